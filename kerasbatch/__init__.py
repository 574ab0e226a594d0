"""kerasbatch: variable-length sequences to `tf.data` pipelines for Keras.

Builders plan each epoch's batches in numpy (random, sorted, length buckets,
token budgets, truncation) and pad once per batch in `tf.data`, so `model.fit`
spends as little work on padding as the data allows. The planning modules
(`boundaries`, `buckets`, `orders`, `packing`, `plan`) need NumPy only:
`import kerasbatch` works without TensorFlow for them.
"""

import os as _os
import sys as _sys

# Planning needs NumPy only: these import without TensorFlow.
from kerasbatch import boundaries, buckets, orders, packing, plan
from kerasbatch.plan import BatchPlan, PlanStatistics

#: The names that need TensorFlow and Keras (every pipeline, layer, loss).
_PIPELINE_NAMES = {
    "Analysis": "kerasbatch.analysis",
    "BucketBuilder": "kerasbatch.builders",
    "Builder": "kerasbatch.builders",
    "ChunkBuilder": "kerasbatch.builders",
    "PackedBuilder": "kerasbatch.builders",
    "PaddedBuilder": "kerasbatch.builders",
    "SortedBuilder": "kerasbatch.builders",
    "StreamBucketBuilder": "kerasbatch.builders",
    "WindowBuilder": "kerasbatch.builders",
    "Padding": "kerasbatch.padding",
    "Reducer": "kerasbatch.reducers",
    "analyze": "kerasbatch.analysis",
}
_PIPELINE_MODULES = (
    "analysis",
    "callbacks",
    "chunking",
    "io",
    "layers",
    "losses",
    "plotting",
    "reducers",
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
#: TensorFlow only for the subcommands that need it, so `--help` and
#: `--version` answer at once and quietly; the names below then import on
#: first use (`__getattr__`).
_DEFERRED = _runs_as_command()
_MISSING_TENSORFLOW = None
if not _DEFERRED:
    try:
        # Keras first: on the torch backend it loads torch before TensorFlow,
        # whose import first crashes torch where triton is installed.
        import keras  # noqa: F401
        import tensorflow  # noqa: F401
    except ImportError as error:
        _MISSING_TENSORFLOW = error
    else:
        # With TensorFlow, everything is imported now, as Keras expects (the
        # serializable layers, losses and builders register on import).
        from kerasbatch import (  # noqa: F401
            analysis,
            callbacks,
            chunking,
            io,
            layers,
            losses,
            plotting,
            reducers,
            tuner,
        )
        from kerasbatch.analysis import Analysis, analyze  # noqa: F401
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
        from kerasbatch.padding import Padding  # noqa: F401
        from kerasbatch.reducers import Reducer  # noqa: F401


def __getattr__(name):
    """The pipeline names: imported on first use by the command, and without
    TensorFlow an error that says what they need."""
    if name not in _PIPELINE_NAMES and name not in _PIPELINE_MODULES:
        raise AttributeError(f"module 'kerasbatch' has no attribute {name!r}")
    missing = _MISSING_TENSORFLOW
    if not missing:
        import importlib

        try:
            import keras  # noqa: F401  (before TensorFlow, as above)
            import tensorflow  # noqa: F401
        except ImportError as error:
            missing = error
        else:
            if name in _PIPELINE_MODULES:
                return importlib.import_module(f"kerasbatch.{name}")
            return getattr(importlib.import_module(_PIPELINE_NAMES[name]), name)
    raise ImportError(
        f"kerasbatch.{name} needs TensorFlow, which could not be imported "
        f"({missing}): pip install tensorflow. Without it, "
        "kerasbatch plans only (kerasbatch.boundaries, kerasbatch.buckets, "
        "kerasbatch.orders, kerasbatch.packing, kerasbatch.plan)."
    ) from missing


__version__ = "0.1.0"

__all__ = [
    "Analysis",
    "BatchPlan",
    "BucketBuilder",
    "Builder",
    "ChunkBuilder",
    "PackedBuilder",
    "PaddedBuilder",
    "Padding",
    "PlanStatistics",
    "Reducer",
    "SortedBuilder",
    "StreamBucketBuilder",
    "WindowBuilder",
    "analysis",
    "analyze",
    "boundaries",
    "buckets",
    "callbacks",
    "chunking",
    "io",
    "layers",
    "losses",
    "orders",
    "packing",
    "plan",
    "plotting",
    "reducers",
    "tuner",
]
