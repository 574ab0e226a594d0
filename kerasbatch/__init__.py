"""kerasbatch: variable-length sequences to `tf.data` pipelines for Keras.

Builders plan each epoch's batches in numpy (random, sorted, length buckets,
token budgets, truncation) and pad once per batch in `tf.data`, so `model.fit`
spends as little work on padding as the data allows.
"""

from kerasbatch import (
    boundaries,
    callbacks,
    chunking,
    io,
    layers,
    losses,
    packing,
    plotting,
    reducers,
    tuner,
)
from kerasbatch.builders import (
    BucketBuilder,
    Builder,
    ChunkBuilder,
    PackedBuilder,
    PaddedBuilder,
    SortedBuilder,
    StreamBucketBuilder,
    WindowBuilder,
)
from kerasbatch.padding import Padding
from kerasbatch.plan import BatchPlan, PlanStatistics
from kerasbatch.reducers import Reducer

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
    "callbacks",
    "chunking",
    "io",
    "layers",
    "losses",
    "packing",
    "plotting",
    "reducers",
    "tuner",
]
