"""A finite `tf.data.Dataset` read into memory, as the inputs `build` takes
(`kerasbatch.WindowBuilder.build_from_dataset`)."""

import numpy as np

from kerasbatch.optional import tensorflow as tf


def read_inputs(dataset):
    """The elements of `dataset` as `build` inputs, in the structure of its
    `element_spec`: a component whose elements vary in their first
    dimension (unknown in the spec) becomes a list of arrays, one of fixed
    shape a stacked array, and `tf.SparseTensor` elements stay a list of
    them.

    Example:

    >>> import tensorflow as tf
    >>> dataset = tf.data.Dataset.from_tensor_slices(tf.constant([[1, 2], [3, 4]]))
    >>> read_inputs(dataset).tolist()
    [[1, 2], [3, 4]]
    """
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(f"Expected a tf.data.Dataset, got {type(dataset).__name__}.")
    if dataset.cardinality() == tf.data.INFINITE_CARDINALITY:
        raise ValueError("The dataset is infinite; windowing reads it into memory.")
    specs = tf.nest.flatten(dataset.element_spec)
    columns = [[] for _ in specs]
    for element in dataset:
        for column, value in zip(columns, tf.nest.flatten(element), strict=True):
            column.append(value)
    return tf.nest.pack_sequence_as(
        dataset.element_spec,
        [_column_input(c, s) for c, s in zip(columns, specs, strict=True)],
    )


def _column_input(values, spec):
    """One flattened component of a dataset's elements, as a `build` input."""
    if isinstance(spec, tf.SparseTensorSpec):
        return values
    if not isinstance(spec, tf.TensorSpec):
        raise TypeError(
            f"Unsupported element type {type(spec).__name__}; elements must be "
            "tensors or tf.SparseTensors."
        )
    arrays = [np.asarray(value.numpy()) for value in values]
    shape = spec.shape
    varies = shape.rank is None or (shape.rank >= 1 and shape[0] is None)
    if varies and arrays and all(a.ndim >= 1 for a in arrays):
        return arrays
    return np.stack(arrays) if arrays else np.zeros((0,))
