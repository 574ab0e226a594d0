"""Losses for padded variable-length sequence batches.

Both losses ignore padded positions. The padding mask is taken from a per-frame
`sample_weight` of shape `(batch, time)` (as the kerasbatch builders emit it),
else from the Keras mask of `y_pred`; see `kerasbatch.losses.masking`.
"""

from kerasbatch.losses.masked_mean_squared_error import MaskedMeanSquaredError
from kerasbatch.losses.negative_snr import NegativeSNR

__all__ = ["MaskedMeanSquaredError", "NegativeSNR"]
