"""A stream's counters on the `tf.data` engine: CPU variables its graph
updates (see `kerasbatch.engines.stream_counters`)."""

import numpy as np

from kerasbatch.engines.stream_counters import (
    BATCHES,
    DROPPED,
    ELEMENTS,
    EPOCH,
    NUM_SCALARS,
    RING,
    initial_vector,
)
from kerasbatch.optional import tensorflow as tf


class GraphStreamCounters:
    """The counters of a stream on the `tf.data` engine: CPU variables its
    graph updates (`begin_epoch`, `add_dropped`, `count` return ops), read
    as `kerasbatch.engines.stream_counters.StreamCounters` is.

    Args:
        num_components: the elements' sequence components.
    """

    def __init__(self, num_components):
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
        dropped = tf.one_hot(DROPPED, self.size, dtype=tf.int64)
        return self._vector.assign_add(dropped * count)

    def count(self, counted, shape, full, drop_remainder):
        """`StreamCounters.count` in the graph: returns the update ops."""
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
