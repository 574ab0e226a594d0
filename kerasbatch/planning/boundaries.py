"""Bucket boundaries for length-bucketed batching (pure numpy).

Boundaries follow `tf.data.experimental.bucket_by_sequence_length`: buckets are
half-open, and boundaries `[b_0, ..., b_{n-1}]` make the n + 1 buckets
`[0, b_0), [b_0, b_1), ..., [b_{n-1}, inf)`. Asking for `num_buckets` buckets
therefore returns at most `num_buckets - 1` boundaries.

Every strategy (`uniform`, `quantile`, `equal_tokens`, `optimal`) has the
signature `(lengths, num_buckets) -> list[int]` and returns boundaries that:

- are a strictly increasing list of Python ints, each at least 1;
- lie in `(min(lengths), max(lengths)]`, so the first and last buckets hold data;
- each split the data: no bucket is empty;
- number exactly `min(num_buckets, D) - 1`, with D the number of distinct
  lengths: `num_buckets - 1` whenever the data has at least `num_buckets`
  distinct lengths, and fewer only when it has fewer, in which case every
  distinct length gets a bucket of its own (`num_buckets == 1`, or a single
  distinct length, gives `[]`);
- are one more than the largest length in the bucket below them, so padding a
  bucket to `boundary - 1` (`pad_to_bucket_boundary=True`) pads exactly to its
  longest element.

`lengths` is a 1-D sequence of non-negative integers (integer-valued floats
are accepted). `padded_cost` scores boundaries; `validate_boundaries` checks
user-supplied ones. `STRATEGIES` and `get` look strategies up by name.

Example:

>>> lengths = [3, 4, 4, 5, 9, 10, 30, 31]
>>> optimal(lengths, 3)
[6, 11]
>>> padded_cost(lengths, [6, 11])
102
"""

import numbers

import numpy as np

__all__ = [
    "STRATEGIES",
    "equal_tokens",
    "get",
    "optimal",
    "padded_cost",
    "quantile",
    "uniform",
    "validate_boundaries",
]

_INT64_MAX = np.iinfo(np.int64).max


def uniform(lengths, num_buckets):
    """Boundaries evenly spaced between the smallest and largest length.

    The cut points `min + (max - min) * i / num_buckets` (rounded up) are moved
    to the canonical boundary that puts the same lengths in each bucket
    (one more than the largest length below the cut). Where cuts fall into
    the same gap between two consecutive distinct lengths (they would leave a
    bucket empty), they are moved apart to the nearest distinct lengths, so
    that every bucket holds data (`_spread`).

    Args:
        lengths: 1-D sequence of non-negative integer lengths.
        num_buckets: the number of buckets wanted, a positive int.

    Returns:
        `min(num_buckets, D) - 1` strictly increasing int boundaries, D the
        number of distinct lengths (see the module docstring).

    Example:

    >>> uniform([1, 2, 3, 4, 5, 6, 7, 8, 9], 4)
    [3, 5, 7]
    >>> uniform([1, 2, 3, 4, 50], 4)  # the cuts 14, 26 and 38 all mean "< 5"
    [3, 4, 5]
    """
    values, _ = _histogram(lengths)
    num_buckets = _check_num_buckets(num_buckets)
    if num_buckets >= len(values):
        return _every_length(values)
    low = int(values[0])
    span = int(values[-1]) - low  # at least len(values) - 1 >= num_buckets
    i = np.arange(1, num_buckets, dtype=np.int64)
    q, r = divmod(span, num_buckets)
    cuts = low + q * i + (r * i + num_buckets - 1) // num_buckets
    below = np.searchsorted(values, cuts, side="left") - 1
    return _boundaries_after(values, _spread(below, len(values)))


def quantile(lengths, num_buckets):
    """Boundaries at length quantiles: buckets hold about equally many elements.

    Each boundary splits the sorted lengths as close as the ties allow to the
    `i / num_buckets` quantile. Where ties put several quantiles at one split
    (they would leave a bucket empty), those boundaries are moved apart to the
    nearest distinct lengths, so that every bucket holds data (`_spread`).
    Takes and returns what `uniform` does.

    Example:

    >>> quantile([1, 1, 2, 2, 3, 3, 40, 50], 4)
    [2, 3, 4]
    """
    values, counts = _histogram(lengths)
    return _balanced(values, counts, _check_num_buckets(num_buckets))


def equal_tokens(lengths, num_buckets):
    """Boundaries so each bucket holds about the same total length (tokens).

    Like `quantile`, but every element weighs its length, so long elements get
    narrower buckets. Where several token quantiles fall at one split (a few
    long lengths hold most tokens), those boundaries are moved apart to the
    nearest distinct lengths, so that every bucket holds data (`_spread`).
    Zero lengths weigh nothing but still count as a distinct length. Takes
    and returns what `uniform` does.

    Example:

    >>> equal_tokens([1, 1, 2, 2, 3, 3, 40, 50], 4)
    [3, 4, 41]
    >>> equal_tokens([1, 2, 3, 4] * 5, 4)  # every length its own bucket
    [2, 3, 4]
    """
    values, counts = _histogram(lengths)
    return _balanced(values, counts * values, _check_num_buckets(num_buckets))


def optimal(lengths, num_buckets):
    """Boundaries that exactly minimise the padded length.

    Minimises `padded_cost`: the sum over buckets of (number of elements) x
    (largest length in the bucket). Runs a dynamic programme over the distinct
    lengths; the cost is Monge, so each of the `num_buckets` layers is solved by
    divide and conquer, vectorised with numpy one recursion level at a time:
    O(N + num_buckets * D log D) for N lengths with D distinct values.

    Splitting a bucket always lowers the cost, so the result has exactly
    `min(num_buckets, D) - 1` boundaries. A bucket whose longest element is `v`
    gets the upper boundary `v + 1`.

    Args:
        lengths: 1-D sequence of non-negative integer lengths.
        num_buckets: the number of buckets wanted, a positive int.

    Returns:
        `min(num_buckets, D) - 1` strictly increasing int boundaries (see the
        module docstring).

    Example:

    >>> optimal([1, 1, 2, 2, 3, 3, 40, 50], 3)
    [4, 41]
    >>> optimal([5, 5, 7], 10)  # only two distinct lengths
    [6]
    """
    values, counts = _histogram(lengths)
    num_buckets = min(_check_num_buckets(num_buckets), len(values))
    if num_buckets == 1:
        return []
    splits = _optimal_splits(values, counts, num_buckets)
    return (values[splits - 1] + 1).tolist()


STRATEGIES = {
    "uniform": uniform,
    "quantile": quantile,
    "equal_tokens": equal_tokens,
    "optimal": optimal,
}


def get(name):
    """Returns the boundary strategy called `name`.

    Args:
        name: one of the keys of `STRATEGIES`.

    Returns:
        The strategy function, `(lengths, num_buckets) -> list[int]`.

    Raises:
        ValueError: `name` is not a strategy name.

    Example:

    >>> get("quantile") is quantile
    True
    """
    if isinstance(name, str) and name in STRATEGIES:
        return STRATEGIES[name]
    valid = ", ".join(repr(n) for n in STRATEGIES)
    raise ValueError(f"Unknown boundary strategy {name!r}; valid names: {valid}.")


def padded_cost(lengths, boundaries):
    """Total padded length when each element is padded to its bucket's longest.

    Args:
        lengths: 1-D sequence of non-negative integer lengths.
        boundaries: bucket boundaries as accepted by `validate_boundaries`;
            `[]` (a single bucket) is allowed.

    Returns:
        The sum over buckets of (number of elements) x (largest length present
        in the bucket), as a Python int.

    Example:

    >>> padded_cost([1, 2, 3, 10], [3])  # buckets {1, 2} and {3, 10}
    24
    """
    values, counts = _histogram(lengths)
    bounds = np.asarray(validate_boundaries(boundaries, allow_empty=True), np.int64)
    bucket = np.searchsorted(bounds, values, side="right")
    longest = np.zeros(len(bounds) + 1, dtype=np.int64)
    np.maximum.at(longest, bucket, values)
    return sum(int(c) * int(m) for c, m in zip(counts, longest[bucket], strict=True))


def validate_boundaries(boundaries, allow_empty=False):
    """Checks user-supplied bucket boundaries.

    Args:
        boundaries: a list (or tuple) of positive ints (numpy integers allowed,
            bools not), strictly increasing.
        allow_empty: whether `[]` (one bucket) is acceptable.

    Returns:
        The boundaries as a list of Python ints.

    Raises:
        TypeError: `boundaries` is not a list, or an element is not an int.
        ValueError: `boundaries` is empty, or an element is not positive or
            not greater than the one before it.

    Example:

    >>> validate_boundaries([np.int32(8), 16, 32])
    [8, 16, 32]
    """
    if not isinstance(boundaries, list | tuple):
        raise TypeError(
            f"boundaries must be a list of ints, got {type(boundaries).__name__}."
        )
    if not boundaries and not allow_empty:
        raise ValueError("boundaries is empty; need at least one boundary.")
    result = []
    for i, b in enumerate(boundaries):
        if not isinstance(b, numbers.Integral) or isinstance(b, bool | np.bool_):
            raise TypeError(
                f"boundaries must be ints; boundaries[{i}] = {b!r} "
                f"is a {type(b).__name__}."
            )
        b = int(b)
        if b <= 0:
            raise ValueError(f"boundaries must be positive; boundaries[{i}] = {b}.")
        if b >= 2**62:
            raise ValueError(
                f"boundaries must be below 2**62 (lengths are int64); "
                f"boundaries[{i}] = {b}."
            )
        if result and b <= result[-1]:
            raise ValueError(
                f"boundaries must be strictly increasing; boundaries[{i}] = {b} "
                f"is not greater than boundaries[{i - 1}] = {result[-1]}."
            )
        result.append(b)
    return result


def _check_num_buckets(num_buckets):
    if not isinstance(num_buckets, numbers.Integral) or isinstance(
        num_buckets, bool | np.bool_
    ):
        raise TypeError(f"num_buckets must be a positive int, got {num_buckets!r}.")
    if num_buckets < 1:
        raise ValueError(f"num_buckets must be a positive int, got {num_buckets}.")
    return int(num_buckets)


def as_lengths(lengths):
    """Validates `lengths` and returns it as a 1-D int64 array."""
    try:
        arr = np.asarray(lengths)
    except (TypeError, ValueError) as e:
        raise TypeError(f"lengths must be a 1-D sequence of integers ({e}).") from e
    if arr.ndim != 1:
        raise ValueError(f"lengths must be 1-D, got an array of shape {arr.shape}.")
    if arr.size == 0:
        raise ValueError("lengths is empty; need at least one length.")
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.floor(arr)) | (arr >= 2.0**63)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(
                f"lengths must be integer-valued; lengths[{i}] = {arr[i].item()}."
            )
    elif arr.dtype.kind == "u":
        if arr.max() > _INT64_MAX:
            i = int(np.argmax(arr > _INT64_MAX))
            raise ValueError(f"lengths[{i}] = {arr[i].item()} does not fit in int64.")
    elif arr.dtype.kind != "i":
        raise TypeError(f"lengths must be integers, got dtype {arr.dtype}.")
    if arr.min() < 0:
        i = int(np.argmax(arr < 0))
        raise ValueError(
            f"lengths must be non-negative; lengths[{i}] = {arr[i].item()}."
        )
    return arr.astype(np.int64, copy=False)


def _histogram(lengths):
    """Returns the sorted distinct lengths and how often each occurs."""
    arr = as_lengths(lengths)
    if arr.max() <= max(1 << 20, 4 * arr.size):
        counts = np.bincount(arr)  # O(N), much faster than sorting
        values = np.flatnonzero(counts)
        return values.astype(np.int64, copy=False), counts[values]
    return np.unique(arr, return_counts=True)


def _every_length(values):
    """Boundaries giving every distinct length in `values` its own bucket."""
    return (values[:-1] + 1).tolist()


def _spread(below, num_values):
    """`below` (sorted split indices into `num_values` distinct values, at
    most `num_values - 1` of them) moved apart to be distinct and in
    `[0, num_values - 2]`, so that no bucket is empty; indices that already
    are stay where they are.

    A forward pass lifts each index above the one before it; a backward
    pass lowers each below the one after it and the last to
    `num_values - 2`. The second pass keeps the first's order, and both keep
    index k within `[k, num_values - len(below) - 1 + k]`.
    """
    k = np.arange(len(below))
    below = np.maximum.accumulate(np.maximum(below - k, 0)) + k
    room = num_values - 1 - len(below)
    return np.minimum.accumulate(np.minimum(below - k, room)[::-1])[::-1] + k


def _boundaries_after(values, below):
    """Boundaries putting `values[: j + 1]` below them, for each `j` in `below`.

    Indices that would leave a bucket empty (outside `[0, len(values) - 2]`)
    are dropped, as are duplicates.
    """
    below = np.unique(below)
    below = below[(below >= 0) & (below <= len(values) - 2)]
    return (values[below] + 1).tolist()


def _balanced(values, weights, num_buckets):
    """Splits where the cumulative weight is nearest to i / num_buckets."""
    if num_buckets >= len(values):
        return _every_length(values)
    cum = np.cumsum(weights)
    targets = cum[-1] * (np.arange(1, num_buckets) / num_buckets)
    splits = cum[:-1]  # weight below a boundary placed after values[j]
    right = np.minimum(np.searchsorted(splits, targets), len(splits) - 1)
    left = np.maximum(right - 1, 0)
    nearer_left = targets - splits[left] <= splits[right] - targets
    below = np.where(nearer_left, left, right)
    return _boundaries_after(values, _spread(below, len(values)))


def _optimal_splits(values, counts, num_buckets):
    """Optimal split points of the distinct values into `num_buckets` runs.

    With `cum[j]` the number of elements among the first j distinct values, a
    bucket holding values `i .. j - 1` costs `(cum[j] - cum[i]) * values[j - 1]`.
    Returns the sorted prefix sizes `i` (in `1 .. D - 1`) where buckets start.
    """
    d = len(values)
    cum = np.zeros(d + 1, dtype=np.int64)
    np.cumsum(counts, out=cum[1:])
    # Exact in int64 unless the unbucketed cost could overflow it.
    dtype = np.int64 if int(cum[-1]) * int(values[-1]) < 1 << 62 else np.float64
    cum = cum.astype(dtype)
    top = values.astype(dtype)  # top[j - 1]: longest length in prefix j
    cost = np.zeros(d + 1, dtype=dtype)
    cost[1:] = cum[1:] * top  # best cost of prefix j in one bucket
    # b buckets cover prefixes b .. b + slack: each later bucket needs at least
    # one distinct value. start[b][j - b] is where the last bucket of the best
    # b-bucket cover of prefix j starts.
    slack = d - num_buckets
    start = np.zeros((num_buckets + 1, slack + 1), dtype=np.int32)
    for b in range(2, num_buckets + 1):
        cost, best = _dp_layer(cost, cum, top, b, b + slack)
        start[b] = best[b : b + slack + 1]
    splits = []
    j = d
    for b in range(num_buckets, 1, -1):
        j = int(start[b, j - b])
        splits.append(j)
    return np.array(splits[::-1], dtype=np.int64)


def _dp_layer(prev, cum, top, lo, hi):
    """One DP layer by divide and conquer, all subproblems of a level at once.

    Computes `new[j] = min_i prev[i] + (cum[j] - cum[i]) * top[j - 1]` over
    `lo - 1 <= i < j` for `j` in `[lo, hi]`, and the smallest minimising `i`.
    The cost is Monge, so that `i` never decreases as `j` grows: solving the
    middle `j` of a range bounds the search for the `j`s on either side.
    """
    new = np.zeros_like(prev)
    best = np.zeros(len(prev), dtype=np.int64)
    # Pending subproblems: j in [j_lo, j_hi], searching i in [i_lo, i_hi].
    j_lo, j_hi = np.array([lo]), np.array([hi])
    i_lo, i_hi = np.array([lo - 1]), np.array([hi - 1])
    while j_lo.size:
        mid = (j_lo + j_hi) // 2
        n = np.minimum(i_hi, mid - 1) - i_lo + 1  # candidates per subproblem
        starts = np.cumsum(n) - n
        i = np.arange(starts[-1] + n[-1]) + np.repeat(i_lo - starts, n)
        # prev[i] - cum[i] * top[mid - 1]; the cum[mid] * top[mid - 1] term is
        # the same for every candidate, so it is added after the minimum.
        val = prev[i] - cum[i] * np.repeat(top[mid - 1], n)
        low = np.minimum.reduceat(val, starts)
        is_min = val == np.repeat(low, n)
        arg = np.minimum.reduceat(np.where(is_min, i, len(prev)), starts)
        new[mid] = low + cum[mid] * top[mid - 1]
        best[mid] = arg
        left, right = j_lo < mid, mid < j_hi
        j_lo = np.concatenate([j_lo[left], mid[right] + 1])
        j_hi = np.concatenate([mid[left] - 1, j_hi[right]])
        i_lo, i_hi = (
            np.concatenate([i_lo[left], arg[right]]),
            np.concatenate([arg[left], i_hi[right]]),
        )
    return new, best
