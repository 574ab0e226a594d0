"""A warning when a model that XLA compiles per batch shape meets many shapes.

Under `jit_compile=True` (or `"auto"` on a GPU) and on the JAX backend, every
distinct batch shape costs one XLA compilation, often seconds on a GPU: a
first epoch with dozens of shapes is mostly compiling. The callbacks check
the datasets a builder built against the model at `on_train_begin` and warn
with the one-line fix.
"""

import warnings

from kerasbatch.builders.serving import builder_of

#: More distinct shapes per epoch than this (or than a bucket builder's
#: buckets, if more) is worth a warning.
MANY_SHAPES = 16

#: Seconds to compile one shape, measured for a 4-layer Transformer
#: encoder (d=256) on an H200 with JAX: the warning's scale.
MEASURED_SECONDS_PER_SHAPE = 6.5


def compiles_per_shape(model):
    """Whether `model` trains with XLA, which compiles once per shape
    (`jit_compile`, whose `"auto"` Keras resolves to True on JAX and on a
    TensorFlow GPU)."""
    if model is None or getattr(model, "run_eagerly", False):
        return False
    return getattr(model, "jit_compile", False) is True


def warn_if_many_shapes(model, builder):
    """Warns if `model` compiles per shape and a dataset `builder` built
    feeds more distinct shapes per epoch than `MANY_SHAPES` (or its buckets),
    or a number that cannot be known before it runs."""
    if not compiles_per_shape(model):
        return
    for dataset in builder.built_datasets():
        source = builder_of(dataset)
        try:
            count = len(source.batch_shapes())
        except ValueError:  # a stream whose shapes depend on its data
            count = None
        buckets = len(getattr(source, "resolved_batch_sizes", None) or ())
        if count is not None and count <= max(MANY_SHAPES, buckets):
            continue
        shapes = "an unbounded number of" if count is None else str(count)
        cost = (
            "more compiles every epoch"
            if count is None
            else f"about {count * MEASURED_SECONDS_PER_SHAPE:.0f} s of compiles"
        )
        warnings.warn(
            "The model is compiled with XLA (jit_compile, or the JAX "
            "backend), which compiles once per batch shape, and "
            f"{type(source).__name__}'s batches have {shapes} distinct shapes "
            f"per epoch: at the {MEASURED_SECONDS_PER_SHAPE} s per shape of a "
            f"small Transformer on a GPU, {cost}, against a steady epoch of "
            "about 1 s for 16 384 sequences there. "
            f"{_fix(source)} Packed rows (PackedBuilder(remainder='even')) "
            "compile once, for models that take segment ids; "
            "kerasbatch.analyze(lengths) weighs the choices for your data.",
            stacklevel=3,
        )
        return


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
