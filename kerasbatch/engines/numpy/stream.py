"""A stream's batches in numpy: `StreamBucketBuilder` on the numpy engines.

The twin of the `tf.data` stream (`kerasbatch.engines.tf_data.stream_pipeline`),
rule for rule: the elements of a Grain dataset or a Python iterable are
read in blocks of
`stream_blocks.BLOCK_ROWS`, each block is bucketed and cut at once, the
plan of `kerasbatch.planning.stream_blocks` sorts the rows into batches,
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
from kerasbatch.engines.numpy.batches import pad_rows
from kerasbatch.planning import plan as plan_lib
from kerasbatch.planning import remainders, stream_blocks
from kerasbatch.planning.plan import ragged_range


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


class StreamBatches:
    """The batches of a stream's epochs, in numpy.

    Makes the dataset's counters (`served.counters`).

    Args:
        served: the dataset's `kerasbatch.engines.served.StreamServed`: its
            `StreamBuilt` value (settings, resolved buckets, and the
            source: a Grain dataset, a Python iterable, or a function that
            returns a new iterator, read once per epoch) and run state.
    """

    def __init__(self, served):
        built = served.built
        served.counters = counters_lib.StreamCounters(
            len(built.elements.sequence_names)
        )
        self._served = served
        self._built = built
        self._settings = built.settings
        self._elements = built.elements
        self._num_sequences = len(self._elements.sequence_positions)
        self.num_batches = built.steps  # None where unknown

    def start(self):
        """A pass over the source starts: `(its epoch, its batches)`. The
        epoch is the dataset's next one, and the statistics restart."""
        epoch = self._served.state.start()
        self._served.counters.begin_epoch(epoch)
        return epoch, self.epoch(epoch)

    def finish(self, epoch):
        """A pass yielded its last batch: the next one is `epoch + 1`."""
        self._served.state.finish(epoch)

    def epoch(self, epoch):
        """Every batch of `epoch` (numpy elements), counted into the
        statistics as it is made."""
        settings, counters = self._settings, self._served.counters
        bucketer = stream_blocks.BlockBucketer(
            self._built.constants["sizes"],
            self._num_sequences,
            settings.buffer_size,
            settings.shuffle,
            settings.seed,
            expected_counts=settings.bucket_counts,
            mismatch=stream_blocks.LENGTHS_MISMATCH,
        )
        blocks = (self._prepare(start, block) for start, block in self._blocks())
        for rows in bucketer.batches(blocks, epoch, self._empty()):
            element, counted, shape, full = self._measure(self._padded(rows))
            if counters.count(counted, shape, full, settings.drop_remainder):
                yield element

    # ------------------------------------------------------------- elements
    def _blocks(self):
        """`(position of the first, flat components)` of every block of
        `BLOCK_ROWS` elements of one pass over the source."""
        block, start = [], 0
        for index, element in enumerate(open_source(self._built.source)):
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
        """`StreamRows.prepare_block` in numpy: one block's rows,
        bucketed and cut; an element that breaks a rule is a ValueError
        that names it."""
        built, settings = self._built, self._settings
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
        if built.shortest is not None:
            column, minimum, template = built.shortest
            short = lengths[:, column] < minimum
            _check_rows(short, index, lengths[:, column], template)
        length = lengths.max(axis=1)
        keep, limit = None, plan_lib.NO_LIMIT
        if settings.max_length is not None:
            too_long = length > settings.max_length
            if settings.overflow == "error":
                _check_rows(
                    too_long,
                    index,
                    length,
                    "Element {} has length {}, longer than max_length="
                    f"{settings.max_length}. Set overflow to truncate or drop, "
                    "or raise max_length.",
                )
            elif settings.overflow == "truncate":
                limit = settings.max_length
            else:
                keep = ~too_long
                self._served.counters.add_dropped(int(too_long.sum()))
        bucket = built.buckets.assign(np.minimum(length, limit)).astype(np.int64)
        limit = built.buckets.cut_limits(bucket, limit)
        kept = np.minimum(lengths, limit[:, None])
        for column, name in enumerate(names):
            fixed = built.paddings[name].fixed_length
            if fixed is not None:
                _check_rows(
                    kept[:, column] > fixed,
                    index,
                    kept[:, column],
                    stream_blocks.FIXED_LENGTH_EXCEEDED.format(name=name, fixed=fixed),
                )
        if settings.bucket_counts is not None:
            longest = built.constants["longest"]
            kept_length = kept.max(axis=1)
            longer = kept_length > longest[bucket]
            if keep is not None:  # rows the drop policy leaves out are not
                longer &= keep
            _check_rows(
                longer,
                index,
                kept_length,
                stream_blocks.LONGER_THAN_GIVEN,
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
            rows = stream_blocks.gather(rows, np.flatnonzero(keep), self._num_sequences)
        return rows

    # --------------------------------------------------------------- batches
    def _padded(self, rows):
        """`StreamRows.padded` in numpy: the components of one
        batch, padded, in component order."""
        built, settings = self._built, self._settings
        sequences = iter(rows["values"][: self._num_sequences])
        others = iter(rows["values"][self._num_sequences :])
        bounds = built.constants["bounds"]
        components = []
        for component in self._elements.components:
            if not component.is_sequence:
                components.append(next(others))
                continue
            column = self._elements.sequence_names.index(component.name)
            padding = built.paddings[component.name]
            lengths = rows["lengths"][:, column]
            bound = None
            if padding.length == padding_lib.BUCKET:
                bound = bounds[rows["bucket"][0]]
            length = plan_lib.padded_length(
                padding, lengths.max(), bound, settings.pad_to_multiple
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
        """`StreamRows.measure_batch` in numpy: `(element,
        counted, shape, full)`."""
        built, settings = self._built, self._settings
        flat, rows = padded
        size = len(rows["bucket"])
        bucket_size = built.constants["sizes"][rows["bucket"][0]]
        fed, lengths = size, rows["lengths"]
        if built.fills:
            fed = remainders.rows_fed(
                size, bucket_size, settings.remainder, settings.batch_multiple
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
        if built.finishes:
            roles = list(element) if isinstance(element, tuple) else [element]
            roles += [None] * (len(sources.ROLES) - len(roles))
            element = outputs.finish(
                outputs.NumpyOps,
                *roles,
                {
                    name: lengths[:, column]
                    for column, name in enumerate(self._elements.sequence_names)
                },
                output_lengths=settings.output_lengths,
                output_mask=settings.output_mask,
                real_rows=size if built.fills else None,
                model_inputs=settings.model_inputs,
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
