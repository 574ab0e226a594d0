"""Callbacks that connect builders to `model.fit`."""

from kerasbatch.callbacks.epoch_reshuffle import EpochReshuffle
from kerasbatch.callbacks.padding_efficiency import PaddingEfficiency

__all__ = ["EpochReshuffle", "PaddingEfficiency"]
