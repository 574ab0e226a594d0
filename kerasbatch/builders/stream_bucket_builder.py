"""Length buckets on streams (`tf.data`, Grain, Python iterables), in
bounded memory."""

import dataclasses

import keras

from kerasbatch import checks, engines
from kerasbatch.builders import stream_inputs
from kerasbatch.builders.datasets import BuiltDatasets
from kerasbatch.builders.settings import BatchedSettings
from kerasbatch.builders.stream_settings import StreamSettings
from kerasbatch.engines import served as served_lib


@keras.saving.register_keras_serializable(package="kerasbatch")
class StreamBucketBuilder(BuiltDatasets, StreamSettings, BatchedSettings):
    """Length buckets on a stream (a `tf.data.Dataset`, a Grain dataset or a
    Python iterable), planned in a bounded buffer.

    The streaming sibling of `kerasbatch.BucketBuilder`, for data that does
    not fit in memory (TFRecord files, generators, infinite streams). It
    runs on the `tf.data` engine, and without TensorFlow on the `grain` and
    `python` engines (`build(source, engine="grain")`). Nothing
    is planned ahead: every epoch, elements go to the bucket of their length
    (the longest of their sequence components), are cut (the `max_length`
    policy, truncation buckets) and wait in a buffer of `buffer_size`; when
    it is full, its elements are shuffled and every bucket's full batches
    leave, padded, while the rest waits. Memory holds `buffer_size` elements
    and at most one partial batch per bucket, whatever the size of the data.
    All of this runs on blocks of elements, never one element at a time
    (`kerasbatch.engines.tf_data.stream_blocks`); `build(..., batched=True)` takes
    blocks as they come from a batched parser, the fastest input.

    Batches are sized and padded by the rules of `BucketBuilder`: one
    `batch_size`, `bucket_batch_sizes`, or a `max_tokens` budget (with
    `quadratic_length`) on the longest padded length a batch of the bucket
    can have; padded to the batch's longest element, to the bucket's upper
    bound (`pad_to_bucket`, `Padding(length="bucket")`) or to a fixed length.
    A bucket's upper bound is `b_i - 1`; the last bucket's is `max_length`,
    or the longest of `lengths` (with truncation buckets, the lower bound).

    `build(dataset, lengths)` takes the lengths of every element when they
    are known (e.g. from a length-index pass over TFRecord files): they give
    `"auto"` and strategy boundaries, the budget's exact padded lengths, and
    the dataset's exact cardinality. Without them, boundaries must be a list,
    and infinite input (`.repeat()`) streams as it comes.

    Every new iteration of the built dataset (each `model.fit` epoch) is the
    next epoch, reshuffled with a seed derived from `(seed, epoch)`, so the
    same seed, epoch and input (in the same blocks) give the same batches; `set_epoch` and
    `kerasbatch.callbacks.EpochReshuffle` pin the epoch for exact resumption.
    Unlike `BucketBuilder`, bucketing keeps some of the input order: batches
    come out as their buckets fill, and randomness is limited by the buffer.

    Statistics are counted in the pipeline as batches are produced (CPU
    variables, reset when an epoch starts): `statistics()` describes the
    batches of the running (or last) epoch produced so far, exact once the
    epoch is complete. Prefetching produces batches before `model.fit`
    consumes them, so mid-epoch counts run ahead; the callbacks'
    per-batch figures use per-batch running totals and stay exact while the
    pipeline is fewer than 4096 batches ahead.

    With infinite data, `model.fit(..., steps_per_epoch=n)` keeps one
    iterator for all its epochs, so the builder sees one long epoch: a pinned
    epoch (`EpochReshuffle`) applies only to the next iteration, and the
    statistics (and `PaddingEfficiency`) accumulate since training began.
    Without `lengths`, a finite dataset's cardinality is unknown, so Keras
    learns the number of steps in the first epoch (and warns that the input
    ran out of data); pass `lengths` for an exact cardinality.

    Args:
        boundaries: a strictly increasing list of positive ints, `"auto"`
            (the `"optimal"` strategy) or a strategy name of
            `kerasbatch.planning.boundaries`; strategies need `lengths` at `build`.
        num_buckets: buckets for a boundary strategy (ignored with a list).
        batch_size: one batch size for every bucket (default 32 when none of
            `batch_size`, `bucket_batch_sizes` and `max_tokens` is given).
        bucket_batch_sizes: a batch size per bucket.
        max_tokens: a budget per batch, as in `BucketBuilder`; needs every
            bucket's upper bound (the last one from `max_length`, `lengths`
            or truncation buckets).
        quadratic_length: with `max_tokens`, the cost of a length L is
            `L + L**2 / quadratic_length`.
        truncate: truncation buckets: elements of bucket `[b_{i-1}, b_i)`
            are cut to `b_{i-1}`; the first bucket is padded.
        pad_to_bucket: pad to the bucket's upper bound instead of the batch's
            longest element; needs the last bucket's bound, as `max_tokens`.
        buffer_size: elements in the shuffle buffer (with `shuffle`).
        shuffle: shuffle through the buffer, differently every epoch.
        seed: int seed; epoch k's batches depend only on `(seed, k)` and the
            input order. None draws one at construction.
        drop_remainder: drop the batches smaller than their bucket's batch
            size (at most one per bucket at the end of finite data); the
            dropped elements are counted in `statistics().dropped`.
        remainder: those smaller batches: `"keep"`, `"drop"` (as
            `drop_remainder`) or `"pad"` (fed with the bucket's batch size,
            the rows past their elements filler of zero `sample_weight`,
            counted as padding), as in `kerasbatch.builders.Builder`. Not
            `"even"`: a stream's bucket sizes are not known ahead.
        padding: as in `kerasbatch.builders.Builder`: None, a
            `kerasbatch.Padding` or config dict for all sequence components,
            or a dict of them by component name.
        max_length: the longest element allowed, or None.
        overflow: for elements longer than `max_length`: `"error"` (a
            `tf.errors.InvalidArgumentError` in the pipeline naming the
            element's position and length, or a `ValueError` at `build`
            when `lengths` show it), `"truncate"` or `"drop"` (counted).
        output_lengths: add each sequence component's (cut) lengths to x as
            `"<name>_length"` int32 entries, as in `kerasbatch.builders.Builder`.
        output_mask: emit the padding mask of the per-frame targets as
            `sample_weight`, times any weights given, for masked losses.
        batch_multiple, pad_to_multiple: as in `kerasbatch.builders.Builder`.
        prefetch: batches to prefetch: `"auto"`, an int, or 0 / None.

    After `build`, `resolved_boundaries`, `resolved_batch_sizes`,
    `bucket_lengths` (the longest padded length a batch of each bucket can
    have, None where unknown) and, with `lengths`, `bucket_counts` describe
    the buckets.

    Example:

    >>> import tensorflow as tf
    >>> import kerasbatch
    >>> lengths = [3, 12, 4, 15, 5, 30, 2]
    >>> dataset = tf.data.Dataset.from_tensor_slices(
    ...     tf.ragged.constant([[i + 1] * n for i, n in enumerate(lengths)]))
    >>> builder = kerasbatch.StreamBucketBuilder(
    ...     boundaries=[10], batch_size=2, shuffle=False)
    >>> batches = builder.build(dataset)
    >>> [tuple(batch.shape) for batch in batches]
    [(2, 4), (2, 15), (2, 5), (1, 30)]
    >>> print(builder.statistics())
    4 batches of 7 elements: padding efficiency 0.910 (x=0.910), 4 distinct shapes, 0 dropped, 0 truncated (0 positions)
    >>> batches = builder.build(dataset, lengths=lengths)  # exact cardinality
    >>> int(batches.cardinality())
    4
    """

    _BUILD_CALL = "build(dataset)"
    remainders = ("keep", "drop", "pad")
    remainders_reason = (
        "a stream's bucket sizes are not known ahead, so its batches cannot "
        "be cut evenly; use 'pad'."
    )

    def __init__(self, *bucket_arguments, buffer_size=10_000, **settings):
        if buffer_size is None:
            raise ValueError("buffer_size must be a positive int, got None.")
        self.buffer_size = checks.optional_positive_int(buffer_size, "buffer_size")
        super().__init__(*bucket_arguments, **settings)
        self._init_datasets()

    def get_config(self):
        """The constructor arguments, JSON-serialisable."""
        config = self._bucket_config()
        config = {
            "boundaries": config.pop("boundaries"),
            "num_buckets": config.pop("num_buckets"),
            "batch_size": self.batch_size,
            **config,
            "buffer_size": self.buffer_size,
        }
        config.update(self._shared_config())
        batch_multiple, prefetch = config.pop("batch_multiple"), config.pop("prefetch")
        config.update(
            output_lengths=self.output_lengths,
            output_mask=self.output_mask,
            batch_multiple=batch_multiple,
            prefetch=prefetch,
        )
        return config

    # ------------------------------------------------------------------ build
    def build(
        self,
        dataset,
        lengths=None,
        shardable=None,
        *,
        batched=False,
        engine="tf.data",
        per_example=(),
    ):
        """Returns a dataset of padded, bucketed batches for `model.fit`.

        Args:
            dataset: the elements, unbatched: `x`, `(x, y)` or `(x, y,
                sample_weight)`, each a tensor or array or a dict of them.
                On the `tf.data` engine, a `tf.data.Dataset` (finite or
                infinite): tensors whose first dimension is None in
                `element_spec` are sequence components (padded), the others
                per-example (stacked). Give its costly maps
                `num_parallel_calls=tf.data.AUTOTUNE`: the builder iterates
                it inside a dataset function (every epoch), where tf.data
                does not parallelize a map that has none. On the `grain` and
                `python` engines, a Grain `MapDataset` or `IterDataset`, any
                Python iterable that can be iterated again (a list, ...), or
                a function that returns a new iterator: read once per epoch.
                There an array with a first axis is a sequence component
                and a scalar per-example (see `per_example`); an element
                whose structure, dtype or trailing shape differs from the
                first is an error that names it by its index.
            lengths: optional 1-D int array of every element's length (the
                longest of its sequence components), in the dataset's order,
                e.g. from a length-index pass. Needed for boundary
                strategies; gives exact cardinality for finite data. The
                elements are checked against them as they stream: an
                element longer than any its bucket was given, or a bucket
                with more (at the end, other) elements than they say, is an
                error, since they fix the cardinality and `batch_shapes()`.
            shardable: optional: the same dataset with a
                `shard(tf.data.experimental.SHARD_HINT, SHARD_HINT)` where it
                lists its files, so that `distribute_with_service` gives
                each tf.data service worker whole files of its own (the
                TFRecord loader passes it); without it, every worker reads
                all the input and keeps its share of the elements.
            batched: the dataset's elements are blocks of examples rather
                than single ones (e.g. `records.batch(256).map(parse)`):
                each component has a first, example dimension; sequence
                components are `tf.RaggedTensor`s `(examples, None,
                *trailing)` and dense tensors are per-example components.
                The builder buckets the examples of each block without
                splitting the blocks into elements (the fastest input; the
                TFRecord loader gives it).
            engine: `"tf.data"` (a `tf.data.Dataset` of batches),
                `"grain"` (a Grain `IterDataset`; every iteration reads the
                source once, as the next epoch) or `"python"` (a
                `keras.utils.PyDataset`; it needs `lengths`, for its number
                of batches). For the same input, seed and epoch, every
                engine yields the same batches, value for value; the numpy
                engines need no TensorFlow.
            per_example: on the numpy engines, the names of components
                whose arrays have a first axis but are per-example (a
                vector of class scores, an embedding), e.g. `("y",)`.

        Returns:
            A dataset of batches in the structure of the input elements;
            sequence components are dense `(batch, length, *trailing)`.
        """
        if engines.in_graph(engine):
            if per_example:
                raise ValueError(
                    "per_example is for the numpy engines ('grain', 'python'); "
                    "on 'tf.data' a component is per-example where its first "
                    "dimension is known in the dataset's element_spec."
                )
            from kerasbatch.engines.tf_data import stream_rows

            elements, cardinality = stream_rows.stream_elements(
                dataset, shardable, batched
            )
        else:
            if shardable is not None or batched:
                raise ValueError(
                    "shardable and batched are arguments of the 'tf.data' "
                    f"engine's streams, not of engine={engine!r}."
                )
            elements, cardinality = stream_inputs.numpy_elements(
                dataset, engine, per_example
            )
        built = self._resolve_stream(elements, lengths, cardinality)
        built = dataclasses.replace(
            built, batched=batched, source=dataset, shardable=shardable
        )
        self._check_data_parallel(built)
        batches = engines.stream(engine, built, epoch=self._epochs.next_epoch())
        return self._keep(batches, served_lib.served_by(batches))

    def distribute_with_service(
        self,
        service,
        *,
        processing_mode=None,
        epochs=1,
        initial_epoch=0,
        num_workers=None,
        dataset=None,
        timeout=30.0,
    ):
        """The built dataset, its batches made by the workers of a tf.data
        service: the input shared out across the workers, bucketed on each.

        Every epoch from `initial_epoch` to `initial_epoch + epochs - 1` is
        sent to the dispatcher as a dataset of its own, with its epoch fixed
        (its shuffle seed): nothing in it refers to this process, so workers
        in other processes or machines run it (the input must not call
        Python: TFRecord files, e.g. `kerasbatch.io.TFRecordLoader`, not a
        generator). With `ShardingPolicy.HINT`, each of N workers reads
        whole files of its own when `build` was given a `shardable` dataset
        (the TFRecord loader gives one), else reads all the input and keeps
        every N-th element; then it buckets and pads its share. (tf.data's
        `FILE` auto-sharding cannot reach the files through the bucketing,
        `group_by_window`.) As with the built dataset, every new iteration
        is the next epoch (`set_epoch` and `EpochReshuffle` pin it), and
        the statistics are counted here, at the client, from the batches
        that arrive: exact, whatever the workers did.

        Each worker keeps its own partial batches, so an epoch has up to
        `num_buckets` smaller batches per worker, and its number of batches
        depends on how the input falls to the workers: the dataset's
        cardinality is unknown and Keras learns the steps in the first
        epoch.

        Args:
            service: the dispatcher's address, `"grpc://host:port"`.
            processing_mode: `ShardingPolicy.HINT` (the default, None: workers
                share out the elements), `ShardingPolicy.DATA` (every worker
                makes every batch and keeps its share of them), both static
                sharding (the dispatcher needs its `worker_addresses`), or
                `"parallel_epochs"` with `num_workers=1`.
            epochs: how many epochs to register; iterating past the last is
                an error.
            initial_epoch: the first epoch registered.
            num_workers, dataset, timeout: as for
                `kerasbatch.builders.PlannedBuilder.distribute_with_service`,
                which says what it raises too.

        Returns:
            A `tf.data.Dataset`: one epoch per iteration.

        Example:

        >>> import tensorflow as tf
        >>> import kerasbatch
        >>> dispatcher = tf.data.experimental.service.DispatchServer()
        >>> worker = tf.data.experimental.service.WorkerServer(
        ...     tf.data.experimental.service.WorkerConfig(
        ...         dispatcher_address=dispatcher.target.split("://")[1]))
        >>> sequences = tf.ragged.constant([[1] * n for n in range(1, 9)])
        >>> builder = kerasbatch.StreamBucketBuilder(
        ...     boundaries=[5], batch_size=4, shuffle=False)
        >>> train = builder.build(tf.data.Dataset.from_tensor_slices(sequences))
        >>> remote = builder.distribute_with_service(
        ...     dispatcher.target, processing_mode="parallel_epochs",
        ...     num_workers=1)
        >>> sorted(tuple(batch.shape) for batch in remote)
        [(4, 4), (4, 8)]
        >>> builder.statistics(dataset=remote).num_elements
        8
        """
        from kerasbatch.engines.tf_data import service as service_lib

        served = self._tf_data_served(dataset, "distribute_with_service")
        remote = service_lib.distribute_stream(
            served,
            service,
            processing_mode,
            epochs,
            initial_epoch,
            timeout,
            num_workers,
        )
        return self._distributed_from(remote, served)

    def batch_shapes(self, epoch=None, dataset=None):
        """Every distinct shape an epoch feeds the model, before it runs.

        A stream's shapes are known ahead when `build` was given the
        lengths (so every bucket's count is known) and every sequence
        component pads to its bucket (`pad_to_bucket`) or a fixed length;
        they are the same every epoch. Otherwise they depend on which
        elements meet in a batch: `statistics().distinct_shapes` counts
        them once an epoch has run.

        Args:
            epoch: unused (every epoch feeds the same shapes); for the
                signature of `kerasbatch.builders.Builder.batch_shapes`.
            dataset: the built dataset (default: the latest).

        Returns:
            As `kerasbatch.builders.Builder.batch_shapes`.

        Raises:
            ValueError: the shapes cannot be known before the stream runs.
        """
        return self._built_served(dataset, "batch_shapes").batch_shapes(epoch)
