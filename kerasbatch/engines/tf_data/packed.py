"""Batches of packed rows in a graph: the `tf.data` engine's part for
`kerasbatch.PackedBuilder`'s batches.

`Packed` computes the running epoch's `PackedBatchArguments` in the graph
(`GraphPackedOrder`, bit for bit the rows of
`kerasbatch.planning.batching.packed_plan`); `PackRows` makes each batch
of rows from them.
"""

import functools
import typing

import numpy as np

from kerasbatch.engines import packed_rows
from kerasbatch.engines.tf_data import distribute, outputs
from kerasbatch.engines.tf_data import orders as graph_orders
from kerasbatch.optional import tensorflow as tf
from kerasbatch.planning import plan as plan_lib


class Packed:
    """The `tf.data` engine's part for batches of packed rows.

    Args:
        served: the `kerasbatch.engines.served.Served` of the dataset.
    """

    def __init__(self, served):
        self.served = served
        self.built = served.built
        self.graph_order = None

    def batch_function(self, replicas):
        """`(batch function, batches per epoch)`; makes the order that
        `batch_arguments` reads."""
        plan = self.served.plan(0)
        if replicas is not None:
            static_batch_size = replicas.static_size(plan.batch_rows)
        elif len(np.unique(plan.batch_rows)) == 1:
            static_batch_size = int(plan.batch_rows[0])
        else:
            static_batch_size = None
        pack_rows = PackRows(self.built, static_batch_size)
        # Tensors made once, captured by `_batch_arguments`.
        self.graph_order = graph_orders.GraphPackedOrder(
            self.built.order, self.built.seed
        )
        # plain tf code
        return tf.autograph.experimental.do_not_convert(pack_rows), plan.num_batches

    def batch_arguments(self, epoch):
        """The `PackedBatchArguments` of every batch of `epoch`, stacked,
        computed in the graph."""
        elements, segments, num_rows, capacities = self.graph_order.batch_rows(epoch)
        return PackedBatchArguments(
            elements=elements,
            segments=segments,
            num_rows=num_rows,
            rows=plan_lib.round_up(capacities, self.built.settings.batch_multiple),
        )

    def replica_parts(self, batch, replicas):
        """Every replica's rows of the packed batch, and their elements."""
        start, part = replicas.spans(batch.rows)
        real = tf.clip_by_value(batch.num_rows - start, 0, part)
        row_segments = distribute.take_parts(batch.segments, start, real, fill=0)
        ends = tf.concat([[0], tf.cumsum(batch.segments)], axis=0)
        first_row = tf.minimum(start, batch.num_rows)
        first_element = tf.gather(ends, first_row)
        element_counts = tf.gather(ends, first_row + real) - first_element
        return PackedBatchArguments(
            elements=distribute.take_parts(
                batch.elements, first_element, element_counts, fill=-1
            ),
            segments=row_segments,
            num_rows=real,
            rows=part,
        )

    def epoch_batches(self, epoch):
        """The batch function's arguments for every batch of `epoch` (a
        tensor), as a dataset."""
        return tf.data.Dataset.from_tensor_slices(self.batch_arguments(epoch))


class PackedBatchArguments(typing.NamedTuple):
    """What the pipeline knows of one packed batch before gathering it (or,
    stacked, of every batch of an epoch).

    Attributes:
        elements: int64 `(width,)` element indices, row after row (-1 after).
        segments: int64 `(width,)` elements per packed row (0 after).
        num_rows: int64 packed rows in the batch.
        rows: int64 rows fed: `num_rows` and filler rows (`batch_multiple`).
    """

    elements: tf.Tensor
    segments: tf.Tensor
    num_rows: tf.Tensor
    rows: tf.Tensor


class PackRows(packed_rows.PackedRowsSettings):
    """Builds one batch of packed rows: `PackedBatchArguments → element`."""

    def __init__(self, built, static_batch_size):
        super().__init__(built)
        self.static_batch_size = static_batch_size
        self.tensors = {c.name: tf.constant(c.values) for c in self.components}
        self.starts = tf.constant(self.starts)
        self.lengths = tf.constant(self.lengths)

    def __call__(self, batch):
        num_rows = batch.num_rows
        segments = batch.segments[:num_rows]
        indices = batch.elements[: tf.reduce_sum(segments)]
        lengths = tf.gather(self.lengths, indices)
        positions = tf.ragged.range(lengths).flat_values
        token_index = tf.repeat(tf.gather(self.starts, indices), lengths) + positions
        row_of = tf.repeat(tf.range(num_rows), segments)
        row_tokens = tf.math.unsorted_segment_sum(lengths, row_of, num_rows)
        segment_ids = tf.repeat(tf.ragged.range(segments).flat_values + 1, lengths)

        def to_dense(values, value=0, weights=False, *, row_lengths, width):
            """Flat values, `row_lengths` of them per row → `(rows, width, ...)`:
            tokens into rows of `sequence_length`, per-element values into
            `max_segments` slots. Filler rows (`batch_multiple`) copy the
            first row (`outputs.fill_rows`), but weigh 0 (`weights=True`)."""
            rows = tf.RaggedTensor.from_row_lengths(values, row_lengths, validate=False)
            filled = batch.rows if weights else num_rows
            shape = [filled, width, *values.shape[1:]]
            dense = rows.to_tensor(tf.cast(value, values.dtype), shape=shape)
            if not weights:
                dense = outputs.fill_rows(dense, batch.rows)
            dense.set_shape([self.static_batch_size, *dense.shape[1:]])
            return dense

        # Tokens into rows of `sequence_length`, per-element values into
        # `max_segments` slots.
        to_rows = functools.partial(
            to_dense, row_lengths=row_tokens, width=self.sequence_length
        )
        to_slots = functools.partial(
            to_dense, row_lengths=segments, width=self.max_segments
        )

        packed = self.pack(
            lambda component, at: tf.gather(self.tensors[component.name], at),
            to_rows,
            to_slots,
            token_index,
            indices,
        )
        token_weights = tf.ones_like(positions, tf.float32)
        if self.normalize_segments:
            token_weights /= tf.cast(tf.repeat(lengths, lengths), tf.float32)
        return self.element(
            packed,
            to_rows,
            to_slots,
            ids=(tf.cast(segment_ids, tf.int32), tf.cast(positions, tf.int32)),
            token_weights=token_weights,
            slot_weights=tf.ones_like(indices, tf.float32),
            tokens_of=lambda given: tf.repeat(
                tf.gather(self.tensors[given.name], indices), lengths, axis=0
            ),
            broadcast=broadcast_to,
            ops=outputs.GraphOps,
        )


def broadcast_to(given, weight):
    """`given` as float32, with trailing axes of size 1 up to `weight`'s rank."""
    given = tf.cast(given, tf.float32)
    for _ in range(weight.shape.rank - given.shape.rank):
        given = given[..., None]
    return given
