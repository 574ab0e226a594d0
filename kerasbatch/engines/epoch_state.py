"""A built dataset's run state: the epoch its next iteration yields, and the
epoch its latest iteration started.

Every built dataset has one, apart from the builder's settings: the numpy
engines (`grain`, `python`) keep it in Python (`EpochState`); the `tf.data`
engine in CPU variables that its graph reads and advances
(`kerasbatch.engines.tf_data.batch.GraphEpochState`). Both answer the same
methods, which `set_epoch`, `last_started_epoch` and the callbacks use.
"""


class EpochState:
    """Epochs counted in Python.

    Args:
        epoch: the epoch the next iteration yields.

    Example:

    >>> from kerasbatch.engines.epoch_state import EpochState
    >>> state = EpochState(3)
    >>> state.start(), state.started_epoch(), state.next_epoch()
    (3, 3, 3)
    >>> state.finish(3)
    >>> state.next_epoch()
    4
    """

    def __init__(self, epoch=0):
        self._next = int(epoch)
        self._started = None

    def next_epoch(self):
        """The epoch the next iteration yields."""
        return self._next

    def assign(self, epoch):
        """Makes the next iteration yield `epoch`."""
        self._next = int(epoch)

    def started_epoch(self):
        """The epoch the latest iteration started, or None."""
        return self._started

    def start(self):
        """An iteration starts: returns its epoch (the next one, which it
        does not advance: an iteration given up part-way, such as Keras'
        look at the first batches, repeats it)."""
        self._started = self._next
        return self._started

    def finish(self, epoch):
        """An iteration of `epoch` yielded its last batch: the next is
        `epoch + 1`."""
        self._next = int(epoch) + 1


def checked_state(state, num_batches):
    """`(epoch, batch)` of an iterator state, or a ValueError naming what
    is wrong."""
    if not isinstance(state, dict) or set(state) != {"epoch", "batch"}:
        raise ValueError(
            "A kerasbatch iterator state is a dict with the keys 'epoch' "
            f"and 'batch' (from get_state()), got {state!r}."
        )
    epoch, batch = state["epoch"], state["batch"]
    for name, value in (("epoch", epoch), ("batch", batch)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(
                f"The iterator state's {name} must be a non-negative int, got "
                f"{value!r}."
            )
    if batch > num_batches:
        raise ValueError(
            f"The iterator state's batch {batch} is past the epoch's "
            f"{num_batches} batches: the state is of another dataset."
        )
    return epoch, batch
