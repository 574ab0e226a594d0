"""Engines: each turns a built dataset's frozen plan into batches for Keras.

- `"tf.data"`: a `tf.data.Dataset` (needs TensorFlow): in-graph epochs,
  `distribute`, the tf.data service, iterator checkpoints.
- `"grain"`: a Grain `IterDataset` of numpy batches (needs Grain):
  `get_state`/`set_state` resume mid-epoch, multi-host JAX.
- `"python"`: a `keras.utils.PyDataset` of numpy batches (needs neither);
  `workers` threads can make the next batches ahead (`python_options`).

For the same seed and epoch, every engine yields bit-identical batches.
"""

import importlib
import numbers

#: Every engine's name -> the module that makes its datasets. A module
#: gives `planned(built, epoch=0, **options)` (a dataset of a built value's
#: batches, whose next iteration yields `epoch`) and `stream(built,
#: epoch=0)` (a dataset of a stream's batches: a `StreamBuilt` value holds
#: its source), and says whether its datasets are `tf.data` datasets
#: (`IN_GRAPH`) and whether it runs here (`available()`).
_MODULES = {
    "tf.data": "kerasbatch.engines.tf_data",
    "grain": "kerasbatch.engines.grain",
    "python": "kerasbatch.engines.python",
}
ENGINES = tuple(_MODULES)


def check_engine(engine):
    """`engine`, or a ValueError naming the engines."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}.")
    return engine


def engine_module(engine):
    """The module of `engine` (imported now: it may need TensorFlow or
    Grain, and says so where it is missing)."""
    return importlib.import_module(_MODULES[check_engine(engine)])


def options(engine, **given):
    """The options of `engine` among `given` (None: not given), checked,
    with their defaults; a ValueError for an option of another engine."""
    check_engine(engine)
    return python_options(engine, **given)


def planned(engine, built, *, epoch=0, **options):
    """A dataset of the batches of `built` (a
    `kerasbatch.planning.built.Built`), made by `engine`; its next iteration
    yields `epoch`. `options`: the engine's (`options`)."""
    return engine_module(engine).planned(built, epoch=epoch, **options)


def stream(engine, built, *, epoch=0):
    """A dataset of the batches of the stream `built` (a
    `kerasbatch.planning.built.StreamBuilt`), made by `engine`; its next
    iteration yields `epoch`."""
    return engine_module(engine).stream(built, epoch=epoch)


def available(engine):
    """Whether `engine` runs here: its package (TensorFlow, Grain) imports."""
    try:
        module = engine_module(engine)
    except ImportError:
        return False
    return module.available()


def in_graph(engine):
    """Whether `engine` makes `tf.data` datasets, whose batches are made in
    a TensorFlow graph (what `tf.distribute` and the tf.data service take)."""
    return engine_module(engine).IN_GRAPH


def check_built_with(served, engine, what):
    """Raises unless the dataset of `served` was built with `engine`;
    `what` names the method that needs it."""
    if served.engine != engine:
        raise ValueError(
            f"{what} runs on the {engine!r} engine, but the dataset was built "
            f"with engine={served.engine!r}: build it with engine={engine!r}."
        )


def python_options(engine, workers=None, use_multiprocessing=None, max_queue_size=None):
    """The `python` engine's `workers`, `use_multiprocessing` and
    `max_queue_size` (None: not given), checked, with their defaults: a
    dict for `kerasbatch.engines.python.PlannedPyDataset`, or a ValueError
    that says what is wrong (given to another engine, a bad value, or
    worker processes).

    Example:

    >>> from kerasbatch import engines
    >>> engines.python_options("python", workers=4)
    {'workers': 4, 'use_multiprocessing': False, 'max_queue_size': 10}
    >>> engines.python_options("grain")
    {}
    """
    given = {
        "workers": workers,
        "use_multiprocessing": use_multiprocessing,
        "max_queue_size": max_queue_size,
    }
    named = [name for name, value in given.items() if value is not None]
    if engine != "python":
        if named:
            raise ValueError(
                f"{', '.join(named)} {'is' if len(named) == 1 else 'are'} an "
                f"option of engine='python' (a keras.utils.PyDataset made by "
                f"worker threads), not of engine={engine!r}: leave "
                f"{'it' if len(named) == 1 else 'them'} out, or build with "
                "engine='python'."
            )
        return {}
    options = {"workers": 1, "use_multiprocessing": False, "max_queue_size": 10}
    for name in ("workers", "max_queue_size"):
        value = given[name]
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise ValueError(f"{name} must be a positive int, got {value!r}.")
        if value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}.")
        options[name] = int(value)
    if use_multiprocessing is not None and not isinstance(
        use_multiprocessing, bool | numbers.Integral
    ):
        raise ValueError(
            f"use_multiprocessing must be a bool, got {use_multiprocessing!r}."
        )
    if use_multiprocessing:
        raise ValueError(
            "engine='python' takes use_multiprocessing=False only: worker "
            "processes would each hold a copy of the dataset, while its "
            "epoch (set_epoch, EpochReshuffle, get_state/set_state) is kept in "
            "this process, so they could make another epoch's batches. Its "
            "workers are threads (numpy releases the GIL in much of its "
            "gathering and padding): pass workers=N alone. For batches made "
            "outside Python, build with engine='tf.data' (its pipeline maps "
            "in parallel)."
        )
    return options


def check_shapes_for_keras(engine, lengths_vary):
    """Warns where Keras cannot take a numpy engine's batches: on the
    TensorFlow backend, Keras reads a Grain dataset's or a `PyDataset`'s
    shapes from its first 2 batches (`data_adapter_utils`, Keras 3.15) and
    fails on a later batch of another length, inside its `tf.data`
    pipeline. Iterating the dataset in Python is not affected.
    `lengths_vary()`: whether the batches' sequence lengths may differ
    (called on the TensorFlow backend only: it plans epochs)."""
    import warnings

    import keras

    if in_graph(engine) or keras.backend.backend() != "tensorflow":
        return
    if not lengths_vary():
        return
    warnings.warn(
        f"On the TensorFlow backend, Keras reads the batch shapes of a "
        f"{'Grain dataset' if engine == 'grain' else 'PyDataset'} from its "
        "first 2 batches and fails on a later batch of another length, and "
        "these batches differ in length: for model.fit, evaluate or predict "
        "on TensorFlow, build with engine='tf.data' (the same batches, bit "
        "for bit), or pad every batch to one length (Padding(length=...)).",
        stacklevel=4,
    )
