"""`SharedSettings`: what every builder shares, in memory or streaming.

Its settings (`settings.Settings`), the datasets it built and their run
state (`serving.Serving`), and the `tf.data` engine's pipelines around
them: `distribute` over a `tf.distribute` strategy, and the epoch counter
that their graphs read.
"""

import keras

from kerasbatch.builders import serving as serving_lib
from kerasbatch.builders.settings import Settings
from kerasbatch.engines import served as served_lib
from kerasbatch.engines.tf_data import batch as tf_data
from kerasbatch.engines.tf_data import distribute as replicas_lib
from kerasbatch.optional import tensorflow as tf
from kerasbatch.planning import plan as plan_lib

REMAINDERS = Settings.remainders


class SharedSettings(serving_lib.Serving, Settings):
    """What every builder shares, in memory or streaming: its settings
    (`kerasbatch.builders.settings.Settings`, the arguments below), the
    datasets it built and their run state
    (`kerasbatch.builders.serving.Serving`), and the `tf.data` engine's
    pipelines: `distribute` over a `tf.distribute` strategy, and the epoch
    counter read inside their graphs.

    Args:
        shuffle, seed, drop_remainder, remainder, padding, max_length,
            overflow, batch_multiple, pad_to_multiple, prefetch: see
            `kerasbatch.builders.settings.Settings`.
    """

    def __init__(self, **settings):
        super().__init__(**settings)
        self._init_serving()

    # ------------------------------------------------------- tf.data engine
    def distribute(self, strategy, dataset=None):
        """The built dataset's batches, per replica, for `strategy`.

        Returns a `tf.distribute.DistributedDataset` for `model.fit` under
        `strategy.scope()`. Every step, each replica gets its part of the
        same global batch of the plan (`batch_size` is global, as in Keras),
        padded to that batch's length: all replicas train on the same bucket
        and shape at every step, run the plan's number of steps, and one
        epoch holds every element exactly once across all replicas (see
        `kerasbatch.engines.tf_data.distribute`). A `kerasbatch.StreamBucketBuilder`
        pipeline (one per worker) reads the whole input and keeps its
        replicas' parts. Epochs, `set_epoch`,
        `statistics()` and the callbacks are those of the built dataset.

        Every batch must split into parts of equal rows: Keras builds the
        model at every `fit` under a strategy by averaging the first
        per-replica batch across replicas, which fails when parts differ
        (and equal parts compile one shape per step). A remainder or a
        token budget's batch that the replicas cannot share evenly is an
        error naming `batch_multiple` (filler rows of zero
        `sample_weight`, counted as padding) and `drop_remainder`.

        Args:
            strategy: a `tf.distribute.Strategy` (e.g. `MirroredStrategy`,
                `MultiWorkerMirroredStrategy`).
            dataset: the built dataset to distribute (default: the latest).

        Raises:
            RuntimeError: nothing was built yet.
            ValueError: a fixed global batch size (`batch_size`, or a
                bucket's) is not a multiple of the number of replicas, or
                another batch (a remainder) cannot be shared evenly.

        Example:

        >>> import numpy as np, tensorflow as tf
        >>> import kerasbatch
        >>> builder = kerasbatch.BucketBuilder(num_buckets=2, batch_size=4)
        >>> train = builder.build([np.ones(n) for n in range(1, 9)])
        >>> per_replica = builder.distribute(tf.distribute.get_strategy())
        >>> sum(1 for _ in per_replica) == len(train)
        True
        """
        if not isinstance(strategy, tf.distribute.Strategy):
            raise TypeError(
                "distribute takes a tf.distribute.Strategy (e.g. "
                f"MirroredStrategy), got {type(strategy).__name__}."
            )
        served = self._built_copy(dataset, "distribute", engine="tf.data")
        replicas_lib.check_divisible(
            [
                (what, size)
                for what, size in served._fixed_batch_sizes()
                if plan_lib.round_up(size, self.batch_multiple)
                % strategy.num_replicas_in_sync
            ],
            strategy.num_replicas_in_sync,
            type(self).__name__,
        )
        served._check_even_split(
            *served._distributed_batch_rows(),
            strategy.num_replicas_in_sync,
            f"The strategy's {strategy.num_replicas_in_sync} replicas each "
            "take an equal part of every batch",
        )

        def per_pipeline(input_context):
            replicas = replicas_lib.ReplicaSlice.of(strategy, input_context)
            return served._make_dataset(replicas)

        distributed = strategy.distribute_datasets_from_function(per_pipeline)
        steps = served._steps_per_epoch()
        if steps is not None:
            # tf.distribute reports the per-pipeline cardinality (one element
            # per local replica and step), which Keras takes for steps.
            distributed._cardinality = steps
        served_lib.serve(distributed, served)
        return distributed

    def _make_dataset(self, replicas=None):
        """The built dataset's pipeline; with `replicas` (a `ReplicaSlice`),
        the parts of every global batch those replicas train on (subclass
        hook)."""
        raise NotImplementedError

    def _start_epoch(self):
        """In a pipeline: reads and advances the epoch counter (a tensor)."""
        return self._state.start_in_graph()

    def _read_epoch(self):
        """In a pipeline: reads the epoch counter (a tensor), not advancing it."""
        return self._state.read_in_graph()

    def _advances_when_taken(self):
        """Whether a pipeline moves the epoch counter past its epoch when
        the consumer takes the last batch (exact, whoever looks at a first
        batch), rather than when an iteration starts (free).

        Keras on JAX and torch takes the first batch of a fresh iterator to
        build an unbuilt model, then starts again: that look must not take
        an epoch. Knowing when the last batch is taken costs a stateful
        call per batch in the consumer's thread (0.6-0.7x the batches/s of
        a pipeline iterated alone), so it is paid there only; TensorFlow
        builds the model in its traced step and never looks.
        """
        return keras.backend.backend() != "tensorflow"

    def _advanced_at_end(self, dataset):
        """`dataset`, which moves the epoch counter to the epoch it read + 1
        when its last element is taken.

        Under a strategy, Keras makes an iterator at the end of every epoch
        that it never uses, and the prefetch to the devices starts it at
        once. So iterators of distributed datasets read the epoch without
        advancing it (`_read_epoch`), and one taken to its end advances it:
        an unused iterator holds one element per device and never gets
        there (unless the epoch is that short; `EpochReshuffle` sets the
        epoch then). Idempotent: every iterator of epoch e sets e + 1.
        """

        def advance(_):
            with tf.control_dependencies([self._state.advance_past_started()]):
                return tf.nest.map_structure(tf_data.empty_like, dataset.element_spec)

        end = tf.data.Dataset.range(1).map(advance)
        return dataset.concatenate(end.filter(lambda *_: False))

    def _prefetched(self, dataset):
        if not self.prefetch:
            return dataset
        buffer = tf.data.AUTOTUNE if self.prefetch == "auto" else self.prefetch
        return dataset.prefetch(buffer)

    def _distributed_batch_rows(self):
        """`(rows of every batch of an epoch, whether remainders of any
        size come too)`, for `distribute` (subclass hook)."""
        raise NotImplementedError
