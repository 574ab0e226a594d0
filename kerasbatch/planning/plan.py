"""One epoch's batches, planned in numpy before the epoch runs.

A plan says which elements form each batch, where each element is cut
(truncation) and to which length each sequence component is padded. Because
it is computed from lengths alone, its padding statistics are exact and known
before any tensor is built.
"""

import dataclasses
import functools

import numpy as np

from kerasbatch.planning import orders

NO_LIMIT = np.iinfo(np.int64).max


@dataclasses.dataclass(frozen=True)
class PlanStatistics:
    """Padding statistics of one planned epoch.

    Attributes:
        num_batches: batches in the epoch.
        num_elements: elements fed (after drops).
        padding_efficiency: real positions / padded positions over all
            sequence components and batches (1.0 means no padding).
        component_efficiency: the same per sequence component name.
        distinct_shapes: different padded shapes `(batch size, padded length
            of every sequence component)` the epoch feeds the model.
        dropped: elements left out (the `"drop"` overflow policy and
            `drop_remainder`).
        truncated: elements cut short (truncation buckets, the `"truncate"`
            overflow policy).
        truncated_positions: positions removed by truncation, over all
            sequence components.
    """

    num_batches: int
    num_elements: int
    padding_efficiency: float
    component_efficiency: dict
    distinct_shapes: int
    dropped: int
    truncated: int
    truncated_positions: int

    def __str__(self):
        components = ", ".join(
            f"{name}={value:.3f}" for name, value in self.component_efficiency.items()
        )
        return (
            f"{self.num_batches} batches of {self.num_elements} elements: padding "
            f"efficiency {self.padding_efficiency:.3f} ({components}), "
            f"{self.distinct_shapes} distinct shapes, {self.dropped} dropped, "
            f"{self.truncated} truncated ({self.truncated_positions} positions)"
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class EpochCounts:
    """What every epoch plan (`BatchPlan`, packing's `PackedPlan`) holds
    besides its batches: their components, what was left out or cut, and
    the rows each batch is fed.

    Attributes:
        component_names: names of the sequence components, in column order.
        dropped: elements left out of the epoch.
        truncated: elements cut short.
        truncated_positions: positions removed by cutting, over all
            sequence components.
        batch_multiple: every batch is fed with a multiple of this many rows;
            the rows beyond its own are filler (copies of its first row,
            weight 0), counted as padding.
        capacities: int64 rows every batch is fed before `batch_multiple`
            (a remainder padded to its full size), or None: its own rows
            (`rows_per_batch`).
    """

    component_names: tuple
    dropped: int
    truncated: int
    truncated_positions: int
    batch_multiple: int = 1
    capacities: np.ndarray | None = None

    @property
    def num_batches(self):
        """The number of batches in the epoch."""
        return len(self.batch_splits) - 1

    @property
    def batch_rows(self):
        """Rows fed per batch: its own rows and any filler rows."""
        rows = self.rows_per_batch if self.capacities is None else self.capacities
        return round_up(rows, self.batch_multiple)


@dataclasses.dataclass(frozen=True)
class BatchPlan(EpochCounts):
    """The batches of one epoch.

    Attributes:
        epoch: the epoch this plan is for.
        indices: element indices (int32 where they fit), batch after batch.
        batch_splits: int64 offsets into `indices`, shape `(num_batches + 1,)`.
        limits: int64 cut length per batch (`NO_LIMIT` when nothing is cut).
        padded_lengths: int64 shape `(num_batches, num_sequence_components)`.
        real_positions: int64 shape `(num_batches, num_sequence_components)`:
            positions that hold data after cutting.

    And the counts of every epoch plan (`EpochCounts`), keyword-only.
    """

    epoch: int
    indices: np.ndarray
    batch_splits: np.ndarray
    limits: np.ndarray
    padded_lengths: np.ndarray
    real_positions: np.ndarray

    @property
    def batch_sizes(self):
        """Elements per batch."""
        return np.diff(self.batch_splits)

    @property
    def rows_per_batch(self):
        """Rows of elements per batch (before any filler rows)."""
        return self.batch_sizes

    def batches(self):
        """The element indices of every batch, as a list of int64 arrays."""
        return np.split(self.indices, self.batch_splits[1:-1])

    def padded_positions(self):
        """Rows × padded length per batch and component (filler rows are
        padding)."""
        return self.batch_rows[:, None] * self.padded_lengths

    def cumulative_efficiency(self):
        """Padding efficiency of batches `0..b` for every batch `b`."""
        real = np.cumsum(self.real_positions.sum(axis=1))
        padded = np.cumsum(self.padded_positions().sum(axis=1))
        return real / np.maximum(padded, 1)

    @functools.cached_property
    def _cumulative_positions(self):
        real = np.cumsum(self.real_positions.sum(axis=1))
        return real, np.cumsum(self.padded_positions().sum(axis=1))

    def running_positions(self, num_batches):
        """`(real, padded)` int positions over every sequence component of
        the epoch's first `num_batches` batches."""
        count = min(int(num_batches), self.num_batches)
        if count <= 0:
            return 0, 0
        real, padded = self._cumulative_positions
        return int(real[count - 1]), int(padded[count - 1])

    def shapes(self):
        """The distinct `(rows, padded length of every sequence component)`
        the epoch feeds, sorted: int64 `(shapes, 1 + components)`."""
        table = np.column_stack([self.batch_rows, self.padded_lengths])
        return np.unique(table, axis=0) if len(table) else table

    def statistics(self):
        """The epoch's `PlanStatistics`: padding efficiency, shapes, dropped and truncated counts."""
        real = self.real_positions.sum(axis=0)
        padded = self.padded_positions().sum(axis=0)
        return PlanStatistics(
            num_batches=self.num_batches,
            num_elements=len(self.indices),
            padding_efficiency=_ratio(real.sum(), padded.sum()),
            component_efficiency={
                name: _ratio(r, p)
                for name, r, p in zip(self.component_names, real, padded, strict=True)
            },
            distinct_shapes=len(self.shapes()),
            dropped=self.dropped,
            truncated=self.truncated,
            truncated_positions=self.truncated_positions,
        )


def make_plan(
    epoch,
    indices,
    batch_splits,
    limits,
    bucket_bounds,
    component_lengths,
    paddings,
    dropped,
    batch_multiple=1,
    capacities=None,
    pad_to_multiple=1,
):
    """Builds a `BatchPlan` from batches and per-batch cut limits.

    Args:
        epoch: the epoch number.
        indices: element indices (int32 where they fit), batch after batch.
        batch_splits: int64 offsets of the batches into `indices`.
        limits: int64 cut length per batch (`NO_LIMIT` for none).
        bucket_bounds: int64 padded length per batch for `"bucket"` padding,
            or None when the builder has no buckets.
        component_lengths: `{name: int64 lengths of all elements}` for every
            sequence component.
        paddings: `{name: Padding}` for every sequence component.
        dropped: elements left out of the epoch.
        batch_multiple: rows fed per batch are a multiple of this.
        capacities: int64 rows fed per batch before `batch_multiple`, or
            None (the batch sizes).
        pad_to_multiple: batch and bucket padded lengths are rounded up to
            a multiple of this (fixed lengths are kept).
    """
    names = tuple(component_lengths)
    padded = np.zeros((len(limits), len(names)), dtype=np.int64)
    real = np.zeros_like(padded)
    truncated = truncated_positions = 0
    # Slices of whole batches: the per-element temporaries stay small.
    cuts = orders.chunk_splits(batch_splits)
    for first, end in zip(cuts[:-1], cuts[1:], strict=True):
        splits = batch_splits[first : end + 1]
        elements = indices[splits[0] : splits[-1]]
        local = splits - splits[0]
        element_limits = np.repeat(limits[first:end], np.diff(local))
        was_cut = np.zeros(len(elements), dtype=bool)
        for column, name in enumerate(names):
            lengths = component_lengths[name][elements]
            kept = np.minimum(lengths, element_limits)
            was_cut |= kept < lengths
            truncated_positions += int((lengths - kept).sum())
            real[first:end, column] = _segment_sum(kept, local)
            padded[first:end, column] = padded_length(
                paddings[name],
                _segment_max(kept, local),
                None if bucket_bounds is None else bucket_bounds[first:end],
                pad_to_multiple,
            )
        truncated += int(was_cut.sum())
    return BatchPlan(
        epoch=int(epoch),
        indices=indices,
        batch_splits=batch_splits,
        limits=limits,
        padded_lengths=padded,
        real_positions=real,
        component_names=names,
        dropped=int(dropped),
        truncated=truncated,
        truncated_positions=truncated_positions,
        batch_multiple=int(batch_multiple),
        capacities=capacities,
    )


def padded_length(padding, longest, bound, multiple):
    """The length a component of a batch is padded to: the one rule of every
    planner and engine (numpy plans, `tf.data` graphs, streams).

    A fixed length (`padding.fixed_length`) as it is; else the bucket's
    padding `bound` (`padding.length == "bucket"`) or the batch's `longest`
    kept element (`"batch"`), rounded up to a multiple of `multiple`
    (`pad_to_multiple`).

    Args:
        padding: the component's `kerasbatch.Padding`, or its length
            (`padding_length`).
        longest: the longest kept element of the batch (an int, or an array
            or tensor over batches); None where `padding` does not use it.
        bound: the bucket's padding bound, likewise.
        multiple: `pad_to_multiple`.

    Returns:
        An int for a fixed length (it broadcasts), else of the kind of
        `longest` or `bound`.

    >>> from kerasbatch.data.padding import Padding
    >>> padded_length(Padding(length="batch"), 13, None, 8)
    16
    >>> padded_length(Padding(length=12), 13, None, 8)
    12
    >>> padded_length("bucket", None, 13, 8)
    16
    """
    length = padding_length(padding)
    if not isinstance(length, str):
        return length
    return round_up(bound if length == "bucket" else longest, multiple)


def padding_length(padding):
    """A `kerasbatch.Padding`'s length (`"batch"`, `"bucket"` or a fixed
    int), or `padding` itself where the length is given in its place."""
    return getattr(padding, "length", padding)


def round_up(sizes, multiple):
    """`sizes` (an int, int array or int tensor) rounded up to multiples of
    `multiple`."""
    return -(-sizes // multiple) * multiple


def ragged_range(lengths):
    """`concatenate([arange(n) for n in lengths])`, without a Python loop."""
    lengths = np.asarray(lengths, np.int64)
    total = int(lengths.sum())
    ends = np.cumsum(lengths)
    return np.arange(total, dtype=np.int64) - np.repeat(ends - lengths, lengths)


def _segment_sum(values, splits):
    """Sum of every batch (batches are never empty)."""
    if len(splits) == 1:
        return np.zeros(0, dtype=np.int64)
    return np.add.reduceat(values, splits[:-1])


def _segment_max(values, splits):
    """Maximum of every batch (batches are never empty)."""
    if len(splits) == 1:
        return np.zeros(0, dtype=np.int64)
    return np.maximum.reduceat(values, splits[:-1])


def _ratio(numerator, denominator):
    return float(numerator) / float(denominator) if denominator else 1.0
