"""A built value's `tf.data` pipeline: each iteration, the next epoch's batches.

`planned(built, epoch)` makes the dataset: the epoch is read once per
iteration (from the dataset's `GraphEpochState`), the epoch's batch
arguments computed in the graph by the part for its kind of batches
(`rows.Rows`, `packed.Packed`), and each batch made by their batch
function, in parallel and in order. tf.data traces the functions as written
(`as_written`).
"""

from kerasbatch.engines import served as served_lib
from kerasbatch.engines.tf_data import batch as batch_lib
from kerasbatch.engines.tf_data.as_written import plain
from kerasbatch.engines.tf_data.epoch_pipeline import EpochPipeline, advances_when_taken
from kerasbatch.optional import tensorflow as tf


def batches_part(served):
    """The engine's part for the kind of batches of `served.built`."""
    kind = served.built.batches
    if served.built.prepared.data.reads_by_index:
        from kerasbatch.engines.tf_data import by_index

        return by_index.ReadByIndex(served)
    if kind == "packed":
        from kerasbatch.engines.tf_data import packed

        return packed.Packed(served)
    from kerasbatch.engines.tf_data import rows

    if kind == "chunks":
        from kerasbatch.engines.tf_data import chunks

        return rows.Rows(served, chunks.ChunkBatchFunction)
    if kind == "windows":
        from kerasbatch.engines.tf_data import windows

        return rows.Rows(served, windows.WindowBatchFunction)
    return rows.Rows(served)


def planned(built, epoch=0):
    """A `tf.data.Dataset` of `built`'s batches, whose next iteration yields
    `epoch`, registered with its `Served`."""
    served = served_lib.Served(built, "tf.data", batch_lib.GraphEpochState(epoch))
    return served_lib.serve(Pipeline(served).dataset(), served)


class Pipeline(EpochPipeline):
    """The pipelines of one built dataset of planned batches.

    Args:
        served: its `kerasbatch.engines.served.Served`.
    """

    def __init__(self, served):
        super().__init__(served)
        self.part = batches_part(served)

    def dataset(self, replicas=None):
        """Each iteration: the next epoch's batches, made by the batch
        function.

        The epoch is read once per iteration, and advanced when the
        iteration's last batch is taken, as on the numpy engines: an
        iteration given up part-way, such as Keras' look at the first batch
        on JAX and torch (to build the model), repeats the epoch, so the
        first epoch of a `fit` is 0 on every backend. On the TensorFlow
        backend, which never looks, the epoch advances as an iteration
        starts, at no cost per batch (`advances_when_taken`). A checkpoint
        of the iterator keeps the running epoch and position in it; the
        epoch counter, which `set_epoch` drives, is set past that epoch at
        its end. With `replicas` (a `ReplicaSlice`), each batch is cut into
        the parts of those replicas, one element per replica and step, and
        the epoch advances when an iteration goes past its last part
        (`advanced_at_end`).
        """
        return plain(self._dataset)(replicas)

    def _dataset(self, replicas):
        batch_function, num_batches = self.part.batch_function(replicas)
        parallel = {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": True}
        if replicas is None and not advances_when_taken():
            epochs = tf.data.Dataset.range(1).map(lambda _: self.state.start_in_graph())
            dataset = epochs.flat_map(self.part.epoch_batches)
            dataset = self.prefetched(dataset.map(batch_function, **parallel))
            return batch_lib.checkpointable(
                dataset.apply(tf.data.experimental.assert_cardinality(num_batches))
            )
        epochs = tf.data.Dataset.range(1).map(lambda _: self.state.read_in_graph())
        if replicas is None:
            dataset = epochs.flat_map(
                lambda epoch: self.numbered_batches(epoch, num_batches)
            )
            dataset = dataset.map(
                lambda epoch, last, batch: (epoch, last, batch_function(batch)),
                **parallel,
            )
            # After the prefetch, so that it runs as the consumer takes a batch.
            dataset = self.prefetched(dataset).map(self.taken)
        else:
            dataset = epochs.flat_map(lambda epoch: self.replica_epoch(epoch, replicas))
            dataset = dataset.map(batch_function, **parallel)
            dataset = self.advanced_at_end(self.prefetched(dataset))
            num_batches *= replicas.count
        return batch_lib.checkpointable(
            dataset.apply(tf.data.experimental.assert_cardinality(num_batches))
        )

    def numbered_batches(self, epoch, num_batches):
        """`(epoch, whether it is the last, batch function's arguments)` of
        every batch of `epoch` (a tensor), as a dataset."""
        numbered = self.part.epoch_batches(epoch).enumerate()
        return numbered.map(
            lambda number, batch: (epoch, number + 1 >= num_batches, batch)
        )

    def taken(self, epoch, last, batch):
        """`batch`, taken by the consumer: the epoch's last batch sets the
        epoch counter to `epoch + 1`."""

        def advance():
            with tf.control_dependencies([self.state.mark_started(epoch)]):
                return self.state.advance_past_started()

        advanced = tf.cond(last, advance, lambda: tf.constant(-1, tf.int64))
        with tf.control_dependencies([advanced]):
            return tf.nest.map_structure(tf.identity, batch)

    def replica_epoch(self, epoch, replicas):
        """The parts of `epoch`'s batches that `replicas` train on, one per
        replica and step."""
        return self.part.epoch_batches(epoch).flat_map(
            lambda batch: tf.data.Dataset.from_tensor_slices(
                self.part.replica_parts(batch, replicas)
            )
        )
