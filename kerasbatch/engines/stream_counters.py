"""What a stream's statistics count, as its batches are made.

`StreamBucketBuilder` plans nothing ahead, so its statistics are counted as
the batches leave the pipeline: one vector of counters (the layout below),
the running `(real, padded)` totals of the latest batches (for the
callbacks' per-batch figures), and the set of distinct batch shapes. The
numpy engines keep them in Python (`StreamCounters`); the `tf.data` engine
in CPU variables its graph updates
(`kerasbatch.engines.tf_data.stream_counters.GraphStreamCounters`). Both answer the
same reads, which `statistics()` and `running_positions()` use.
"""

import numpy as np

from kerasbatch.planning import plan as plan_lib

#: The counters vector: these scalars, then the real, then the padded
#: positions of every sequence component.
EPOCH, BATCHES, ELEMENTS, TRUNCATED, TRUNCATED_POSITIONS, DROPPED = range(6)
NUM_SCALARS = 6
#: Batches whose running `(real, padded)` totals are kept for the callbacks:
#: exact per-batch figures while the pipeline runs at most this far ahead.
RING = 4096


def initial_vector(num_components):
    """The counters before any epoch: epoch -1, nothing counted."""
    return np.array([-1] + [0] * (NUM_SCALARS + 2 * num_components - 1), np.int64)


def statistics(counters, names, distinct_shapes):
    """The `kerasbatch.PlanStatistics` of a counters vector of the sequence
    components `names`."""
    num = len(names)
    real = counters[NUM_SCALARS : NUM_SCALARS + num]
    padded = counters[NUM_SCALARS + num :]
    return plan_lib.PlanStatistics(
        num_batches=int(counters[BATCHES]),
        num_elements=int(counters[ELEMENTS]),
        padding_efficiency=plan_lib._ratio(real.sum(), padded.sum()),
        component_efficiency={
            name: plan_lib._ratio(r, p)
            for name, r, p in zip(names, real, padded, strict=True)
        },
        distinct_shapes=distinct_shapes,
        dropped=int(counters[DROPPED]),
        truncated=int(counters[TRUNCATED]),
        truncated_positions=int(counters[TRUNCATED_POSITIONS]),
    )


class StreamCounters:
    """The counters of a stream on a numpy engine.

    Args:
        num_components: the elements' sequence components.
    """

    def __init__(self, num_components):
        self._num = num_components
        self._vector = initial_vector(num_components)
        self._ring = np.zeros([RING, 2], np.int64)
        self._shapes = set()
        # The counters of the epoch before, and its number of shapes.
        self._previous = np.append(self._vector, 0)

    # ------------------------------------------------------------------ reads
    def vector(self):
        return self._vector.copy()

    def num_shapes(self):
        return len(self._shapes)

    def previous(self):
        """The epoch before's counters, then its number of shapes."""
        return self._previous.copy()

    def running(self, row):
        """`(real, padded)` after batch `row + 1` (modulo `RING`)."""
        return self._ring[row % RING].copy()

    # ---------------------------------------------------------------- updates
    def begin_epoch(self, epoch):
        """An iteration of `epoch` starts: the counters restart, and those
        of another epoch before are kept as `previous()`."""
        if self._vector[EPOCH] >= 0 and self._vector[EPOCH] != epoch:
            self._previous = np.append(self._vector, len(self._shapes))
        self._shapes.clear()
        self._vector = initial_vector(self._num)
        self._vector[EPOCH] = epoch
        return epoch

    def add_dropped(self, count):
        """`count` elements the overflow policy left out."""
        self._vector[DROPPED] += count

    def count(self, counted, shape, full, drop_remainder):
        """Counts one batch (`counted`: its increment of the vector;
        `shape`: its shape as a string): returns whether it is fed
        (`drop_remainder` leaves out a batch that is not `full`, counting
        its elements as dropped)."""
        if drop_remainder and not full:
            self._vector[DROPPED] += counted[ELEMENTS]
            return False
        self._vector += counted
        totals = self._vector
        real = totals[NUM_SCALARS : NUM_SCALARS + self._num].sum()
        padded = totals[NUM_SCALARS + self._num :].sum()
        self._ring[(totals[BATCHES] - 1) % RING] = (real, padded)
        self._shapes.add(shape)
        return True
