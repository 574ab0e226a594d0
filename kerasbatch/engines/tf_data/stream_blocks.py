"""A stream's plan in a graph: the twin of
`kerasbatch.planning.stream_blocks`, rule for rule, in TF ops on whole
blocks of rows (tensors; the module there says what rows hold).

A `scan` keeps the rows waiting for their batch; when they reach the
buffer size, or the input ends, every bucket's full batches leave
together, in the order the numpy plan gives them.
"""

from kerasbatch.engines.tf_data import orders as epochs_lib
from kerasbatch.engines.tf_data.as_written import plain
from kerasbatch.optional import tensorflow as tf
from kerasbatch.planning import orders
from kerasbatch.planning.stream_blocks import LAST_KEY, ROW_FIELDS


def gather(rows, indices, sequence_positions):
    """The rows at `indices`, in that order."""
    values = list(rows["values"])
    for column, position in enumerate(sequence_positions):
        values[position] = tf.gather(
            _ragged(rows, column, position), indices
        ).flat_values
    for position in range(len(values)):
        if position not in sequence_positions:
            values[position] = tf.gather(values[position], indices)
    gathered = {key: tf.gather(rows[key], indices) for key in ("lengths", *ROW_FIELDS)}
    return {"values": tuple(values), **gathered}


def concat(first, second):
    """The rows of `first`, then those of `second`."""
    return tf.nest.map_structure(lambda a, b: tf.concat([a, b], axis=0), first, second)


def _any_rows(tensor):
    """`tensor`, with its first (row) dimension of unknown static size."""
    shape = [None, *tensor.shape[1:]]
    return tf.compat.v1.placeholder_with_default(tensor, shape)


def _ragged(rows, column, position):
    return tf.RaggedTensor.from_row_lengths(
        rows["values"][position], rows["lengths"][:, column], validate=False
    )


class BlockBucketer:
    """Batches of rows, bucket by bucket, from a dataset of blocks of rows.

    Args:
        batch_sizes: int64 array, the batch size of every bucket.
        sequence_positions: which of `"values"` are sequence components.
        buffer_size: rows to gather before sorting them into batches.
        shuffle: draw the rows' batches and the batches' order at random.
        seed: int seed of the draws.
        expected_counts: optional int array, the rows every bucket gets in
            all: more rows in a bucket, or at the end other counts, fail
            with an error that quotes `mismatch` and the counts.
        mismatch: the message of that error.
    """

    def __init__(
        self,
        batch_sizes,
        sequence_positions,
        buffer_size,
        shuffle,
        seed,
        expected_counts=None,
        mismatch="",
    ):
        self.batch_sizes = tf.constant(batch_sizes, tf.int64)
        self.num_buckets = len(batch_sizes)
        self.sequence_positions = list(sequence_positions)
        self.buffer_size = int(buffer_size)
        self.shuffle = shuffle
        self.seed = int(seed)
        self.expected_counts = expected_counts
        self.mismatch = mismatch

    def batches(self, blocks, epoch, finish):
        """A dataset of `finish(rows)`, one per batch, from `blocks`, a
        dataset of rows; `epoch` an int64 scalar tensor."""
        empty = tf.nest.map_structure(
            lambda spec: tf.zeros([0, *spec.shape[1:]], spec.dtype),
            blocks.element_spec,
        )
        marked = blocks.map(plain(lambda rows: (rows, False)))
        marked = marked.concatenate(tf.data.Dataset.from_tensors((empty, True)))
        # The waiting rows start with a row dimension of unknown size, as
        # the step makes them: `scan` then traces the step once, where a
        # size of 0 would have it trace again with the shape relaxed.
        pending = tf.nest.map_structure(_any_rows, empty)
        state = {"pending": pending, "emission": tf.constant(0, tf.int64)}
        if self.expected_counts is not None:
            state["seen"] = tf.zeros([self.num_buckets], tf.int64)
        seed = tf.stack([tf.constant(self.seed, tf.int64), epoch])

        def step(state, block_and_end):
            block, end = block_and_end
            checks = []
            if self.expected_counts is not None:
                seen = state["seen"] + self._counts(block["bucket"])
                checks.append(self._check_counts(seen, end))
            with tf.control_dependencies(checks):
                rows = concat(state["pending"], block)
            count = tf.shape(rows["bucket"], out_type=tf.int64)[0]
            leave = tf.logical_or(end, count >= self.buffer_size)
            emission = state["emission"]
            left, pending = tf.cond(
                leave,
                lambda: self._sort(rows, end, tf.stack([seed[0], seed[1], emission])),
                lambda: (self._none(rows), rows),
            )
            new_state = {"pending": pending, "emission": emission + 1}
            if self.expected_counts is not None:
                new_state["seen"] = seen
            return new_state, left

        emissions = marked.scan(state, plain(step))
        return emissions.flat_map(
            plain(lambda rows, sizes: self._split(rows, sizes, finish))
        )

    def _counts(self, bucket):
        """The rows of each bucket among `bucket`, the rows' buckets."""
        return tf.math.bincount(
            tf.cast(bucket, tf.int32),
            minlength=self.num_buckets,
            maxlength=self.num_buckets,
            dtype=tf.int64,
        )

    def _check_counts(self, seen, end):
        """No bucket has more rows than expected; at the `end`, each has
        exactly as many."""
        expected = tf.constant(self.expected_counts, tf.int64)
        matches = tf.where(
            end,
            tf.reduce_all(tf.equal(seen, expected)),
            tf.reduce_all(seen <= expected),
        )
        return tf.debugging.Assert(
            matches,
            [self.mismatch, "expected per bucket:", expected, "seen:", seen],
            summarize=self.num_buckets,
        )

    def _none(self, rows):
        return gather(rows, tf.zeros([0], tf.int64), self.sequence_positions), tf.zeros(
            [0], tf.int64
        )

    def _sort(self, rows, end, seeds):
        """`((leaving rows, batch sizes), waiting rows)`: the full batches of
        every bucket (every batch at the `end`), in leaving order."""
        count = tf.shape(rows["bucket"], out_type=tf.int64)[0]
        order = tf.range(count)
        if self.shuffle:
            order = tf.argsort(self._draw(seeds, 0, count), stable=True)
            order = tf.cast(order, tf.int64)
        order = tf.gather(
            order, tf.argsort(tf.gather(rows["bucket"], order), stable=True)
        )
        bucket = tf.gather(rows["bucket"], order)
        counts = self._counts(bucket)
        rank = tf.range(count) - tf.gather(tf.cumsum(counts, exclusive=True), bucket)
        sizes = self.batch_sizes
        batches_per_bucket = -(-counts // sizes)
        leaving = tf.where(end, batches_per_bucket, counts // sizes)
        in_bucket = rank // tf.gather(sizes, bucket)
        leaves = in_bucket < tf.gather(leaving, bucket)
        batch = tf.gather(tf.cumsum(batches_per_bucket, exclusive=True), bucket)
        batch += in_bucket
        num_batches = tf.reduce_sum(batches_per_bucket)
        rows_in_batch = tf.math.unsorted_segment_sum(
            tf.ones_like(batch), batch, num_batches
        )
        batch_leaves = tf.math.unsorted_segment_max(
            tf.cast(leaves, tf.int64), batch, num_batches
        )
        if self.shuffle:
            key = self._draw(seeds, 1, num_batches)
        else:
            last = tf.math.unsorted_segment_max(
                tf.gather(rows["index"], order), batch, num_batches
            )
            batch_bucket = tf.math.unsorted_segment_max(bucket, batch, num_batches)
            full = tf.equal(rows_in_batch, tf.gather(sizes, batch_bucket))
            key = tf.where(full, last, LAST_KEY - 1 - self.num_buckets + batch_bucket)
        key = tf.where(batch_leaves > 0, key, LAST_KEY)
        batch_order = tf.argsort(key, stable=True)
        num_leaving = tf.reduce_sum(batch_leaves)
        position = tf.math.invert_permutation(batch_order)
        leaving_rows = tf.reshape(tf.where(leaves), [-1])
        leaving_rows = tf.gather(
            leaving_rows,
            tf.argsort(
                tf.gather(position, tf.gather(batch, leaving_rows)), stable=True
            ),
        )
        waiting = tf.sort(tf.gather(order, tf.reshape(tf.where(~leaves), [-1])))
        left = gather(rows, tf.gather(order, leaving_rows), self.sequence_positions)
        sizes_left = tf.gather(rows_in_batch, batch_order[:num_leaving])
        return (left, sizes_left), gather(rows, waiting, self.sequence_positions)

    def _draw(self, seeds, draw, count):
        """`count` hashes in `[0, 2**31)` of `(seed, epoch, emission)` and
        the `draw` (the rule of `kerasbatch.planning.orders.hash31`, as the planned
        builders' epochs)."""
        stream = orders.emission_stream(seeds[2], draw)
        return epochs_lib.hash31(self.seed, seeds[1], stream, count)

    def _split(self, rows, sizes, finish):
        """The batches of one emission: `finish(rows of the batch)` each."""
        ends = tf.cumsum(sizes)
        value_ends = [
            tf.concat([[0], tf.cumsum(rows["lengths"][:, column])], axis=0)
            for column in range(len(self.sequence_positions))
        ]

        def batch(end, size):
            start = end - size
            values = list(rows["values"])
            for position in range(len(values)):
                if position in self.sequence_positions:
                    column = self.sequence_positions.index(position)
                    bounds = value_ends[column]
                    values[position] = values[position][bounds[start] : bounds[end]]
                else:
                    values[position] = values[position][start:end]
            sliced = {key: rows[key][start:end] for key in ("lengths", *ROW_FIELDS)}
            return finish({"values": tuple(values), **sliced})

        return tf.data.Dataset.from_tensor_slices((ends, sizes)).map(plain(batch))
