from kerasbatch.layers.pad_sequences import PadSequences
from kerasbatch.layers.segments import (
    SegmentAttentionMask,
    SegmentLossWeights,
    SegmentPooling,
)

__all__ = [
    "PadSequences",
    "SegmentAttentionMask",
    "SegmentLossWeights",
    "SegmentPooling",
]
