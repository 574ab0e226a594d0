"""kerasbatch: variable-length sequences to `tf.data` pipelines for Keras.

Builders plan each epoch's batches in numpy (random, sorted, length buckets,
token budgets, truncation) and pad once per batch in `tf.data`, so `model.fit`
spends as little work on padding as the data allows. The planning modules
(`boundaries`, `buckets`, `orders`, `packing`, `plan`) need NumPy only:
`import kerasbatch` works without TensorFlow for them.
"""

# Planning needs NumPy only: these import without TensorFlow.
from kerasbatch import boundaries, buckets, orders, packing, plan
from kerasbatch.plan import BatchPlan, PlanStatistics

#: The names that need TensorFlow and Keras (every pipeline, layer, loss).
_PIPELINE_NAMES = {
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
}
_PIPELINE_MODULES = (
    "callbacks",
    "chunking",
    "io",
    "layers",
    "losses",
    "plotting",
    "reducers",
    "tuner",
)

try:
    import tensorflow  # noqa: F401
except ImportError as error:
    _MISSING_TENSORFLOW = error
else:
    _MISSING_TENSORFLOW = None
    # With TensorFlow, everything is imported now, as Keras expects (the
    # serializable layers, losses and builders register on import).
    from kerasbatch import (  # noqa: F401
        callbacks,
        chunking,
        io,
        layers,
        losses,
        plotting,
        reducers,
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
    from kerasbatch.padding import Padding  # noqa: F401
    from kerasbatch.reducers import Reducer  # noqa: F401


def __getattr__(name):
    """Without TensorFlow, the pipeline names say what they need."""
    if _MISSING_TENSORFLOW and (name in _PIPELINE_NAMES or name in _PIPELINE_MODULES):
        raise ImportError(
            f"kerasbatch.{name} needs TensorFlow, which could not be imported "
            f"({_MISSING_TENSORFLOW}): pip install tensorflow. Without it, "
            "kerasbatch plans only (kerasbatch.boundaries, kerasbatch.buckets, "
            "kerasbatch.orders, kerasbatch.packing, kerasbatch.plan)."
        ) from _MISSING_TENSORFLOW
    raise AttributeError(f"module 'kerasbatch' has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
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
