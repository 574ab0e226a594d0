"""What the kerasbatch callbacks share: deep copies that share the builder
and its datasets, and the builder they serve, checked.

keras-tuner deep-copies the callbacks of every trial. A copy of a kerasbatch
callback must still drive and read the builder the datasets came from, not a
copy of it (whose datasets no trial trains on). `FreshCopies` makes a deep
copy a new callback from the same constructor arguments: the same builder and
datasets, and no run state.
"""

import keras

from kerasbatch.callbacks import fit_datasets


class FreshCopies:
    """A mixin: `copy.deepcopy` calls the constructor again with the
    arguments it was given (the objects themselves, not copies).

    Example:

    >>> import copy
    >>> import numpy as np
    >>> import kerasbatch
    >>> builder = kerasbatch.SortedBuilder(batch_size=2)
    >>> _ = builder.build([np.ones(n) for n in (1, 2, 3)])
    >>> callback = copy.deepcopy(kerasbatch.callbacks.EpochReshuffle(builder))
    >>> callback.builder is builder
    True
    """

    def __new__(cls, *args, **kwargs):
        callback = super().__new__(cls)
        callback._constructor_arguments = (args, kwargs)
        return callback

    def __deepcopy__(self, memo):
        args, kwargs = self._constructor_arguments
        return type(self)(*args, **kwargs)


class BuilderCallback(FreshCopies, keras.callbacks.Callback):
    """A callback of a builder: `builder` (a kerasbatch builder) checked.

    Args:
        builder: the builder whose datasets `fit` trains on.
    """

    def __init__(self, builder):
        super().__init__()
        self.builder = fit_datasets.checked_builder(builder, type(self).__name__)
