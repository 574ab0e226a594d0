"""Batches of packed rows in NumPy: the numpy engines' batch function for
`kerasbatch.PackedBuilder`'s batches, value for value as the `tf.data`
engine's (`kerasbatch.engines.tf_data.packed`).
"""

import functools

import numpy as np

from kerasbatch.data import outputs
from kerasbatch.engines import packed_rows
from kerasbatch.engines.numpy import batches


class PackRows(packed_rows.PackedRowsSettings):
    """`kerasbatch.engines.tf_data.packed.PackRows` in numpy: batch `index`
    of a `PackedPlan`."""

    def row_elements(self, plan, index):
        """The elements packed into every fed row of batch `index` (a
        filler row copies the first row's)."""
        first_row, end_row = plan.batch_splits[index], plan.batch_splits[index + 1]
        splits = plan.row_splits[first_row : end_row + 1]
        rows = [plan.indices[a:b] for a, b in zip(splits[:-1], splits[1:], strict=True)]
        return rows + rows[:1] * (int(plan.batch_rows[index]) - len(rows))

    def __call__(self, plan, index):
        first_row, end_row = plan.batch_splits[index], plan.batch_splits[index + 1]
        row_splits = plan.row_splits[first_row : end_row + 1]
        segments = np.diff(row_splits)
        num_rows = len(segments)
        fed_rows = int(plan.batch_rows[index])
        indices = plan.indices[row_splits[0] : row_splits[-1]]
        lengths = self.lengths[indices]
        positions = batches.ragged_range(lengths)
        token_index = np.repeat(self.starts[indices], lengths) + positions
        row_tokens = np.zeros(num_rows, np.int64)
        np.add.at(row_tokens, np.repeat(np.arange(num_rows), segments), lengths)
        segment_ids = np.repeat(batches.ragged_range(segments) + 1, lengths)

        def to_dense(values, value=0, weights=False, *, row_lengths, width):
            """As the `tf.data` engine's `to_dense`: filler rows copy the first row, or
            weigh 0 (`weights=True`)."""
            dense = batches.pad_rows(
                values,
                np.cumsum(row_lengths) - row_lengths,
                row_lengths,
                fed_rows if weights else num_rows,
                width,
                value,
            )
            return dense if weights else outputs.fill_numpy_rows(dense, fed_rows)

        # Tokens into rows of `sequence_length`, per-element values into
        # `max_segments` slots.
        to_rows = functools.partial(
            to_dense, row_lengths=row_tokens, width=self.sequence_length
        )
        to_slots = functools.partial(
            to_dense, row_lengths=segments, width=self.max_segments
        )

        packed = self.pack(
            lambda component, at: component.values[at],
            to_rows,
            to_slots,
            token_index,
            indices,
        )
        token_weights = np.ones(len(positions), np.float32)
        if self.normalize_segments:
            token_weights /= np.repeat(lengths, lengths).astype(np.float32)
        return self.element(
            packed,
            to_rows,
            to_slots,
            ids=(segment_ids.astype(np.int32), positions.astype(np.int32)),
            token_weights=token_weights,
            slot_weights=np.ones(len(indices), np.float32),
            tokens_of=lambda given: np.repeat(given.values[indices], lengths, axis=0),
            broadcast=broadcast_to,
            ops=outputs.NumpyOps,
        )


def broadcast_to(given, weight):
    """`given` as float32, with trailing axes of size 1 up to `weight`'s rank."""
    given = np.asarray(given, np.float32)
    return given.reshape(given.shape + (1,) * (weight.ndim - given.ndim))
