"""The `tf.data` engine's run state: epochs counted in CPU variables.

A `tf.data` pipeline reads its epoch inside its graph, so the counter the
graph reads and advances is a `tf.Variable` (on the CPU): every new
iteration of a built dataset reads the next epoch and advances it. The
pipelines themselves are made by the builders (`_planned_dataset`).
"""

from kerasbatch.optional import tensorflow as tf


class GraphEpochState:
    """`kerasbatch.engines.epoch_state.EpochState` for a `tf.data` graph.

    Args:
        epoch: the epoch the next iteration yields.
    """

    def __init__(self, epoch=0):
        with tf.device("/CPU:0"):
            self._epoch = tf.Variable(
                int(epoch), dtype=tf.int64, trainable=False, name="epoch"
            )
            self._started = tf.Variable(
                -1, dtype=tf.int64, trainable=False, name="started_epoch"
            )

    def next_epoch(self):
        return int(self._epoch.numpy())

    def assign(self, epoch):
        self._epoch.assign(int(epoch))

    def started_epoch(self):
        started = int(self._started.numpy())
        return None if started < 0 else started

    # ------------------------------------------------------ in the graph
    def start_in_graph(self):
        """Reads and advances the epoch counter: the iteration's epoch."""
        epoch = self._epoch.assign_add(1) - 1
        with tf.control_dependencies([self._started.assign(epoch)]):
            return tf.identity(epoch)

    def read_in_graph(self):
        """Reads the epoch counter, not advancing it."""
        epoch = self._epoch.read_value()
        with tf.control_dependencies([self._started.assign(epoch)]):
            return tf.identity(epoch)

    def mark_started(self, epoch):
        """Records `epoch` (a tensor) as started; returns the op."""
        return self._started.assign(epoch)

    def advance_past_started(self):
        """Sets the next epoch to the started one + 1; returns the op."""
        return self._epoch.assign(self._started + 1)
