"""kerasbatch: variable-length sequences to batches for Keras `model.fit`.

Builders plan each epoch's batches in numpy (random, sorted, length buckets,
token budgets, packing, truncation); an engine turns the plan into batches:
`tf.data` pipelines, Grain datasets or `keras.utils.PyDataset`s, so
`model.fit` spends as little work on padding as the data allows, on every
Keras backend. `import kerasbatch` needs neither TensorFlow nor Grain: the
engine that needs one imports it when a dataset is built (see
`kerasbatch.optional`); `kerasbatch.io`'s TFRecord readers and writers
need TensorFlow, its token files do not.
"""

import os as _os
import sys as _sys

# Planning needs NumPy only: these import without Keras.
from kerasbatch import _moved, planning
from kerasbatch.planning.plan import BatchPlan, PlanStatistics
from kerasbatch.tools.analysis import Analysis, analyze

_moved.install()

#: The names that need Keras (every builder, layer, loss, callback).
_KERAS_NAMES = {
    "BucketBuilder": "kerasbatch.builders",
    "Builder": "kerasbatch.builders",
    "ChunkBuilder": "kerasbatch.builders",
    "PackedBuilder": "kerasbatch.builders",
    "PaddedBuilder": "kerasbatch.builders",
    "SortedBuilder": "kerasbatch.builders",
    "StreamBucketBuilder": "kerasbatch.builders",
    "WindowBuilder": "kerasbatch.builders",
    "ModelInputs": "kerasbatch.data.model_inputs",
    "Padding": "kerasbatch.data.padding",
    "Reducer": "kerasbatch.data.reducers",
    "predict": "kerasbatch.tools.prediction",
    "restore_order": "kerasbatch.tools.restore",
}
_KERAS_MODULES = (
    "builders",
    "callbacks",
    "data",
    "engines",
    "layers",
    "losses",
    "tools",
    "tuner",
)
#: The names the console script and `python -m` may run as.
_COMMAND_NAMES = ("kerasbatch", "kerasbatch.exe", "kerasbatch-script.py")


def _runs_as_command():
    """Whether this process is the `kerasbatch` command, being started.

    `python -m kerasbatch` imports this package first, while `sys.argv[0]`
    is `"-m"` and `sys.orig_argv` names the module; the console script's
    `sys.argv[0]` is the `kerasbatch` script itself.
    """
    argv = getattr(_sys, "argv", None) or [""]
    if _os.path.basename(argv[0]) in _COMMAND_NAMES:
        return True
    if argv[0] != "-m":
        return False
    original = list(getattr(_sys, "orig_argv", ()))
    for index, argument in enumerate(original):
        if argument == "-m" and index + 1 < len(original):
            return original[index + 1] in ("kerasbatch", "kerasbatch.__main__")
        if argument.startswith("-m") and len(argument) > 2:
            return argument[2:] in ("kerasbatch", "kerasbatch.__main__")
    return False


#: The command (`python -m kerasbatch`, the `kerasbatch` script) imports
#: Keras only for the subcommands that need it, so `--help` and `--version`
#: answer at once; the names below then import on first use (`__getattr__`).
_DEFERRED = _runs_as_command()
if not _DEFERRED:
    # Everything is imported now, as Keras expects (the serializable layers,
    # losses and builders register on import). TensorFlow is not: an engine
    # imports it when it needs it, after Keras (on the torch backend, Keras
    # loads torch, whose import crashes after TensorFlow's where triton is
    # installed).
    from kerasbatch import (  # noqa: F401
        builders,
        callbacks,
        data,
        engines,
        layers,
        losses,
        tools,
        tuner,
    )
    from kerasbatch.builders import (  # noqa: F401
        BucketBuilder,
        Builder,
        ChunkBuilder,
        PackedBuilder,
        PaddedBuilder,
        SortedBuilder,
        StreamBucketBuilder,
        WindowBuilder,
    )
    from kerasbatch.data.model_inputs import ModelInputs  # noqa: F401
    from kerasbatch.data.padding import Padding  # noqa: F401
    from kerasbatch.data.reducers import Reducer  # noqa: F401
    from kerasbatch.tools.prediction import predict  # noqa: F401
    from kerasbatch.tools.restore import restore_order  # noqa: F401


def __getattr__(name):
    """The names imported on first use: everything for the command, and
    `kerasbatch.io` (whose TFRecord names need TensorFlow, and say so
    where it is missing)."""
    import importlib

    if name in _KERAS_MODULES or name == "io":
        return importlib.import_module(f"kerasbatch.{name}")
    if name in _KERAS_NAMES:
        return getattr(importlib.import_module(_KERAS_NAMES[name]), name)
    if f"kerasbatch.{name}" in _moved.MOVED:
        return _moved.moved_module(f"kerasbatch.{name}")
    raise AttributeError(f"module 'kerasbatch' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "Analysis",
    "BatchPlan",
    "BucketBuilder",
    "Builder",
    "ChunkBuilder",
    "ModelInputs",
    "PackedBuilder",
    "PaddedBuilder",
    "Padding",
    "PlanStatistics",
    "Reducer",
    "SortedBuilder",
    "StreamBucketBuilder",
    "WindowBuilder",
    "analyze",
    "callbacks",
    "data",
    "engines",
    "io",
    "layers",
    "losses",
    "planning",
    "predict",
    "restore_order",
    "tools",
    "tuner",
]
