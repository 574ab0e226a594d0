import keras
from keras import ops

from kerasbatch.losses.masking import (
    FLOAT32_EPSILON,
    MaskedSequenceLoss,
    masked_sum_over_time,
    mean_over_features,
    zero_where_invalid,
)


@keras.saving.register_keras_serializable(package="kerasbatch")
class NegativeSNR(MaskedSequenceLoss):
    """Negative signal-to-noise ratio, in dB, over valid sequence positions.

    For each example `i` and feature, signal and noise energies are summed
    over the valid time steps; the loss is minus the mean SNR over the batch
    and features:

    ```python
    signal = sum_t mask[i, t] * y_true[i, t, f] ** 2
    noise = sum_t mask[i, t] * (y_true - y_pred)[i, t, f] ** 2
    snr = 10 * log10(signal / (noise + epsilon) + epsilon)
    loss = -mean_{i, f}(snr)
    ```

    Padded positions are ignored whatever they hold, NaN and inf included.
    Following the formula, an example of length 0 (or with an all-zero
    target) has `snr = 10 * log10(epsilon)` (about -69.2 dB for the default
    `epsilon`): a finite constant with zero gradient.

    `y_true` and `y_pred` have shape `(batch, time)` or
    `(batch, time, *features)`; a trailing axis of size 1 on one of them is
    squeezed, as in Keras' built-in losses.

    The mask, the weights and the reduction to a scalar are those of
    `kerasbatch.losses.MaskedMeanSquaredError`: a `sample_weight` of shape
    `(batch, time)` is the per-frame mask the kerasbatch builders emit (its
    non-binary values weigh both energies per frame), else the Keras mask of
    `y_pred`, else every position counts; a `(batch,)` weight weighs whole
    examples. `call(y_true, y_pred)` returns the `(batch,)` per-example
    losses with all positions valid.

    Args:
        epsilon: Small constant keeping the ratio and the logarithm finite.
            Defaults to the machine epsilon of float32 (`2**-23`).
        name: Optional name for the loss instance. Defaults to
            `"negative_snr"`.
        dtype: The dtype of the loss' computations, as for
            `kerasbatch.losses.MaskedMeanSquaredError`.

    Example:

    >>> import numpy as np
    >>> from kerasbatch.losses import NegativeSNR
    >>> clean = np.array([[1.0, 2.0, 0.0], [3.0, 0.0, 0.0]])
    >>> estimate = np.array([[1.0, 1.0, 9.0], [2.0, 9.0, 9.0]])
    >>> valid = (clean != 0).astype("float32")  # its real frames here
    >>> # SNRs are 10 * log10(5 / 1) and 10 * log10(9 / 1).
    >>> round(float(NegativeSNR()(clean, estimate, sample_weight=valid)), 4)
    -8.2661
    """

    def __init__(self, epsilon=FLOAT32_EPSILON, name="negative_snr", dtype=None):
        super().__init__(name=name, dtype=dtype)
        self.epsilon = float(epsilon)

    def per_example(self, y_true, y_pred, frame_weights):
        """The negative SNR in dB of each example over its valid frames."""
        noise = y_true - y_pred
        if frame_weights is None:
            signal_energy = ops.sum(ops.square(y_true), axis=1)
            noise_energy = ops.sum(ops.square(noise), axis=1)
        else:
            y_true = zero_where_invalid(y_true, frame_weights)
            noise = zero_where_invalid(noise, frame_weights)
            signal_energy = masked_sum_over_time(ops.square(y_true), frame_weights)
            noise_energy = masked_sum_over_time(ops.square(noise), frame_weights)
        epsilon = ops.cast(self.epsilon, y_pred.dtype)
        ratio = signal_energy / (noise_energy + epsilon) + epsilon
        snr = 10.0 * ops.log10(ratio)
        return -mean_over_features(snr)

    def get_config(self):
        """The loss's configuration, with `epsilon`."""
        config = super().get_config()
        config["epsilon"] = self.epsilon
        return config
