"""Dataset builders: variable-length sequences to padded batches, on any engine."""

from kerasbatch.builders.base import Builder, PlannedBuilder, builder_of
from kerasbatch.builders.bucket_builder import BucketBuilder
from kerasbatch.builders.chunk_builder import ChunkBuilder
from kerasbatch.builders.packed_builder import PackedBuilder
from kerasbatch.builders.padded_builder import PaddedBuilder
from kerasbatch.builders.sorted_builder import SortedBuilder
from kerasbatch.builders.stream_bucket_builder import StreamBucketBuilder
from kerasbatch.builders.window_builder import WindowBuilder

__all__ = [
    "Builder",
    "BucketBuilder",
    "ChunkBuilder",
    "PackedBuilder",
    "PaddedBuilder",
    "PlannedBuilder",
    "SortedBuilder",
    "StreamBucketBuilder",
    "WindowBuilder",
    "builder_of",
]
