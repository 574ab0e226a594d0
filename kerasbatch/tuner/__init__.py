"""Bucket tuning on keras-tuner, and memory-aware batch sizes."""

from kerasbatch.tuner import objectives
from kerasbatch.tuner.batch_sizes import (
    BucketBatchSizes,
    MemoryLimit,
    PositionBudget,
    ProcessMemoryLimit,
    find_bucket_batch_sizes,
)
from kerasbatch.tuner.bucket_tuner import BucketTuner
from kerasbatch.tuner.compile_cost import CompileCost, TrainingTime
from kerasbatch.tuner.hypermodel import BucketHyperModel
from kerasbatch.tuner.plotting import plot_trials
from kerasbatch.tuner.search_space import BucketSearchSpace

__all__ = [
    "BucketBatchSizes",
    "BucketHyperModel",
    "BucketSearchSpace",
    "BucketTuner",
    "CompileCost",
    "MemoryLimit",
    "PositionBudget",
    "ProcessMemoryLimit",
    "TrainingTime",
    "find_bucket_batch_sizes",
    "objectives",
    "plot_trials",
]
