"""Reducers in a graph: the `tf.data` engine reduces a window of elements with
a component's reducer (`kerasbatch.data.reducers`), as in the tf.data RFC
"Generalizing tf.data batching using windowing and reducers".

Example:

>>> import tensorflow as tf
>>> import kerasbatch
>>> from kerasbatch.engines.tf_data.reducers import Window, reduce
>>> int(reduce("count", Window(tf.range(10))))
10
>>> reduce("dense", Window(tf.range(5))).numpy().tolist()
[0, 1, 2, 3, 4]
"""

import dataclasses

from kerasbatch.data import reducers
from kerasbatch.data.reducers import (  # noqa: F401  (the old kerasbatch.reducers)
    BUILT_INS,
    Count,
    DenseBatch,
    PaddedBatch,
    Reducer,
    get,
    serialize,
)
from kerasbatch.optional import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Window:
    """The elements of one component in one window, as a reducer receives them.

    Attributes:
        values: the elements stacked along a new first axis of `size` rows:
            a `tf.Tensor` of shape `(size, *shape)` (per-example components),
            a `tf.RaggedTensor` of shape `(size, None, *trailing)`
            (sequences), or a `tf.SparseTensor` whose `dense_shape` is
            `[size, *the largest element shape]` (sparse components).
        element_shapes: sparse components only: int64 `(size, rank)`, the
            `dense_shape` of every element.

    Example:

    >>> import tensorflow as tf
    >>> window = Window(tf.ragged.constant([[1], [2, 2]]))
    >>> int(window.size), [e.numpy().tolist() for e in window.elements()]
    (2, [[1], [2, 2]])
    """

    values: object
    element_shapes: object = None

    @property
    def size(self):
        """The number of elements, an int64 scalar tensor."""
        if isinstance(self.values, tf.SparseTensor):
            return self.values.dense_shape[0]
        if isinstance(self.values, tf.RaggedTensor):
            return self.values.nrows()
        return tf.shape(self.values, out_type=tf.int64)[0]

    def elements(self):
        """The elements as a `tf.data.Dataset`, each shaped as its source holds it.

        Sequence elements are dense tensors of shape `(length, *trailing)`;
        sparse elements are `tf.SparseTensor`s of their own `dense_shape`.
        """
        if not isinstance(self.values, tf.SparseTensor):
            return tf.data.Dataset.from_tensor_slices(self.values)
        batch, shapes = self.values, self.element_shapes

        def element(index):
            start = tf.concat([[index], tf.zeros_like(shapes[index])], axis=0)
            piece = tf.sparse.slice(batch, start, tf.concat([[1], shapes[index]], 0))
            return tf.sparse.reshape(piece, shapes[index])

        return tf.data.Dataset.range(self.size).map(element)


def reduce(reducer, window):
    """The component's batched value for `window` (a `Window`).

    Args:
        reducer: a reducer, or anything `kerasbatch.data.reducers.get` takes
            (a built-in's name, a config).
        window: the `Window` of the component's elements.

    Example (`kerasbatch.Reducer` shows a user's reducer):

    >>> import tensorflow as tf
    >>> import kerasbatch
    >>> window = Window(tf.ragged.constant([[1], [2]]))
    >>> reduce(kerasbatch.data.reducers.PaddedBatch(length=2), window).numpy().tolist()
    [[1, 0], [2, 0]]
    """
    reducer = reducers.get(reducer)
    if isinstance(reducer, reducers.Count):
        return window.size
    if isinstance(reducer, reducers.DenseBatch):
        if isinstance(window.values, tf.RaggedTensor):
            return window.values.to_tensor()
        return window.values
    if isinstance(reducer, reducers.PaddedBatch):
        return _padded(reducer, window.values)
    return _user_reduce(reducer, window)


def _padded(reducer, values):
    fixed = reducer.padding.fixed_length
    if isinstance(values, tf.SparseTensor):
        if reducer.value != 0:
            raise ValueError(
                "sparse elements are padded with their implicit zeros; "
                f"PaddedBatch needs value=0, got {reducer.value!r}."
            )
        if fixed is None:
            return values
        shape = values.dense_shape
        shape = tf.concat([shape[:1], [fixed], shape[2:]], axis=0)
        return tf.SparseTensor(values.indices, values.values, shape)
    if isinstance(values, tf.RaggedTensor):
        shape = None if fixed is None else [None, fixed, *values.shape[2:]]
        return values.to_tensor(tf.cast(reducer.value, values.dtype), shape=shape)
    return values


def _user_reduce(reducer, window):
    """A user's `kerasbatch.Reducer`: its functions traced into a
    `tf.data.Dataset.reduce` over the window's elements."""

    def step(state, element):
        new_state = reducer.reduce_fn(state, element)
        try:
            tf.nest.assert_same_structure(state, new_state, check_types=False)
        except (TypeError, ValueError):
            error = ValueError(
                f"reduce_fn returned a state of structure {_describe(new_state)}, "
                f"but init_fn returned {_describe(state)}; the state must keep "
                "its structure."
            )
            error.ag_pass_through = True  # AutoGraph keeps the message as is
            raise error from None
        return new_state

    # The engine's functions run as written (no AutoGraph); a user's are
    # converted, as tf.data converts the functions it traces, so that
    # `if`s and loops on tensors work: tf.function does it.
    init_fn, finalize_fn = (
        tf.function(reducer.init_fn),
        tf.function(reducer.finalize_fn),
    )
    state = window.elements().reduce(init_fn(window.size), tf.function(step))
    return finalize_fn(state)


def _describe(state):
    """The structure of a state with dtype names as leaves, for messages."""
    return tf.nest.map_structure(
        lambda leaf: getattr(getattr(leaf, "dtype", None), "name", type(leaf).__name__),
        state,
    )
