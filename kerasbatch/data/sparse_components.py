"""Components whose elements are sparse tensors (`kerasbatch.WindowBuilder`)."""

import dataclasses

import numpy as np


@dataclasses.dataclass(eq=False)
class SparseComponent:
    """A component whose elements are `tf.SparseTensor`s of one rank.

    Its length (along which windows pad and statistics count) is the first
    dimension; the other dimensions may vary too.

    Attributes:
        name, role, key: as `kerasbatch.data.sources.Component`.
        indices: int64 `(entries, rank)`: every element's entries in turn,
            each in row-major order.
        values: `(entries,)` the entries' values.
        entry_splits: int64 `(num_elements + 1,)` offsets into the entries.
        shapes: int64 `(num_elements, rank)`, each element's `dense_shape`.
    """

    #: Sparse components are held in memory.
    reads_by_index = False

    name: str
    role: str
    key: str | None
    indices: np.ndarray
    values: np.ndarray
    entry_splits: np.ndarray
    shapes: np.ndarray
    is_sequence = True

    @property
    def lengths(self):
        return self.shapes[:, 0]

    @property
    def num_elements(self):
        return len(self.shapes)

    @property
    def trailing_shape(self):
        """The dimensions after the first: an int where all elements agree."""
        return tuple(
            int(column[0]) if (column == column[0]).all() else None
            for column in self.shapes[:, 1:].T
        )

    @property
    def where(self):
        return self.role if self.key is None else f"{self.role}[{self.key!r}]"
