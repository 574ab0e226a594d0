import keras
from keras import ops

from kerasbatch.losses.masking import (
    MaskedSequenceLoss,
    masked_sum_over_time,
    mean_over_features,
    safe_divide,
    zero_where_invalid,
)


@keras.saving.register_keras_serializable(package="kerasbatch")
class MaskedMeanSquaredError(MaskedSequenceLoss):
    """Mean squared error over the valid positions of padded sequences.

    For each example `i` and feature, the squared error is summed over the
    valid time steps and divided by the example's length; the result is then
    averaged over features and over the batch:

    ```python
    length[i] = sum_t mask[i, t]
    loss = mean_{i, f}(sum_t mask[i, t] * (y_pred - y_true)[i, t, f] ** 2
                       / length[i])
    ```

    Each example therefore counts equally, however long it is. An example of
    length 0 contributes 0 (still counting in the batch mean) and never NaN.
    Padded positions are ignored whatever they hold, NaN and inf included.

    `y_true` and `y_pred` have shape `(batch, time)` or
    `(batch, time, *features)`; a trailing axis of size 1 on one of them is
    squeezed, as in `keras.losses.MeanSquaredError`.

    The mask is resolved in this order:

    1. `sample_weight` of rank >= 2, shape `(batch, time)`: the per-frame
       mask, as the kerasbatch builders emit it (1.0 real frame, 0.0
       padding). Non-binary values act as per-frame weights `w`, with
       `length[i] = sum_t w[i, t]`, so a per-example factor folded into
       them cancels (a zero factor still drops the example). A Keras mask on
       `y_pred` is then ignored.
    2. Otherwise the Keras mask of `y_pred` (from e.g.
       `keras.layers.Masking` or `keras.layers.Embedding(mask_zero=True)`).
    3. Otherwise every position is valid.

    In cases 2 and 3 a `sample_weight` of shape `(batch,)` weights whole
    examples: the batch reduction is `sum(w * loss_i) / sum(w)`. A scalar
    `sample_weight` multiplies the loss.

    The loss always reduces to a scalar, so there is no `reduction` argument.
    `call(y_true, y_pred)` returns the `(batch,)` per-example losses with all
    positions valid.

    Args:
        name: Optional name for the loss instance. Defaults to
            `"masked_mean_squared_error"`.
        dtype: The dtype of the loss' computations. Defaults to `None`, which
            means `keras.backend.floatx()`. If a `keras.DTypePolicy` is given,
            its `compute_dtype` is used.

    Example:

    >>> import numpy as np
    >>> from kerasbatch.losses import MaskedMeanSquaredError
    >>> y_true = np.array([[1.0, 2.0, 0.0], [3.0, 0.0, 0.0]])
    >>> y_pred = np.array([[2.0, 2.0, 9.0], [1.0, 9.0, 9.0]])
    >>> mask = np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    >>> loss = MaskedMeanSquaredError()
    >>> float(loss(y_true, y_pred, sample_weight=mask))  # (1/2 + 4/1) / 2
    2.25

    Usage with `compile()`, where each batch is `(x, y, mask)`:

    >>> import keras
    >>> model = keras.Sequential([keras.Input((None, 4)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="adam", loss=MaskedMeanSquaredError())
    """

    def __init__(self, name="masked_mean_squared_error", dtype=None):
        super().__init__(name=name, dtype=dtype)

    def per_example(self, y_true, y_pred, frame_weights):
        """The mean squared error of each example over its valid frames."""
        diff = y_pred - y_true
        if frame_weights is None:
            per_feature = ops.mean(ops.square(diff), axis=1)
        else:
            diff = zero_where_invalid(diff, frame_weights)
            total = masked_sum_over_time(ops.square(diff), frame_weights)
            length = ops.sum(frame_weights, axis=1)
            per_feature = safe_divide(total, length)
        return mean_over_features(per_feature)
