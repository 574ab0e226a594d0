"""Batches of padded rows, one element (or chunk, or window) per row, in a graph.

`Rows` computes the running epoch's `BatchArguments` in the graph, as
`kerasbatch.planning.plan.make_plan` computes them in NumPy: the epoch's
order once (`GraphOrder`), then the rows of its batches slice after slice,
so that only one slice of them is in memory. Its batch function
(`kerasbatch.engines.tf_data.batch.BatchFunction`, or the chunks' or
windows' own) gathers, cuts and pads each batch.
"""

import numpy as np

from kerasbatch.engines.tf_data import batch as batch_lib
from kerasbatch.engines.tf_data import distribute
from kerasbatch.engines.tf_data import orders as graph_orders
from kerasbatch.optional import tensorflow as tf
from kerasbatch.planning import plan as plan_lib


class Rows:
    """The `tf.data` engine's part for batches of rows.

    Args:
        served: the `kerasbatch.engines.served.Served` of the dataset.
        batch_function: the class of its batch function (`BatchFunction`,
            or a subclass).
    """

    def __init__(self, served, batch_function=batch_lib.BatchFunction):
        self.served = served
        self.built = served.built
        self.batch_function_class = batch_function
        self.epoch_tensors = None

    def batch_function(self, replicas):
        """`(batch function, batches per epoch)`; makes the tensors that
        `batch_arguments` reads."""
        plan = self.served.plan()
        num_batches = plan.num_batches
        self.built.check_has_batches(num_batches)
        sizes = np.unique(plan.batch_rows)
        if replicas is not None:
            static = replicas.static_size(sizes)
        else:
            static = int(sizes[0]) if len(sizes) == 1 else None
        function = self.batch_function_class(self.built, static)
        with tf.device("/CPU:0"):  # captured by `batch_arguments`
            self.epoch_tensors = epoch_tensors(self.built)
        return function, num_batches

    def epoch_batches(self, epoch):
        """The batch function's arguments for every batch of `epoch` (a
        tensor), as a dataset: the epoch's order computed once, the rows of
        its batches made slice after slice (`GraphOrder.slices`)."""
        order = self.epoch_tensors.order
        ordered, taken = order.epoch(epoch)
        if order.slices == 1:
            return tf.data.Dataset.from_tensor_slices(
                self.slice_arguments(ordered, taken)
            )
        size = order.slice_batches

        def one_slice(start):
            arguments = self.slice_arguments(ordered, taken[start : start + size])
            return tf.data.Dataset.from_tensor_slices(arguments)

        starts = tf.data.Dataset.range(0, order.order.num_batches, size)
        return starts.flat_map(one_slice)

    def batch_arguments(self, epoch):
        """The `BatchArguments` of every batch of `epoch` (a tensor),
        stacked, computed in the graph as `make_plan` computes them."""
        return self.slice_arguments(*self.epoch_tensors.order.epoch(epoch))

    def slice_arguments(self, ordered, taken):
        """The `BatchArguments` of the batches `taken` (indices into the
        order's batches), stacked, given the epoch's `ordered` units."""
        tensors = self.epoch_tensors
        settings = self.built.settings
        rows, sizes, capacities = tensors.order.rows(ordered, taken)
        first = rows[:, 0]
        batch_limits = batch_lib.take(tensors.limits, first)
        padded = [tf.zeros([tf.shape(rows)[0], 0], tf.int64)]
        for lengths, padding in tensors.columns:
            bound = longest = None
            if reads(padding, "bucket"):
                bound = batch_lib.take(tensors.bounds, first)
            elif reads(padding, "batch"):
                # The longest kept element: the longest element, cut at the
                # batch's limit (one limit per batch).
                longest = tf.minimum(batch_lib.longest(lengths, rows), batch_limits)
            length = plan_lib.padded_length(
                padding, longest, bound, settings.pad_to_multiple
            )
            length = tf.broadcast_to(tf.cast(length, tf.int64), tf.shape(first))
            padded.append(length[:, None])
        return batch_lib.BatchArguments(
            indices=tf.cast(rows, tf.int64),
            size=sizes,
            rows=plan_lib.round_up(capacities, settings.batch_multiple),
            padded_lengths=tf.concat(padded, axis=1),
            limit=batch_limits,
        )

    def replica_parts(self, batch, replicas):
        """The batch function's arguments of every part of one global
        `batch` that `replicas` (a `ReplicaSlice`) train on, stacked."""
        start, part = replicas.spans(batch.rows)
        real = tf.clip_by_value(batch.size - start, 0, part)
        return batch_lib.BatchArguments(
            indices=distribute.take_parts(batch.indices, start, real, fill=-1),
            size=real,
            rows=part,
            padded_lengths=tf.tile(
                batch.padded_lengths[None], tf.stack([replicas.count, 1])
            ),
            limit=tf.fill([replicas.count], batch.limit),
        )


def epoch_tensors(built):
    """The `EpochTensors` of `built`: per-element tensors only where a
    padded length reads them."""
    prepared = built.prepared
    paddings = prepared.paddings
    bounds = prepared.element_bounds
    if not any(reads(paddings[name], "bucket") for name in paddings):
        bounds = None
    return batch_lib.EpochTensors(
        order=graph_orders.GraphOrder(built.order, built.seed),
        limits=batch_lib.per_element(prepared.element_limits),
        bounds=None if bounds is None else batch_lib.per_element(bounds),
        columns=[
            (
                batch_lib.per_element(lengths)
                if reads(paddings[name], "batch")
                else None,
                paddings[name],
            )
            for name, lengths in prepared.component_lengths.items()
        ],
    )


def element_batch(built, batch_function, index, batch_size):
    """`batch_size` copies of element `index` of `built`, cut and padded as
    a real batch would be (`kerasbatch.builders.Builder.element_batch`)."""
    prepared = built.prepared
    indices = np.full(batch_size, index, dtype=np.int64)
    limits = prepared.element_limits[[index]]
    bounds = prepared.element_bounds
    if bounds is not None:
        bounds = bounds[[index]]
    plan = plan_lib.make_plan(
        epoch=0,
        indices=indices,
        batch_splits=np.array([0, batch_size], dtype=np.int64),
        limits=limits,
        bucket_bounds=bounds,
        component_lengths=prepared.component_lengths,
        paddings=prepared.paddings,
        dropped=0,
        pad_to_multiple=built.settings.pad_to_multiple,
    )
    return batch_function(
        batch_lib.BatchArguments(
            indices=tf.constant(indices),
            size=tf.constant(batch_size, tf.int64),
            rows=tf.constant(batch_size, tf.int64),
            padded_lengths=tf.constant(plan.padded_lengths[0]),
            limit=tf.constant(limits[0]),
        )
    )


def reads(padding, length):
    """Whether `padding`'s length is the bucket's bound (`length="bucket"`)
    or the batch's longest element (`"batch"`): not a fixed length."""
    return padding.fixed_length is None and padding.length == length
