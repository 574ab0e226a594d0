"""The in-memory builders' batching rules, planned from lengths in NumPy.

A builder resolves its data once, at `build` or `adapt` (lengths, cut
limits, buckets), and plans every epoch from that alone. The functions here
are that planning: `PaddedBuilder`, `SortedBuilder`, `BucketBuilder` and
`PackedBuilder` call them with what they resolved, and `kerasbatch.analyze`
with lengths alone, so what `analyze` reports is what the builders feed.

- the fixed order of each rule: `random_order` (random batches),
  `sorted_order` (neighbours in length order), `bucket_order` (batches of
  one bucket each), `packed_order` (packed rows);
- buckets: `resolve_boundaries`, `bucket_layout` (every element's bucket,
  cut limit and padding bound) and the token budget's batch size
  (`budget_batch_size`);
- an epoch's plan from its order: `batch_plan` (a `kerasbatch.planning.plan.BatchPlan`)
  and `packed_plan` (a `kerasbatch.planning.packing.PackedPlan`).

Paddings are `kerasbatch.Padding` values or their lengths (`"batch"`,
`"bucket"` or an int): only the length matters to a plan. This module
imports neither Keras nor TensorFlow.
"""

import dataclasses

import numpy as np

from kerasbatch.planning import boundaries as boundaries_lib
from kerasbatch.planning import orders, packing
from kerasbatch.planning import plan as plan_lib
from kerasbatch.planning.buckets import Buckets

#: `boundaries="auto"`: the `"optimal"` strategy of `kerasbatch.planning.boundaries`.
AUTO = "auto"
#: The longest length every rule plans: sorted batches order elements by
#: length in keys below `kerasbatch.planning.orders.MAX_GROUP`.
MAX_LENGTH = orders.MAX_GROUP - 1


# ------------------------------------------------------------------ orders
def random_order(candidates, batch_size, remainder, shuffle):
    """Random batches (`PaddedBuilder`): the candidates in a fresh order
    every epoch (with `shuffle`), cut into batches of `batch_size`.

    Example:

    >>> import numpy as np
    >>> order = random_order(np.arange(5), 2, "keep", shuffle=False)
    >>> order.sizes.tolist()
    [2, 2, 1]
    """
    return orders.EpochOrder.of_groups(
        candidates,
        np.zeros(len(candidates), np.int64),
        [batch_size],
        remainder,
        shuffle_units=shuffle,
        shuffle_batches=False,
    )


def sorted_order(candidates, lengths, batch_size, remainder, shuffle):
    """Neighbours in length order (`SortedBuilder`): the candidates sorted by
    `lengths` (theirs), elements of equal length in a fresh order every
    epoch, cut into batches taken in a fresh order (with `shuffle`).

    Example:

    >>> import numpy as np
    >>> order = sorted_order(np.arange(4), np.array([5, 1, 4, 2]), 2, "keep",
    ...                      shuffle=False)
    >>> indices, splits = order.batches(seed=0, epoch=0)
    >>> indices.tolist()
    [1, 3, 2, 0]
    """
    return orders.EpochOrder.of_groups(
        candidates,
        lengths,
        [batch_size],
        remainder,
        shuffle_units=shuffle,
        shuffle_batches=shuffle,
    )


def bucket_order(candidates, buckets, batch_sizes, remainder, shuffle):
    """Batches of one bucket each (`BucketBuilder`): every bucket's
    candidates (`buckets`: theirs) cut into batches of its batch size,
    every bucket shuffled and the batches of all interleaved in a fresh
    order every epoch (with `shuffle`).

    Example:

    >>> import numpy as np
    >>> order = bucket_order(np.arange(5), np.array([0, 1, 0, 1, 1]), [2, 2],
    ...                      "keep", shuffle=False)
    >>> order.sizes.tolist()
    [2, 2, 1]
    """
    return orders.EpochOrder.of_groups(
        candidates,
        buckets,
        batch_sizes,
        remainder,
        shuffle_units=shuffle,
        shuffle_batches=shuffle,
    )


def packed_order(
    candidates,
    lengths,
    sequence_length,
    batch_size,
    remainder,
    shuffle,
    max_segments=None,
):
    """Packed rows (`PackedBuilder`): the candidates (`lengths`: theirs)
    packed into rows of `sequence_length` positions by best-fit decreasing
    (`kerasbatch.planning.packing.pack`), the rows cut into batches of `batch_size`;
    which sequences of equal length share a row, their order in it and the
    rows' order change every epoch (with `shuffle`).

    Returns:
        A `kerasbatch.planning.orders.PackedOrder`.

    Example:

    >>> import numpy as np
    >>> order = packed_order(np.arange(5), np.array([5, 3, 2, 7, 1]), 8, 2,
    ...                      "keep", shuffle=False)
    >>> np.diff(order.row_splits).tolist(), order.rows.sizes.tolist()
    ([2, 2, 1], [2, 1])
    """
    rows = packing.pack(lengths, sequence_length, max_segments)
    return orders.PackedOrder.of_packing(
        candidates, lengths, rows, batch_size, remainder, shuffle
    )


# ----------------------------------------------------------------- buckets
def resolve_boundaries(boundaries, lengths, num_buckets):
    """The bucket boundaries: `boundaries` if a list, else that strategy of
    `kerasbatch.planning.boundaries` (`"auto"`: `"optimal"`) with `num_buckets` on
    `lengths` (those the buckets will hold).

    Example:

    >>> import numpy as np
    >>> resolve_boundaries("auto", np.array([2, 3, 3, 9, 10, 30]), 3)
    [4, 11]
    >>> resolve_boundaries([8, 16], None, 3)
    [8, 16]
    """
    if isinstance(boundaries, list):
        return [int(b) for b in boundaries]
    strategy = "optimal" if boundaries == AUTO else boundaries
    return [int(b) for b in boundaries_lib.get(strategy)(lengths, num_buckets)]


@dataclasses.dataclass(frozen=True)
class BucketLayout:
    """Every element's bucket, and what the bucket makes of it.

    Attributes:
        buckets: the `kerasbatch.planning.buckets.Buckets`.
        bucket_of: int bucket of every element (by its cut length).
        element_limits: int64 cut length of every element (truncation
            buckets cut to their lower bound).
        element_bounds: int bucket padding bound of every element.
        counts: candidates per bucket (a list).
        padded_lengths: the longest padded length (any component) a batch
            of each bucket can have, 0 for an empty bucket (a list).
    """

    buckets: Buckets
    bucket_of: np.ndarray
    element_limits: np.ndarray
    element_bounds: np.ndarray
    counts: list
    padded_lengths: list


def bucket_layout(
    cut_lengths,
    candidates,
    element_limits,
    component_lengths,
    paddings,
    *,
    boundaries,
    last_upper,
    truncate,
    pad_to_multiple,
):
    """Assigns every element to its bucket (`BucketBuilder`).

    Args:
        cut_lengths: int64 length of every element after the overflow policy.
        candidates: int64 indices of the elements batches may hold.
        element_limits: int64 cut length of every element before buckets.
        component_lengths: `{sequence component name: int64 lengths}`.
        paddings: `{sequence component name: Padding or its length}`.
        boundaries: the resolved boundaries (a list).
        last_upper: the longest length the last bucket holds.
        truncate: truncation buckets (cut to the bucket's lower bound).
        pad_to_multiple: padded lengths are rounded up to a multiple of it.

    Returns:
        A `BucketLayout`.

    Example:

    >>> import numpy as np
    >>> lengths = np.array([3, 9, 4, 12])
    >>> layout = bucket_layout(
    ...     lengths, np.arange(4), np.full(4, 2**62), {"x": lengths},
    ...     {"x": "bucket"}, boundaries=[8], last_upper=12, truncate=False,
    ...     pad_to_multiple=1)
    >>> layout.bucket_of.tolist(), layout.counts, layout.padded_lengths
    ([0, 1, 0, 1], [2, 2], [7, 12])
    """
    buckets = Buckets.of(boundaries, last_upper, truncate)
    bucket_of = buckets.assign(cut_lengths)
    if truncate:
        element_limits = buckets.cut_limits(bucket_of, element_limits)
    counts = np.zeros(buckets.num_buckets, np.int64)
    for start in range(0, len(candidates), orders.CHUNK):
        members = bucket_of[candidates[start : start + orders.CHUNK]]
        counts += np.bincount(members, minlength=buckets.num_buckets)
    longest = {}

    def longest_of(name):
        """The longest kept element of every bucket, in `name`."""
        if name not in longest:
            maxima = np.zeros(buckets.num_buckets, np.int64)
            for start in range(0, len(candidates), orders.CHUNK):
                members = candidates[start : start + orders.CHUNK]
                kept = np.minimum(
                    component_lengths[name][members], element_limits[members]
                )
                np.maximum.at(maxima, bucket_of[members], kept)
            longest[name] = maxima
        return longest[name]

    padded_lengths = []
    for bucket, bound in enumerate(buckets.bounds.tolist()):
        if not counts[bucket]:
            padded_lengths.append(0)
            continue
        padded_lengths.append(
            longest_padding(
                paddings,
                bound,
                lambda name, bucket=bucket: longest_of(name)[bucket],
                pad_to_multiple,
            )
        )
    return BucketLayout(
        buckets=buckets,
        bucket_of=bucket_of,
        element_limits=element_limits,
        element_bounds=orders.compact(buckets.bounds)[bucket_of],
        counts=[int(count) for count in counts],
        padded_lengths=padded_lengths,
    )


def longest_padding(paddings, bound, longest_kept, pad_to_multiple):
    """The longest padded length (any component) of a batch of a bucket.

    Args:
        paddings: `{name: Padding or its length}` of the sequence components.
        bound: the bucket's padding bound (for `"bucket"` padding).
        longest_kept: `name -> ` the longest the component can be in the
            bucket after cutting (for `"batch"` padding).
        pad_to_multiple: `pad_to_multiple`.

    Example:

    >>> longest_padding({"x": "batch", "y": "bucket"}, 15, lambda name: 9, 8)
    16
    """
    padded = 0
    for name, padding in paddings.items():
        longest = None
        if plan_lib.padding_length(padding) == "batch":
            longest = int(longest_kept(name))
        length = plan_lib.padded_length(padding, longest, int(bound), pad_to_multiple)
        padded = max(padded, int(length))
    return padded


def token_cost(length, quadratic_length=None):
    """What a row of `length` costs of a token budget: `length`, or
    `length + length**2 / quadratic_length` (Lhotse's `quadratic_duration`).

    Example:

    >>> token_cost(100), token_cost(100, quadratic_length=200)
    (100.0, 150.0)
    """
    if quadratic_length is None:
        return float(length)
    return length + length**2 / quadratic_length


def budget_batch_size(max_tokens, padded, count=None, quadratic_length=None):
    """The largest batch size of a bucket with `size × token_cost(padded) <=
    max_tokens`; 0 when not even one row fits.

    Args:
        max_tokens: the token budget.
        padded: the longest padded length a batch of the bucket can have.
        count: elements in the bucket, or None when unknown.
        quadratic_length: as in `token_cost`.

    Example:

    >>> budget_batch_size(1000, 128), budget_batch_size(1000, 0, count=7)
    (7, 7)
    """
    if count == 0:
        return 1
    if padded == 0:  # zero-length elements cost nothing: one batch
        return count if count is not None else max_tokens
    return int(max_tokens // token_cost(padded, quadratic_length))


# ------------------------------------------------------------------- plans
def batch_plan(
    order,
    seed,
    epoch,
    *,
    element_limits,
    element_bounds,
    component_lengths,
    paddings,
    dropped,
    batch_multiple=1,
    pad_to_multiple=1,
):
    """The `kerasbatch.planning.plan.BatchPlan` of `epoch` of an `EpochOrder`.

    Args:
        order: the `kerasbatch.planning.orders.EpochOrder`.
        seed, epoch: the epoch's draw.
        element_limits: int64 cut length of every element.
        element_bounds: int bucket padding bound of every element, or None.
        component_lengths: `{sequence component name: int64 lengths}`.
        paddings: `{sequence component name: Padding or its length}`.
        dropped: elements no batch of the epoch holds.
        batch_multiple, pad_to_multiple: as the builders'.

    Example:

    >>> import numpy as np
    >>> lengths = np.array([3, 1, 4, 2])
    >>> order = random_order(np.arange(4), 2, "keep", shuffle=False)
    >>> plan = batch_plan(
    ...     order, 0, 0, element_limits=np.full(4, 2**62), element_bounds=None,
    ...     component_lengths={"x": lengths}, paddings={"x": "batch"},
    ...     dropped=0)
    >>> plan.padded_lengths.ravel().tolist(), plan.statistics().padding_efficiency
    ([3, 4], 0.7142857142857143)
    """
    indices, splits = order.batches(seed, epoch)
    first_of_batch = indices[splits[:-1]]
    return plan_lib.make_plan(
        epoch=epoch,
        indices=indices,
        batch_splits=splits,
        limits=element_limits[first_of_batch],
        bucket_bounds=None
        if element_bounds is None
        else element_bounds[first_of_batch],
        component_lengths=component_lengths,
        paddings=paddings,
        dropped=dropped,
        batch_multiple=batch_multiple,
        capacities=order.batch_capacities(seed, epoch),
        pad_to_multiple=pad_to_multiple,
    )


def packed_plan(
    order,
    seed,
    epoch,
    *,
    sequence_length,
    lengths,
    cut_lengths,
    component_names,
    dropped,
    batch_multiple=1,
):
    """The `kerasbatch.planning.packing.PackedPlan` of `epoch` of a `PackedOrder`.

    Args:
        order: the `kerasbatch.planning.orders.PackedOrder`.
        seed, epoch: the epoch's draw.
        sequence_length: positions per row.
        lengths: int64 length of every element.
        cut_lengths: int64 length of every element after the overflow policy.
        component_names: the sequence components, packed alike.
        dropped: elements a policy left out before packing (those no batch
            of the epoch holds are added).
        batch_multiple: as the builder's.

    Example:

    >>> import numpy as np
    >>> lengths = np.array([5, 3, 2, 7, 1])
    >>> order = packed_order(np.arange(5), lengths, 8, 3, "keep", shuffle=False)
    >>> plan = packed_plan(order, 0, 0, sequence_length=8, lengths=lengths,
    ...                    cut_lengths=lengths, component_names=("x",), dropped=0)
    >>> plan.statistics().padding_efficiency
    0.75
    """
    indices, row_splits, batch_splits = order.batches(seed, epoch)
    # Slice by slice, in int32 (a packed length is at most a row).
    token_lengths = np.empty(len(indices), np.int32)
    truncated = truncated_positions = 0
    for start in range(0, len(indices), orders.CHUNK):
        elements = indices[start : start + orders.CHUNK]
        kept = cut_lengths[elements]
        token_lengths[start : start + orders.CHUNK] = kept
        if not _same_values(cut_lengths, lengths):  # else nothing is cut
            cut = lengths[elements] - kept
            truncated += int((cut > 0).sum())
            truncated_positions += int(cut.sum())
    return packing.PackedPlan(
        epoch=epoch,
        sequence_length=sequence_length,
        indices=indices,
        row_splits=row_splits,
        batch_splits=batch_splits,
        token_lengths=token_lengths,
        component_names=tuple(component_names),
        dropped=dropped + len(order.candidates) - len(indices),
        truncated=truncated,
        truncated_positions=truncated_positions * len(component_names),
        batch_multiple=batch_multiple,
        capacities=order.rows.batch_capacities(seed, epoch),
    )


def _same_values(first, second):
    """Whether two arrays are views of the same memory, alike."""
    return (
        first.shape == second.shape
        and first.dtype == second.dtype
        and first.strides == second.strides
        and first.ctypes.data == second.ctypes.data
    )
