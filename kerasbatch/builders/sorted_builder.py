"""Batches of elements sorted by length."""

import keras

from kerasbatch.builders.base import Builder
from kerasbatch.planning import batching


@keras.saving.register_keras_serializable(package="kerasbatch")
class SortedBuilder(Builder):
    """Batches of neighbours in length order, in shuffled batch order.

    Elements are sorted by length (elements of equal length in a fresh random
    order every epoch) and cut into consecutive batches; the order of the
    batches is shuffled so training does not see short batches first and long
    ones last. Near-minimal padding, but the same elements tend to share a
    batch from one epoch to the next. Arguments are those of
    `kerasbatch.builders.Builder`.

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> x = [np.ones(n) for n in (5, 1, 4, 2)]
    >>> builder = kerasbatch.SortedBuilder(batch_size=2, shuffle=False)
    >>> dataset = builder.build(x)
    >>> [tuple(batch.shape) for batch in dataset]
    [(2, 2), (2, 5)]
    >>> builder.statistics().padding_efficiency
    0.8571428571428571
    """

    def _epoch_order(self, prepared):
        candidates = prepared.candidates
        return batching.sorted_order(
            candidates,
            prepared.cut_lengths[candidates],
            self.batch_size,
            self.remainder,
            self.shuffle,
        )
