"""The `grain` engine: a Grain `IterDataset` of numpy batches.

Keras takes Grain datasets in `fit`, `evaluate` and `predict` on every
backend (Keras 3.11 and later). Every iteration of the dataset yields one
epoch of the plan: the dataset's epoch, which moves on when an iteration
yields its last batch (an iteration given up part-way, such as Keras' look
at the first batches, does not count); `set_epoch` and
`kerasbatch.callbacks.EpochReshuffle` pin it.

The iterator's state, `{"epoch": e, "batch": k}`, is Grain's
checkpointable state: `set_state` on a new iterator continues at batch `k`
of epoch `e`, and `PlannedIterDataset.set_state` makes the dataset's next
iteration start there (what `kerasbatch.callbacks.DataCheckpoint` restores
after a restart, mid-epoch).
"""

from kerasbatch import optional
from kerasbatch.engines import numpy_batches
from kerasbatch.engines.epoch_state import checked_state

# This module is imported only by `build(..., engine="grain")`: Grain is
# loaded here, with an error that says what needs it where it is missing.
grain = optional.grain.load()


class PlannedIterator(grain.DatasetIterator):
    """One pass over the batches of one epoch of a plan.

    The epoch is read at the first batch (not when the iterator is made:
    Keras makes the next epoch's iterator before its callbacks set the
    epoch), unless `set_state` gave one.
    """

    def __init__(self, dataset, resume=None):
        super().__init__()
        self._dataset = dataset
        self._epoch, self._batch = resume or (None, 0)

    def __next__(self):
        dataset = self._dataset
        if self._epoch is None:
            self._epoch = dataset._state.next_epoch()
        if self._batch == 0 or dataset._state.started_epoch() != self._epoch:
            dataset._state.assign(self._epoch)
            dataset._state.start()
        if self._batch >= dataset._batches.num_batches:
            if self._batch == dataset._batches.num_batches:
                dataset._state.finish(self._epoch)
                self._batch += 1  # finished once
            raise StopIteration
        batch = dataset._batches.batch(self._epoch, self._batch)
        self._batch += 1
        return batch

    def get_state(self):
        epoch = self._epoch
        if epoch is None:
            epoch = self._dataset._state.next_epoch()
        return {"epoch": epoch, "batch": min(self._batch, len(self._dataset))}

    def set_state(self, state):
        self._epoch, self._batch = checked_state(state, len(self._dataset))


class PlannedIterDataset(grain.IterDataset):
    """A built dataset's batches as a Grain `IterDataset`.

    Made by `build(..., engine="grain")`. `len()` is the number of
    batches of an epoch; each iteration yields the next epoch.

    Args:
        served: the frozen builder copy that serves the dataset.

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> builder = kerasbatch.SortedBuilder(batch_size=2, shuffle=False)
    >>> dataset = builder.build(
    ...     [np.ones(n) for n in (1, 2, 3)], engine="grain")
    >>> iterator = iter(dataset)
    >>> next(iterator).shape, iterator.get_state()
    ((2, 2), {'epoch': 0, 'batch': 1})
    """

    def __init__(self, served):
        super().__init__()
        self._batches = numpy_batches.PlannedBatches(served)
        self._state = served._state
        self._resume = None

    def __len__(self):
        return self._batches.num_batches

    def __iter__(self):
        resume, self._resume = self._resume, None
        return PlannedIterator(self, resume)

    def set_state(self, state):
        """Makes the next iteration continue where an iterator's
        `get_state()` was taken: at `state["batch"]` of
        `state["epoch"]`."""
        self._resume = checked_state(state, self._batches.num_batches)

    def __str__(self):
        return f"PlannedIterDataset({self._batches.num_batches} batches per epoch)"
