"""Layers for packed rows: keep the sequences of a row apart.

A packed row (`kerasbatch.PackedBuilder`) holds several sequences, told apart
by `segment_ids` of shape `(batch, length)`: 1, 2, ... for the sequences of
the row, 0 for padding. These layers use them, with any Keras backend.
"""

import keras
from keras import ops


def _check_segment_ids(layer, segment_ids):
    """`segment_ids` must be integer ids of shape `(batch, length)`."""
    dtype = keras.backend.standardize_dtype(segment_ids.dtype)
    if "int" not in dtype:
        raise TypeError(
            f"{type(layer).__name__} takes integer segment_ids (1, 2, ... per "
            f"sequence, 0 for padding), got dtype {dtype}."
        )
    if len(segment_ids.shape) != 2:
        raise ValueError(
            f"{type(layer).__name__} takes segment_ids of shape (batch, "
            f"length), got shape {tuple(segment_ids.shape)}."
        )


def _same_segment(segment_ids):
    """bool `(batch, length, length)`: query and key in one non-zero segment."""
    queries = ops.expand_dims(segment_ids, -1)
    keys = ops.expand_dims(segment_ids, -2)
    return ops.logical_and(ops.equal(queries, keys), ops.not_equal(queries, 0))


def _itself(segment_ids):
    """bool `(batch, length, length)`: query and key are the same position."""
    positions = ops.cumsum(ops.ones_like(segment_ids), axis=1)
    return ops.equal(ops.expand_dims(positions, -1), ops.expand_dims(positions, -2))


@keras.saving.register_keras_serializable(package="kerasbatch")
class SegmentAttentionMask(keras.layers.Layer):
    """The block-diagonal attention mask of packed rows.

    True where the query and the key are tokens of the same sequence (the
    same non-zero segment id), so packed sequences do not attend to each
    other and no token attends to padding. Pass it as the `attention_mask` of
    `keras.layers.MultiHeadAttention`.

    A padding token (and every token of a filler row) attends to itself
    alone: no row of the mask is all False. A fully masked softmax row is
    NaN in fused attention kernels (cuDNN flash attention, which Keras on
    JAX picks on a GPU), and NaN times a zero loss weight is still NaN, so
    a mask with such rows poisons the loss of a whole batch. Real tokens see
    exactly what they saw before: their rows are the same.

    Call arguments:
        segment_ids: int tensor of shape `(batch, length)`, 0 for padding.

    Returns:
        A bool tensor of shape `(batch, length, length)`.

    Example:

    >>> import numpy as np
    >>> from kerasbatch.layers import SegmentAttentionMask
    >>> mask = SegmentAttentionMask()(np.array([[1, 1, 2, 0]]))
    >>> np.asarray(mask).astype(int)[0]
    array([[1, 1, 0, 0],
           [1, 1, 0, 0],
           [0, 0, 1, 0],
           [0, 0, 0, 1]])
    """

    def __init__(self, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        self.built = True

    def call(self, segment_ids):
        """The `(batch, length, length)` boolean attention mask of `segment_ids`."""
        _check_segment_ids(self, segment_ids)
        return ops.logical_or(_same_segment(segment_ids), _itself(segment_ids))


@keras.saving.register_keras_serializable(package="kerasbatch")
class SegmentPooling(keras.layers.Layer):
    """Mean of the token features of every sequence of a packed row.

    Segment k + 1 of a row goes to slot k of the output, which lines up with
    the per-segment targets of `kerasbatch.PackedBuilder`. Slots of absent
    segments are zero; segment ids above `max_segments` are left out. The
    features left out (padding included) are selected away, not multiplied
    by 0: a NaN or inf there reaches no slot, nor its gradient.

    Args:
        max_segments: the static size of the segment axis, e.g. the builder's
            `resolved_max_segments`.
        **kwargs: other `keras.layers.Layer` arguments, e.g. `name`.

    Call arguments:
        features: float tensor of shape `(batch, length, features)`.
        segment_ids: int tensor of shape `(batch, length)`, 0 for padding.

    Returns:
        A tensor of shape `(batch, max_segments, features)`.

    Example:

    >>> import numpy as np
    >>> from kerasbatch.layers import SegmentPooling
    >>> features = np.array([[[1.0], [3.0], [10.0], [7.0]]])
    >>> pooled = SegmentPooling(max_segments=3)(features, np.array([[1, 1, 2, 0]]))
    >>> np.asarray(pooled)[0, :, 0]
    array([ 2., 10.,  0.], dtype=float32)
    """

    def __init__(self, max_segments, **kwargs):
        super().__init__(**kwargs)
        if (
            isinstance(max_segments, bool)
            or not isinstance(max_segments, int)
            or max_segments <= 0
        ):
            raise ValueError(
                f"max_segments must be a positive int, got {max_segments!r}."
            )
        self.max_segments = max_segments
        self.built = True

    def call(self, features, segment_ids):
        """Pools `features` per segment: `(batch, slots, channels)`."""
        _check_segment_ids(self, segment_ids)
        if len(features.shape) != 3 or any(
            a is not None and b is not None and a != b
            for a, b in zip(features.shape[:2], segment_ids.shape, strict=True)
        ):
            raise ValueError(
                "SegmentPooling takes features of shape (batch, length, "
                "features) with the (batch, length) of segment_ids, got "
                f"features of shape {tuple(features.shape)} and segment_ids of "
                f"shape {tuple(segment_ids.shape)}."
            )
        slots = ops.arange(1, self.max_segments + 1, dtype=segment_ids.dtype)
        member = ops.cast(
            ops.equal(ops.expand_dims(segment_ids, -1), slots), features.dtype
        )  # (batch, length, max_segments)
        pooled = ops.sum(member, axis=-1, keepdims=True) > 0
        features = ops.where(pooled, features, ops.zeros_like(features))
        sums = ops.einsum("bls,blf->bsf", member, features)
        counts = ops.sum(member, axis=1)
        return sums / ops.expand_dims(ops.maximum(counts, 1), -1)

    def get_config(self):
        config = super().get_config()
        config["max_segments"] = self.max_segments
        return config


@keras.saving.register_keras_serializable(package="kerasbatch")
class SegmentLossWeights(keras.layers.Layer):
    """Per-token loss weights of packed rows: 0 on padding.

    Real tokens weigh 1, or with `normalize=True` `1 / length` of their
    sequence, so every packed sequence weighs the same in the loss however
    long it is (a row's weights then sum to its number of sequences).
    `kerasbatch.PackedBuilder` emits the same weights as `sample_weight`
    (`normalize_segments`); this layer computes them inside a model, e.g.
    for `add_loss` or a custom `train_step`.

    Args:
        normalize: weigh every sequence, not every token, equally.
        **kwargs: other `keras.layers.Layer` arguments, e.g. `name`.

    Call arguments:
        segment_ids: int tensor of shape `(batch, length)`, 0 for padding.

    Returns:
        A float tensor of shape `(batch, length)`.

    Example:

    >>> import numpy as np
    >>> from kerasbatch.layers import SegmentLossWeights
    >>> segment_ids = np.array([[1, 1, 1, 1, 2, 0]])
    >>> np.asarray(SegmentLossWeights()(segment_ids))
    array([[1., 1., 1., 1., 1., 0.]], dtype=float32)
    >>> np.asarray(SegmentLossWeights(normalize=True)(segment_ids))
    array([[0.25, 0.25, 0.25, 0.25, 1.  , 0.  ]], dtype=float32)
    """

    def __init__(self, normalize=False, **kwargs):
        kwargs.setdefault("autocast", False)
        super().__init__(**kwargs)
        if not isinstance(normalize, bool):
            raise TypeError(f"normalize must be True or False, got {normalize!r}.")
        self.normalize = normalize
        self.built = True

    def call(self, segment_ids):
        """The `(batch, length)` weights of `segment_ids`: 0 on padding."""
        _check_segment_ids(self, segment_ids)
        dtype = self.compute_dtype
        real = ops.cast(ops.not_equal(segment_ids, 0), dtype)
        if not self.normalize:
            return real
        lengths = ops.sum(ops.cast(_same_segment(segment_ids), dtype), axis=-1)
        return real / ops.maximum(lengths, 1)

    def compute_output_shape(self, input_shape):
        """The shape of `segment_ids`."""
        return tuple(input_shape)

    def get_config(self):
        config = super().get_config()
        config["normalize"] = self.normalize
        return config
