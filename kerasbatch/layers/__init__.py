"""Layers for variable-length batches.

- `SegmentAttentionMask`, `SegmentPooling`, `SegmentLossWeights`: keep the
  sequences of a packed row (`kerasbatch.PackedBuilder`) apart in attention,
  pooling and the loss;
- `PadSequences`: ragged to padded, as `keras.utils.pad_sequences`, inside a
  model or a `tf.data` map.
"""

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
