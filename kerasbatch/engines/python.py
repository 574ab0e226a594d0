"""The `python` engine: a `keras.utils.PyDataset` of numpy batches.

It needs neither TensorFlow nor Grain, and every Keras backend takes it in
`fit`, `evaluate` and `predict`. Batch `k` of an epoch is made on demand
(`__getitem__`) from the epoch's plan. Once every batch of the epoch has
been made, the dataset moves on to the next epoch (Keras' `on_epoch_end`,
which it also calls when no epoch ran, plays no part); `set_epoch` (and
`kerasbatch.callbacks.EpochReshuffle`) pins it.

With `workers` > 1, threads of the dataset's own make the next batches of
the running epoch ahead of Keras' loop. Keras itself is told `workers=1`:
its `OrderedEnqueuer` would ask for the batches from several threads, in
its own (with `fit(shuffle=True)`, randomly shuffled) order, and nothing
in those calls tells which of them is the epoch's next. Here Keras asks
for one batch at a time, in its loop, and the dataset decides which batch
that is; the threads only compute batches, each a pure function of its
epoch and position in the plan, so the batches are those of `workers=1`,
bit for bit.
"""

import keras

from kerasbatch import engines
from kerasbatch.engines import ahead as ahead_lib
from kerasbatch.engines import epoch_state
from kerasbatch.engines import served as served_lib
from kerasbatch.engines.epoch_state import checked_state
from kerasbatch.engines.numpy import planned as numpy_planned

#: Why `np.array(dataset)` fails: code that converts anything but a tf.data
#: or Grain dataset to arrays (keras-hub's task models' `fit`) reads this.
NOT_AN_ARRAY = (
    "A dataset of kerasbatch's 'python' engine (a keras.utils.PyDataset of "
    "batches) is not an array. keras-hub's task models (and other code that "
    "takes only a tf.data or Grain dataset as a dataset) convert anything else "
    "to arrays: build with engine='grain' or engine='tf.data' for them."
)


class _NotAnArray:
    """Makes `np.array(dataset)` fail with `NOT_AN_ARRAY`, not with numpy's
    "inhomogeneous shape" after reading every batch. (An `__array__` method
    would make Keras take the dataset for an array; numpy also reads
    `__array_interface__`, which Keras does not.)"""

    @property
    def __array_interface__(self):
        raise TypeError(NOT_AN_ARRAY)


#: Its datasets are not `tf.data` datasets.
IN_GRAPH = False


def available():
    """Whether the engine runs here (its module imported: yes)."""
    return True


def planned(built, epoch=0, **options):
    """A `keras.utils.PyDataset` of the batches of `built` (a
    `kerasbatch.planning.built.Built`); its next iteration yields `epoch`.
    `options`: `workers`, `use_multiprocessing` and `max_queue_size` (see
    `PlannedPyDataset`)."""
    engines.check_shapes_for_keras("python", built.lengths_vary)
    served = served_lib.Served(built, "python", epoch_state.EpochState(epoch))
    return served_lib.serve(PlannedPyDataset(served, **options), served)


def stream(built, epoch=0):
    """A `keras.utils.PyDataset` of the batches of the stream `built` (a
    `kerasbatch.planning.built.StreamBuilt`); its next iteration yields
    `epoch`. A `PyDataset` needs its number of batches: the lengths given
    to `build`."""
    if built.steps is None:
        raise ValueError(
            "A stream on the 'python' engine (a keras.utils.PyDataset) "
            "needs its number of batches: pass build(source, lengths=...), "
            "or use engine='grain', with which Keras learns the number of "
            "steps in the first epoch."
        )
    engines.check_shapes_for_keras("python", built.lengths_vary)
    served = served_lib.StreamServed(built, "python", epoch_state.EpochState(epoch))
    return served_lib.serve(StreamDataset(served), served)


class PlannedPyDataset(_NotAnArray, keras.utils.PyDataset):
    """A built dataset's batches as a `keras.utils.PyDataset`.

    Made by `build(..., engine="python")`; `len()` is the number of batches
    of an epoch, and `dataset[k]` is batch `k` of the running epoch.

    Inside a Keras epoch (between Keras' `on_epoch_begin` and
    `on_epoch_end`), the batches come in the plan's order whatever index
    Keras asks for: `fit(shuffle=True)`, Keras' default, would shuffle a
    `PyDataset`'s batches with Python's global random state, and the plan
    has already ordered (and, with `shuffle`, shuffled) them by its seed.

    Keras takes the batches one at a time, in its loop (its `workers`
    setting is 1 and cannot be set). With `workers` > 1, that many threads
    make the next `max_queue_size` batches of the running epoch (in a Keras
    epoch, or a `for` loop over the dataset) while the model trains: the
    same batches in the same order as with one, bit for bit.

    Args:
        served: the dataset's `kerasbatch.engines.served.Served`.
        workers: threads that make batches ahead (1: none; each batch is
            made when Keras asks for it).
        use_multiprocessing: False only (worker processes would each hold
            a copy of the dataset and its epoch; the error says what to
            use instead).
        max_queue_size: with `workers` > 1, how many batches are made
            ahead, at most.

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> builder = kerasbatch.SortedBuilder(batch_size=2, shuffle=False)
    >>> x = [np.ones(n) for n in (1, 2, 3)]
    >>> dataset = builder.build(x, engine="python")
    >>> len(dataset), [batch.shape for batch in dataset]
    (2, [(2, 2), (1, 3)])
    >>> threaded = builder.build(x, engine="python", workers=2)
    >>> threaded.batch_workers, threaded.workers  # Keras sees one
    (2, 1)
    >>> [batch.shape for batch in threaded]
    [(2, 2), (1, 3)]
    """

    def __init__(self, served, workers=1, use_multiprocessing=False, max_queue_size=10):
        options = engines.python_options(
            "python", workers, use_multiprocessing, max_queue_size
        )
        # Keras takes the batches in its loop (workers=1): see the class.
        super().__init__(max_queue_size=options["max_queue_size"])
        self._batches = numpy_planned.PlannedBatches(served)
        self._state = served.state
        self._made = set()  # the batches of the running epoch made so far
        self._keras_calls = None  # the batch Keras takes next in its epoch
        self._resume = None  # (epoch, batch) the next Keras epoch starts at
        self._skipped = 0  # batches of the running Keras epoch resumed past
        self._batch_workers = options["workers"]
        self._ahead = ahead_lib.Ahead(
            lambda epoch, index: self._batches.batch(epoch, index),
            self._batches.num_batches,
            options["workers"],
            options["max_queue_size"],
            "kerasbatch-python-engine",
        )

    @property
    def workers(self):
        """1, as Keras reads it: Keras takes the batches in its loop, one
        call at a time, which keeps them in the plan's order; the
        dataset's own `batch_workers` threads make them ahead."""
        return 1

    @workers.setter
    def workers(self, value):
        raise AttributeError(
            "A kerasbatch PyDataset's Keras workers stay 1 (its batches keep "
            "the plan's order): pass workers= to build(..., engine='python') "
            "for threads that make its batches ahead."
        )

    @property
    def use_multiprocessing(self):
        """False: the batches are made in threads of this process."""
        return False

    @use_multiprocessing.setter
    def use_multiprocessing(self, value):
        raise AttributeError(
            "A kerasbatch PyDataset makes its batches in threads of this "
            "process (its epoch lives here): pass workers= to "
            "build(..., engine='python')."
        )

    @property
    def batch_workers(self):
        """The threads that make batches ahead (`workers` of `build`)."""
        return self._batch_workers

    @property
    def num_batches(self):
        """The batches Keras takes in its running epoch: all of them, but
        those before the batch it resumes at (`set_state`)."""
        return self._batches.num_batches - self._skipped

    def __len__(self):
        return self._batches.num_batches

    def __getitem__(self, index):
        if self._keras_calls == self._batches.num_batches:
            # Keras took every batch of its epoch and never ended it (an
            # exception in a callback stopped its fit): this call is not in
            # that epoch (on TensorFlow, the next fit's look at a batch).
            self._keras_calls = None
        in_keras_epoch = self._keras_calls is not None
        if in_keras_epoch:  # in the plan's order (see above)
            index, self._keras_calls = self._keras_calls, self._keras_calls + 1
        return self._item(index, ahead=in_keras_epoch)

    def __iter__(self):
        for index in range(self.num_batches):
            yield self._item(index, ahead=True)

    def _item(self, index, ahead):
        if not 0 <= index < self._batches.num_batches:
            raise IndexError(
                f"batch {index} is out of range for {self._batches.num_batches} "
                "batches."
            )
        epoch = self._state.next_epoch()
        if not self._made or self._state.started_epoch() != epoch:
            self._made.clear()  # a new epoch (or set_epoch) starts
            self._state.start()
        batch = self._batch(epoch, index, ahead)
        self._made.add(index)
        if len(self._made) == self._batches.num_batches:
            self._made.clear()
            self._state.finish(epoch)
        return batch

    def _batch(self, epoch, index, ahead):
        """Batch `index` of `epoch`; with `ahead` (and workers), the
        workers start on the next `max_queue_size` batches of `epoch`."""
        return self._ahead.batch(epoch, index, ahead)

    def on_epoch_begin(self):
        self._keras_calls = 0
        self._made.clear()  # a pass of Keras' (not a look at the first batch)
        if self._resume is not None:
            (epoch, batch), self._resume = self._resume, None
            self._state.assign(epoch)
            self._state.start()
            self._keras_calls = self._skipped = batch
            self._made.update(range(batch))

    def on_epoch_end(self):
        self._keras_calls = None
        self._skipped = 0
        self._ahead.drop()

    def get_state(self):
        """`{"epoch": e, "batch": k}`: the running epoch, and the batches of
        it made so far (in the plan's order; batches the workers made
        ahead do not count)."""
        return {"epoch": self._state.next_epoch(), "batch": len(self._made)}

    def set_state(self, state):
        """Makes the next Keras epoch continue at `state["batch"]` of
        `state["epoch"]` (a `get_state()`): Keras then takes the rest of
        that epoch's batches."""
        self._resume = checked_state(state, self._batches.num_batches)


class StreamDataset(_NotAnArray, keras.utils.PyDataset):
    """A stream's batches as a `keras.utils.PyDataset`.

    Made by `StreamBucketBuilder.build(source, lengths, engine="python")`:
    the lengths give the number of batches a `PyDataset` needs. Keras takes
    the batches in the stream's order, whatever index it asks for (a
    stream has no batch `k` before batches `0..k-1`); each Keras epoch
    reads the source once, as the next epoch of the stream.

    Args:
        served: the dataset's `kerasbatch.engines.served.StreamServed`.

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> lengths = [3, 12, 4, 15, 5]
    >>> source = [np.ones(n, np.int32) for n in lengths]
    >>> builder = kerasbatch.StreamBucketBuilder(
    ...     boundaries=[10], batch_size=2, shuffle=False)
    >>> dataset = builder.build(source, lengths, engine="python")
    >>> len(dataset), [dataset[k].shape for k in range(len(dataset))]
    (3, [(2, 4), (2, 15), (1, 5)])
    """

    def __init__(self, served):
        from kerasbatch.engines.numpy import stream as numpy_stream

        super().__init__()
        self._stream = numpy_stream.StreamBatches(served)
        self._num_batches = self._stream.num_batches
        self._batches = None  # the running pass over the source
        self._made = 0

    @property
    def num_batches(self):
        return self._num_batches

    def __len__(self):
        return self._num_batches

    def __getitem__(self, index):
        if not 0 <= index < self._num_batches:
            raise IndexError(
                f"batch {index} is out of range for {self._num_batches} batches."
            )
        if self._batches is None:
            self._epoch, self._batches = self._stream.start()
            self._made = 0
        batch = next(self._batches, None)
        if batch is None:
            raise ValueError(
                f"The stream ended after {self._made} batches, but build() "
                f"counted {self._num_batches} from the lengths it was given."
            )
        self._made += 1
        if self._made == self._num_batches:
            next(self._batches, None)  # the checks at the source's end
            self._batches = None
            self._stream.finish(self._epoch)
        return batch

    def on_epoch_begin(self):
        self._batches = None  # a pass of Keras' (not a look at the first batch)
