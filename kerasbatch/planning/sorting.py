"""Sorts of per-element arrays in bounded memory.

A plan of tens of millions of elements cannot afford, for every sort, the
int64 keys and the int64 result of `np.argsort(keys, kind="stable")`: at 50
million elements those are 800 MB. The sorts here give the very order of the
stable argsorts they stand for, made slice by slice, so that their
temporaries are those of one slice. Their results are in the index dtype
(int32 where it fits). Within a slice, keys and positions are packed into one
int64 and sorted with NumPy's default sort, which is several times faster
than a stable sort (the positions make every key distinct, so the order is
the stable one).
"""

import numpy as np

#: Elements per slice: temporaries of a few MB, whatever the array.
SLICE = 1 << 20
#: A run of short segments sorted together holds fewer than `2 * RUN`
#: elements (and so fewer segments), so that `(segment, hash, position)`
#: fits in 63 bits.
RUN = 1 << 15
#: Bits of a hash (`kerasbatch.planning.orders.hash31`).
HASH_BITS = 31


def index_dtype(count):
    """int32 for indices below `count` where they fit, else int64."""
    return np.int32 if count <= 2**31 else np.int64


def key_counts(keys, num_keys):
    """int64 occurrences of every key of int `keys` in `[0, num_keys)`
    (`np.bincount`, without an int64 copy of the keys).

    Example:

    >>> key_counts(np.array([2, 0, 2], np.int32), 4).tolist()
    [1, 0, 2, 0]
    """
    counts = np.zeros(num_keys, np.int64)
    for start in range(0, len(keys), SLICE):
        found = np.bincount(keys[start : start + SLICE])
        counts[: len(found)] += found
    return counts


def stable_order(keys, num_keys):
    """The stable argsort of int `keys` in `[0, num_keys)`, by counting.

    Args:
        keys: 1-D int array.
        num_keys: a bound above every key.

    Returns:
        The positions of `keys` in the order of `np.argsort(keys,
        kind="stable")`, int32 where they fit.

    Example:

    >>> stable_order(np.array([2, 0, 2, 1]), 3).tolist()
    [1, 3, 0, 2]
    """
    count = len(keys)
    out = np.empty(count, index_dtype(count))
    # Where the next key of every value goes.
    next_position = np.cumsum(key_counts(keys, num_keys))
    next_position[1:] = next_position[:-1].copy()
    next_position[:1] = 0
    position_bits = (SLICE - 1).bit_length()
    for start in range(0, count, SLICE):
        part = keys[start : start + SLICE].astype(np.int64)
        packed = part << position_bits
        packed |= np.arange(len(part))
        packed.sort()
        sorted_keys = packed >> position_bits
        firsts = np.flatnonzero(np.diff(sorted_keys, prepend=-1))
        run_lengths = np.diff(np.append(firsts, len(part)))
        rank = np.arange(len(part)) - np.repeat(firsts, run_lengths)
        out[next_position[sorted_keys] + rank] = (packed & (SLICE - 1)) + start
        next_position[sorted_keys[firsts]] += run_lengths
    return out


def sort_segments(values, splits, hashes_of):
    """`values` with every segment sorted by the hashes of its positions.

    Segment i is `values[splits[i]:splits[i + 1]]`; within it, the values
    come in the order of their positions' hashes, ties by position: the
    order of the stable argsort of `segment * 2**31 + hash` (what the
    per-epoch shuffles of packed rows are).

    Args:
        values: 1-D array.
        splits: non-decreasing int64 offsets of the segments into `values`,
            from 0 to `len(values)`.
        hashes_of: `hashes_of(start, end)`: the int64 hashes, in
            `[0, 2**31)`, of positions `start` to `end - 1`.

    Returns:
        A new array like `values`.

    Example:

    >>> hashes = np.array([5, 1, 3, 0, 7, 7])
    >>> sort_segments(np.arange(6) * 10, np.array([0, 3, 6]),
    ...               lambda start, end: hashes[start:end]).tolist()
    [10, 20, 0, 30, 40, 50]
    """
    out = np.empty_like(values)
    splits = np.asarray(splits, np.int64)
    splits = splits[np.append(True, splits[1:] != splits[:-1])]  # none empty
    for first, last in _runs(splits):
        start, end = int(splits[first]), int(splits[last])
        position_bits = max(end - start - 1, 1).bit_length()
        segment_shift = HASH_BITS + position_bits
        segments = np.repeat(
            np.arange(last - first, dtype=np.int64), np.diff(splits[first : last + 1])
        )
        keys = segments << segment_shift
        keys |= hashes_of(start, end) << position_bits
        keys |= np.arange(end - start)
        keys.sort()
        keys &= (1 << position_bits) - 1
        out[start:end] = values[start:end][keys]
    return out


def _runs(splits):
    """`(first, last)` positions into `splits` (strictly increasing) that
    cut its segments into runs sorted together: one segment longer than
    `RUN`, or shorter segments of fewer than `2 * RUN` elements in all."""
    total = int(splits[-1]) if len(splits) else 0
    cuts = np.searchsorted(splits, np.arange(RUN, total, RUN), "right") - 1
    long = np.flatnonzero(np.diff(splits) > RUN)
    cuts = np.unique(np.concatenate([[0], cuts, long, long + 1, [len(splits) - 1]]))
    return zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True)
