"""Input normalisation: `(x, y, sample_weight)` into named, validated components.

Every builder accepts the same inputs. Each of `x`, `y` and `sample_weight` is
one of:

- a list (or tuple) of arrays whose first axis varies and whose trailing axes
  agree, e.g. token ids of shape `(T,)` or features of shape `(T, 80)`:
  a *sequence* component;
- a `tf.RaggedTensor` with one ragged dimension: a sequence component;
- a dense `np.ndarray` or `tf.Tensor` whose first axis indexes elements, e.g.
  class labels of shape `(N,)`: a *per-example* component, batched unpadded;
- a dict mapping names to any of the above (multi-input or multi-output).

Sequences are stored once, concatenated (`values`) with `row_splits`, so a
batch is a gather plus one `RaggedTensor.to_tensor` in the pipeline.
"""

import dataclasses

import keras
import ml_dtypes
import numpy as np

from kerasbatch import optional
from kerasbatch.planning import orders

ROLES = ("x", "y", "sample_weight")
#: NumPy's dtype of TensorFlow's bfloat16 (from ml_dtypes; numpy kind "V").
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
#: The dtype kinds a component may have (`dtype_kind`): bool, signed and
#: unsigned ints, floats (bfloat16 too), complex, and strings (bytes,
#: unicode, or the object arrays of `tf.string` tensors).
NUMERIC_KINDS = "biufc"
STRING_KINDS = "SUO"
#: Lists longer than this show a progress bar while they are converted.
PROGRESS_THRESHOLD = 200_000
_PROGRESS_EVERY = 50_000


@dataclasses.dataclass(eq=False)
class Component:
    """One named input of every element.

    Attributes:
        name: the key under which the component is padded and reported
            (`"x"`, `"y"`, `"sample_weight"`, or the dict key).
        role: `"x"`, `"y"` or `"sample_weight"`.
        key: the dict key inside its role, or None when the role is not a dict.
        values: sequences: all rows concatenated, shape `(total_length,
            *trailing)`; per-example: shape `(num_elements, *shape)`.
        row_splits: sequences: int64 offsets of shape `(num_elements + 1,)`;
            None for per-example components.
    """

    name: str
    role: str
    key: str | None
    values: np.ndarray
    row_splits: np.ndarray | None
    #: Whether `values` and `row_splits` are buffers kerasbatch made (and
    #: nothing else writes), which TensorFlow may then read in place.
    owned: bool = False

    #: Whether `values` are read by index from a source, not held.
    reads_by_index = False

    @property
    def is_sequence(self):
        return self.row_splits is not None

    @property
    def lengths(self):
        """int64 length of every element along the variable axis."""
        return np.diff(self.row_splits)

    @property
    def num_elements(self):
        if self.is_sequence:
            return len(self.row_splits) - 1
        return len(self.values)

    @property
    def trailing_shape(self):
        """The fixed shape after the (variable or batch) first axis."""
        return tuple(self.values.shape[1:])

    @property
    def where(self):
        """How a user would name this component in an error message."""
        return self.role if self.key is None else f"{self.role}[{self.key!r}]"


@dataclasses.dataclass(eq=False)
class SequenceData:
    """The validated inputs of one `build` call.

    Attributes:
        components: all components, x first, then y, then sample_weight.
        structure: for each role, None (absent), `"single"`, or the tuple of
            dict keys in order.
        lengths_only: the data holds lengths but no values (`from_lengths`):
            enough to plan, not to build a dataset.
    """

    components: list
    structure: dict
    lengths_only: bool = False

    @property
    def num_elements(self):
        return self.components[0].num_elements

    @property
    def reads_by_index(self):
        """Whether some component is read by index from a source."""
        return any(c.reads_by_index for c in self.components)

    @property
    def sequence_components(self):
        return [c for c in self.components if c.is_sequence]

    def element_lengths(self):
        """Each element's length: the longest of its sequence components."""
        return np.max([c.lengths for c in self.sequence_components], axis=0)

    def role_components(self, role):
        return [c for c in self.components if c.role == role]


def from_inputs(x, y=None, sample_weight=None, *, require_sequence=True, convert=None):
    """Validates `(x, y, sample_weight)` and returns a `SequenceData`.

    `require_sequence=False` accepts inputs without a variable-length
    component (windows of per-example data). `convert(role, data)` may
    convert a role's data itself: it returns `(components, {role:
    structure})` (a source of x may give y and sample_weight too), or None
    for the conversion here.

    Raises:
        ValueError: empty input, mismatched element counts, misaligned
            sequences, inconsistent ranks or trailing shapes, duplicate names.
        TypeError: unsupported container types or non-numeric data.
    """
    if x is None:
        raise ValueError("x is None: pass the input sequences to build().")
    if isinstance(x, SequenceData):
        if y is not None or sample_weight is not None:
            raise ValueError("With converted SequenceData, pass no y or sample_weight.")
        return x
    if sample_weight is not None and y is None:
        raise ValueError("sample_weight was given without y; pass targets too.")
    components = []
    structure = {}
    for role, data in zip(ROLES, (x, y, sample_weight), strict=True):
        if data is not None and structure.get(role) is not None:
            raise ValueError(
                f"The source of x gives {role} in its (x, y, ...) elements, and "
                f"{role} was given too: give it once."
            )
        converted = None if convert is None or data is None else convert(role, data)
        if converted is not None:
            parts, roles = converted
            components.extend(parts)
            structure.update(roles)
            continue
        if data is None:
            structure.setdefault(role, None)
            continue
        if isinstance(data, dict):
            if not data:
                raise ValueError(f"{role} is an empty dict.")
            for key, value in data.items():
                if not isinstance(key, str):
                    raise TypeError(
                        f"{role} has a non-string key {key!r}; dict keys must "
                        "be strings (they name model inputs and outputs)."
                    )
                components.append(_to_component(value, role, key))
            structure[role] = tuple(data)
        else:
            components.append(_to_component(data, role, None))
            structure[role] = "single"
    _check_weight_keys(y, sample_weight)
    data = SequenceData(components, structure)
    _check_names(data)
    _check_counts(data)
    _check_alignment(data)
    if require_sequence and not data.sequence_components:
        raise ValueError(NO_SEQUENCE)
    return data


#: Why inputs without a variable-length component cannot be planned.
NO_SEQUENCE = (
    "None of x, y or sample_weight has a variable-length component. Pass "
    "sequences as a list of arrays or a tf.RaggedTensor; dense arrays are "
    "treated as per-example data."
)


def from_lengths(lengths):
    """A `SequenceData` of one x component that holds only `lengths`.

    Builders plan from lengths alone, so this is all `Builder.adapt` needs to
    resolve boundaries, batch sizes and statistics without the data itself.
    The values take no memory: every position reads the same zero.
    """
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or not len(lengths):
        raise ValueError(
            f"lengths must be a non-empty 1-D array, got shape {lengths.shape}."
        )
    if not np.issubdtype(lengths.dtype, np.integer):
        raise TypeError(f"lengths must be integers, got dtype {lengths.dtype}.")
    if (lengths < 0).any():
        first = int(np.flatnonzero(lengths < 0)[0])
        raise ValueError(f"lengths[{first}] is negative ({lengths[first]}).")
    row_splits = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    values = np.broadcast_to(np.zeros((), np.int8), (int(row_splits[-1]),))
    component = Component("x", "x", None, values, row_splits)
    structure = {"x": "single", "y": None, "sample_weight": None}
    return SequenceData([component], structure, lengths_only=True)


def _to_component(data, role, key):
    where = role if key is None else f"{role}[{key!r}]"
    name = component_name(role, key)
    loaded = optional.imported("tensorflow")  # a TF value needs TF imported
    if loaded is not None and isinstance(data, loaded.RaggedTensor):
        if data.ragged_rank != 1:
            raise ValueError(
                f"{where} is a RaggedTensor with ragged_rank {data.ragged_rank}; "
                "only one ragged (the first inner) dimension is supported."
            )
        values = data.values.numpy()
        _check_values(values, where)
        splits = data.row_splits.numpy().astype(np.int64)
        if len(splits) == 1:
            raise ValueError(f"{where} is empty: it has no elements.")
        return Component(name, role, key, values, splits)
    if loaded is not None and isinstance(data, loaded.Tensor | loaded.Variable):
        data = data.numpy()
    if is_sparse(data):
        raise TypeError(
            f"{where} is a sparse tensor; pass a list of dense arrays (e.g. "
            "tf.sparse.to_dense(t).numpy() per element) or a tf.RaggedTensor."
        )
    if isinstance(data, np.generic | int | float) or (
        isinstance(data, np.ndarray) and data.ndim == 0
    ):
        raise ValueError(f"{where} is a scalar; it needs one entry per element.")
    if isinstance(data, np.ndarray) and data.dtype != object:
        if len(data) == 0:
            raise ValueError(f"{where} is empty: it has no elements.")
        _check_values(data, where)
        return Component(name, role, key, data, None)
    if isinstance(data, list | tuple | np.ndarray):
        values, splits = _concatenate_sequences(data, where)
        return Component(name, role, key, values, splits, owned=True)
    raise TypeError(
        f"{where} has unsupported type {type(data).__name__}; expected a list of "
        "arrays, a tf.RaggedTensor, a dense array, or a dict of those."
    )


def component_name(role, key):
    """`"x"`, `"y"`, `"sample_weight"`; a dict key for x and y entries, and
    `"sample_weight[key]"` for sample weight entries (they share y's keys)."""
    if key is None:
        return role
    return f"sample_weight[{key}]" if role == "sample_weight" else key


def _concatenate_sequences(sequences, where):
    if len(sequences) == 0:
        raise ValueError(f"{where} is empty: it has no elements.")
    arrays = []
    checked = set()  # dtypes checked once (object arrays: every element)
    first_trailing = None
    progress = None
    if len(sequences) > PROGRESS_THRESHOLD:
        print(f"Reading {len(sequences)} sequences of {where}")
        progress = keras.utils.Progbar(len(sequences), unit_name="sequence")
    for index, sequence in enumerate(sequences):
        if progress is not None and index % _PROGRESS_EVERY == 0:
            progress.update(index)
        if isinstance(sequence, dict):
            raise TypeError(
                f"{where} element {index} is a dict (keys {list(sequence)}); "
                f"give {where} as a dict of lists, one list per key, as Keras "
                "takes multi-input data, not as a list of dicts."
            )
        if is_sparse(sequence):
            raise TypeError(
                f"{where} element {index} is a sparse tensor; pass dense arrays "
                "(tf.sparse.to_dense(element).numpy()) or a tf.RaggedTensor."
            )
        try:
            array = np.asarray(sequence)
        except ValueError as error:
            raise ValueError(
                f"{where} element {index} is not a regular array: {error}"
            ) from None
        if array.ndim == 0:
            raise ValueError(
                f"{where} element {index} is a scalar; each sequence needs a "
                "first (time) axis. Pass per-example values as one dense array."
            )
        if first_trailing is None:
            first_trailing = array.shape[1:]
        elif array.shape[1:] != first_trailing:
            raise ValueError(
                f"{where} element {index} has shape {array.shape}, but element 0 "
                f"has trailing shape {first_trailing}; all elements of a "
                "component need the same rank and trailing shape."
            )
        if array.dtype not in checked or array.dtype == object:
            _check_values(array, f"{where} element {index}")
            checked.add(array.dtype)
        if (
            index
            and array.dtype != arrays[0].dtype
            and is_string(array.dtype) != is_string(arrays[0].dtype)
        ):
            raise TypeError(
                f"{where} element {index} has dtype {dtype_name(array.dtype)} but "
                f"element 0 has {dtype_name(arrays[0].dtype)}; a component holds "
                "either text or numbers."
            )
        arrays.append(array)
    if progress is not None:
        progress.update(len(sequences), finalize=True)
    dtype = np.result_type(*{a.dtype for a in arrays})
    _check_exact(arrays, dtype, where)
    splits = orders.aligned_empty(len(arrays) + 1, np.int64)
    splits[0] = 0
    np.cumsum(np.fromiter(map(len, arrays), np.int64, len(arrays)), out=splits[1:])
    values = orders.aligned_empty((int(splits[-1]), *first_trailing), dtype)
    # Every array already has the shape (length, *first_trailing): no
    # reshaped views (a million of them cost more than the values).
    np.concatenate(arrays, out=values, casting="same_kind")
    return values, splits


def _check_exact(arrays, dtype, where):
    """Raises if an integer element's values change in `dtype`, the common
    dtype of a component's elements (int64 beside float32 is float64, which
    holds integers exactly only up to 2**53)."""
    if dtype.kind != "f":
        return
    exact = 2 ** (np.finfo(dtype).nmant + 1)
    for index, array in enumerate(arrays):
        if array.dtype.kind in "iu" and array.size:
            if np.iinfo(array.dtype).bits <= np.finfo(dtype).nmant + 1:
                continue
            bad = np.flatnonzero((array.ravel() > exact) | (array.ravel() < -exact))
            if len(bad):
                value = array.ravel()[bad[0]]
                raise ValueError(
                    f"{where} element {index} holds the {array.dtype} value "
                    f"{value}, which {dtype} (the one dtype of the elements' "
                    f"{', '.join(sorted({str(a.dtype) for a in arrays}))}) "
                    "cannot hold exactly: give every element one dtype."
                )


def as_numpy_dtype(dtype):
    """`dtype` (a numpy dtype or type, a `tf.DType`, or a dtype name) as a
    `np.dtype`; `tf.bfloat16` and `"bfloat16"` give `BFLOAT16`, `tf.string`
    gives `object`."""
    loaded = optional.imported("tensorflow")
    if loaded is not None and isinstance(dtype, loaded.DType):
        dtype = dtype.as_numpy_dtype
    elif isinstance(dtype, str) and dtype == "bfloat16":
        dtype = BFLOAT16
    return np.dtype(dtype)


def dtype_kind(dtype):
    """The numpy kind of `dtype` (see `as_numpy_dtype`), with bfloat16
    (numpy kind "V") as the float it is: `"b"` bool, `"i"`/`"u"` ints, `"f"`
    floats, `"c"` complex, `"S"`/`"U"`/`"O"` bytes, unicode and object.

    >>> dtype_kind("bfloat16"), dtype_kind(np.uint8), dtype_kind(np.str_)
    ('f', 'u', 'U')
    """
    dtype = as_numpy_dtype(dtype)
    return "f" if dtype == BFLOAT16 else dtype.kind


def dtype_name(dtype):
    """A user-facing name of `dtype`: `"bfloat16"`, `"int32"`, `"string"`."""
    dtype = as_numpy_dtype(dtype)
    if dtype_kind(dtype) in STRING_KINDS:
        return "string"
    return dtype.name


def is_string(dtype):
    """Whether `dtype` holds text (`tf.string`, numpy bytes or unicode)."""
    return dtype_kind(dtype) in STRING_KINDS


def check_dtype(dtype, where):
    """Raises a TypeError unless `tf.data` batches `dtype`: bool, ints,
    floats (bfloat16 and float16 too), complex or strings.

    Returns:
        `dtype` as a `np.dtype`.
    """
    dtype = as_numpy_dtype(dtype)
    kind = dtype_kind(dtype)
    if kind not in NUMERIC_KINDS + STRING_KINDS:
        raise TypeError(
            f"{where} has dtype {dtype}, which tf.data cannot batch; give bool, "
            "integer, floating-point (bfloat16 and float16 too) or string values."
        )
    return dtype


def _check_values(array, where):
    """`check_dtype`, and an object array must hold text."""
    check_dtype(array.dtype, where)
    if array.dtype == object and array.size:
        item = array.flat[0]
        if not isinstance(item, str | bytes):
            raise TypeError(
                f"{where} holds Python objects of type {type(item).__name__}; "
                "give numbers, booleans or strings in a regular array."
            )


def _check_weight_keys(y, sample_weight):
    """A dict of sample weights weighs the targets of its keys: y must be a
    dict that has them all (Keras would otherwise drop the weights)."""
    if not isinstance(sample_weight, dict):
        return
    if not isinstance(y, dict):
        raise ValueError(
            f"sample_weight is a dict (keys {sorted(sample_weight)}), but y is "
            "one array: give sample_weight as one array, or y as a dict with "
            "those keys."
        )
    unknown = sorted(set(sample_weight) - set(y))
    if unknown:
        raise ValueError(
            f"sample_weight has the keys {unknown}, which y does not have (y's "
            f"keys: {sorted(y)}): each weight weighs the target of its key."
        )


def is_sparse(value):
    """Whether `value` is a TensorFlow sparse tensor (without importing it)."""
    return type(value).__name__ in ("SparseTensor", "SparseTensorValue")


def _check_names(data):
    seen = {}
    for component in data.components:
        if component.name in seen:
            raise ValueError(
                f"{component.where} and {seen[component.name]} share the name "
                f"{component.name!r}; rename one of them."
            )
        seen[component.name] = component.where


def _check_counts(data):
    first = data.components[0]
    for component in data.components[1:]:
        if component.num_elements != first.num_elements:
            raise ValueError(
                f"{first.where} has {first.num_elements} elements but "
                f"{component.where} has {component.num_elements}; they must match."
            )


def _check_alignment(data):
    """Per-frame targets follow x; per-frame weights follow their targets."""
    x_parts = data.role_components("x")
    y_parts = data.role_components("y")
    for weight in data.role_components("sample_weight"):
        target = next((y for y in y_parts if y.key == weight.key), None)
        if target is None and len(y_parts) == 1:
            target = y_parts[0]
        if weight.is_sequence and target is not None and target.is_sequence:
            check_same_lengths(target, weight)
    if len(x_parts) == 1 and x_parts[0].is_sequence:
        for target in y_parts:
            if target.is_sequence:
                check_same_lengths(x_parts[0], target)


def check_same_lengths(reference, other, why="aligned sequences need equal lengths"):
    """Raises a ValueError naming the first element whose length in the
    component `other` differs from its length in `reference`; `why` says
    why they must be equal."""
    mismatch = np.flatnonzero(reference.lengths != other.lengths)
    if len(mismatch):
        index = mismatch[0]
        raise ValueError(
            f"{other.where} element {index} has length {other.lengths[index]} "
            f"but {reference.where} element {index} has length "
            f"{reference.lengths[index]}; {why} ({len(mismatch)} elements differ)."
        )
