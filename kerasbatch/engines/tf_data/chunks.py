"""Batches of chunks in a graph: the `tf.data` engine's batch function for
`kerasbatch.ChunkBuilder`'s batches, each chunk cut with its context out of
its sequence."""

from kerasbatch.engines.tf_data import batch
from kerasbatch.optional import tensorflow as tf


class ChunkBatchFunction(batch.BatchFunction):
    """Cuts each planned chunk, with its context, out of its sequence."""

    def __init__(self, built, static_batch_size):
        super().__init__(built, static_batch_size)
        table = built.prepared.layout.table
        self.sequence = tf.constant(table.sequence)
        self.offset = tf.constant(table.offset)
        self.length = tf.constant(table.length)
        self.chunk_context = built.prepared.layout.context

    def _gather(self, component, tensor, indices):
        sequences = tf.gather(self.sequence, indices)
        if component.name not in self.chunk_context:
            return tf.gather(tensor, sequences)
        left, right = self.chunk_context[component.name]
        starts = tf.gather(self.offset, indices) - left
        ends = starts + tf.gather(self.length, indices) + left + right
        positions = tf.ragged.range(starts, ends)  # frames, may lie outside
        sequence_of = tf.gather(sequences, positions.value_rowids())
        frames = positions.flat_values
        frames_in_sequence = tf.gather(tensor.row_lengths(), sequence_of)
        inside = (frames >= 0) & (frames < frames_in_sequence)
        values = tf.gather(
            tensor.values,
            tf.gather(tensor.row_splits, sequence_of)
            + tf.clip_by_value(frames, 0, tf.maximum(frames_in_sequence - 1, 0)),
        )
        padding = tf.cast(self.paddings[component.name].value, tensor.dtype)
        inside = tf.reshape(inside, [-1] + [1] * len(component.trailing_shape))
        return positions.with_flat_values(tf.where(inside, values, padding))
