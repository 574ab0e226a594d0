"""The `python` engine: a `keras.utils.PyDataset` of numpy batches.

It needs neither TensorFlow nor Grain, and every Keras backend takes it in
`fit`, `evaluate` and `predict`. Batch `k` of an epoch is made on demand
(`__getitem__`) from the epoch's plan. Once every batch of the epoch has
been made, the dataset moves on to the next epoch (Keras' `on_epoch_end`,
which it also calls when no epoch ran, plays no part); `set_epoch` (and
`kerasbatch.callbacks.EpochReshuffle`) pins it.
"""

import keras

from kerasbatch.engines import numpy_batches
from kerasbatch.engines.epoch_state import checked_state


class PlannedPyDataset(keras.utils.PyDataset):
    """A built dataset's batches as a `keras.utils.PyDataset`.

    Made by `build(..., engine="python")`; `len()` is the number of batches
    of an epoch, and `dataset[k]` is batch `k` of the running epoch.

    Inside a Keras epoch (between Keras' `on_epoch_begin` and
    `on_epoch_end`), the batches come in the plan's order whatever index
    Keras asks for: `fit(shuffle=True)`, Keras' default, would shuffle a
    `PyDataset`'s batches with Python's global random state, and the plan
    has already ordered (and, with `shuffle`, shuffled) them by its seed.
    Batches are made in the training loop, one at a time (`workers=1`).

    Args:
        served: the frozen builder copy that serves the dataset.

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> builder = kerasbatch.SortedBuilder(batch_size=2, shuffle=False)
    >>> dataset = builder.build([np.ones(n) for n in (1, 2, 3)], engine="python")
    >>> len(dataset), [batch.shape for batch in dataset]
    (2, [(2, 2), (1, 3)])
    """

    def __init__(self, served):
        super().__init__()
        self._batches = numpy_batches.PlannedBatches(served)
        self._state = served._state
        self._made = set()  # the batches of the running epoch made so far
        self._keras_calls = None  # the batch Keras takes next in its epoch
        self._resume = None  # (epoch, batch) the next Keras epoch starts at
        self._skipped = 0  # batches of the running Keras epoch resumed past

    @property
    def num_batches(self):
        """The batches Keras takes in its running epoch: all of them, but
        those before the batch it resumes at (`set_state`)."""
        return self._batches.num_batches - self._skipped

    def __len__(self):
        return self._batches.num_batches

    def __getitem__(self, index):
        if self._keras_calls is not None:  # in the plan's order (see above)
            index, self._keras_calls = self._keras_calls, self._keras_calls + 1
        if not 0 <= index < self._batches.num_batches:
            raise IndexError(
                f"batch {index} is out of range for {self._batches.num_batches} "
                "batches."
            )
        epoch = self._state.next_epoch()
        if not self._made or self._state.started_epoch() != epoch:
            self._made.clear()  # a new epoch (or set_epoch) starts
            self._state.start()
        batch = self._batches.batch(epoch, index)
        self._made.add(index)
        if len(self._made) == self._batches.num_batches:
            self._made.clear()
            self._state.finish(epoch)
        return batch

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

    def get_state(self):
        """`{"epoch": e, "batch": k}`: the running epoch, and the batches of
        it made so far (in the plan's order)."""
        return {"epoch": self._state.next_epoch(), "batch": len(self._made)}

    def set_state(self, state):
        """Makes the next Keras epoch continue at `state["batch"]` of
        `state["epoch"]` (a `get_state()`): Keras then takes the rest of
        that epoch's batches."""
        self._resume = checked_state(state, self._batches.num_batches)
