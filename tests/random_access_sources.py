"""Sources for the random-access tests: in-memory inputs put behind
`__len__` and `__getitem__`, as a Grain data source or a Hugging Face
`Dataset` gives them, counting what is read."""

import threading

import numpy as np

ROLES = ("x", "y", "sample_weight")


class ListSource:
    """A random-access source of `elements`, counting the reads of each
    element (`reads`), optionally failing on the indices of `broken`."""

    def __init__(self, elements, broken=()):
        self.elements = elements
        self.broken = set(broken)
        self.reads = np.zeros(len(elements), np.int64)
        self._lock = threading.Lock()

    def __len__(self):
        return len(self.elements)

    def __getitem__(self, index):
        if index in self.broken:
            raise OSError(f"bad block at element {index}")
        with self._lock:
            self.reads[index] += 1
        return self.elements[index]


def element_of(value, index):
    """Element `index` of an in-memory input (a list of sequences, an array
    of per-example values, or a dict of those)."""
    if isinstance(value, dict):
        return {key: element_of(part, index) for key, part in value.items()}
    return value[index]


def sequence_lengths(role, value):
    """`{component name: lengths}` of the sequence components of a role."""
    parts = value.items() if isinstance(value, dict) else [(None, value)]
    lengths = {}
    for key, part in parts:
        if isinstance(part, list):
            name = (
                role
                if key is None
                else (f"sample_weight[{key}]" if role == "sample_weight" else key)
            )
            lengths[name] = np.array([len(s) for s in part], np.int64)
    return lengths


def convertible(value):
    """Whether an input is lists and arrays (what a source can give)."""
    if isinstance(value, dict):
        return all(convertible(part) for part in value.values())
    if isinstance(value, list):
        return all(isinstance(part, np.ndarray) for part in value)
    return isinstance(value, np.ndarray) and value.dtype.kind not in "OSU"


def as_source(args, kwargs):
    """`(source, lengths)` holding the inputs `args` (x, y,
    sample_weight) as `(x, y[, sample_weight])` tuple elements, or None if
    they are not all lists and arrays."""
    given = dict(zip(ROLES, args, strict=False))
    given.update({k: v for k, v in kwargs.items() if k in ROLES})
    if not all(convertible(v) for v in given.values()):
        return None
    roles = [r for r in ROLES if given.get(r) is not None]
    count = len(
        next(iter(given["x"].values())) if isinstance(given["x"], dict) else given["x"]
    )
    elements = [
        tuple(element_of(given[r], i) for r in roles)
        if len(roles) > 1
        else element_of(given["x"], i)
        for i in range(count)
    ]
    lengths = {}
    for role in roles:
        lengths.update(sequence_lengths(role, given[role]))
    return ListSource(elements), lengths
