"""Per-epoch orders: what a build fixes, and what `(seed, epoch)` reshuffles.

The batches of an in-memory builder's epoch are described by an
`EpochOrder`, computed once at `build` from the lengths:

- the *units* to batch (element indices; for windows, every window's
  elements one after the other), each with a *group* key (its bucket, its
  length for sorted batches, or 0);
- every batch as a `(start, size)` span of the units once they are sorted by
  group. Group sizes do not change from epoch to epoch, so neither do the
  spans: bucket membership, per-bucket batch splits and windows are fixed.

What changes per epoch is only two orderings, drawn from a counter-based
hash of `(seed, epoch, index)` (`hash31`: SplitMix64's finaliser on uint64,
which NumPy and TensorFlow ops compute bit for bit alike):

- units are sorted by `(group, hash)`, a stable sort, so units of a group
  come in a fresh random order every epoch (`shuffle_units`);
- batches are taken in the stable order of their hashes (`shuffle_batches`).

`EpochOrder.batches` computes an epoch in NumPy (the plan that statistics
describe); `kerasbatch.engines.tf_data.orders` computes the very same batches with
TensorFlow ops inside the `tf.data` graph, so a built dataset calls no
Python: it can be serialised, checkpointed mid-epoch and run where the
builder is not. This module imports no TensorFlow.
"""

import dataclasses

import numpy as np

from kerasbatch.planning import remainders, sorting

#: Streams of the hash, so that unit, batch and slot orders are independent.
UNIT_STREAM = 0
BATCH_STREAM = 1
SLOT_STREAM = 2
#: A stream's emission k draws its rows' order from stream
#: `EMISSION_STREAM + 2 k` and its batches' order from the next one.
EMISSION_STREAM = 2**32


def emission_stream(emission, draw):
    """The hash stream of `draw` (0: rows, 1: batches) of a stream's
    emission `emission` (an int or an int64 tensor)."""
    return EMISSION_STREAM + 2 * emission + draw


#: SplitMix64's multipliers (`mix64`).
MIX1 = np.uint64(0xBF58476D1CE4E5B9)
MIX2 = np.uint64(0x94D049BB133111EB)
#: Groups must stay below this, so that `group * 2**31 + hash31` fits int64.
MAX_GROUP = 2**31


def mix64(z):
    """SplitMix64's finaliser: a bijective scramble of uint64 values.

    Args:
        z: uint64 array.

    Returns:
        uint64 array of the same shape.

    Example:

    >>> import numpy as np
    >>> int(mix64(np.array([1], np.uint64))[0])
    6238072747940578789
    """
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * MIX1
        z = (z ^ (z >> np.uint64(27))) * MIX2
    return z ^ (z >> np.uint64(31))


def hash31(seed, epoch, stream, count):
    """`count` pseudo-random int64 values in `[0, 2**31)` for `(seed, epoch)`.

    Value i is a hash of `(seed, epoch, stream, i)`; `kerasbatch.engines.tf_data.orders`
    computes the same values with TensorFlow ops.

    Example:

    >>> hash31(0, 0, 0, 3).tolist() == hash31(0, 0, 0, 4)[:3].tolist()
    True
    """
    out = np.empty(count, np.int64)
    for start in range(0, count, CHUNK):  # bounded temporaries
        out[start : start + CHUNK] = hash31_at(
            seed, epoch, stream, np.arange(start, min(start + CHUNK, count))
        )
    return out


def hash31_at(seed, epoch, stream, positions):
    """The values of `hash31` at non-negative int `positions`.

    Example:

    >>> hash31_at(0, 0, 0, [2, 0]).tolist() == hash31(0, 0, 0, 3)[[2, 0]].tolist()
    True
    """
    key = mix64(np.array([seed], np.uint64)) ^ np.uint64(epoch)
    key = mix64(key) ^ np.uint64(stream)
    key = mix64(key)
    values = mix64(key ^ np.asarray(positions).astype(np.uint64))
    return (values >> np.uint64(33)).astype(np.int64)


#: Elements per slice of the large per-element computations of a plan:
#: their temporaries stay this small, whatever the number of elements.
CHUNK = 1 << 20


def chunk_splits(splits, size=CHUNK):
    """Positions into `splits` (offsets of batches into elements) that cut
    the batches into runs of about `size` elements each, whole batches."""
    if len(splits) < 2:
        return np.zeros(1, np.int64)
    cuts = np.searchsorted(splits, np.arange(size, int(splits[-1]), size), "right") - 1
    cuts = np.unique(np.concatenate([[0], cuts, [len(splits) - 1]]))
    return cuts


@dataclasses.dataclass(frozen=True)
class EpochOrder:
    """The fixed part of every epoch's batches, and how epochs reshuffle it.

    Attributes:
        units: element indices to batch (int32 where they fit, to halve the
            memory of large datasets; results are int64).
        groups: group key of every unit, in `[0, MAX_GROUP)` (int32 where
            the keys fit).
        starts: int64 start of every batch in the units sorted by group.
        sizes: int64 size of every batch (positive).
        capacities: int64 rows every batch is fed (at least its size; more
            when a remainder is padded to its group's batch size with
            filler rows).
        shuffle_units: order the units of a group by hash every epoch (else
            keep their order in `units`).
        shuffle_batches: take the batches in hash order every epoch (else in
            the order of `starts`).

    Example:

    >>> import numpy as np
    >>> order = EpochOrder.of_groups(
    ...     np.arange(5), np.array([1, 0, 1, 0, 1]), [2, 2], "keep",
    ...     shuffle_units=False, shuffle_batches=False)
    >>> indices, splits = order.batches(seed=0, epoch=0)
    >>> [batch.tolist() for batch in np.split(indices, splits[1:-1])]
    [[1, 3], [0, 2], [4]]
    """

    units: np.ndarray
    groups: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray
    capacities: np.ndarray
    shuffle_units: bool
    shuffle_batches: bool

    def __post_init__(self):
        object.__setattr__(self, "units", compact(self.units))
        object.__setattr__(self, "groups", compact(self.groups))
        if len(self.groups) and (
            self.groups.min() < 0 or self.groups.max() >= MAX_GROUP
        ):
            raise ValueError(f"Group keys must lie in [0, {MAX_GROUP}).")

    @classmethod
    def of_groups(
        cls,
        units,
        groups,
        batch_sizes,
        remainder,
        *,
        shuffle_units,
        shuffle_batches,
    ):
        """Batches of `batch_sizes[g]` units of every group g, in group order.

        Args:
            units: int64 element indices.
            groups: int64 group of every unit, in `[0, len(batch_sizes))`
                unless `batch_sizes` has one entry (then any group keys:
                one batch size for all, batches cut across groups in sorted
                order, as sorted batching does).
            batch_sizes: batch size of every group, or one for all.
            remainder: each group's last, smaller batch: `"keep"`, `"drop"`
                (leave it out), `"pad"` (feed it with the group's batch
                size, the rows past its units filler) or `"even"` (cut the
                group into its number of batches of equal capacity, at most
                the batch size: fewer than one filler row per batch).
        """
        units = np.asarray(units)
        groups = np.asarray(groups)
        if len(batch_sizes) == 1:
            counts, sizes_of = [len(units)], batch_sizes
        else:
            counts, sizes_of = (
                np.bincount(groups, minlength=len(batch_sizes)),
                batch_sizes,
            )
        starts, sizes, capacities, offset = [], [], [], 0
        for count, size in zip(counts, sizes_of, strict=True):
            group_sizes, group_capacities = remainders.group_batches(
                int(count), int(size), remainder
            )
            ends = np.cumsum(group_sizes, dtype=np.int64)
            starts.extend(offset + ends - group_sizes)
            sizes.extend(group_sizes)
            capacities.extend(group_capacities)
            offset += int(count)
        return cls(
            units=units,
            groups=groups,
            starts=np.asarray(starts, np.int64),
            sizes=np.asarray(sizes, np.int64),
            capacities=np.asarray(capacities, np.int64),
            shuffle_units=bool(shuffle_units),
            shuffle_batches=bool(shuffle_batches),
        )

    @classmethod
    def of_spans(cls, units, splits, *, shuffle_batches, capacity=None):
        """Fixed batches `units[splits[b]:splits[b + 1]]` (e.g. windows),
        each fed with `capacity` rows (default: its size)."""
        units = np.asarray(units, np.int64)
        splits = np.asarray(splits, np.int64)
        sizes = np.diff(splits)
        return cls(
            units=units,
            groups=np.zeros(len(units), np.int64),
            starts=splits[:-1],
            sizes=sizes,
            capacities=sizes if capacity is None else np.full_like(sizes, capacity),
            shuffle_units=False,
            shuffle_batches=bool(shuffle_batches),
        )

    @property
    def num_batches(self):
        return len(self.starts)

    def sort_keys(self, seed, epoch):
        """int64 keys whose stable argsort orders the units of `epoch`."""
        if not self.shuffle_units:
            return self.groups
        keys = hash31(seed, epoch, UNIT_STREAM, len(self.units))
        for start in range(0, len(keys), CHUNK):
            group = self.groups[start : start + CHUNK].astype(np.int64)
            keys[start : start + CHUNK] += group * MAX_GROUP
        return keys

    def ordered_units(self, seed, epoch):
        """The units of `epoch`, sorted by group (and hash)."""
        count = len(self.units)
        index_bits = max(count - 1, 1).bit_length()
        group_bits = int(self.groups.max(initial=0)).bit_length()
        if self.shuffle_units and group_bits + 31 + index_bits <= 63:
            # The stable argsort of `sort_keys`, in place and in half the
            # memory: `(group, hash, position)` packed in one int64, sorted.
            keys = hash31(seed, epoch, UNIT_STREAM, count)
            for start in range(0, count, CHUNK):
                group = self.groups[start : start + CHUNK].astype(np.int64)
                keys[start : start + CHUNK] <<= index_bits
                keys[start : start + CHUNK] |= group << (31 + index_bits)
                keys[start : start + CHUNK] |= np.arange(start, start + len(group))
            keys.sort()
            ordered = np.empty(count, self.units.dtype)
            mask = np.int64((1 << index_bits) - 1)
            for start in range(0, count, CHUNK):
                ordered[start : start + CHUNK] = self.units[
                    keys[start : start + CHUNK] & mask
                ]
            return ordered
        return self.units[np.argsort(self.sort_keys(seed, epoch), kind="stable")]

    def batch_order(self, seed, epoch):
        """The order in which `epoch` takes the batches."""
        if not self.shuffle_batches:
            return np.arange(self.num_batches, dtype=np.int64)
        keys = hash31(seed, epoch, BATCH_STREAM, self.num_batches)
        return np.argsort(keys, kind="stable")

    def batch_capacities(self, seed, epoch):
        """The rows every batch of `epoch` is fed, in the epoch's order."""
        return self.capacities[self.batch_order(seed, epoch)]

    def batches(self, seed, epoch):
        """`(indices, batch_splits)` of `epoch`: element indices batch after
        batch, and the int64 offsets of the batches into them."""
        ordered = self.ordered_units(seed, epoch)
        taken = self.batch_order(seed, epoch)
        sizes = self.sizes[taken]
        splits = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        return gather_spans(ordered, self.starts[taken], splits), splits


def gather_spans(values, starts, splits):
    """`values[starts[b]:starts[b] + size b]` for every batch b, one after
    the other (`splits`: the batches' offsets into the result), in the
    dtype of `values` (int32 indices stay int32), made slice by slice so
    that its temporaries stay small."""
    out = np.empty(int(splits[-1]), values.dtype)
    cuts = chunk_splits(splits)
    for first, end in zip(cuts[:-1], cuts[1:], strict=True):
        local = splits[first : end + 1]
        offsets = np.repeat(starts[first:end] - local[:-1], np.diff(local))
        out[local[0] : local[-1]] = values[np.arange(local[0], local[-1]) + offsets]
    return out


#: The alignment at which TensorFlow reads a numpy buffer in place
#: (`IsAligned`): `kerasbatch.engines.tf_data.tensors` then hands it over
#: without a copy.
ALIGNMENT = 64


def aligned_empty(shape, dtype):
    """`np.empty(shape, dtype)` whose buffer starts on a 64-byte boundary,
    so that TensorFlow can read it in place."""
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(count * dtype.itemsize + ALIGNMENT, np.uint8)
    offset = -raw.ctypes.data % ALIGNMENT
    return raw[offset : offset + count * dtype.itemsize].view(dtype).reshape(shape)


def compact(values):
    """Non-negative int `values` as int32 when they fit (else int64).

    A converted array starts on a 64-byte boundary (`aligned_empty`):
    TensorFlow can read it in place (the `tf.data` engine's tensors of an
    order share its memory).
    """
    values = np.asarray(values)
    if values.dtype == np.int32:
        return values
    if len(values) and values.max() >= 2**31:
        return values.astype(np.int64, copy=False)
    out = aligned_empty(values.shape, np.int32)
    out[...] = values
    return out


@dataclasses.dataclass(frozen=True)
class PackedOrder:
    """Packed rows fixed at build, and how epochs reshuffle them.

    Which rows a packing forms (how many, and the lengths in each) depends
    only on the multiset of lengths (`kerasbatch.planning.packing.pack`), so the
    deterministic packing is computed once; every epoch then, by hash:

    - elements of equal length trade places (the k-th slot of length L takes
      the k-th element of length L in the epoch's `(length, hash)` order);
    - the sequences of a row come in a fresh order;
    - the rows come in a fresh order, and consecutive rows form the batches
      (`rows`, an `EpochOrder` over row indices).

    Attributes:
        candidates: element indices packed (int32 where they fit, as the
            other per-element arrays).
        lengths: (cut) length of every candidate.
        slot_ranks: for every slot of the deterministic packing (row
            after row), the rank of its element among the candidates sorted
            by `(length, index)`.
        row_splits: int64 offsets of the rows into the slots.
        rows: the `EpochOrder` of the rows' batches.
        shuffle: reshuffle every epoch.
    """

    candidates: np.ndarray
    lengths: np.ndarray
    slot_ranks: np.ndarray
    row_splits: np.ndarray
    rows: EpochOrder
    shuffle: bool

    @classmethod
    def of_packing(cls, candidates, lengths, packing, batch_size, remainder, shuffle):
        """From a deterministic `kerasbatch.planning.packing.Packing` of `lengths`."""
        # int32 where they fit (lengths are at most a row): half the memory.
        candidates = compact(candidates)
        lengths = compact(lengths)
        # Every candidate's rank by (length, index): a counting sort.
        by_length = sorting.stable_order(lengths, _length_bound(lengths))
        rank = np.empty(len(lengths), by_length.dtype)
        for start in range(0, len(lengths), CHUNK):
            part = by_length[start : start + CHUNK]
            rank[part] = np.arange(start, start + len(part))
        del by_length
        rows = EpochOrder.of_groups(
            np.arange(packing.num_rows),
            np.zeros(packing.num_rows, np.int64),
            [batch_size],
            remainder,
            shuffle_units=shuffle,
            shuffle_batches=False,
        )
        return cls(
            candidates=candidates,
            lengths=lengths,
            slot_ranks=rank[packing.order],
            row_splits=np.asarray(packing.row_splits, np.int64),
            rows=rows,
            shuffle=bool(shuffle),
        )

    @property
    def row_of_slot(self):
        return np.repeat(np.arange(len(self.row_splits) - 1), np.diff(self.row_splits))

    def length_keys(self):
        """int64 sort keys of the candidates' lengths (`length * MAX_GROUP`)."""
        return self.lengths.astype(np.int64) * MAX_GROUP

    def slot_elements(self, seed, epoch):
        """The element of every slot in `epoch`, row after row (rows in
        their fixed order, each row's sequences in the epoch's order).

        In `epoch`'s order, candidates are sorted by `(length, hash)` and
        the sequences of a row by hash: these are the stable argsorts of
        `length * MAX_GROUP + hash` and of `row * MAX_GROUP + hash`
        (`kerasbatch.engines.tf_data.orders` computes them so), made here
        segment by segment in bounded memory.
        """
        # Candidate positions by (length, position).
        bound = _length_bound(self.lengths)
        by_length = sorting.stable_order(self.lengths, bound)
        if self.shuffle:
            length_splits = np.cumsum(sorting.key_counts(self.lengths, bound))
            ranked = by_length
            by_length = sorting.sort_segments(
                ranked,
                np.append(0, length_splits),
                lambda start, end: hash31_at(
                    seed, epoch, UNIT_STREAM, ranked[start:end]
                ),
            )
            del ranked
        by_length = by_length.astype(self.candidates.dtype, copy=False)
        for start in range(0, len(by_length), CHUNK):  # positions to elements
            part = by_length[start : start + CHUNK]
            part[...] = self.candidates[part]
        elements = by_length[self.slot_ranks]
        del by_length
        if not self.shuffle:
            return elements
        return sorting.sort_segments(
            elements,
            self.row_splits,
            lambda start, end: hash31_at(
                seed, epoch, SLOT_STREAM, np.arange(start, end)
            ),
        )

    def batches(self, seed, epoch):
        """`(indices, row_splits, batch_splits)` of `epoch`: element indices
        row after row, the offsets of the rows into them, and the offsets of
        the batches into the rows."""
        elements = self.slot_elements(seed, epoch)
        rows, batch_splits = self.rows.batches(seed, epoch)
        counts = np.diff(self.row_splits)[rows]
        row_splits = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        indices = gather_spans(elements, self.row_splits[rows], row_splits)
        return indices, row_splits, batch_splits


def _length_bound(lengths):
    """A bound above every one of `lengths` (non-negative ints)."""
    return int(lengths.max(initial=0)) + 1
