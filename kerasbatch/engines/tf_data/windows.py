"""Windows in a graph: the `tf.data` engine's batch function for
`kerasbatch.WindowBuilder`'s batches, every component's window reduced by
its `kerasbatch.Reducer`."""

from kerasbatch.data import reducers, sparse_components
from kerasbatch.engines.tf_data import batch, outputs
from kerasbatch.engines.tf_data import reducers as graph_reducers
from kerasbatch.optional import tensorflow as tf


class WindowBatchFunction(batch.BatchFunction):
    """Gathers one window per component and applies the component's reducer."""

    def __init__(self, built, static_batch_size):
        super().__init__(built, static_batch_size)
        self.reducers = built.prepared.reducers

    def __call__(self, batch):
        indices = batch.indices[: batch.size]
        limit = batch.limit if self.may_cut else None
        planned = dict(
            zip(self.paddings, tf.unstack(batch.padded_lengths), strict=True)
        )
        tensors = {}
        for component, tensor in zip(self.components, self.tensors, strict=True):
            reducer = self.reducers[component.name]
            window = _window(component, tensor, indices, limit)
            try:
                reduced = graph_reducers.reduce(reducer, window)
            except (TypeError, ValueError) as error:
                named = type(error)(
                    f"The reducer {reducer!r} of component {component.name!r} "
                    f"failed: {error}"
                )
                named.ag_pass_through = True  # AutoGraph keeps the message as is
                raise named from error
            if (
                component.name in planned
                and isinstance(reducer, reducers.PaddedBatch)
                and reducer.padding.fixed_length is None
            ):
                reduced = _pad_to(reduced, planned[component.name], reducer.value)
            if self.fills:
                reduced = outputs.fill_rows(reduced, batch.rows)
            tensors[component.name] = reduced
        return self._structure(tensors, {}, batch)


def _pad_to(batch, length, value):
    """`batch` (dense) padded along its time axis to the plan's `length`: the
    window's own longest element alone, but the whole window's under
    `distribute`, where each replica reduces a part of it."""
    if not isinstance(batch, tf.Tensor) or batch.shape.rank < 2:
        return batch
    extra = tf.maximum(length - tf.shape(batch, out_type=tf.int64)[1], 0)
    paddings = tf.pad([[0, extra]], [[1, batch.shape.rank - 2], [0, 0]])
    padded = tf.pad(batch, paddings, constant_values=tf.cast(value, batch.dtype))
    padded.set_shape([batch.shape[0], None, *batch.shape[2:]])
    return padded


def _window(component, tensor, indices, limit):
    """The `Window` of `component` for the elements `indices`."""
    if isinstance(component, sparse_components.SparseComponent):
        return _sparse_window(component, *tensor, indices, limit)
    values = tf.gather(tensor, indices)
    if component.is_sequence and limit is not None:
        values = values[:, :limit]
    return graph_reducers.Window(values)


def _sparse_window(component, entries, values, shapes, indices, limit):
    rows = tf.gather(entries, indices)
    positions, coordinates = rows.value_rowids(), rows.values
    values = tf.gather(values, indices).values
    shapes = tf.gather(shapes, indices)
    if limit is not None:
        kept = coordinates[:, 0] < limit
        positions = positions[kept]
        coordinates = coordinates[kept]
        values = values[kept]
        shapes = tf.concat([tf.minimum(shapes[:, :1], limit), shapes[:, 1:]], 1)
    batch = tf.SparseTensor(
        tf.concat([positions[:, None], coordinates], axis=1),
        values,
        tf.concat([tf.shape(indices, tf.int64), tf.reduce_max(shapes, 0)], 0),
    )
    batch.set_shape([None, None, *component.trailing_shape])
    return graph_reducers.Window(batch, shapes)
