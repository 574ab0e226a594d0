"""The batch function of padded rows of elements, in numpy: batch `k` of a
plan gathered, cut and padded, value for value as the `tf.data` engine's
batch function makes it, with no TensorFlow; and the padding every numpy
batch function shares (`pad_rows`).
"""

import numpy as np

from kerasbatch.data import outputs, sources
from kerasbatch.planning.plan import ragged_range


class BatchFunction:
    """Gathers and pads batch `index` of a `BatchPlan`, as `_BatchFunction`.

    Args:
        built: the built value (its prepared data and settings).
    """

    def __init__(self, built):
        prepared = built.prepared
        settings = built.settings
        self.components = prepared.data.components
        self.structure = prepared.data.structure
        self.paddings = prepared.paddings
        self.output_lengths = settings.output_lengths
        self.output_mask = settings.output_mask
        self.model_inputs = settings.model_inputs
        self.fills = built.fills

    def __call__(self, plan, index):
        start, end = plan.batch_splits[index], plan.batch_splits[index + 1]
        indices = plan.indices[start:end]
        size = len(indices)
        rows = int(plan.batch_rows[index])
        if self.fills:
            indices = outputs.fill_numpy_rows(indices, rows)
        limit = plan.limits[index]
        arrays, lengths = {}, {}
        column = 0
        for component in self.components:
            if not component.is_sequence:
                arrays[component.name] = self.gather(component, indices)
                continue
            values, starts, row_lengths = self.rows(component, indices)
            kept = np.minimum(row_lengths, limit)
            arrays[component.name] = pad_rows(
                values,
                starts,
                kept,
                rows,
                int(plan.padded_lengths[index, column]),
                self.paddings[component.name].value,
            )
            lengths[component.name] = kept
            column += 1
        return outputs.finish(
            outputs.NumpyOps,
            *[self.role(role, arrays) for role in sources.ROLES],
            lengths,
            output_lengths=self.output_lengths,
            output_mask=self.output_mask,
            real_rows=size if self.fills else None,
            model_inputs=self.model_inputs,
        )

    def row_elements(self, plan, index):
        """The elements that every fed row of batch `index` reads (one
        array per row; a filler row reads the first row's)."""
        start, end = plan.batch_splits[index], plan.batch_splits[index + 1]
        rows = [plan.indices[i : i + 1] for i in range(start, end)]
        return rows + rows[:1] * (int(plan.batch_rows[index]) - len(rows))

    def gather(self, component, indices):
        """The rows `indices` of a per-example component."""
        return component.values[indices]

    def rows(self, component, indices):
        """The rows `indices` of a sequence component, uncut: `(values,
        start of every row in values, length of every row)` (subclass
        hook)."""
        return (
            component.values,
            component.row_splits[indices],
            component.lengths[indices],
        )

    def role(self, role, arrays):
        """x, y or sample_weight of the batch: an array, a dict, or None."""
        if self.structure[role] is None:
            return None
        if self.structure[role] == "single":
            return arrays[role]
        return {c.key: arrays[c.name] for c in self.components if c.role == role}


def pad_rows(values, starts, lengths, rows, length, value):
    """`(rows, length, *trailing)` of `values.dtype`: row `i` holds
    `values[starts[i]:starts[i] + lengths[i]]`, the rest `value`."""
    out = np.full((rows, length, *values.shape[1:]), value, dtype=values.dtype)
    row_of = np.repeat(np.arange(len(lengths)), lengths)
    positions = ragged_range(lengths)
    out[row_of, positions] = values[np.repeat(starts, lengths) + positions]
    return out
