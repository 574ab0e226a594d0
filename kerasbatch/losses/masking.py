"""Shared masking machinery for the kerasbatch sequence losses.

Padded batches carry a description of which positions are real. The losses in
`kerasbatch.losses` look for it in this order:

1. A `sample_weight` of rank >= 2, shape `(batch, time)` (or
   `(batch, time, *features)`). This is how the kerasbatch builders deliver
   the padding mask: a per-frame `sample_weight` with `1.0` for real frames and
   `0.0` for padding, so `model.fit` passes it to the loss as the third element
   of each `(x, y, sample_weight)` batch. Non-binary values are per-frame
   weights `w`; the "length" of an example is then `sum_t w[i, t]`. Because
   each example is normalised by its own `sum_t w`, a per-example factor
   folded into these weights (as `output_mask=True` does with a per-example
   `sample_weight`) cancels out; only a zero factor still drops the example.
2. Otherwise, the Keras mask attached to `y_pred` (propagated from e.g.
   `keras.layers.Embedding(mask_zero=True)` or `keras.layers.Masking`). In this
   case a rank-1 `sample_weight` of shape `(batch,)` weights whole examples:
   the batch reduction becomes a weighted mean.
3. Otherwise, every position is valid (a rank-1 `sample_weight` still weights
   examples).

Only `keras.ops` is used for the computation, so the losses run on every Keras
backend.
"""

import keras
import numpy as np
from keras import ops

from kerasbatch import optional

FLOAT32_EPSILON = float(np.finfo(np.float32).eps)
"""Machine epsilon of float32 (`2**-23`), the default `epsilon` of the SNR."""


def _mask_getter():
    # Keras keeps masks in a tensor attribute (or, on backends whose tensors
    # reject attributes, in a side table keyed by tensor id). Keras 3.15 has
    # no public getter for it, so prefer a public one if a later release adds
    # it, then the internal helper `keras.losses.Loss` itself uses, and finally
    # the plain `_keras_mask` attribute documented in the masking guide.
    getter = getattr(keras.backend, "get_keras_mask", None)
    if getter is not None:
        return getter
    try:
        from keras.src.backend import get_keras_mask as getter
    except ImportError:  # pragma: no cover - depends on the Keras version

        def getter(x):
            return getattr(x, "_keras_mask", None)

    return getter


get_keras_mask = _mask_getter()


def standardize_ranks(y_true, y_pred):
    """Aligns `y_true` and `y_pred` ranks and checks they are sequences.

    As Keras' built-in losses do, a trailing axis of size 1 is squeezed away
    when the ranks differ by one, so `(batch, time)` targets work with
    `(batch, time, 1)` predictions.

    Args:
        y_true: Tensor of targets.
        y_pred: Tensor of predictions.

    Returns:
        The `(y_true, y_pred)` pair, both of the same rank (at least 2).
    """
    rank_true, rank_pred = len(y_true.shape), len(y_pred.shape)
    if rank_pred == rank_true + 1 and y_pred.shape[-1] == 1:
        y_pred = ops.squeeze(y_pred, axis=-1)
    elif rank_true == rank_pred + 1 and y_true.shape[-1] == 1:
        y_true = ops.squeeze(y_true, axis=-1)
    if len(y_true.shape) != len(y_pred.shape):
        raise ValueError(
            "`y_true` and `y_pred` must have the same rank. Received: "
            f"y_true.shape={y_true.shape}, y_pred.shape={y_pred.shape}"
        )
    if len(y_pred.shape) < 2:
        raise ValueError(
            "Sequence losses expect `y_true` and `y_pred` of shape "
            "`(batch, time)` or `(batch, time, *features)`. Received: "
            f"y_pred.shape={y_pred.shape}"
        )
    return y_true, y_pred


def frame_weights_like(weights, y):
    """Brings per-frame weights to the rank of `y` so they broadcast over it.

    `(batch, time)` weights gain trailing size-1 axes; weights with more axes
    than `y` lose trailing size-1 axes.

    Args:
        weights: Tensor of shape `(batch, time, ...)`.
        y: Tensor of shape `(batch, time, *features)`.

    Returns:
        `weights` cast to `y.dtype`, of the same rank as `y`.
    """
    weights = ops.cast(weights, y.dtype)
    rank = len(y.shape)
    while len(weights.shape) > rank and weights.shape[-1] == 1:
        weights = ops.squeeze(weights, axis=-1)
    if len(weights.shape) > rank:
        raise ValueError(
            "Per-frame weights must not have more axes than `y`. Received: "
            f"weights.shape={weights.shape}, y.shape={y.shape}"
        )
    while len(weights.shape) < rank:
        weights = ops.expand_dims(weights, axis=-1)
    return weights


def check_shapes(y_true, y_pred, frame_weights, example_weights):
    """Raises ValueError naming the argument whose static shape does not fit.

    Checked in Python, where the shapes are known, so a mis-shaped argument
    is named instead of failing inside a backend op. Unknown dimensions
    (None) are not checked.

    Args:
        y_true, y_pred: the targets and predictions, of equal rank.
        frame_weights: per-frame weights of the rank of `y_pred` (size-1
            trailing axes broadcast), or None.
        example_weights: None, a scalar or a `(batch,)` tensor.
    """
    if _conflict(y_true.shape, y_pred.shape):
        raise ValueError(
            "`y_true` and `y_pred` must have the same shape. Received: "
            f"y_true.shape={y_true.shape}, y_pred.shape={y_pred.shape}"
        )
    if frame_weights is not None:
        broadcast = [
            None if axis >= 2 and size == 1 else size
            for axis, size in enumerate(frame_weights.shape)
        ]
        if _conflict(broadcast, y_pred.shape):
            raise ValueError(
                "The per-frame `sample_weight` (or the mask of `y_pred`) must "
                "have the shape `(batch, time)` of `y_pred` (trailing axes of "
                f"size 1 or equal). Received: sample_weight.shape="
                f"{frame_weights.shape}, y_pred.shape={y_pred.shape}"
            )
    per_example = example_weights is not None and len(example_weights.shape) == 1
    if per_example and _conflict(example_weights.shape, y_pred.shape[:1]):
        raise ValueError(
            "A per-example `sample_weight` must have shape `(batch,)`. "
            f"Received: sample_weight.shape={example_weights.shape}, "
            f"y_pred.shape={y_pred.shape}"
        )


def _conflict(shape, other):
    return any(
        a is not None and b is not None and a != b
        for a, b in zip(shape, other, strict=False)
    )


def resolve_weights(sample_weight, keras_mask, dtype):
    """Decides which tensor masks frames and which one weights examples.

    Args:
        sample_weight: `None`, a scalar, a `(batch,)` tensor of per-example
            weights, or a per-frame mask/weights tensor of rank >= 2.
        keras_mask: The Keras mask of `y_pred` (read before `y_pred` is
            converted, since conversion may drop it), or `None`.
        dtype: The loss' compute dtype.

    Returns:
        A `(frame_weights, example_weights)` pair. `frame_weights` is `None`
        (all positions valid) or a tensor of shape `(batch, time, ...)`;
        `example_weights` is `None`, a scalar or a `(batch,)` tensor.
    """
    if sample_weight is not None:
        sample_weight = ops.convert_to_tensor(sample_weight, dtype=dtype)
        if len(sample_weight.shape) >= 2:
            return sample_weight, None
    frame_weights = None if keras_mask is None else ops.cast(keras_mask, dtype)
    return frame_weights, sample_weight


def masked_sum_over_time(values, frame_weights):
    """`sum_t w[:, t] * values[:, t]` over the time axis (axis 1).

    Pass values computed from inputs cleaned by `zero_where_invalid`, so that
    non-finite padding gives neither NaN values nor NaN gradients.
    """
    return ops.sum(frame_weights * values, axis=1)


def zero_where_invalid(values, frame_weights):
    """Replaces values at positions whose frame weight is 0 by 0.

    Padded positions are selected away rather than only multiplied by 0
    (`0 * nan` is `nan`), which keeps values and gradients finite whatever the
    padding holds.
    """
    return ops.where(ops.not_equal(frame_weights, 0), values, ops.zeros_like(values))


def safe_divide(numerator, denominator):
    """`numerator / denominator`, and 0 where `denominator == 0`.

    Uses the double-`where` form so the gradient is finite as well.
    """
    nonzero = ops.not_equal(denominator, 0)
    safe_denominator = ops.where(nonzero, denominator, ops.ones_like(denominator))
    quotient = numerator / safe_denominator
    return ops.where(nonzero, quotient, ops.zeros_like(quotient))


def mean_over_features(values):
    """Averages a `(batch, *features)` tensor down to `(batch,)`."""
    if len(values.shape) <= 1:
        return values
    return ops.mean(values, axis=tuple(range(1, len(values.shape))))


def reduce_examples(per_example, example_weights):
    """Reduces `(batch,)` per-example losses to a scalar.

    Without weights this is the plain mean over the batch. A `(batch,)`
    `example_weights` gives the weighted mean `sum(w * l) / sum(w)` (0 when
    all weights are 0), where an example of weight 0 (a filler row) is
    selected away, so a NaN or inf in its loss does not reach the mean; a
    scalar multiplies the mean.
    """
    if example_weights is None:
        return ops.mean(per_example)
    example_weights = ops.cast(example_weights, per_example.dtype)
    if len(example_weights.shape) == 0:
        return ops.mean(per_example) * example_weights
    example_weights = ops.reshape(example_weights, (-1,))
    weighted = zero_where_invalid(example_weights * per_example, example_weights)
    return safe_divide(ops.sum(weighted), ops.sum(example_weights))


def scale_for_distribution(loss):
    """Divides the loss by the number of replicas under `tf.distribute`.

    Mirrors what `keras.losses.Loss` does for its mean reductions, so that the
    gradients summed across replicas are those of the global mean. It is a
    no-op outside a multi-replica TensorFlow strategy.
    """
    if keras.backend.backend() == "tensorflow":
        tf = optional.imported("tensorflow")  # imported by Keras' backend
        num_replicas = tf.distribute.get_strategy().num_replicas_in_sync
        if num_replicas > 1:
            loss = loss * ops.cast(1.0 / num_replicas, loss.dtype)
    return loss


class MaskedSequenceLoss(keras.losses.Loss):
    """Base class for losses over padded `(batch, time, ...)` sequences.

    Subclasses implement `per_example(y_true, y_pred, frame_weights)`, which
    returns a `(batch,)` tensor given per-frame weights (or `None` when all
    positions are valid). This class resolves the mask (see the module
    docstring), reduces the per-example values over the batch and returns a
    scalar.

    The loss always reduces to a scalar itself, so it takes no `reduction`
    argument. The inherited `reduction` attribute reads
    `"sum_over_batch_size"` and has no effect.

    Args:
        name: Optional name for the loss instance.
        dtype: The dtype of the loss' computations. Defaults to `None`, which
            means `keras.backend.floatx()`. If a `keras.DTypePolicy` is given,
            its `compute_dtype` is used.
    """

    def __init__(self, name=None, dtype=None):
        super().__init__(name=name, reduction="sum_over_batch_size", dtype=dtype)

    def per_example(self, y_true, y_pred, frame_weights):
        """One loss per example, from its valid frames (`frame_weights` nonzero, or every frame where it is None)."""
        raise NotImplementedError

    def __call__(self, y_true, y_pred, sample_weight=None):
        # Read the mask before converting: conversion may return a new tensor
        # without it.
        keras_mask = get_keras_mask(y_pred)
        with keras.name_scope(self.name):
            y_true = ops.convert_to_tensor(y_true, dtype=self.dtype)
            y_pred = ops.convert_to_tensor(y_pred, dtype=self.dtype)
            y_true, y_pred = standardize_ranks(y_true, y_pred)
            frame_weights, example_weights = resolve_weights(
                sample_weight, keras_mask, self.dtype
            )
            if frame_weights is not None:
                frame_weights = frame_weights_like(frame_weights, y_pred)
            check_shapes(y_true, y_pred, frame_weights, example_weights)
            values = self.per_example(y_true, y_pred, frame_weights)
            loss = reduce_examples(values, example_weights)
            return scale_for_distribution(loss)

    def call(self, y_true, y_pred):
        """Per-example losses with every position valid.

        Returns:
            A `(batch,)` tensor; its mean is what `__call__` returns when no
            mask and no `sample_weight` are present.
        """
        y_true = ops.convert_to_tensor(y_true, dtype=self.dtype)
        y_pred = ops.convert_to_tensor(y_pred, dtype=self.dtype)
        y_true, y_pred = standardize_ranks(y_true, y_pred)
        return self.per_example(y_true, y_pred, None)

    def get_config(self):
        """The loss's name and dtype, a JSON-serialisable dict."""
        return {"name": self.name, "dtype": self.dtype}

    @classmethod
    def from_config(cls, config):
        """A new loss from the dict of `get_config()`."""
        config = dict(config)
        # Written by `keras.losses.Loss.get_config`; these losses always
        # reduce to a scalar mean, so it carries no information.
        config.pop("reduction", None)
        return cls(**config)
