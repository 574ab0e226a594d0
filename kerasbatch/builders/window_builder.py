"""Windows of consecutive elements, batched by a reducer per component."""

import dataclasses

import keras
import numpy as np

from kerasbatch import checks, optional
from kerasbatch.builders.base import Builder
from kerasbatch.data import reducers as reducers_lib
from kerasbatch.data import sources, sparse_components
from kerasbatch.data.padding import Padding
from kerasbatch.engines.tf_data import in_memory
from kerasbatch.planning import orders
from kerasbatch.planning.prepared import Prepared


@keras.saving.register_keras_serializable(package="kerasbatch")
class WindowBuilder(Builder):
    """Windows of consecutive elements, each component batched by its reducer.

    The generalised batching of the tf.data RFC "Generalizing tf.data
    batching using windowing and reducers". A window combines consecutive elements
    exactly as `tf.data.Dataset.window(size, shift, stride, drop_remainder)`:
    window k starts at element `k * shift` and holds the elements `start,
    start + stride, ...`, `size` of them (fewer at the end, unless
    `drop_remainder`). Then a reducer per component (`kerasbatch.data.reducers`)
    turns the window's elements into the batch: pad x, stack the labels,
    count, or a user's own `kerasbatch.Reducer`.

    Windows are fixed by the element order; each epoch (`shuffle`) takes
    them in a new order drawn from `(seed, epoch)`. Windows overlap when
    `shift < size * stride`, and then an element is fed once per window
    holding it. `shift=size` (with `stride=1`) makes every window a batch of
    its own elements: each element exactly once per epoch with
    `drop_remainder=False`.

    Components are named `"x"`, `"y"`, `"sample_weight"` or by their dict keys
    (`kerasbatch.data.sources.component_name`). Besides the inputs of
    `kerasbatch.builders.Builder.build`, a component may be a list of
    `tf.SparseTensor`s of one rank (a sparse component: its length is the
    first dimension; needs `engine="tf.data"`) or an array of strings
    (per-example). `build` returns one batch per window. `statistics()`
    reports the padding of the components batched by `"padded"` or `"dense"`
    (sparse ones along their first dimension); a count or a user's reducer
    has no padding to report.

    Args:
        size: elements per window, a positive int.
        shift: how many elements the window moves forward between windows.
            The RFC's default 1 makes sliding windows; use `size` for
            batches.
        stride: the step between the elements of a window.
        drop_remainder: drop the last windows that hold fewer than `size`
            elements (the RFC's default, True).
        remainder: those last windows: `"keep"`, `"drop"` or `"pad"` (fed
            with `size` rows, the rows past their elements filler of zero
            `sample_weight`, as with `batch_multiple`). When given, it
            decides, whatever `drop_remainder` says. Not `"even"`: windows
            are cut by `size`, `shift` and `stride` alone.
        reducers: a dict mapping component names to a reducer: a name
            (`"padded"`, `"dense"`/`"batch"`, `"count"`), a config dict, or a
            `kerasbatch.Reducer` / built-in instance. Components left out are
            `"padded"` (sequences, sparse) or `"dense"` (per-example).
        shuffle: take the windows in a new order every epoch.
        seed: int seed; epoch k's order depends only on `(seed, k)`.
        max_length, overflow, batch_multiple, pad_to_multiple, prefetch: as
            in `kerasbatch.builders.Builder`
            (elements are cut or dropped before windowing).

    Example:

    The RFC's end-to-end example: strings stacked, integers padded to 2.

    >>> import tensorflow as tf
    >>> import kerasbatch
    >>> def gen():
    ...     yield "a", [1]
    ...     yield "b", [2]
    ...     yield "c", [3]
    ...     yield "d", [4, 4]
    >>> dataset = tf.data.Dataset.from_generator(gen, output_signature=(
    ...     tf.TensorSpec((), tf.string), tf.TensorSpec((None,), tf.int32)))
    >>> builder = kerasbatch.WindowBuilder(
    ...     size=2, shift=2, shuffle=False,
    ...     reducers={"x": "dense", "y": kerasbatch.data.reducers.PaddedBatch(length=2)})
    >>> for x, y in builder.build_from_dataset(dataset):
    ...     print(x.numpy().tolist(), y.numpy().tolist())
    [b'a', b'b'] [[1, 0], [2, 0]]
    [b'c', b'd'] [[3, 0], [4, 4]]
    >>> builder.statistics().padding_efficiency
    0.625
    """

    remainders = ("keep", "drop", "pad")
    remainders_reason = (
        "windows are cut by size, shift and stride alone; use 'pad' for one shape."
    )

    batches = "windows"
    settings_not_taken = ("padding", "output_lengths", "output_mask", "model_inputs")

    def __init__(
        self,
        size,
        shift=1,
        stride=1,
        drop_remainder=True,
        reducers=None,
        **settings,
    ):
        self.size, self.shift, self.stride = _window_arguments(size, shift, stride)
        settings = self.take_settings(settings)
        super().__init__(
            self.size,
            # A remainder given decides (drop_remainder defaults to True).
            drop_remainder=drop_remainder and settings.get("remainder") is None,
            **settings,
        )
        self.reducers = _parse_reducers(reducers)

    # ----------------------------------------------------------------- config
    def get_config(self):
        config = self._arguments()
        if config["reducers"] is not None:
            config["reducers"] = {
                name: reducers_lib.serialize(reducer)
                for name, reducer in config["reducers"].items()
            }
        return config

    def _arguments(self):
        """The constructor arguments, reducers as objects."""
        shared = self._shared_config()
        del shared["padding"], shared["drop_remainder"], shared["model_inputs"]
        return {
            "size": self.size,
            "shift": self.shift,
            "stride": self.stride,
            "drop_remainder": self.drop_remainder,
            "reducers": None if self.reducers is None else dict(self.reducers),
            **shared,
        }

    def __eq__(self, other):
        return type(self) is type(other) and self._arguments() == other._arguments()

    def __repr__(self):
        arguments = ", ".join(f"{k}={v!r}" for k, v in self._arguments().items())
        return f"WindowBuilder({arguments})"

    # ------------------------------------------------------------------ build
    def _inputs(self, x, y, sample_weight):
        """`build`'s inputs: those of `kerasbatch.builders.Builder.build`,
        lists of `tf.SparseTensor`s, or string arrays; or a dict of those.
        The numpy engines (`"grain"`, `"python"`) take the built-in reducers
        of dense components; a user's `Reducer` (TensorFlow ops) and sparse
        components need `"tf.data"`. `build` returns one batch per window,
        each component as its reducer returns it, with exact cardinality
        (the number of windows)."""
        return _window_data(x, y, sample_weight)

    def build_from_dataset(self, dataset):
        """Windows the elements of a finite `tf.data.Dataset`, read into memory.

        Elements are a tensor, a dict, or a tuple `(x, y[, sample_weight])`
        of those (as `model.fit` reads them). A component whose elements vary
        in their first dimension (unknown in the `element_spec`) is a
        sequence; `tf.SparseTensor` elements make a sparse component.

        Returns:
            The dataset `build` returns for the same inputs.
        """
        inputs = in_memory.read_inputs(dataset)
        if not isinstance(inputs, tuple | list):
            return self.build(inputs)
        if not 1 <= len(inputs) <= 3:
            raise ValueError(
                f"Dataset elements are tuples of {len(inputs)}; expected "
                "(x,), (x, y) or (x, y, sample_weight)."
            )
        return self.build(*inputs)

    # ------------------------------------------------------------------- plan
    def _prepare(self, prepared, layout):
        data, candidates = prepared.data, prepared.candidates
        reducers = self._resolve_reducers(data)
        batched = [
            c
            for c in data.sequence_components
            if isinstance(
                reducers[c.name],
                reducers_lib.PaddedBatch | reducers_lib.DenseBatch,
            )
        ]
        positions, splits = window_positions(
            len(candidates),
            self.size,
            self.shift,
            self.stride,
            self.drop_remainder,
        )
        if len(splits) == 1:
            raise ValueError(
                f"No window: {len(candidates)} elements cannot fill a "
                f"window of size {self.size} with stride {self.stride}; keep "
                "the partial windows with drop_remainder=False."
            )
        prepared = prepared.extended(
            WindowPrepared,
            component_lengths={c.name: c.lengths for c in batched},
            paddings={
                c.name: getattr(reducers[c.name], "padding", Padding()) for c in batched
            },
            reducers=reducers,
            window_indices=candidates[positions],
            window_splits=splits,
            num_unwindowed=len(candidates) - len(np.unique(positions)),
        )
        self._check_multiple_of_fixed(prepared.paddings)
        for component in batched:
            if isinstance(reducers[component.name], reducers_lib.DenseBatch):
                self._check_one_shape(prepared, component)
        if self._fills:
            self._check_fillable(prepared)
        return prepared

    def _check_fillable(self, prepared):
        """Filler rows extend dense batched components only."""
        sparse = {
            c.name
            for c in prepared.data.components
            if isinstance(c, sparse_components.SparseComponent)
        }
        for name, reducer in prepared.reducers.items():
            batches = isinstance(
                reducer, reducers_lib.PaddedBatch | reducers_lib.DenseBatch
            )
            if name in sparse or not batches:
                raise ValueError(
                    f"{self._filler_setting} fills each window's "
                    f"batch with rows, but component {name!r} is reduced by "
                    f"{reducer!r}{' of sparse elements' if name in sparse else ''}, "
                    "which gives no dense row per element. Use 'padded' or "
                    "'dense' reducers of dense elements, or keep or drop the "
                    "smaller windows (batch_multiple=1, remainder='keep' or "
                    "'drop')."
                )

    def _resolve_reducers(self, data):
        """`{component name: reducer}` for every component of `data`."""
        names = [c.name for c in data.components]
        given = dict(self.reducers or {})
        if data.lengths_only:
            given = {name: r for name, r in given.items() if name in names}
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise ValueError(
                f"reducers names {unknown}, but the components are {names}."
            )
        return {
            c.name: given.get(
                c.name,
                reducers_lib.PaddedBatch()
                if c.is_sequence
                else reducers_lib.DenseBatch(),
            )
            for c in data.components
        }

    @staticmethod
    def _check_one_shape(prepared, component):
        """Every window of a `"dense"` sequence component has one shape."""
        shapes = _element_shapes(component, prepared.element_limits)
        indices, splits = prepared.window_indices, prepared.window_splits
        windowed = shapes[indices]
        differs = (
            np.minimum.reduceat(windowed, splits[:-1])
            != np.maximum.reduceat(windowed, splits[:-1])
        ).any(axis=1)
        if not differs.any():
            return
        window = int(np.flatnonzero(differs)[0])
        members = indices[splits[window] : splits[window + 1]]
        first = members[0]
        other = members[np.flatnonzero((shapes[members] != shapes[first]).any(1))[0]]
        raise ValueError(
            f"Reducer 'dense' of component {component.name!r} needs elements of "
            f"one shape, but window {window} holds element {first} of shape "
            f"{tuple(shapes[first].tolist())} and element {other} of shape "
            f"{tuple(shapes[other].tolist())}. Use 'padded' to pad them."
        )

    def _epoch_order(self, prepared):
        return orders.EpochOrder.of_spans(
            prepared.window_indices,
            prepared.window_splits,
            shuffle_batches=self.shuffle,
            capacity=self.size if self.remainder == "pad" else None,
        )

    def _num_left_out(self):
        return self._prepared.num_unwindowed


def window_positions(num_elements, size, shift=1, stride=1, drop_remainder=True):
    """The element positions of every window, as `tf.data.Dataset.window`.

    Window k starts at `k * shift` (while that is below `num_elements`) and
    holds `start + j * stride` for `j < size` that are below `num_elements`.

    Returns:
        `(positions, splits)`, int64: window k holds
        `positions[splits[k]:splits[k + 1]]`.

    Example:

    The RFC's examples:

    >>> def windows(*arguments):
    ...     positions, splits = window_positions(*arguments)
    ...     return [w.tolist() for w in np.split(positions, splits[1:-1])]
    >>> windows(5, 3)
    [[0, 1, 2], [1, 2, 3], [2, 3, 4]]
    >>> windows(5, 3, 3, 1, False)
    [[0, 1, 2], [3, 4]]
    >>> windows(6, 3, 1, 2)
    [[0, 2, 4], [1, 3, 5]]
    """
    size, shift, stride = _window_arguments(size, shift, stride)
    starts = np.arange(0, num_elements, shift, dtype=np.int64)
    positions = starts[:, None] + np.arange(size, dtype=np.int64) * stride
    inside = positions < num_elements
    counts = inside.sum(axis=1)
    kept = counts == size if drop_remainder else counts > 0
    splits = np.concatenate([[0], np.cumsum(counts[kept])]).astype(np.int64)
    return positions[kept][inside[kept]], splits


@dataclasses.dataclass(frozen=True, kw_only=True)
class WindowPrepared(Prepared):
    """A `Prepared` value with the windows of the candidates.

    Attributes:
        reducers: `{component name: reducer}`, resolved.
        window_indices: int64 elements of every window, window after window.
        window_splits: int64 window k holds
            `window_indices[window_splits[k]:window_splits[k + 1]]`.
        num_unwindowed: candidates that no window holds.
    """

    reducers: dict
    window_indices: np.ndarray
    window_splits: np.ndarray
    num_unwindowed: int


def _window_data(x, y, sample_weight):
    """`sources.from_inputs`, plus sparse and string components.

    Sparse and string inputs are validated through stand-ins of the same
    element counts and lengths (zero-width numeric arrays), then swapped in.
    """
    if isinstance(x, sources.SequenceData):
        return sources.from_inputs(x, y, sample_weight)
    swapped = {}

    def stand_in(value, role, key):
        name = sources.component_name(role, key)
        if _is_sparse_list(value, name):
            swapped[name] = _sparse_component(value, role, key)
            lengths = swapped[name].lengths
            return [np.zeros((length, 0), np.int8) for length in lengths]
        strings = _as_strings(value)
        if strings is None:
            return value
        swapped[name] = sources.Component(name, role, key, strings, None)
        return np.zeros(strings.shape, np.int8)

    inputs = []
    for role, value in zip(sources.ROLES, (x, y, sample_weight), strict=True):
        if isinstance(value, dict):
            value = {key: stand_in(v, role, key) for key, v in value.items()}
        elif value is not None:
            value = stand_in(value, role, None)
        inputs.append(value)
    data = sources.from_inputs(*inputs, require_sequence=False)
    data.components = [swapped.get(c.name, c) for c in data.components]
    return data


def _is_sparse_list(value, name):
    loaded = optional.imported("tensorflow")  # a sparse tensor needs TF imported
    if loaded is None or not isinstance(value, list | tuple) or not value:
        return False
    sparse = [isinstance(v, loaded.SparseTensor) for v in value]
    if any(sparse) and not all(sparse):
        raise TypeError(
            f"{name} mixes tf.SparseTensor and dense elements (element "
            f"{sparse.index(False)} is not); a component is one or the other."
        )
    return all(sparse)


def _as_strings(value):
    """`value` as a numpy string array, or None when it holds no strings."""
    loaded = optional.imported("tensorflow")
    if loaded is not None and isinstance(value, loaded.Tensor):
        return value.numpy() if value.dtype == loaded.string else None
    if isinstance(value, list | tuple) and value and isinstance(value[0], str | bytes):
        return np.asarray(value)
    if isinstance(value, np.ndarray) and (
        value.dtype.kind in "SU"
        or (
            value.dtype == object
            and value.size
            and isinstance(value.flat[0], str | bytes)
        )
    ):
        return value
    return None


def _sparse_component(elements, role, key):
    where = role if key is None else f"{role}[{key!r}]"
    first = elements[0]
    rank = int(first.dense_shape.shape[0])
    if rank == 0:
        raise ValueError(
            f"{where} element 0 is a scalar; sparse elements need rank >= 1."
        )
    for index, element in enumerate(elements):
        if int(element.dense_shape.shape[0]) != rank:
            raise ValueError(
                f"{where} element {index} has rank {element.dense_shape.shape[0]}, "
                f"but element 0 has rank {rank}; sparse elements need one rank."
            )
        if element.dtype != first.dtype:
            raise TypeError(
                f"{where} element {index} has dtype {element.dtype.name}, but "
                f"element 0 has {first.dtype.name}."
            )
    counts = [int(e.values.shape[0]) for e in elements]
    entry_splits = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    indices = np.concatenate([e.indices.numpy() for e in elements]).reshape(-1, rank)
    values = np.concatenate([e.values.numpy() for e in elements])
    # Row-major order within each element (element first, so splits hold).
    owner = np.repeat(np.arange(len(elements)), counts)
    order = np.lexsort((*indices.T[::-1], owner))
    shapes = np.stack([e.dense_shape.numpy() for e in elements]).astype(np.int64)
    return sparse_components.SparseComponent(
        sources.component_name(role, key),
        role,
        key,
        indices[order].astype(np.int64),
        values[order],
        entry_splits,
        shapes,
    )


def _element_shapes(component, limits):
    """int64 `(num_elements, rank)`: each element's shape after cutting."""
    if isinstance(component, sparse_components.SparseComponent):
        shapes = component.shapes.copy()
    else:
        shapes = component.lengths[:, None].copy()
    shapes[:, 0] = np.minimum(shapes[:, 0], limits)
    return shapes


def _window_arguments(*values):
    """Validated `(size, shift, stride)`: positive ints."""
    names = ("size", "shift", "stride")
    checked = tuple(
        checks.optional_positive_int(value, name)
        for value, name in zip(values, names, strict=True)
    )
    if None in checked:
        raise ValueError(
            f"{names[checked.index(None)]} must be a positive int, got None."
        )
    return checked


def _parse_reducers(reducers):
    if reducers is None:
        return None
    if not isinstance(reducers, dict):
        raise TypeError(
            "reducers must be a dict mapping component names to reducers, got "
            f"{type(reducers).__name__}."
        )
    parsed = {}
    for name, spec in reducers.items():
        try:
            parsed[name] = reducers_lib.get(spec)
        except (TypeError, ValueError) as error:
            raise type(error)(f"reducers[{name!r}]: {error}") from None
    return parsed
