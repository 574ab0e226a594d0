"""Batches of elements sorted by length."""

import keras
import numpy as np

from kerasbatch import plan as plan_lib
from kerasbatch.builders.base import Builder


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

    def _plan_batches(self, rng):
        order = self._candidates
        if self.shuffle:
            order = rng.permutation(order)
        order = order[np.argsort(self._cut_lengths[order], kind="stable")]
        splits = plan_lib.batch_splits(len(order), self.batch_size, self.drop_remainder)
        if self.shuffle:
            order, splits = plan_lib.reorder_batches(
                order, splits, rng.permutation(len(splits) - 1)
            )
        return order, splits
