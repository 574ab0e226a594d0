"""Batches of data read by index, in a `tf.data` pipeline.

Data on disk (a random-access source, `kerasbatch.data.random_access`) is
not a tensor: the pipeline's map calls the numpy engines' batch function
(`kerasbatch.engines.numpy.planned`) through `tf.numpy_function`, in
parallel and in order, so the batches are the numpy engines', bit for bit.
Each call holds the GIL while it runs Python, so the `grain` and `python`
engines, which read in threads without a graph, serve such data as fast or
faster.
"""

import numpy as np

from kerasbatch.engines.numpy import planned as numpy_planned
from kerasbatch.optional import tensorflow as tf


class ReadByIndex:
    """The `tf.data` engine's part for data read by index.

    Args:
        served: the `kerasbatch.engines.served.Served` of the dataset.
    """

    def __init__(self, served):
        self.served = served
        self.built = served.built
        try:
            self.make = numpy_planned.batch_function(served.built)
        except ValueError as error:  # what only a graph of tensors batches
            raise ValueError(
                f"{str(error).split(', which only')[0]}, which needs the data "
                "in memory: data read by index from a source is batched in "
                "numpy, on every engine. Read the data into memory, or use "
                "the built-in reducers."
            ) from None
        self.num_batches = None

    def batch_function(self, replicas):
        """`(batch function, batches per epoch)`."""
        if replicas is not None:
            raise ValueError(
                "distribute splits batches of in-memory data between replicas "
                "in a graph; data read by index from a source makes its batches "
                "in numpy: build with engine='grain' or engine='python' and fit "
                "on the JAX backend (each process reads its part), or read the "
                "data into memory."
            )
        plan = self.served.plan()
        self.num_batches = plan.num_batches
        self.built.check_has_batches(self.num_batches)
        probe = self.make(plan, 0)
        flat = tf.nest.flatten(probe)
        dtypes = [tf.as_dtype(np.asarray(value).dtype) for value in flat]
        shapes = leaf_shapes(probe, self.built.prepared.data)

        def make(epoch, index):
            batch = self.make(self.served.plan(int(epoch)), int(index))
            return [np.asarray(value) for value in tf.nest.flatten(batch)]

        def function(arguments):
            made = tf.numpy_function(
                make, [arguments["epoch"], arguments["index"]], dtypes, stateful=False
            )
            for tensor, shape in zip(made, shapes, strict=True):
                tensor.set_shape(shape)
            return tf.nest.pack_sequence_as(probe, made)

        return function, self.num_batches

    def epoch_batches(self, epoch):
        """`{"epoch", "index"}` of every batch of `epoch` (a tensor)."""
        indices = tf.data.Dataset.range(self.num_batches)
        return indices.map(lambda index: {"epoch": epoch, "index": index})


def leaf_shapes(batch, data):
    """The static shape of every leaf of `batch` (flattened): the rows
    unknown; a sequence's length unknown; the trailing axes of a
    component known."""
    sequence = {c.name: c.is_sequence for c in data.components}
    roles = dict(zip(("x", "y", "sample_weight"), batch, strict=False))
    if not isinstance(batch, tuple):
        roles = {"x": batch}
    shapes = []
    for role, value in roles.items():
        components = {c.key: c for c in data.role_components(role)}
        for key, leaf in _leaves(value):
            component = components.get(key)
            leaf = np.asarray(leaf)
            known = sequence.get(component.name) is False if component else False
            shape = [
                None if axis == 0 or (axis == 1 and not known) else size
                for axis, size in enumerate(leaf.shape)
            ]
            shapes.append(shape)
    return shapes


def _leaves(value):
    """`(dict key or None, leaf)` of a role's value, in `tf.nest` order."""
    if isinstance(value, dict):
        return [(key, value[key]) for key in sorted(value)]
    return [(None, value)]
