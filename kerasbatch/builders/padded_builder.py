"""Random batches, each padded to its longest element."""

import keras

from kerasbatch.builders.base import Builder
from kerasbatch.planning import batching


@keras.saving.register_keras_serializable(package="kerasbatch")
class PaddedBuilder(Builder):
    """Random batches padded to the batch's longest element.

    The baseline: batch-level padding on shuffled elements (random
    batching). It keeps the most randomness and wastes the most padding when
    lengths vary a lot. Arguments are those of `kerasbatch.builders.Builder`.

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> x = [np.arange(1, n + 1) for n in (3, 1, 4, 2)]
    >>> builder = kerasbatch.PaddedBuilder(batch_size=2, shuffle=False)
    >>> dataset = builder.build(x, y=np.array([0, 1, 0, 1]))
    >>> [tuple(batch_x.shape) for batch_x, _ in dataset]
    [(2, 3), (2, 4)]
    >>> builder.statistics().padding_efficiency
    0.7142857142857143
    """

    def _epoch_order(self, prepared):
        return batching.random_order(
            prepared.candidates, self.batch_size, self.remainder, self.shuffle
        )
