"""A warning when a model that XLA compiles per batch shape meets many shapes.

Under `jit_compile=True` (or `"auto"` on a GPU) on TensorFlow, and on the
JAX backend, every distinct batch shape costs one XLA compilation, often
seconds on a GPU: a first epoch with dozens of shapes is mostly compiling.
On torch, `jit_compile=True` means `torch.compile`, which compiles again
with the changing dimension dynamic once it sees a second shape: it does
not compile once per shape, and gets no warning. `EpochReshuffle` and
`PaddingEfficiency` check the datasets of a `fit` against the model and warn
with the one-line fix, once per `fit` however many of them it has:

- at `on_train_begin` each tells the fit what it knows (`register`): the
  builder whose epochs follow Keras' (`EpochReshuffle`), the datasets `fit`
  trains and validates on (`PaddingEfficiency`), and the epoch each dataset
  would yield next;
- at the first `on_epoch_begin` (when Keras gives the first epoch, so the
  fit's epochs `initial_epoch .. epochs - 1` are known) the first of them
  counts the distinct shapes of exactly the epochs each dataset will feed
  (`warn_once`): batch padding brings new shapes in later epochs, which
  XLA compiles as they come.
"""

import math
import warnings
import weakref

import keras

from kerasbatch.builders.datasets import builder_of
from kerasbatch.planning import costs

#: More distinct shapes than this over the fit's epochs (or than a bucket
#: builder's buckets, if more) are worth a warning.
MANY_SHAPES = 16

#: Seconds to compile one shape, measured for a 4-layer Transformer
#: encoder (width 256) with JAX on a GPU (`kerasbatch.planning.costs`): the
#: warning's scale.
MEASURED_SECONDS_PER_SHAPE = costs.BACKEND_COSTS["jax"]["gpu"].seconds_per_shape
#: Where `MEASURED_SECONDS_PER_SHAPE` was measured, as the warning says it.
MEASURED_ON = (
    "a 4-layer Transformer encoder with JAX on "
    + costs.BACKEND_COSTS["jax"]["gpu"].hardware
)

#: The epochs whose shapes are counted exactly (planned); those beyond are
#: extrapolated as `kerasbatch.tuner.CompileCost` does (planning a million
#: elements takes about 0.2 s an epoch).
PLANNED_EPOCHS = 20

#: The fit each model is in, by model: what the callbacks registered.
_FITS = weakref.WeakKeyDictionary()


def compiles_per_shape(model):
    """Whether `model` trains with XLA, which compiles once per shape
    (`jit_compile`, whose `"auto"` Keras resolves to True on JAX and on a
    TensorFlow GPU; on torch it means `torch.compile`, which makes a
    changing dimension dynamic instead)."""
    if model is None or getattr(model, "run_eagerly", False):
        return False
    if keras.backend.backend() not in ("tensorflow", "jax"):
        return False
    return getattr(model, "jit_compile", False) is True


class _Fit:
    """What the kerasbatch callbacks of one `model.fit` told each other.

    Keras gives every callback of a fit the same `params` dict (one per
    fit): the fit is known by it.
    """

    def __init__(self, params):
        self.params = params
        self.pinned = []  # builders whose epochs follow Keras' epochs
        self.builders = []  # builders whose datasets are not named
        self.training = {}  # id(served) -> served, the datasets fit trains on
        self.validation = {}  # id(served) -> served
        self.next_epochs = {}  # id(served) -> its next epoch at train begin
        self.warned = False


def _fit_of(callback):
    """The `_Fit` of the fit `callback` is in (a new one for a new fit).
    Outside a fit (no model or params), each callback is its own fit."""
    params = callback.params
    model = callback.model if params else None
    key = model if model is not None else callback
    try:
        fit = _FITS.get(key)
    except TypeError:  # not weakly referable
        fit, key = None, callback
    if fit is None or fit.params is not params:
        fit = _Fit(params)
        _FITS[key] = fit
    return fit


def _model(callback):
    try:
        return callback.model
    except AttributeError:
        return None


def register(callback, builder, training=None, validation=None, pins=False):
    """Tells the fit `callback` is in what it knows, at `on_train_begin`.

    Args:
        callback: the kerasbatch callback.
        builder: its builder.
        training: the copy serving the dataset `fit` trains on (see
            `kerasbatch.callbacks.fit_datasets.fit_sources`), or None where
            the callback does not know it (every dataset `builder` built
            then counts).
        validation: the copy serving the validation dataset, or None.
        pins: whether `builder`'s epochs follow Keras' (`EpochReshuffle`).
    """
    fit = _fit_of(callback)
    if pins and all(b is not builder for b in fit.pinned):
        fit.pinned.append(builder)
    if training is None or training is builder:
        if all(b is not builder for b in fit.builders):
            fit.builders.append(builder)
        sources = [builder_of(d) for d in builder._not_freed()]
    else:
        fit.training[id(training)] = training
        sources = [training]
    if validation is not None:
        fit.validation[id(validation)] = validation
        sources.append(validation)
    for served in sources:
        fit.next_epochs.setdefault(id(served), served.epoch)


def warn_once(callback, epoch):
    """At `on_epoch_begin`: warns, once per fit, if the model compiles per
    shape and a dataset of the fit feeds more distinct shapes over the fit's
    epochs than `MANY_SHAPES` (or its buckets), or a number that cannot be
    known before it runs."""
    fit = _fit_of(callback)
    if fit.warned:
        return
    fit.warned = True
    try:
        if compiles_per_shape(_model(callback)):
            _warn(fit, epoch)
    finally:  # the fit keeps no builder copy (nor their data) alive
        fit.pinned, fit.builders, fit.next_epochs = [], [], {}
        fit.training, fit.validation = {}, {}


def _warn(fit, epoch):
    last = (fit.params or {}).get("epochs")
    num_epochs = max(1, (last if last is not None else epoch + 1) - epoch)
    training, validation = _sources(fit)
    counted = [
        (served, _count(served, _data_epochs(fit, served, epoch, num_epochs)))
        for served in training + validation
    ]
    if not any(_many(served, count) for served, count in counted):
        return
    if not training:  # only validation data is known
        training, validation = validation, []
    first, first_count = max(counted[: len(training)], key=_order)
    validation_counts = [count for _, count in counted[len(training) :]]
    warnings.warn(
        _message(first, first_count, validation_counts, epoch, num_epochs),
        stacklevel=4,  # Keras' callback list
    )


def _sources(fit):
    """The copies serving the fit's training datasets (those named, else
    every dataset of the builders whose datasets are not named) and its
    validation datasets."""
    validation = list(fit.validation.values())
    training = list(fit.training.values())
    if not training:
        for builder in fit.builders:
            for dataset in builder.built_datasets():
                served = builder_of(dataset)
                if all(served is not s for s in training + validation):
                    training.append(served)
    return training, validation


def _data_epochs(fit, served, epoch, num_epochs):
    """The epochs `served`'s dataset yields in the fit's `num_epochs` epochs
    from Keras' `epoch`: Keras' own where a builder's epochs follow them
    (`EpochReshuffle`), else the next ones of the dataset."""
    if any(
        any(builder_of(dataset) is served for dataset in builder._not_freed())
        for builder in fit.pinned
    ):
        first = epoch
    else:
        first = fit.next_epochs.get(id(served), served.epoch)
    return range(first, first + num_epochs)


def _count(served, epochs):
    """Distinct shapes `served` feeds over `epochs` (planned up to
    `PLANNED_EPOCHS`, extrapolated beyond); None where a stream's shapes
    depend on its data."""
    shapes, counts = set(), []
    try:
        for epoch in epochs[:PLANNED_EPOCHS]:
            shapes.update(
                tuple(sorted(shape.items())) for shape in served.batch_shapes(epoch)
            )
            counts.append(len(shapes))
    except ValueError:  # a stream whose shapes depend on its data
        return None
    if len(counts) == len(epochs):
        return counts[-1]
    return math.ceil(costs.extrapolate_shapes(counts, len(epochs)))


def _many(served, count):
    buckets = len(getattr(served, "resolved_batch_sizes", None) or ())
    return count is None or count > max(MANY_SHAPES, buckets)


def _order(counted):
    count = counted[1]
    return math.inf if count is None else count


def _message(source, count, validation_counts, epoch, num_epochs):
    known = [c for c in [count, *validation_counts] if c is not None]
    span = (
        f"the {num_epochs} epochs this fit runs (epochs {epoch} to "
        f"{epoch + num_epochs - 1})"
        if num_epochs > 1
        else f"the 1 epoch this fit runs (epoch {epoch})"
    )
    about = "about " if num_epochs > PLANNED_EPOCHS else ""
    if count is None:
        shapes = "an unbounded number of distinct shapes (new ones every epoch)"
    else:
        shapes = f"{about}{count} distinct shapes over {span}"
    if validation_counts:
        extra = (
            "an unbounded number"
            if None in validation_counts
            else str(sum(validation_counts))
        )
        shapes += f", and its validation batches {extra} more"
    total = sum(known)
    cost = (
        "more compiles every epoch"
        if count is None or None in validation_counts
        else f"{about}{total * MEASURED_SECONDS_PER_SHAPE:.0f} s of compiles"
    )
    compiler = (
        "The JAX backend compiles the model with XLA"
        if keras.backend.backend() == "jax"
        else "The model is compiled with XLA (jit_compile=True)"
    )
    return (
        f"{compiler}, which compiles once per batch shape, and "
        f"{type(source).__name__}'s batches have {shapes}: at the "
        f"{MEASURED_SECONDS_PER_SHAPE} s per shape measured for {MEASURED_ON} "
        f"(a CPU compiles faster), {cost}, against a steady epoch of about 1 s "
        f"for 16 384 sequences there. {_fix(source)} Packed rows "
        "(PackedBuilder(remainder='even')) compile once, for models that "
        "take segment ids; kerasbatch.analyze(lengths) weighs the choices "
        "for your data."
    )


def _fix(source):
    """The one-line fix for `source`'s builder kind."""
    # "even" needs the bucket sizes ahead, which a stream does not know.
    remainder = "even" if "even" in type(source).remainders else "pad"
    if hasattr(source, "pad_to_bucket"):
        return (
            f"Set pad_to_bucket=True, remainder={remainder!r} for one shape per "
            "bucket (see batch_shapes())."
        )
    if hasattr(source, "sequence_length"):
        return f"Set remainder={remainder!r} for one shape."
    return (
        f"Set pad_to_multiple (e.g. 16) and remainder={remainder!r} to bound "
        "them, or use BucketBuilder(pad_to_bucket=True, remainder='even') for "
        "one shape per bucket (see batch_shapes())."
    )
