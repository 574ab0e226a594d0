"""A stream's batches in numpy: `StreamBucketBuilder` on the numpy engines.

The twin of the `tf.data` stream (`kerasbatch.engines.tf_data.stream_blocks` and
`StreamBucketBuilder`'s block functions), rule for rule: the elements of a
Grain dataset or a Python iterable are read in blocks of
`stream_blocks.BLOCK_ROWS`, each block is bucketed and cut at once, the
rows wait in a buffer of `buffer_size` and leave as batches when it fills,
and each batch is padded and counted. For the same input, seed and epoch
the batches are the `tf.data` engine's, value for value. Memory holds one
block, at most `buffer_size` waiting rows and one partial batch per bucket.

Rows are a dict of numpy arrays: `"values"` (per component: a sequence's
flat values, or the stacked per-example values), `"lengths"` `(rows,
sequence components)` and the int64 fields of `stream_blocks.ROW_FIELDS`.
"""

import numpy as np

from kerasbatch import optional
from kerasbatch.data import outputs, sources
from kerasbatch.data import padding as padding_lib
from kerasbatch.engines import stream_counters as counters_lib
from kerasbatch.engines.numpy.batches import pad_rows, ragged_range
from kerasbatch.engines.tf_data import stream_blocks
from kerasbatch.planning import orders, remainders
from kerasbatch.planning import plan as plan_lib

#: Sorts last: the key of a batch that does not leave.
_LAST = np.iinfo(np.int64).max


def open_source(source):
    """A new iterator over `source`: a function returning one, or an
    iterable. A Grain `MapDataset` is read by index, in order (its own
    iterator costs ~150 us an element, with threads; an index ~4 us),
    leaving out the None of elements its filters removed."""
    grain = optional.imported("grain")
    if grain is not None and isinstance(source, grain.MapDataset):
        elements = (source[index] for index in range(len(source)))
        return (element for element in elements if element is not None)
    return source() if callable(source) else iter(source)


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
    gathered = {
        key: rows[key][indices] for key in ("lengths", *stream_blocks.ROW_FIELDS)
    }
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
            for key in ("lengths", *stream_blocks.ROW_FIELDS)
        },
    }


def _segment_max(values, starts):
    """The largest of `values` in each contiguous segment from `starts`."""
    return np.maximum.reduceat(values, starts) if len(values) else values


class NumpyBlockBucketer:
    """`stream_blocks.BlockBucketer` in numpy: batches of rows, bucket by
    bucket, from blocks of rows. Its arguments are `BlockBucketer`'s."""

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
        """`BlockBucketer._sort`: `((leaving rows, batch sizes), waiting
        rows)`."""
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
            key = np.where(full, last, _LAST - 1 - self.num_buckets + batch_bucket)
        key = np.where(batch_leaves, key, _LAST)
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
        sliced = {
            key: rows[key][start:stop] for key in ("lengths", *stream_blocks.ROW_FIELDS)
        }
        return {"values": tuple(values), **sliced}


def _with_end(marked, empty):
    yield from marked
    yield empty, True


class StreamBatches:
    """The batches of a stream's epochs, in numpy.

    Args:
        served: the frozen `StreamBucketBuilder` copy that serves the
            dataset (its settings, resolved buckets and counters).
        source: a Grain dataset, a Python iterable, or a function that
            returns a new iterator: the elements, one epoch per pass.
    """

    def __init__(self, served, source):
        served._counters = counters_lib.StreamCounters(
            len(served._elements.sequence_names)
        )
        self._served = served
        self._source = source
        self._elements = served._elements
        self._num_sequences = len(self._elements.sequence_positions)
        self.num_batches = served._num_batches  # None where unknown

    def start(self):
        """A pass over the source starts: `(its epoch, its batches)`. The
        epoch is the dataset's next one, and the statistics restart."""
        epoch = self._served._state.start()
        self._served._counters.begin_epoch(epoch)
        return epoch, self.epoch(epoch)

    def finish(self, epoch):
        """A pass yielded its last batch: the next one is `epoch + 1`."""
        self._served._state.finish(epoch)

    def epoch(self, epoch):
        """Every batch of `epoch` (numpy elements), counted into the
        statistics as it is made."""
        served = self._served
        constants = served._pipeline_constants()
        bucketer = NumpyBlockBucketer(
            constants["sizes"],
            self._num_sequences,
            served.buffer_size,
            served.shuffle,
            served.seed,
            expected_counts=served.bucket_counts,
            mismatch=stream_blocks.LENGTHS_MISMATCH,
        )
        blocks = (self._prepare(start, block) for start, block in self._blocks())
        for rows in bucketer.batches(blocks, epoch, self._empty()):
            element, counted, shape, full = self._measure(self._padded(rows))
            if served._counters.count(counted, shape, full, served.drop_remainder):
                yield element

    # ------------------------------------------------------------- elements
    def _blocks(self):
        """`(position of the first, flat components)` of every block of
        `BLOCK_ROWS` elements of one pass over the source."""
        block, start = [], 0
        for index, element in enumerate(open_source(self._source)):
            block.append(self._elements.flatten(element, index))
            if len(block) == stream_blocks.BLOCK_ROWS:
                yield start, block
                block, start = [], index + 1
        if block:
            yield start, block

    def _empty(self):
        components = self._elements.components
        values = [
            np.zeros((0, *(c.trailing if c.is_sequence else c.shape)), c.dtype)
            for c in self._ordered(components)
        ]
        fields = {key: np.zeros([0], np.int64) for key in stream_blocks.ROW_FIELDS}
        lengths = np.zeros([0, self._num_sequences], np.int64)
        return {"values": tuple(values), "lengths": lengths, **fields}

    def _ordered(self, flat):
        """Sequence components first, then the others (the rows' order)."""
        positions = self._elements.sequence_positions
        others = [v for i, v in enumerate(flat) if i not in positions]
        return [flat[i] for i in positions] + others

    # ---------------------------------------------------------------- blocks
    def _prepare(self, start, block):
        """`StreamBucketBuilder._prepare_block` in numpy: one block's rows,
        bucketed and cut; an element that breaks a rule is a ValueError
        that names it."""
        served = self._served
        names = self._elements.sequence_names
        columns = list(zip(*block, strict=True))
        sequences = self._ordered(columns)[: self._num_sequences]
        index = start + np.arange(len(block), dtype=np.int64)
        lengths = np.array(
            [[len(s) for s in row] for row in zip(*sequences, strict=True)], np.int64
        ).reshape(len(block), self._num_sequences)
        for reference, other, template in self._elements.aligned():
            unequal = lengths[:, other] != lengths[:, reference]
            _check_rows(unequal, index, lengths[:, other], template)
        if served._shortest is not None:
            column, minimum, template = served._shortest
            short = lengths[:, column] < minimum
            _check_rows(short, index, lengths[:, column], template)
        length = lengths.max(axis=1)
        keep, limit = None, plan_lib.NO_LIMIT
        if served.max_length is not None:
            too_long = length > served.max_length
            if served.overflow == "error":
                _check_rows(
                    too_long,
                    index,
                    length,
                    "Element {} has length {}, longer than max_length="
                    f"{served.max_length}. Set overflow to truncate or drop, "
                    "or raise max_length.",
                )
            elif served.overflow == "truncate":
                limit = served.max_length
            else:
                keep = ~too_long
                served._counters.add_dropped(int(too_long.sum()))
        bucket = served._buckets.assign(np.minimum(length, limit)).astype(np.int64)
        limit = served._buckets.cut_limits(bucket, limit)
        kept = np.minimum(lengths, limit[:, None])
        for column, name in enumerate(names):
            fixed = served._paddings[name].fixed_length
            if fixed is not None:
                _check_rows(
                    kept[:, column] > fixed,
                    index,
                    kept[:, column],
                    f"Component {name} is padded to the fixed length {fixed}, "
                    "but element {} is {} long. Raise the length, or set "
                    "max_length with overflow truncate.",
                )
        if served.bucket_counts is not None:
            longest = served._pipeline_constants()["longest"]
            kept_length = kept.max(axis=1)
            longer = kept_length > longest[bucket]
            if keep is not None:  # rows the drop policy leaves out are not
                longer &= keep
            _check_rows(
                longer,
                index,
                kept_length,
                "Element {} has length {} (after any truncation), longer "
                "than any in its bucket among the lengths given to "
                f"build(): {stream_blocks.LENGTHS_MISMATCH}",
            )
        values = [
            _cut(np.concatenate(sequence), lengths[:, column], kept[:, column])
            for column, sequence in enumerate(sequences)
        ]
        others = [np.stack(c) for c in self._ordered(columns)[self._num_sequences :]]
        rows = {
            "values": tuple(values + others),
            "lengths": kept,
            "bucket": bucket,
            "index": index,
            "truncated": np.any(kept < lengths, axis=1).astype(np.int64),
            "truncated_positions": (lengths - kept).sum(axis=1),
        }
        if keep is not None:
            rows = gather(rows, np.flatnonzero(keep), self._num_sequences)
        return rows

    # --------------------------------------------------------------- batches
    def _padded(self, rows):
        """`StreamBucketBuilder._padded` in numpy: the components of one
        batch, padded, in component order."""
        served = self._served
        sequences = iter(rows["values"][: self._num_sequences])
        others = iter(rows["values"][self._num_sequences :])
        bounds = served._pipeline_constants()["bounds"]
        components = []
        for component in self._elements.components:
            if not component.is_sequence:
                components.append(next(others))
                continue
            column = self._elements.sequence_names.index(component.name)
            padding = served._paddings[component.name]
            lengths = rows["lengths"][:, column]
            bound = None
            if padding.length == padding_lib.BUCKET:
                bound = bounds[rows["bucket"][0]]
            length = plan_lib.padded_length(
                padding, lengths.max(), bound, served.pad_to_multiple
            )
            components.append(
                pad_rows(
                    next(sequences),
                    np.cumsum(lengths) - lengths,
                    lengths,
                    len(lengths),
                    int(length),
                    np.asarray(padding.value).astype(component.dtype),
                )
            )
        return components, rows

    def _measure(self, padded):
        """`StreamBucketBuilder._measure_batch` in numpy: `(element,
        counted, shape, full)`."""
        served = self._served
        flat, rows = padded
        size = len(rows["bucket"])
        bucket_size = served._pipeline_constants()["sizes"][rows["bucket"][0]]
        fed, lengths = size, rows["lengths"]
        if served._fills:
            fed = remainders.rows_fed(
                size, bucket_size, served.remainder, served.batch_multiple
            )
            flat = [outputs.fill_numpy_rows(a, fed) for a in flat]
            lengths = outputs.fill_numpy_rows(lengths, fed)
        positions = self._elements.sequence_positions
        padded_lengths = np.array([flat[i].shape[1] for i in positions], np.int64)
        scalars = [
            0,  # EPOCH
            1,  # BATCHES
            size,  # ELEMENTS
            rows["truncated"].sum(),
            rows["truncated_positions"].sum(),
            0,  # DROPPED
        ]
        counted = np.concatenate(
            [
                np.array(scalars, np.int64),
                rows["lengths"].sum(axis=0),
                fed * padded_lengths,
            ]
        )
        shape = ",".join(str(int(d)) for d in [fed, *padded_lengths])
        element = self._elements.pack(flat)
        if served._finishes_batches():
            roles = list(element) if isinstance(element, tuple) else [element]
            roles += [None] * (len(sources.ROLES) - len(roles))
            element = outputs.finish_numpy_batch(
                *roles,
                {
                    name: lengths[:, column]
                    for column, name in enumerate(self._elements.sequence_names)
                },
                output_lengths=served.output_lengths,
                output_mask=served.output_mask,
                real_rows=size if served._fills else None,
                model_inputs=served.model_inputs,
            )
        return element, counted, shape, size == bucket_size


def _cut(values, lengths, kept):
    """Flat `values` of rows of `lengths`, row i cut to `kept[i]`."""
    if np.array_equal(lengths, kept):
        return values
    return values[ragged_range(lengths) < np.repeat(kept, lengths)]


def _check_rows(bad, index, value, template):
    """A ValueError naming the first `bad` row: `template` formatted with
    its `index` and `value`."""
    if bad.any():
        first = int(np.argmax(bad))
        raise ValueError(template.format(index[first], value[first]))
