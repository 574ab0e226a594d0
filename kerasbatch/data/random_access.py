"""Random-access sources: data on disk, planned from its lengths, read by index.

A random-access source is anything with `__len__` and `__getitem__` that
returns one element: a Grain `MapDataset` or data source (an ArrayRecord
file, parsed), a Hugging Face `Dataset`, or a `kerasbatch.io.TokenFile`. An
element is an array (one sequence: `x`), a dict of arrays (a multi-input
`x`), or a tuple `(x, y)` / `(x, y, sample_weight)` of those. In an
element, an array with a first axis is a sequence along it; a scalar is a
per-example value.

`from_source` turns a source into the components of a
`kerasbatch.data.sources.SequenceData`, whose values are not in memory:
planning needs only the lengths (given, the source's own `lengths`, or one
indexing pass, cached next to the data's files), and a batch reads only the
elements it holds (`SourceValues`), so the batches are the same, bit for
bit, as those of the same data in memory.
"""

import concurrent.futures
import contextlib
import dataclasses
import threading

import numpy as np

from kerasbatch.data import source_lengths, sources

#: The threads that read a batch's elements, by default.
READ_THREADS = 8


def is_random_access(value):
    """Whether `value` is a random-access source (not an in-memory input:
    a list, tuple, dict, array or tensor)."""
    if isinstance(value, list | tuple | dict | np.ndarray | str | bytes):
        return False
    if isinstance(value, sources.SequenceData):
        return False
    package = (type(value).__module__ or "").split(".")[0]
    if package in ("tensorflow", "keras", "jax", "jaxlib", "torch"):
        return False
    return hasattr(value, "__len__") and hasattr(value, "__getitem__")


@dataclasses.dataclass(frozen=True)
class Field:
    """One component of a source's elements: where it sits in an element.

    Attributes:
        role: `"x"`, `"y"` or `"sample_weight"`.
        key: its dict key, or None.
        position: its place in a tuple element, or None (not a tuple).
        is_sequence: whether it has a variable first axis.
        dtype: its dtype (the first element's).
        trailing_shape: its shape after the variable (or no) first axis.
    """

    role: str
    key: str | None
    position: int | None
    is_sequence: bool
    dtype: np.dtype
    trailing_shape: tuple

    @property
    def name(self):
        return sources.component_name(self.role, self.key)

    @property
    def where(self):
        return self.role if self.key is None else f"{self.role}[{self.key!r}]"

    def part_of(self, element):
        """This field's value in the raw `element`."""
        if self.position is not None:
            element = element[self.position]
        if self.key is not None:
            if not isinstance(element, dict) or self.key not in element:
                raise KeyError(self.key)
            element = element[self.key]
        return np.asarray(element)


def fields_of(element, role, where):
    """The `Field`s of a source's `element` (element 0), as the source of
    `role` (`"x"`: a tuple element holds x, y and maybe sample_weight)."""
    if isinstance(element, tuple):
        if role != "x" or len(element) not in (2, 3):
            raise TypeError(
                f"Element 0 of {where} is a tuple of {len(element)}: a source of "
                f"x may give (x, y) or (x, y, sample_weight) tuples; a source "
                f"of {role} gives arrays or dicts."
            )
        parts = zip(sources.ROLES, element, range(3), strict=False)
    else:
        parts = [(role, element, None)]
    fields = []
    for part_role, part, position in parts:
        keys = sorted(part) if isinstance(part, dict) else [None]
        if isinstance(part, dict) and not part:
            raise ValueError(
                f"Element 0 of {where} gives {part_role} as an empty dict."
            )
        for key in keys:
            value = np.asarray(part if key is None else part[key])
            label = part_role if key is None else f"{part_role}[{key!r}]"
            sources.check_dtype(value.dtype, f"Element 0 of {where}: {label}")
            fields.append(
                Field(
                    role=part_role,
                    key=key,
                    position=position,
                    is_sequence=value.ndim > 0,
                    dtype=value.dtype,
                    trailing_shape=tuple(value.shape[1:]),
                )
            )
    return fields


class SourceReader:
    """Reads a source's elements by index, checked against its fields and
    lengths, `threads` at a time; the last elements read are kept per
    thread, so that a batch's components read each element once.

    Args:
        source: the random-access source.
        fields: its `Field`s.
        lengths: `{field name: int64 lengths}` of its sequence fields.
        threads: threads that read a batch's elements (a source with
            `__getitems__` reads them in one call instead).
        where: how to name the source in errors.
    """

    def __init__(self, source, fields, lengths, threads, where):
        self.source = source
        self.fields = fields
        self.lengths = lengths
        self.threads = threads
        self.where = where
        self._local = threading.local()
        self._pool = None
        self._pool_lock = threading.Lock()

    def __getstate__(self):  # worker processes make their own threads
        state = dict(self.__dict__)
        state.update(_local=None, _pool=None, _pool_lock=None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._local, self._pool_lock = threading.local(), threading.Lock()

    def read(self, indices):
        """`{field name: [array of every element of indices]}`."""
        last = getattr(self._local, "last", None)
        if last is not None and np.array_equal(last[0], indices):
            return last[1]
        elements = self._raw(indices)
        parts = {field.name: [] for field in self.fields}
        for index, element in zip(indices, elements, strict=True):
            for field in self.fields:
                parts[field.name].append(self.checked(field, element, int(index)))
        self._local.last = (np.array(indices), parts)
        return parts

    def _raw(self, indices):
        indices = [int(index) for index in indices]
        getitems = getattr(self.source, "__getitems__", None)
        if getitems is not None:
            try:
                return list(getitems(indices))
            except Exception:  # noqa: BLE001 (read one by one: name the element)
                pass
        if self.threads > 1 and len(indices) > 1:
            return list(self.pool().map(self.element, indices))
        return [self.element(index) for index in indices]

    def pool(self):
        with self._pool_lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    self.threads, thread_name_prefix="kerasbatch-read"
                )
            return self._pool

    def element(self, index):
        """The raw element `index`; an error that names it if it cannot be read."""
        try:
            return self.source[index]
        except Exception as error:
            raise type(error)(
                f"Element {index} of {self.where} could not be read: "
                f"{type(error).__name__}: {error}"
            ) from error

    def checked(self, field, element, index):
        """`field`'s array in `element` (number `index`), or an error that
        names the element if it does not match the fields or lengths."""
        label = f"Element {index} of {self.where}"
        try:
            value = field.part_of(element)
        except (KeyError, IndexError, TypeError):
            raise ValueError(
                f"{label} has no {field.where}, which element 0 has: every "
                "element needs the same structure."
            ) from None
        if field.is_sequence:
            fits = value.ndim > 0 and value.shape[1:] == field.trailing_shape
            expected = "(length" + "".join(f", {n}" for n in field.trailing_shape) + ")"
        else:
            fits = value.shape == field.trailing_shape
            expected = str(field.trailing_shape)
        if not fits:
            raise ValueError(
                f"{label}: {field.where} has shape {value.shape}, but element "
                f"0's has {expected}: every element needs the same rank and "
                "trailing shape."
            )
        if value.dtype != field.dtype:
            raise ValueError(
                f"{label}: {field.where} has dtype {value.dtype}, but element "
                f"0's has {field.dtype}: give every element one dtype."
            )
        if field.is_sequence and self.lengths is not None:
            expected = self.lengths[field.name][index]
            if len(value) != expected:
                raise ValueError(
                    f"{label}: {field.where} has length {len(value)}, but its "
                    f"lengths say {expected}: the lengths do not describe this "
                    "source (pass the source's own lengths, or none, to "
                    "compute them)."
                )
        return value


#: The elements this thread may read (`reading_only`), or None: all.
_ONLY = threading.local()


@contextlib.contextmanager
def reading_only(elements):
    """Within the block, this thread reads only `elements` of any source:
    the values of every other element read as zeros (rows that another
    JAX process feeds, and that this one leaves out of its part)."""
    before = getattr(_ONLY, "elements", None)
    _ONLY.elements = np.unique(elements)
    try:
        yield
    finally:
        _ONLY.elements = before


class SourceValues:
    """A component's values, read from its source when indexed.

    Indexing it as a component's `values` is indexed (token positions of
    a sequence component, element indices of a per-example one) reads
    only the elements that those positions fall in.

    Args:
        reader: the `SourceReader`.
        field: the component's `Field`.
        row_splits: the component's row splits (sequences), or None.
        num_elements: the number of elements.
    """

    def __init__(self, reader, field, row_splits, num_elements):
        self.reader = reader
        self.field = field
        self.row_splits = row_splits
        self.dtype = field.dtype
        first = int(row_splits[-1]) if field.is_sequence else num_elements
        self.shape = (first, *field.trailing_shape)
        self.ndim = len(self.shape)

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, positions):
        positions = np.asarray(positions, dtype=np.int64)
        if not positions.size:
            return np.zeros((*positions.shape, *self.shape[1:]), self.dtype)
        if self.field.is_sequence:
            elements = np.searchsorted(self.row_splits, positions, side="right") - 1
        else:
            elements = positions
        unique, inverse = np.unique(elements, return_inverse=True)
        arrays = self._read(unique)
        if not self.field.is_sequence:
            return np.stack(arrays)[inverse.reshape(positions.shape)]
        lengths = np.fromiter(map(len, arrays), np.int64, len(arrays))
        local_starts = np.cumsum(lengths) - lengths
        values = np.concatenate(arrays)
        local = positions - self.row_splits[elements] + local_starts[inverse]
        return values[local]

    def _read(self, elements):
        """The arrays of `elements`; zeros for those `reading_only` leaves out."""
        only = getattr(_ONLY, "elements", None)
        if only is None:
            return self.reader.read(elements)[self.field.name]
        kept = np.isin(elements, only)
        arrays = iter(self.reader.read(elements[kept])[self.field.name])
        if self.field.is_sequence:
            lengths = self.row_splits[elements + 1] - self.row_splits[elements]
        else:
            lengths = [None] * len(elements)
        return [
            next(arrays)
            if keep
            else np.zeros(
                (() if length is None else (int(length),)) + self.field.trailing_shape,
                self.dtype,
            )
            for keep, length in zip(kept, lengths, strict=True)
        ]


class SourceComponent(sources.Component):
    """A component read from a random-access source: its lengths are held,
    its values (`SourceValues`) read by index."""

    reads_by_index = True

    def __init__(self, field, values, row_splits, lengths):
        super().__init__(field.name, field.role, field.key, values, row_splits)
        self._lengths = lengths

    @property
    def lengths(self):
        return self._lengths


def from_source(source, role, lengths=None, threads=READ_THREADS, verbose="auto"):
    """The components of `source` as the source of `role` (a tuple element
    gives several roles), and `{role: structure}`.

    Args:
        source: a random-access source.
        role: `"x"`, `"y"` or `"sample_weight"`.
        lengths: None (the source's own `lengths`, or one pass over it), a
            1-D int array (every sequence component's lengths), or a dict of
            them by component name: then the arrays it does not name are
            per-example values (e.g. a feature vector per element).
        threads: threads that read a batch's elements.
        verbose: whether the lengths pass shows a progress bar ("auto":
            for more than 10 000 elements).
    """
    where = f"the source of {role}"
    count = len(source)
    if not count:
        raise ValueError(f"The source of {role} is empty: it has no elements.")
    probe = SourceReader(source, [], {}, 1, where)
    element = probe.element(0)
    fields = fields_of(element, role, where)
    if isinstance(lengths, dict):
        # Each source takes the lengths of its own components
        # (`from_inputs` checks that every name is some source's).
        lengths = {name: lengths[name] for name in lengths if name in names_of(fields)}
        # The components that lengths names are the sequences; other
        # arrays are per-example values (a vector per element).
        fields = [
            field
            if not field.is_sequence or field.name in lengths
            else dataclasses.replace(
                field,
                is_sequence=False,
                trailing_shape=field.part_of(element).shape,
            )
            for field in fields
        ]
    names = [field.name for field in fields if field.is_sequence]
    given = (
        source_lengths.given_lengths(source, lengths, names, count, where)
        if names
        else {}
    )
    # A source's own offsets (a token file's index) are its one sequence's
    # row splits: shared, not made again.
    offsets = getattr(source, "offsets", None) if lengths is None else None
    reader = SourceReader(source, fields, None, threads, where)
    if given is None:
        given = source_lengths.lengths_pass(reader, names, count, verbose)
    reader.lengths = given
    components = []
    for field in fields:
        if field.is_sequence:
            field_lengths = given[field.name]
            if _are_row_splits(offsets, count) and len(names) == 1:
                row_splits = offsets
            else:
                row_splits = np.zeros(count + 1, np.int64)
                np.cumsum(field_lengths, out=row_splits[1:])
        else:
            field_lengths = row_splits = None
        values = SourceValues(reader, field, row_splits, count)
        components.append(SourceComponent(field, values, row_splits, field_lengths))
    structure = {}
    for field in fields:
        structure[field.role] = (
            "single"
            if field.key is None
            else (*structure.get(field.role, ()), field.key)
        )
    return components, structure


def names_of(fields):
    """The names of the `fields` that have a first axis."""
    return [field.name for field in fields if field.is_sequence]


def _are_row_splits(offsets, count):
    """Whether `offsets` are int64 row splits of `count` elements."""
    return (
        isinstance(offsets, np.ndarray)
        and offsets.dtype == np.int64
        and offsets.shape == (count + 1,)
        and offsets[0] == 0
    )


def read_threads(data):
    """The threads that read the sources of `data` (a `SequenceData`): 1
    for data in memory."""
    readers = [c.values.reader for c in data.components if c.reads_by_index]
    return max([reader.threads for reader in readers], default=1)


def from_inputs(
    x, y=None, sample_weight=None, *, lengths=None, threads=None, **options
):
    """`kerasbatch.data.sources.from_inputs`, where any of `x`, `y` and
    `sample_weight` may be a random-access source (read by `threads`
    threads, default `READ_THREADS`), planned from `lengths` (see
    `from_source`). `options`: those of `sources.from_inputs`.

    Example:

    >>> import numpy as np
    >>> class Squares:
    ...     def __len__(self):
    ...         return 3
    ...     def __getitem__(self, index):
    ...         return np.arange(index + 1) ** 2, np.int32(index)
    >>> data = from_inputs(Squares())
    >>> [(c.name, c.is_sequence, c.reads_by_index) for c in data.components]
    [('x', True, True), ('y', False, True)]
    >>> data.components[0].lengths.tolist(), data.components[0].values[[2, 5]]
    ([1, 2, 3], array([1, 4]))
    """
    if not any(is_random_access(data) for data in (x, y, sample_weight)):
        named = [
            n
            for n, v in (("lengths", lengths), ("read_threads", threads))
            if v is not None
        ]
        if named:
            raise ValueError(
                f"{' and '.join(named)} {'is' if len(named) == 1 else 'are'} for "
                "a random-access source (a Grain MapDataset or data source, a "
                "Hugging Face Dataset, a kerasbatch.io.TokenFile), which x is "
                f"not: leave {'it' if len(named) == 1 else 'them'} out."
            )
        return sources.from_inputs(x, y, sample_weight, **options)
    threads = READ_THREADS if threads is None else threads
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"read_threads must be a positive int, got {threads!r}.")

    def convert(role, data):
        if not is_random_access(data):
            return None
        return from_source(data, role, lengths, threads)

    require_sequence = options.pop("require_sequence", True)
    data = sources.from_inputs(
        x, y, sample_weight, convert=convert, require_sequence=False, **options
    )
    if isinstance(lengths, dict):
        read = [c.name for c in data.components if c.reads_by_index and c.is_sequence]
        unknown = sorted(set(lengths) - set(read))
        if unknown:
            raise ValueError(
                f"lengths names the components {unknown}, but the sources' "
                f"elements have no such array (their sequences: {read})."
            )
    if require_sequence and not data.sequence_components:
        raise ValueError(sources.NO_SEQUENCE)
    return data
