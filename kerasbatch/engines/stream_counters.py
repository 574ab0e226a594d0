"""What a stream's statistics count, as its batches are made.

`StreamBucketBuilder` plans nothing ahead, so its statistics are counted as
the batches leave the pipeline: one vector of counters (the layout below),
the running `(real, padded)` totals of the latest batches (for the
callbacks' per-batch figures), and the set of distinct batch shapes. The
numpy engines keep them in Python (`StreamCounters`); the `tf.data` engine
in CPU variables its graph updates (`GraphStreamCounters`). Both answer the
same reads, which `statistics()` and `running_positions()` use.
"""

import numpy as np

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


class GraphStreamCounters:
    """The counters of a stream on the `tf.data` engine: CPU variables its
    graph updates (`begin_epoch`, `add_dropped`, `count` return ops), read
    as `StreamCounters` is.

    Args:
        num_components: the elements' sequence components.
    """

    def __init__(self, num_components):
        from kerasbatch.optional import tensorflow as tf

        self._num = num_components
        with tf.device("/CPU:0"):
            initial = tf.constant(initial_vector(num_components))
            self._vector = tf.Variable(initial, trainable=False, name="counters")
            self._ring = tf.Variable(
                tf.zeros([RING, 2], tf.int64), trainable=False, name="running"
            )
            self._shapes = tf.lookup.experimental.MutableHashTable(
                tf.string, tf.int64, default_value=0, name="shapes"
            )
            self._previous = tf.Variable(
                tf.concat([initial, [0]], axis=0), trainable=False, name="previous"
            )

    @property
    def size(self):
        """The length of the counters vector."""
        return int(self._vector.shape[0])

    # ------------------------------------------------------------------ reads
    def vector(self):
        return self._vector.numpy()

    def num_shapes(self):
        return int(self._shapes.size().numpy())

    def previous(self):
        return self._previous.numpy()

    def running(self, row):
        return self._ring[row % RING].numpy()

    # ---------------------------------------------------------------- updates
    def begin_epoch(self, epoch):
        """`StreamCounters.begin_epoch` in the graph: returns `epoch` once
        the counters are reset."""
        import tensorflow as tf

        keys, _ = self._shapes.export()
        counters = self._vector.read_value()
        ended = tf.logical_and(
            tf.not_equal(counters[EPOCH], epoch), counters[EPOCH] >= 0
        )
        snapshot = tf.concat([counters, [self._shapes.size()]], axis=0)
        keep = self._previous.assign(tf.where(ended, snapshot, self._previous))
        with tf.control_dependencies([keep]):
            reset = [
                self._shapes.remove(keys),
                self._vector.assign(
                    tf.concat([[epoch], tf.zeros_like(counters[1:])], axis=0)
                ),
            ]
        with tf.control_dependencies(reset):
            return tf.identity(epoch)

    def add_dropped(self, count):
        """An op adding `count` (int64 tensor) dropped elements."""
        import tensorflow as tf

        dropped = tf.one_hot(DROPPED, self.size, dtype=tf.int64)
        return self._vector.assign_add(dropped * count)

    def count(self, counted, shape, full, drop_remainder):
        """`StreamCounters.count` in the graph: returns the update ops."""
        import tensorflow as tf

        shapes = shape[None]
        if drop_remainder:
            dropped = np.zeros(self.size, np.int64)
            dropped[DROPPED] = 1
            counted = tf.where(full, counted, counted[ELEMENTS] * dropped)
            shapes = shapes[: tf.cast(full, tf.int32)]  # none for a dropped batch
        totals = self._vector.assign_add(counted)
        real = tf.reduce_sum(totals[NUM_SCALARS : NUM_SCALARS + self._num])
        padded = tf.reduce_sum(totals[NUM_SCALARS + self._num :])
        row = tf.math.floormod(totals[BATCHES] - 1, RING)
        return [
            self._ring.scatter_nd_update([[row]], [tf.stack([real, padded])]),
            self._shapes.insert(shapes, tf.ones(tf.shape(shapes), tf.int64)),
        ]
