"""The `tf.data` engine: what turns a plan into batches inside a graph.

- `GraphEpochState`: a built dataset's epochs in CPU variables, which its
  graph reads and advances: an iteration reads the epoch, and the counter
  moves past it when the epoch's last batch is taken (an iteration given
  up part-way repeats its epoch); the tf.data service's pipelines advance
  it when an iteration starts (`start_in_graph`);
- `BatchArguments` and `BatchFunction`: the seam where a batch of the plan
  becomes tensors, and the map that gathers, cuts and pads it (the twin of
  `kerasbatch.engines.numpy.batches.BatchFunction`);
- `checkpointable`: the options every pipeline runs with.

`kerasbatch.engines.tf_data.pipeline` assembles the pipelines from these.
"""

from __future__ import annotations

import dataclasses
import typing

from kerasbatch.data import sources
from kerasbatch.engines.tf_data import orders as epochs_lib
from kerasbatch.engines.tf_data import outputs, tensors
from kerasbatch.optional import tensorflow as tf
from kerasbatch.planning import orders as orders_lib
from kerasbatch.planning import plan as plan_lib


class GraphEpochState:
    """`kerasbatch.engines.epoch_state.EpochState` for a `tf.data` graph.

    Args:
        epoch: the epoch the next iteration yields.
    """

    def __init__(self, epoch=0):
        with tf.device("/CPU:0"):
            self._epoch = tf.Variable(
                int(epoch), dtype=tf.int64, trainable=False, name="epoch"
            )
            self._started = tf.Variable(
                -1, dtype=tf.int64, trainable=False, name="started_epoch"
            )

    def next_epoch(self):
        return int(self._epoch.numpy())

    def assign(self, epoch):
        self._epoch.assign(int(epoch))

    def started_epoch(self):
        started = int(self._started.numpy())
        return None if started < 0 else started

    # ------------------------------------------------------ in the graph
    def start_in_graph(self):
        """Reads and advances the epoch counter: the iteration's epoch."""
        epoch = self._epoch.assign_add(1) - 1
        with tf.control_dependencies([self._started.assign(epoch)]):
            return tf.identity(epoch)

    def read_in_graph(self):
        """Reads the epoch counter, not advancing it."""
        epoch = self._epoch.read_value()
        with tf.control_dependencies([self._started.assign(epoch)]):
            return tf.identity(epoch)

    def mark_started(self, epoch):
        """Records `epoch` (a tensor) as started; returns the op."""
        return self._started.assign(epoch)

    def advance_past_started(self):
        """Sets the next epoch to the started one + 1; returns the op."""
        return self._epoch.assign(self._started + 1)


class BatchArguments(typing.NamedTuple):
    """What the pipeline knows of one batch before gathering it (or, stacked,
    of every batch of an epoch): the seam where plans become tensors.

    Attributes:
        indices: int64 `(width,)` element indices, the batch's first `size`
            entries (the rest is -1).
        size: int64 elements in the batch.
        rows: int64 rows fed: `size` and filler rows (`batch_multiple`).
        padded_lengths: int64 `(sequence components,)` padded lengths.
        limit: int64 cut length of the batch's elements (`NO_LIMIT`: none).
    """

    indices: tf.Tensor
    size: tf.Tensor
    rows: tf.Tensor
    padded_lengths: tf.Tensor
    limit: tf.Tensor


@dataclasses.dataclass(frozen=True)
class EpochTensors:
    """What `kerasbatch.engines.tf_data.rows.Rows` reads, made once per
    dataset.

    Attributes:
        order: the `kerasbatch.engines.tf_data.orders.GraphOrder` of the batches.
        limits: cut length of every element (`per_element`).
        bounds: bucket padding bound of every element, or None (no
            component is padded to its bucket's bound).
        columns: `(lengths, Padding)` of every sequence component (lengths
            None unless it is padded to its batch's longest element).
    """

    order: epochs_lib.GraphOrder
    limits: tf.Tensor
    bounds: tf.Tensor | None
    columns: list


class BatchFunction:
    """Gathers and pads one batch: `BatchArguments → element`."""

    def __init__(self, built, static_batch_size):
        prepared = built.prepared
        settings = built.settings
        data = prepared.data
        self.static_batch_size = static_batch_size
        self.components = data.components
        self.structure = data.structure
        self.tensors = [tensors.component_tensor(c) for c in self.components]
        self.paddings = prepared.paddings
        self.may_cut = bool((prepared.element_limits != plan_lib.NO_LIMIT).any())
        self.output_lengths = settings.output_lengths
        self.output_mask = settings.output_mask
        self.model_inputs = settings.model_inputs
        self.fills = built.fills

    def __call__(self, batch):
        indices = batch.indices[: batch.size]
        if self.fills:
            indices = outputs.fill_rows(indices, batch.rows)
        tensors, lengths = {}, {}
        column = 0
        for component, tensor in zip(self.components, self.tensors, strict=True):
            if not component.is_sequence:
                gathered = self._gather(component, tensor, indices)
                gathered.set_shape([self.static_batch_size, *component.trailing_shape])
                tensors[component.name] = gathered
                continue
            rows = self._gather(component, tensor, indices)
            if self.may_cut:
                # No row is longer than all values: a limit past that
                # (`NO_LIMIT`) would overflow the ends of the slice.
                total = tf.shape(rows.values, out_type=tf.int64)[0]
                rows = rows[:, : tf.minimum(batch.limit, total)]
            shape = tf.stack(
                [batch.rows, batch.padded_lengths[column], *component.trailing_shape]
            )
            value = tf.cast(self.paddings[component.name].value, tensor.dtype)
            padded = rows.to_tensor(value, shape=shape)
            padded.set_shape(
                [
                    self.static_batch_size,
                    self.paddings[component.name].fixed_length,
                    *component.trailing_shape,
                ]
            )
            tensors[component.name] = padded
            lengths[component.name] = rows.row_lengths()
            column += 1
        return self._structure(tensors, lengths, batch)

    def _gather(self, component, tensor, indices):
        """The batch's rows of `component`: ragged for sequences, else dense."""
        return tf.gather(tensor, indices)

    def _structure(self, tensors, lengths, batch):
        roles = [
            None if self.structure[role] is None else self._role(role, tensors)
            for role in sources.ROLES
        ]
        return outputs.finish_batch(
            *roles,
            lengths,
            output_lengths=self.output_lengths,
            output_mask=self.output_mask,
            real_rows=batch.size if self.fills else None,
            model_inputs=self.model_inputs,
        )

    def _role(self, role, tensors):
        if self.structure[role] == "single":
            return tensors[role]
        return {c.key: tensors[c.name] for c in self.components if c.role == role}


def per_element(values):
    """A per-element int array as a tensor for `take`: a scalar when all
    values are equal, else int32 where they fit (half the memory; the
    tensor shares the memory of the int32 copy, `epochs.shared`)."""
    if len(values) and (values == values[0]).all():
        return tf.constant(values[0], tf.int64)
    return epochs_lib.shared(orders_lib.compact(values))


def take(values, indices):
    """int64 `values[indices]` of a `per_element` tensor."""
    if values.shape.rank == 0:
        return tf.fill(tf.shape(indices), values)
    return tf.cast(tf.gather(values, indices), tf.int64)


def longest(values, rows):
    """int64 largest `values` (a `per_element` tensor) of every row of
    `rows` (element indices padded with -1; each row holds one or more),
    gathered in the values' own dtype."""
    if values.shape.rank == 0:
        return tf.fill(tf.shape(rows)[:1], values)
    gathered = tf.gather(values, tf.maximum(rows, 0))
    gathered = tf.where(rows >= 0, gathered, tf.zeros([], gathered.dtype))
    return tf.cast(tf.reduce_max(gathered, axis=1), tf.int64)


def checkpointable(dataset):
    """`dataset`, whose iterator a `tf.train.Checkpoint` saves mid-epoch, and
    whose graph tf.data runs as built.

    The builder's variables (epoch counter, statistics counters) are state
    outside the iterator: a checkpoint keeps the running epoch and the
    position in it, and leaves those out (`set_epoch` drives the counter).
    tf.data's default graph rewrites would serialise the graph, with a copy
    of the data it holds, every time an iterator starts; the pipelines are
    already what those rewrites make (parallel maps, prefetch), so they are
    off.
    """
    options = tf.data.Options()
    options.experimental_external_state_policy = (
        tf.data.experimental.ExternalStatePolicy.IGNORE
    )
    options.experimental_optimization.apply_default_optimizations = False
    return dataset.with_options(options)


def empty_like(spec):
    """A value of `spec` (a tensor or sparse tensor spec) with no entries."""
    shape = [d or 0 for d in spec.shape]
    if isinstance(spec, tf.SparseTensorSpec):
        return tf.SparseTensor(
            tf.zeros([0, len(shape)], tf.int64), tf.zeros([0], spec.dtype), shape
        )
    return tf.zeros(shape, spec.dtype)
