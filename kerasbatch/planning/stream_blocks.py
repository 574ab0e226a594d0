"""A stream's plan, block by block: which rows leave as which batches.

`kerasbatch.StreamBucketBuilder` does no work per element. Its input
arrives in *blocks* of rows, and each block is encoded as *rows*, a dict of
arrays:

- `"values"`: per component, a sequence component's flat values
  `(total length, *trailing)` or another component's rows `(rows, *shape)`;
- `"lengths"`: `(rows, sequence components)`, each row's kept lengths;
- `"bucket"`, `"index"` (the row's position in the input), `"truncated"`
  and `"truncated_positions"` (what a cut removed): one int64 per row.

The rows wait for their batch. When they reach the buffer size, or the
input ends, they are shuffled (with `shuffle`) and sorted by bucket in one
pass; every bucket's full batches leave together and the rest waits for
the next block. When the input ends, every bucket's last, smaller batch
leaves too. Memory holds one block, at most `buffer_size` waiting rows and
one partial batch per bucket, whatever the size of the data.

Batches leave in the order they filled (the input position of their last
row; the smaller last batches after all others, by bucket), which is the
order of `tf.data`'s `group_by_window`, or, with `shuffle`, in an order
drawn from `(seed, epoch, emission)`, as are the rows of a shuffled
buffer: the batches are a pure function of the seed, the epoch and the
input. `BlockBucketer` is this plan in numpy (the numpy engines run it);
the `tf.data` engine runs its twin in a graph
(`kerasbatch.engines.tf_data.stream_blocks`), rule for rule.
"""

import numpy as np

from kerasbatch.planning import orders
from kerasbatch.planning.plan import ragged_range

#: The per-row int64 fields of rows, beside "values" and "lengths".
ROW_FIELDS = ("bucket", "index", "truncated", "truncated_positions")
#: Single input elements gathered into one block, on every engine.
BLOCK_ROWS = 256
#: Why lengths given to `build` that do not match the data are an error.
LENGTHS_MISMATCH = (
    "the lengths given to build() do not match the dataset's elements, which "
    "would make a wrong cardinality and wrong batch shapes; pass each "
    "element's own length (the longest of its sequence components), in the "
    "dataset's order."
)
#: The message of an element longer than its component's fixed padded
#: length: `.format(name=..., fixed=...)`, then `{}` for the element's
#: index and its length.
FIXED_LENGTH_EXCEEDED = (
    "Component {name} is padded to the fixed length {fixed}, but element {{}} "
    "is {{}} long. Raise the length, or set max_length with overflow truncate."
)
#: The message of an element longer than the lengths given to `build()`
#: said: `{}` for its index and its length.
LONGER_THAN_GIVEN = (
    "Element {} has length {} (after any truncation), longer than any in its "
    f"bucket among the lengths given to build(): {LENGTHS_MISMATCH}"
)
#: Sorts last: the key of a batch that does not leave.
LAST_KEY = np.iinfo(np.int64).max


def gather(rows, indices, num_sequences):
    """The rows at `indices`, in that order."""
    indices = np.asarray(indices, np.int64)
    values = list(rows["values"])
    for column in range(num_sequences):
        lengths = rows["lengths"][:, column]
        starts = np.cumsum(lengths) - lengths
        picked = lengths[indices]
        values[column] = values[column][
            np.repeat(starts[indices], picked) + ragged_range(picked)
        ]
    for position in range(num_sequences, len(values)):
        values[position] = values[position][indices]
    gathered = {key: rows[key][indices] for key in ("lengths", *ROW_FIELDS)}
    return {"values": tuple(values), **gathered}


def concat(first, second):
    """The rows of `first`, then those of `second`."""
    return {
        "values": tuple(
            np.concatenate([a, b])
            for a, b in zip(first["values"], second["values"], strict=True)
        ),
        **{
            key: np.concatenate([first[key], second[key]])
            for key in ("lengths", *ROW_FIELDS)
        },
    }


def _segment_max(values, starts):
    """The largest of `values` in each contiguous segment from `starts`."""
    return np.maximum.reduceat(values, starts) if len(values) else values


class BlockBucketer:
    """Batches of rows, bucket by bucket, from blocks of rows: a stream's
    plan (see the module docstring).

    Args:
        batch_sizes: every bucket's batch size.
        num_sequences: how many sequence components the rows hold.
        buffer_size: rows that wait before batches leave.
        shuffle: whether the buffer is shuffled.
        seed: the shuffle's seed.
        expected_counts: every bucket's number of rows in an epoch (from
            the lengths given to `build`), or None; other counts are an
            error.
        mismatch: the error's explanation.

    Example:

    >>> import numpy as np
    >>> from kerasbatch.planning import stream_blocks
    >>> def rows(lengths, buckets, start):
    ...     lengths = np.array(lengths, np.int64)
    ...     return {"values": (np.zeros(lengths.sum()),),
    ...             "lengths": lengths[:, None],
    ...             "bucket": np.array(buckets, np.int64),
    ...             "index": start + np.arange(len(lengths)),
    ...             "truncated": np.zeros(len(lengths), np.int64),
    ...             "truncated_positions": np.zeros(len(lengths), np.int64)}
    >>> bucketer = stream_blocks.BlockBucketer([2, 2], 1, 4, False, 0)
    >>> blocks = [rows([1, 9, 2], [0, 1, 0], 0), rows([8, 3], [1, 0], 3)]
    >>> [b["index"].tolist() for b in bucketer.batches(blocks, 0, rows([], [], 0))]
    [[0, 2], [1, 3], [4]]
    """

    def __init__(
        self,
        batch_sizes,
        num_sequences,
        buffer_size,
        shuffle,
        seed,
        expected_counts=None,
        mismatch="",
    ):
        self.batch_sizes = np.asarray(batch_sizes, np.int64)
        self.num_buckets = len(batch_sizes)
        self.num_sequences = num_sequences
        self.buffer_size = int(buffer_size)
        self.shuffle = shuffle
        self.seed = int(seed)
        self.expected_counts = expected_counts
        self.mismatch = mismatch

    def batches(self, blocks, epoch, empty):
        """The rows of every batch, in leaving order, from `blocks` (an
        iterable of rows); `empty`: rows of none."""
        pending, seen = empty, np.zeros(self.num_buckets, np.int64)
        marked = ((block, False) for block in blocks)
        for emission, (block, end) in enumerate(_with_end(marked, empty)):
            if self.expected_counts is not None:
                seen += self._counts(block["bucket"])
                self._check_counts(seen, end)
            rows = concat(pending, block)
            if end or len(rows["bucket"]) >= self.buffer_size:
                (left, sizes), pending = self._sort(rows, end, epoch, emission)
                ends = np.cumsum(sizes)
                for start, stop in zip(ends - sizes, ends, strict=True):
                    yield self._slice(left, start, stop)
            else:
                pending = rows

    def _counts(self, bucket):
        return np.bincount(bucket, minlength=self.num_buckets).astype(np.int64)

    def _check_counts(self, seen, end):
        expected = np.asarray(self.expected_counts, np.int64)
        matches = np.all(seen == expected) if end else np.all(seen <= expected)
        if not matches:
            raise ValueError(
                f"{self.mismatch} Expected per bucket: {expected.tolist()}, "
                f"seen: {seen.tolist()}."
            )

    def _sort(self, rows, end, epoch, emission):
        """`((leaving rows, batch sizes), waiting rows)` of one emission."""
        bucket_of = rows["bucket"]
        count = len(bucket_of)
        order = np.arange(count, dtype=np.int64)
        if self.shuffle:
            order = np.argsort(self._draw(epoch, emission, 0, count), kind="stable")
        order = order[np.argsort(bucket_of[order], kind="stable")]
        bucket = bucket_of[order]
        counts = self._counts(bucket)
        rank = np.arange(count) - (np.cumsum(counts) - counts)[bucket]
        sizes = self.batch_sizes
        batches_per_bucket = -(-counts // sizes)
        leaving = batches_per_bucket if end else counts // sizes
        in_bucket = rank // sizes[bucket]
        leaves = in_bucket < leaving[bucket]
        first_batch = np.cumsum(batches_per_bucket) - batches_per_bucket
        batch = first_batch[bucket] + in_bucket
        num_batches = int(batches_per_bucket.sum())
        rows_in_batch = np.bincount(batch, minlength=num_batches)
        starts = np.cumsum(rows_in_batch) - rows_in_batch  # rows sorted by batch
        batch_leaves = _segment_max(leaves.astype(np.int64), starts) > 0
        if self.shuffle:
            key = self._draw(epoch, emission, 1, num_batches)
        else:
            last = _segment_max(rows["index"][order], starts)
            batch_bucket = bucket[starts]
            full = rows_in_batch == sizes[batch_bucket]
            key = np.where(full, last, LAST_KEY - 1 - self.num_buckets + batch_bucket)
        key = np.where(batch_leaves, key, LAST_KEY)
        batch_order = np.argsort(key, kind="stable")
        num_leaving = int(batch_leaves.sum())
        position = np.argsort(batch_order)
        leaving_rows = np.flatnonzero(leaves)
        leaving_rows = leaving_rows[
            np.argsort(position[batch[leaving_rows]], kind="stable")
        ]
        waiting = np.sort(order[np.flatnonzero(~leaves)])
        left = gather(rows, order[leaving_rows], self.num_sequences)
        sizes_left = rows_in_batch[batch_order[:num_leaving]]
        return (left, sizes_left), gather(rows, waiting, self.num_sequences)

    def _draw(self, epoch, emission, draw, count):
        stream = orders.emission_stream(emission, draw)
        return orders.hash31(self.seed, epoch, stream, count)

    def _slice(self, rows, start, stop):
        """Rows `start` to `stop` (contiguous)."""
        values = list(rows["values"])
        for column in range(self.num_sequences):
            bounds = np.concatenate([[0], np.cumsum(rows["lengths"][:, column])])
            values[column] = values[column][bounds[start] : bounds[stop]]
        for position in range(self.num_sequences, len(values)):
            values[position] = values[position][start:stop]
        sliced = {key: rows[key][start:stop] for key in ("lengths", *ROW_FIELDS)}
        return {"values": tuple(values), **sliced}


def _with_end(marked, empty):
    yield from marked
    yield empty, True
