"""A stream's rows in a graph: each block of input bucketed, cut and
checked, and each batch padded and measured, in TF ops on whole blocks
(the rows of `kerasbatch.planning.stream_blocks`). The twin of
`kerasbatch.engines.numpy.stream`, rule for rule.
"""

from kerasbatch import optional
from kerasbatch.data import padding as padding_lib
from kerasbatch.data import sources
from kerasbatch.data.stream_elements import Component, StreamElements
from kerasbatch.engines.tf_data import buckets as graph_buckets
from kerasbatch.engines.tf_data import outputs
from kerasbatch.engines.tf_data import stream_blocks as graph_blocks
from kerasbatch.optional import tensorflow as tf
from kerasbatch.planning import plan as plan_lib
from kerasbatch.planning import remainders as remainders_lib
from kerasbatch.planning.stream_blocks import (
    FIXED_LENGTH_EXCEEDED,
    LONGER_THAN_GIVEN,
    ROW_FIELDS,
)

#: tf.data's cardinality of a dataset whose size is unknown.
UNKNOWN_CARDINALITY = -2


class StreamRows:
    """The graph functions of one stream's rows and batches.

    Args:
        built: the stream's `kerasbatch.planning.built.StreamBuilt`.
        counters: its `GraphStreamCounters` (the drop policy counts into
            them).
    """

    def __init__(self, built, counters):
        self.built = built
        self.settings = built.settings
        self.elements = built.elements
        self.counters = counters

    def prepare_block(self, start, block):
        """One block of input rows: their buckets, cut sequence components
        and what statistics need, as rows of `stream_blocks` (sequence
        components first, then the others; rows the drop policy leaves out
        are counted and removed). `start`: the position of the block's first
        row in the input."""
        flat = tf.nest.flatten(block)
        positions = self.elements.sequence_positions
        index = start + tf.range(num_rows(block))
        sequences = [_as_ragged(flat[i]) for i in positions]
        lengths = tf.stack([s.row_lengths() for s in sequences], axis=1)
        length = tf.reduce_max(lengths, axis=1)
        checks, keep, limit = [], None, None
        for reference, other, template in self.elements.aligned():
            unequal = tf.not_equal(lengths[:, other], lengths[:, reference])
            checks.append(_check_rows(unequal, index, lengths[:, other], template))
        if self.built.shortest is not None:
            column, minimum, template = self.built.shortest
            short = lengths[:, column] < minimum
            checks.append(_check_rows(short, index, lengths[:, column], template))
        if self.settings.max_length is not None:
            too_long = length > self.settings.max_length
            if self.settings.overflow == "error":
                checks.append(
                    _check_rows(
                        too_long,
                        index,
                        length,
                        "Element {} has length {}, longer than max_length="
                        f"{self.settings.max_length}. Set overflow to truncate or drop, "
                        "or raise max_length.",
                    )
                )
            elif self.settings.overflow == "truncate":
                limit = tf.constant(self.settings.max_length, tf.int64)
            else:
                keep = tf.logical_not(too_long)
                num_dropped = tf.reduce_sum(tf.cast(too_long, tf.int64))
                checks.append(self.counters.add_dropped(num_dropped))
        cut_length = length if limit is None else tf.minimum(length, limit)
        bucket = graph_buckets.assign(self.built.buckets, cut_length)
        limit = graph_buckets.cut_limit(self.built.buckets, bucket, limit)
        kept = lengths
        values = [s.values for s in sequences]
        if limit is not None:
            limit = tf.broadcast_to(limit, tf.shape(length))
            kept = tf.minimum(lengths, limit[:, None])
            values = [_cut_rows(s, limit) for s in sequences]
        for column, name in enumerate(self.elements.sequence_names):
            fixed = self.built.paddings[name].fixed_length
            if fixed is not None:
                checks.append(
                    _check_rows(
                        kept[:, column] > fixed,
                        index,
                        kept[:, column],
                        FIXED_LENGTH_EXCEEDED.format(name=name, fixed=fixed),
                    )
                )
        if self.settings.bucket_counts is not None:
            longest = self.built.constants["longest"]
            kept_length = tf.reduce_max(kept, axis=1)
            longer = kept_length > tf.gather(longest, bucket)
            if keep is not None:  # rows the drop policy leaves out are not
                longer = tf.logical_and(longer, keep)
            checks.append(
                _check_rows(
                    longer,
                    index,
                    kept_length,
                    LONGER_THAN_GIVEN,
                )
            )
        others = [t for i, t in enumerate(flat) if i not in positions]
        with tf.control_dependencies(checks):
            rows = {
                "values": tuple(values + others),
                "lengths": tf.identity(kept),
                "bucket": bucket,
                "index": index,
                "truncated": tf.cast(tf.reduce_any(kept < lengths, axis=1), tf.int64),
                "truncated_positions": tf.reduce_sum(lengths - kept, axis=1),
            }
        if keep is not None:
            kept_rows = tf.reshape(tf.where(keep), [-1])
            rows = graph_blocks.gather(rows, kept_rows, range(len(positions)))
        return rows

    def padded(self, rows):
        """One batch of rows, its components padded and in input order: what
        `measure_batch` takes."""
        num_sequences = len(self.elements.sequence_positions)
        sequences = iter(rows["values"][:num_sequences])
        others = iter(rows["values"][num_sequences:])
        components = []
        for component in self.elements.components:
            name = component.name
            if name not in self.built.paddings:
                components.append(next(others))
                continue
            column = self.elements.sequence_names.index(name)
            padding = self.built.paddings[name]
            sequence = tf.RaggedTensor.from_row_lengths(
                next(sequences), rows["lengths"][:, column], validate=False
            )
            bound = None
            if padding.length == padding_lib.BUCKET:
                bound = tf.gather(self.built.constants["bounds"], rows["bucket"][0])
            length = plan_lib.padded_length(
                padding,
                tf.reduce_max(sequence.row_lengths()),
                bound,
                self.settings.pad_to_multiple,
            )
            trailing = [-1 if d is None else d for d in component.trailing]
            shape = tf.stack([-1, tf.cast(length, tf.int64), *trailing])
            components.append(
                sequence.to_tensor(
                    default_value=tf.cast(padding.value, component.dtype), shape=shape
                )
            )
        return {
            "components": tuple(components),
            **{key: rows[key] for key in ("lengths", *ROW_FIELDS)},
        }

    def measure_batch(self, batch):
        """One batch in the input structure, with what the statistics count.

        Returns `(element, counted, shape, full)`: the counters' increment
        (`kerasbatch.engines.stream_counters`), the
        batch's shape as a string `"size,length,..."`, and whether it is a
        full batch (what `drop_remainder` keeps). Sums over the batch: no
        per-element work, no branches.
        """
        flat = list(batch["components"])
        positions = self.elements.sequence_positions
        size = tf.shape(batch["bucket"], out_type=tf.int64)[0]
        sizes = self.built.constants["sizes"]
        bucket_size = tf.gather(sizes, batch["bucket"][0])
        rows, lengths = size, batch["lengths"]
        if self.built.fills:
            rows = remainders_lib.rows_fed(
                size, bucket_size, self.settings.remainder, self.settings.batch_multiple
            )
            flat = [outputs.fill_rows(t, rows) for t in flat]
            lengths = outputs.fill_rows(lengths, rows)
        padded_lengths = tf.stack(
            [tf.shape(flat[i], out_type=tf.int64)[1] for i in positions]
        )
        zero = tf.constant(0, tf.int64)
        scalars = [
            zero,  # EPOCH
            tf.constant(1, tf.int64),  # BATCHES
            size,  # ELEMENTS
            tf.reduce_sum(batch.get("truncated", zero)),
            tf.reduce_sum(batch.get("truncated_positions", zero)),
            zero,  # DROPPED
        ]
        counted = tf.concat(
            [
                tf.stack(scalars),
                tf.reduce_sum(batch["lengths"], axis=0),
                rows * padded_lengths,
            ],
            axis=0,
        )
        shape = tf.strings.reduce_join(
            tf.strings.as_string(tf.concat([[rows], padded_lengths], axis=0)),
            separator=",",
        )
        full = size == bucket_size
        element = self.elements.pack(flat)
        if self.built.finishes:
            element = self.with_outputs(element, lengths, size)
        return element, counted, shape, full

    def with_outputs(self, element, lengths, size):
        """`output_lengths`, `output_mask` and the weights of filler rows
        (`kerasbatch.data.outputs`); `size`: the batch's real rows."""
        roles = list(element) if isinstance(element, tuple) else [element]
        roles += [None] * (len(sources.ROLES) - len(roles))
        by_name = {
            name: lengths[:, column]
            for column, name in enumerate(self.elements.sequence_names)
        }
        return outputs.finish_batch(
            *roles,
            by_name,
            output_lengths=self.settings.output_lengths,
            output_mask=self.settings.output_mask,
            real_rows=size if self.built.fills else None,
            model_inputs=self.settings.model_inputs,
        )


def _check_rows(bad, index, value, template):
    """An assertion that no row is `bad`; when one is, the message names the
    first: `template` formatted with its `index` and `value`."""

    def fail():
        first = tf.argmax(tf.cast(bad, tf.int32))
        message = tf.strings.format(template, (index[first], value[first]))
        with tf.control_dependencies([tf.debugging.Assert(False, [message])]):
            return tf.constant(False)

    return tf.cond(tf.reduce_any(bad), fail, lambda: tf.constant(True))


def num_rows(block):
    first = tf.nest.flatten(block)[0]
    if isinstance(first, tf.RaggedTensor):
        return first.nrows(out_type=tf.int64)
    return tf.shape(first, out_type=tf.int64)[0]


def _as_ragged(sequences):
    """A block's sequence component as a `tf.RaggedTensor` with int64 row
    lengths (a dense block is rows of one length)."""
    if not isinstance(sequences, tf.RaggedTensor):
        sequences = tf.RaggedTensor.from_tensor(sequences)
    return sequences.with_row_splits_dtype(tf.int64)


def _cut_rows(sequences, limit):
    """The flat values of ragged `sequences` with row i cut to `limit[i]`."""
    lengths = sequences.row_lengths()
    position = tf.ragged.range(lengths).flat_values
    kept = position < tf.repeat(limit, lengths)
    return tf.boolean_mask(sequences.values, kept)


def example_spec(block_spec):
    """The spec of one example of a block of examples (`build(batched=True)`):
    a ragged component's rows are sequences, a dense one's per-example."""

    def example(spec, where):
        if isinstance(spec, tf.RaggedTensorSpec):
            if spec.ragged_rank != 1:
                raise ValueError(
                    f"{where} is ragged in {spec.ragged_rank} dimensions ({spec}); "
                    "a block's sequence components take one ragged dimension, "
                    "the sequence, after the example dimension."
                )
            return tf.TensorSpec(spec.shape[1:], spec.dtype)
        if isinstance(spec, tf.TensorSpec) and spec.shape.rank:
            return tf.TensorSpec(spec.shape[1:], spec.dtype)
        raise TypeError(
            f"{where} is {spec!r}; with batched=True every component is a "
            "tensor or ragged tensor with a first, example dimension."
        )

    flat = tf.nest.flatten(block_spec)
    return tf.nest.pack_sequence_as(
        block_spec,
        [example(spec, f"component {i} of the blocks") for i, spec in enumerate(flat)],
    )


def stream_elements(dataset, shardable, batched):
    """`(elements, cardinality)` of a `tf.data.Dataset` source (`batched`:
    its elements are blocks of examples); a clear error for what the
    `tf.data` engine cannot stream."""
    if optional.imported("tensorflow") is None and not optional.tensorflow.available:
        raise ImportError(
            "StreamBucketBuilder streams tf.data datasets on the 'tf.data' "
            "engine, which needs TensorFlow: pip install tensorflow. "
            "Without it, build(source, engine='grain') streams a Grain "
            "dataset or a Python iterable."
        )
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(
            "StreamBucketBuilder.build(engine='tf.data') takes a "
            f"tf.data.Dataset, got {type(dataset).__name__}; stream a "
            "Grain dataset or a Python iterable with engine='grain' or "
            "'python'."
        )
    if shardable is not None and shardable.element_spec != dataset.element_spec:
        raise ValueError(
            "shardable must be the same dataset with a shard hint: its "
            f"element_spec {shardable.element_spec} differs from the "
            f"dataset's {dataset.element_spec}."
        )
    spec = dataset.element_spec
    elements = elements_of_spec(example_spec(spec) if batched else spec)
    cardinality = int(dataset.cardinality())
    if batched and cardinality >= 0:  # blocks, of elements not yet known
        cardinality = UNKNOWN_CARDINALITY
    return elements, cardinality


def elements_of_spec(element_spec):
    """The components of a `tf.data` dataset's `element_spec`: tensors
    whose first dimension is None are sequences."""

    def component(role, key, spec):
        where = role if key is None else f"{role}[{key!r}]"
        if isinstance(spec, tf.RaggedTensorSpec) and spec.ragged_rank == 0:
            spec = tf.TensorSpec(spec.shape, spec.dtype)  # dense at run time
        if isinstance(spec, tf.RaggedTensorSpec | tf.SparseTensorSpec):
            kind = "ragged" if isinstance(spec, tf.RaggedTensorSpec) else "sparse"
            raise TypeError(
                f"{where} is a {kind} tensor ({spec}); StreamBucketBuilder "
                "takes dense tensors per element, with a variable first "
                "dimension. Convert it in a map (e.g. .to_tensor()) or "
                "split its rows into elements."
            )
        if not isinstance(spec, tf.TensorSpec):
            raise TypeError(
                f"{where} is {spec!r}; dataset elements must be x, (x, y) "
                "or (x, y, sample_weight), each a tensor or a dict of "
                "tensors."
            )
        if spec.shape.rank is None:
            raise ValueError(
                f"{where} has unknown rank ({spec}); set its shape, e.g. "
                "with tf.ensure_shape in a map."
            )
        sources.check_dtype(spec.dtype, where)
        return Component(
            sources.component_name(role, key),
            role,
            key,
            sources.as_numpy_dtype(spec.dtype),
            tuple(spec.shape.as_list()),
        )

    return StreamElements.of_roles(element_spec, component, "dataset")
