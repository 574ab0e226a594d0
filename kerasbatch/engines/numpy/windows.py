"""Windows in NumPy: the numpy engines' batch function for
`kerasbatch.WindowBuilder`'s batches with the built-in reducers, value for
value as the `tf.data` engine's (`kerasbatch.engines.tf_data.windows`)."""

import numpy as np

from kerasbatch.data import outputs, reducers, sources, sparse_components
from kerasbatch.engines.numpy import batches


class WindowBatchFunction(batches.BatchFunction):
    """`kerasbatch.engines.tf_data.windows.WindowBatchFunction` in numpy: the built-in
    reducers of dense components. A user's `Reducer` (TensorFlow ops) and
    sparse components need the `tf.data` engine."""

    def __init__(self, built):
        super().__init__(built)
        self.reducers = built.prepared.reducers
        for component in self.components:
            reducer = self.reducers[component.name]
            if isinstance(
                component, sparse_components.SparseComponent
            ) or not isinstance(
                reducer,
                reducers.Count | reducers.DenseBatch | reducers.PaddedBatch,
            ):
                what = (
                    "sparse elements"
                    if isinstance(component, sparse_components.SparseComponent)
                    else f"the reducer {reducer!r} (TensorFlow ops)"
                )
                raise ValueError(
                    f"WindowBuilder component {component.name!r} has {what}, "
                    "which only the 'tf.data' engine batches: build with "
                    "engine='tf.data', or use the built-in reducers of dense "
                    "elements on the numpy engines."
                )

    def __call__(self, plan, index):
        start, end = plan.batch_splits[index], plan.batch_splits[index + 1]
        indices = plan.indices[start:end]
        size = len(indices)
        limit = plan.limits[index]
        planned = dict(zip(self.paddings, plan.padded_lengths[index], strict=True))
        arrays = {}
        for component in self.components:
            reducer = self.reducers[component.name]
            if isinstance(reducer, reducers.Count):
                arrays[component.name] = np.int64(size)
                continue
            if not component.is_sequence:
                reduced = component.values[indices]
            else:
                kept = np.minimum(component.lengths[indices], limit)
                if isinstance(reducer, reducers.PaddedBatch):
                    length = reducer.padding.fixed_length or planned[component.name]
                    value = reducer.value
                else:  # "dense": every element of the window has one length
                    length, value = int(kept.max(initial=0)), 0
                reduced = batches.pad_rows(
                    component.values,
                    component.row_splits[indices],
                    kept,
                    size,
                    int(length),
                    value,
                )
            if self.fills:
                reduced = outputs.fill_numpy_rows(reduced, plan.batch_rows[index])
            arrays[component.name] = reduced
        return outputs.finish(
            outputs.NumpyOps,
            *[self.role(role, arrays) for role in sources.ROLES],
            {},
            output_lengths=self.output_lengths,
            output_mask=self.output_mask,
            real_rows=size if self.fills else None,
        )
