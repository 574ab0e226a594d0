"""Reducers: per-component batching logic, as in the tf.data RFC "Generalizing
tf.data batching using windowing and reducers".

The RFC batches in two steps: a window combines consecutive elements
(`kerasbatch.WindowBuilder`), then a reducer per component turns the window's
elements into that component's batched value. So x can be padded while y is
stacked and a third component counted, each by its own logic.

A reducer is either user-defined, `Reducer(init_fn, reduce_fn,
finalize_fn)`: plain Python functions traced into the `tf.data` pipeline; or
a built-in, which does its work vectorised with one gather per window (no
per-element `tf.concat` growth). Built-ins by name:

- `"count"` (`Count`): the number of elements in the window, an int64 scalar.
- `"dense"` or `"batch"` (`DenseBatch`): the elements stacked, shape
  `(size, *element shape)`; every element of a window has the same shape.
- `"padded"` (`PaddedBatch`): sequences padded to the window's longest
  element (or a fixed length), shape `(size, length, *trailing)`; sparse
  elements batched into one `tf.SparseTensor` whose `dense_shape` is the
  largest of every dimension.

Here a reducer is a setting: the `tf.data` engine reduces a window with it
(`kerasbatch.engines.tf_data.reducers`), and the numpy engines apply the
built-ins to dense components, value for value.
"""

import keras

from kerasbatch.config import Configurable
from kerasbatch.data.padding import Padding


@keras.saving.register_keras_serializable(package="kerasbatch")
class Reducer:
    """User-defined batching logic for one component (the tf.data RFC's reducer).

    The window's elements are folded into a state, and the final state into
    the component's batched value: `finalize_fn(reduce_fn(... reduce_fn(
    init_fn(size), element_0) ..., element_n-1))`. The functions are plain
    Python, traced once into the `tf.data` pipeline (a `tf.data.Dataset.reduce`
    over the window's elements), so they compute with TensorFlow ops;
    AutoGraph converts them, as tf.data converts the functions it traces, so
    an `if` on a tensor works. The state's shape may change from element to element (tf.data relaxes it);
    its structure and dtypes may not.

    Prefer the built-ins (`"count"`, `"dense"`, `"padded"`) where they fit:
    they gather a whole window at once.

    Args:
        init_fn: `init_fn(size) -> state`: the initial state, any nest of
            tensors (Python numbers become tensors). `size` is the window's
            number of elements, an int64 scalar tensor.
        reduce_fn: `reduce_fn(state, element) -> state`: the next state.
            `element` is one element of the component: a tensor of shape
            `(*shape)` (per-example), `(length, *trailing)` (sequence), or a
            `tf.SparseTensor`.
        finalize_fn: `finalize_fn(state) -> value`: the batched value.

    `get_config()` names the functions by their registered Keras names: a
    Reducer is serialisable (in a builder's config, too) when all three are
    registered with `keras.saving.register_keras_serializable`; otherwise
    `get_config()` raises a ValueError naming the function.

    Example:

    The RFC's Example 0, counting elements:

    >>> import tensorflow as tf
    >>> import kerasbatch
    >>> count = kerasbatch.Reducer(
    ...     init_fn=lambda _: 0,
    ...     reduce_fn=lambda state, value: state + 1,
    ...     finalize_fn=lambda state: state)
    >>> from kerasbatch.engines.tf_data.reducers import Window, reduce
    >>> int(reduce(count, Window(tf.range(10))))
    10
    """

    def __init__(self, init_fn, reduce_fn, finalize_fn):
        for name, function in zip(
            _FUNCTIONS, (init_fn, reduce_fn, finalize_fn), strict=True
        ):
            if not callable(function):
                raise TypeError(f"Reducer {name} must be callable, got {function!r}.")
        self.init_fn = init_fn
        self.reduce_fn = reduce_fn
        self.finalize_fn = finalize_fn

    def get_config(self):
        """The registered names of the reducer's functions."""
        return {name: _registered_name(self, name) for name in _FUNCTIONS}

    @classmethod
    def from_config(cls, config):
        """A new `Reducer` from the dict of `get_config()`: its functions looked up by their registered names."""
        functions = {}
        for name in _FUNCTIONS:
            functions[name] = keras.saving.get_registered_object(config[name])
            if functions[name] is None:
                raise ValueError(
                    f"Reducer {name} {config[name]!r} is not registered; import "
                    "the module that registers it before loading the config."
                )
        return cls(**functions)

    def __eq__(self, other):
        return type(self) is type(other) and all(
            getattr(self, name) is getattr(other, name) for name in _FUNCTIONS
        )

    def __repr__(self):
        functions = ", ".join(
            f"{name}={getattr(getattr(self, name), '__qualname__', '?')}"
            for name in _FUNCTIONS
        )
        return f"Reducer({functions})"


class _BuiltinReducer(Configurable):
    """Shared config, equality and `repr` of the built-in reducers."""

    def get_config(self):
        return {}


@keras.saving.register_keras_serializable(package="kerasbatch")
class Count(_BuiltinReducer):
    """The number of elements in the window (`"count"`), an int64 scalar.

    Example:

    >>> get("count")
    Count()
    """


@keras.saving.register_keras_serializable(package="kerasbatch")
class DenseBatch(_BuiltinReducer):
    """The window's elements stacked (`"dense"`, alias `"batch"`).

    Every element of a window must have the same shape (a
    `kerasbatch.WindowBuilder` checks this when planning). Output: a tensor of
    shape `(size, *element shape)`, or a `tf.SparseTensor` for sparse
    components.

    Example:

    >>> get("batch")
    DenseBatch()
    """


@keras.saving.register_keras_serializable(package="kerasbatch")
class PaddedBatch(_BuiltinReducer):
    """The window's sequences padded into one batch (`"padded"`).

    Sequences become a dense tensor of shape `(size, length, *trailing)`.
    Sparse elements become one `tf.SparseTensor` of `dense_shape` `[size,
    *the largest of every dimension]` (their padding is the implicit zeros,
    so `value` must be 0); `length` fixes the first element dimension.
    Per-example components have nothing to pad and are stacked.

    Args:
        value: the value written into padded positions.
        length: `-1` or `"batch"`: the window's longest element; a positive
            int: that fixed length (the builder raises for a longer element).

    Example:

    >>> PaddedBatch(length=2).padding
    Padding(value=0, length=2)
    """

    def __init__(self, value=0, length=-1):
        padding = Padding(value, length)
        if padding.length == "bucket":
            raise ValueError(
                "PaddedBatch length must be -1 or 'batch' (the window's longest "
                "element) or a positive int; windows have no buckets."
            )
        self.value = padding.value
        self.length = padding.length

    @property
    def padding(self):
        """The `kerasbatch.Padding` this reducer applies (for statistics)."""
        return Padding(self.value, self.length)

    def get_config(self):
        return self.padding.get_config()


BUILT_INS = {
    "count": Count,
    "dense": DenseBatch,
    "batch": DenseBatch,
    "padded": PaddedBatch,
}
_FUNCTIONS = ("init_fn", "reduce_fn", "finalize_fn")


def get(identifier):
    """A reducer from a built-in name, a Keras config dict, or a reducer.

    Args:
        identifier: `"count"`, `"dense"` (alias `"batch"`), `"padded"`, a
            dict from `serialize`, or a reducer (returned as it is).

    Example:

    >>> get("padded"), get(serialize(PaddedBatch(value=-1)))
    (PaddedBatch(value=0, length='batch'), PaddedBatch(value=-1, length='batch'))
    """
    if isinstance(identifier, Reducer | _BuiltinReducer):
        return identifier
    if isinstance(identifier, str):
        if identifier not in BUILT_INS:
            raise ValueError(
                f"Unknown reducer {identifier!r}; the built-ins are "
                f"{sorted(BUILT_INS)}, or pass a kerasbatch.Reducer."
            )
        return BUILT_INS[identifier]()
    if isinstance(identifier, dict):
        # Keras hands back a dict that is no object's config as it is.
        reducer = keras.saving.deserialize_keras_object(identifier)
        if not isinstance(reducer, Reducer | _BuiltinReducer):
            raise ValueError(
                f"{identifier!r} is not the config of a reducer (make one "
                "with kerasbatch.data.reducers.serialize)."
            )
        return reducer
    raise TypeError(
        "A reducer must be a built-in name, a config dict or a "
        f"kerasbatch.Reducer, got {identifier!r}."
    )


def serialize(reducer):
    """The JSON-serialisable Keras config of a reducer (see `get`)."""
    return keras.saving.serialize_keras_object(reducer)


def _registered_name(reducer, argument):
    function = getattr(reducer, argument)
    name = keras.saving.get_registered_name(function)
    if keras.saving.get_registered_object(name) is not function:
        raise ValueError(
            f"Reducer {argument} {function!r} is not registered, so the "
            "Reducer has no config. Define it as a named function decorated "
            "with @keras.saving.register_keras_serializable()."
        )
    return name
