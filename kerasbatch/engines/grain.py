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

from kerasbatch import engines, optional
from kerasbatch.data import random_access
from kerasbatch.engines import ahead, epoch_state, grain_lengths
from kerasbatch.engines import served as served_lib
from kerasbatch.engines.epoch_state import checked_state
from kerasbatch.engines.numpy import planned as numpy_planned

# This module is imported only by `build(..., engine="grain")`: Grain is
# loaded here, with an error that says what needs it where it is missing.
grain = optional.grain.load()


#: Its datasets are not `tf.data` datasets.
IN_GRAPH = False


def available():
    """Whether the engine runs here (its module imported: yes)."""
    return True


def planned(built, epoch=0):
    """A Grain `IterDataset` of the batches of `built` (a
    `kerasbatch.planning.built.Built`); its next iteration yields `epoch`."""
    engines.check_shapes_for_keras("grain", built.lengths_vary)
    served = served_lib.Served(built, "grain", epoch_state.EpochState(epoch))
    return served_lib.serve(PlannedIterDataset(served), served)


def stream(built, epoch=0):
    """A Grain `IterDataset` of the batches of the stream `built` (a
    `kerasbatch.planning.built.StreamBuilt`); its next iteration yields
    `epoch`."""
    engines.check_shapes_for_keras("grain", built.lengths_vary)
    served = served_lib.StreamServed(built, "grain", epoch_state.EpochState(epoch))
    return served_lib.serve(StreamDataset(served), served)


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
            raise StopIteration
        batch = dataset._ahead.batch(self._epoch, self._batch)
        self._batch += 1
        if self._batch == dataset._batches.num_batches and not dataset.keras_looks:
            # The last batch: Keras, which knows the length (see
            # `grain_lengths`), asks for no more.
            dataset._state.finish(self._epoch)
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
        served: the dataset's `kerasbatch.engines.served.Served`.

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
        self._batches = numpy_planned.PlannedBatches(served)
        # Data read by index waits on its reads: threads make the next
        # batches meanwhile (`build(read_threads=...)`).
        threads = random_access.read_threads(served.built.prepared.data)
        self._ahead = ahead.Ahead(
            self._batches.batch,
            self._batches.num_batches,
            threads,
            2 * threads,
            "kerasbatch-grain-engine",
        )
        self._state = served.state
        self._resume = None
        #: Keras' looks at the first batches under way (`grain_lengths`).
        self.keras_looks = 0
        grain_lengths.install()  # Keras takes len() as the epoch's length

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


class StreamIterator(grain.DatasetIterator):
    """One pass over a stream's source: one epoch of its batches.

    The epoch is read, and the statistics restart, at the first batch; it
    moves on when the pass yields its last batch.
    """

    def __init__(self, dataset):
        super().__init__()
        self._dataset = dataset
        self._epoch = self._batches = None
        self._made = 0

    def __next__(self):
        stream = self._dataset._stream
        if self._batches is None:
            self._epoch, self._batches = stream.start()
        try:
            batch = next(self._batches)
        except StopIteration:
            self._finish()
            raise
        self._made += 1
        if self._made == stream.num_batches and not self._dataset.keras_looks:
            # The last batch of a known number: Keras asks for no more (see
            # `grain_lengths`), so the pass ends here, with the checks at
            # the source's end.
            next(self._batches, None)
            self._finish()
        return batch

    def _finish(self):
        if self._epoch is not None and not self._dataset.keras_looks:
            self._dataset._stream.finish(self._epoch)
            self._epoch = None  # finished once

    def get_state(self):
        raise NotImplementedError(_NO_STREAM_STATE)

    def set_state(self, state):
        raise NotImplementedError(_NO_STREAM_STATE)


#: Why a stream's iterator has no state to save.
_NO_STREAM_STATE = (
    "A StreamBucketBuilder's iterator cannot resume mid-epoch: its position "
    "holds the buffer's waiting elements and the source's own position. "
    "Resume at an epoch's start (kerasbatch.callbacks.EpochReshuffle, "
    "set_epoch), or plan in memory with BucketBuilder, whose iterators resume "
    "mid-epoch."
)


class StreamDataset(grain.IterDataset):
    """A stream's batches as a Grain `IterDataset`: each iteration reads the
    source once, and yields the next epoch.

    Made by `StreamBucketBuilder.build(source, engine="grain")`. With the
    lengths given to `build`, `len()` is the number of batches of an epoch.

    Args:
        served: the dataset's `kerasbatch.engines.served.StreamServed`.

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> source = [np.ones(n, np.int32) for n in (3, 12, 4, 15, 5)]
    >>> builder = kerasbatch.StreamBucketBuilder(
    ...     boundaries=[10], batch_size=2, shuffle=False)
    >>> dataset = builder.build(source, engine="grain")
    >>> [batch.shape for batch in dataset]
    [(2, 4), (2, 15), (1, 5)]
    """

    def __init__(self, served):
        from kerasbatch.engines.numpy import stream as numpy_stream

        super().__init__()
        self._stream = numpy_stream.StreamBatches(served)
        #: Keras' looks at the first batches under way (`grain_lengths`).
        self.keras_looks = 0
        grain_lengths.install()  # Keras takes len(), where it is known

    def __len__(self):
        if self._stream.num_batches is None:
            raise TypeError(
                "This stream's number of batches is unknown: pass "
                "build(source, lengths=...) for it."
            )
        return self._stream.num_batches

    def __iter__(self):
        return StreamIterator(self)

    def __str__(self):
        return "StreamDataset(StreamBucketBuilder batches)"
