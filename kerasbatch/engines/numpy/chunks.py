"""Batches of chunks in NumPy: the numpy engines' batch function for
`kerasbatch.ChunkBuilder`'s batches, value for value as the `tf.data`
engine's (`kerasbatch.engines.tf_data.chunks`)."""

import numpy as np

from kerasbatch.engines.numpy import batches


class ChunkBatchFunction(batches.BatchFunction):
    """`kerasbatch.engines.tf_data.chunks.ChunkBatchFunction` in numpy."""

    def __init__(self, built):
        super().__init__(built)
        self.table = built.prepared.layout.table
        self.chunk_context = built.prepared.layout.context

    def row_elements(self, plan, index):
        return [self.table.sequence[row] for row in super().row_elements(plan, index)]

    def gather(self, component, indices):
        return component.values[self.table.sequence[indices]]

    def rows(self, component, indices):
        sequences = self.table.sequence[indices]
        if component.name not in self.chunk_context:
            return component.values, *_sequence_rows(component, sequences)
        left, right = self.chunk_context[component.name]
        lengths = self.table.length[indices] + left + right
        frames = np.repeat(self.table.offset[indices] - left, lengths)
        frames += batches.ragged_range(lengths)  # may lie outside
        sequence_of = np.repeat(sequences, lengths)
        starts, frames_in_sequence = _sequence_rows(component, sequence_of)
        inside = (frames >= 0) & (frames < frames_in_sequence)
        values = component.values[
            starts + np.clip(frames, 0, np.maximum(frames_in_sequence - 1, 0))
        ]
        padding = np.asarray(self.paddings[component.name].value, values.dtype)
        inside = inside.reshape([-1] + [1] * len(component.trailing_shape))
        values = np.where(inside, values, padding)
        return values, np.cumsum(lengths) - lengths, lengths


def _sequence_rows(component, sequences):
    """`(start, length)` of the rows `sequences` of a sequence component."""
    return component.row_splits[sequences], component.lengths[sequences]
