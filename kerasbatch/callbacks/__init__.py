"""Callbacks that connect builders to `model.fit`."""

from kerasbatch.callbacks.backup_and_restore import BackupAndRestore
from kerasbatch.callbacks.epoch_reshuffle import EpochReshuffle
from kerasbatch.callbacks.padding_efficiency import PaddingEfficiency
from kerasbatch.callbacks.throughput import Throughput
from kerasbatch.callbacks.warm_up import WarmUp

__all__ = [
    "BackupAndRestore",
    "EpochReshuffle",
    "PaddingEfficiency",
    "Throughput",
    "WarmUp",
]
