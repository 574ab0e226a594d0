"""A stream's `tf.data` pipeline: each iteration reads the source once, as
the next epoch, and plans its batches block by block in the graph.

`stream(built, epoch)` makes the dataset of a
`kerasbatch.planning.built.StreamBuilt` value. Each block of input rows is
bucketed, cut and checked in one call (`stream_rows.StreamRows`), the
bucketer sorts the rows into batches (`stream_blocks.BlockBucketer`), and
each batch is padded, measured and counted into the dataset's counters
(`stream_counters.GraphStreamCounters`), which its statistics read.
"""

from kerasbatch.engines import served as served_lib
from kerasbatch.engines.tf_data import batch as batch_lib
from kerasbatch.engines.tf_data import stream_blocks as graph_blocks
from kerasbatch.engines.tf_data.as_written import plain
from kerasbatch.engines.tf_data.epoch_pipeline import EpochPipeline, advances_when_taken
from kerasbatch.engines.tf_data.stream_counters import GraphStreamCounters
from kerasbatch.engines.tf_data.stream_rows import StreamRows, num_rows
from kerasbatch.optional import tensorflow as tf
from kerasbatch.planning import plan as plan_lib
from kerasbatch.planning.built import INFINITE
from kerasbatch.planning.stream_blocks import BLOCK_ROWS, LENGTHS_MISMATCH

#: Input elements read ahead in their own thread: the input pipeline runs
#: inside the stream's dataset function, where tf.data would otherwise run it
#: in the consuming thread, one element at a time (tensorflow/tensorflow#44278).
_INPUT_PREFETCH = 256


def stream(built, epoch=0):
    """A `tf.data.Dataset` of the batches of the stream `built` (a
    `StreamBuilt`), whose next iteration yields `epoch`, registered with its
    `StreamServed`."""
    served = served_lib.StreamServed(built, "tf.data", batch_lib.GraphEpochState(epoch))
    return served_lib.serve(StreamPipeline(served).dataset(), served)


class StreamPipeline(EpochPipeline):
    """The pipelines of one stream's built dataset.

    Makes the dataset's counters (`served.counters`) when it is first made.

    Args:
        served: the dataset's `kerasbatch.engines.served.StreamServed`.
    """

    def __init__(self, served):
        super().__init__(served)
        self.built = served.built
        self.settings = served.built.settings
        if served.counters is None:
            served.counters = GraphStreamCounters(
                len(self.built.elements.sequence_names)
            )
        self.counters = served.counters
        self.rows = StreamRows(self.built, self.counters)

    def dataset(self, replicas=None):
        """Each iteration: the next epoch's batches (`replicas`, a
        `ReplicaSlice`: the parts of every global batch those replicas
        train on, `replica_parts`).

        Each iteration reads the epoch and moves the counter past it when
        the iteration's last batch is taken (as the planned pipelines and
        the numpy engines do): Keras' look at a first batch on JAX and
        torch, to build the model, does not take an epoch. On TensorFlow,
        which never looks, it advances as an iteration starts
        (`advances_when_taken`).
        """
        if replicas is not None:
            return self.replica_parts(replicas)
        num_batches = self.built.num_batches
        at_end = advances_when_taken()
        batches = self.prefetched(self.epochs(advance=not at_end))
        if at_end and num_batches is None:  # the end is known when reached
            batches = self.advanced_at_end(batches)
        elif at_end and num_batches != INFINITE:
            batches = batches.enumerate().map(
                plain(
                    lambda number, batch: self.taken(number + 1 >= num_batches, batch)
                )
            )
        if num_batches is not None:
            batches = batches.apply(
                tf.data.experimental.assert_cardinality(num_batches)
            )
        return batch_lib.checkpointable(batches)

    def replica_parts(self, replicas):
        """The per-replica pipeline of `distribute`: every global batch, cut
        into `replicas`' parts. The epoch is read, and advanced when an
        iteration goes past its last part (`advanced_at_end`)."""
        parts = self.epochs(advance=False).flat_map(plain(replicas.parts_of))
        parts = self.advanced_at_end(self.prefetched(parts))
        if self.built.steps is not None:
            parts = parts.apply(
                tf.data.experimental.assert_cardinality(
                    self.built.steps * replicas.count
                )
            )
        return batch_lib.checkpointable(parts)

    def epochs(self, advance):
        """One iteration's batches, counted: the epoch read (and, with
        `advance`, advanced) as it begins."""
        source = self.built.source
        epochs = tf.data.Dataset.range(1).map(
            plain(lambda _: self.begin_epoch(advance=advance))
        )
        return epochs.flat_map(
            plain(lambda epoch: self.counted(self.epoch_batches(source, epoch)))
        )

    def taken(self, last, batch):
        """`batch`, taken by the consumer; the epoch's `last` batch moves the
        epoch counter past the epoch."""
        advanced = tf.cond(
            last,
            self.state.advance_past_started,
            lambda: tf.constant(-1, tf.int64),
        )
        with tf.control_dependencies([advanced]):
            return tf.nest.map_structure(tf.identity, batch)

    def begin_epoch(self, advance=True):
        """Reads the epoch counter (and advances it) and resets the
        statistics; returns the epoch (a tensor).

        The statistics of the epoch before are kept when another epoch
        begins: under a strategy, Keras starts an iterator of the next epoch
        before the callbacks of the epoch's end read the figures.
        """
        state = self.state
        epoch = state.start_in_graph() if advance else state.read_in_graph()
        return self.counters.begin_epoch(epoch)

    def epoch_batches(self, dataset, epoch, shard_hint=False, whole_input=True):
        """The batches of one epoch, made block by block: no function runs
        per element.

        With the lengths given to `build`, an element longer than its
        bucket's longest length there fails (`StreamRows.prepare_block`),
        and when the pipeline reads the `whole_input` (not a tf.data
        service worker's share) so does a bucket with more or, at the end,
        fewer elements than those lengths put in it: lengths that do not
        match the data would make a wrong cardinality and wrong
        `batch_shapes`.

        The batches come with what the statistics count (`counted` counts
        them): a pure function of the epoch, which can run where the
        dataset's variables are not (a tf.data service worker).
        """
        blocks = dataset
        if shard_hint:  # each tf.data service worker keeps its share
            hint = tf.data.experimental.SHARD_HINT
            blocks = blocks.shard(hint, hint)
        if not self.built.batched:
            blocks = blocks.prefetch(_INPUT_PREFETCH).ragged_batch(BLOCK_ROWS)
        numbered = blocks.prefetch(2).scan(
            tf.constant(0, tf.int64),
            plain(lambda seen, block: (seen + num_rows(block), (seen, block))),
        )
        rows = numbered.map(plain(self.rows.prepare_block))
        whole_input = whole_input and not shard_hint
        settings = self.settings
        bucketer = graph_blocks.BlockBucketer(
            self.built.constants["sizes"],
            range(len(self.built.elements.sequence_positions)),
            settings.buffer_size,
            settings.shuffle,
            settings.seed,
            expected_counts=settings.bucket_counts if whole_input else None,
            mismatch=LENGTHS_MISMATCH,
        )
        return bucketer.batches(
            rows,
            epoch,
            plain(lambda batch: self.rows.measure_batch(self.rows.padded(batch))),
        )

    def counted(self, measured):
        """The batches of `measured` (from `epoch_batches`), counted into
        the statistics; batches `drop_remainder` drops are counted as
        dropped and left out."""
        batches = measured.map(plain(self.count_batch))
        if self.settings.drop_remainder:
            batches = batches.filter(plain(lambda batch, full: full))
            batches = batches.map(plain(lambda batch, full: batch))
        return batches

    def count_batch(self, element, counted, shape, full):
        """Counts one measured batch into the statistics: one `assign_add` of
        the counters vector, one row of the running totals and one insert
        into the set of distinct shapes. Returns the element (and `full`
        with `drop_remainder`)."""
        settings = self.settings
        updates = self.counters.count(counted, shape, full, settings.drop_remainder)
        with tf.control_dependencies(updates):
            element = tf.nest.map_structure(tf.identity, element)
        sizes = settings.resolved_batch_sizes
        if settings.remainder != "keep" and len(set(sizes)) == 1:
            rows = int(plan_lib.round_up(sizes[0], settings.batch_multiple))
            for t in tf.nest.flatten(element):
                t.set_shape([rows] + [None] * (t.shape.rank - 1))
        if settings.drop_remainder:
            return element, full
        return element
