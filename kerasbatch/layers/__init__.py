from kerasbatch.layers.pad_sequences import PadSequences

__all__ = ["PadSequences"]
