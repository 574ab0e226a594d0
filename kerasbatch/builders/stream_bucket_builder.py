"""Length buckets on streams (`tf.data`, Grain, Python iterables), in
bounded memory."""

import keras
import numpy as np

from kerasbatch import checks, engines, optional
from kerasbatch.builders.base import SharedSettings
from kerasbatch.builders.bucket_builder import AUTO, BucketSettings
from kerasbatch.data import outputs, sources
from kerasbatch.data import padding as padding_lib
from kerasbatch.data.stream_elements import StreamElements
from kerasbatch.engines import served as served_lib
from kerasbatch.engines import stream_counters as counters_lib
from kerasbatch.engines.tf_data import buckets as graph_buckets
from kerasbatch.engines.tf_data import service as service_lib
from kerasbatch.engines.tf_data import stream_blocks
from kerasbatch.engines.tf_data.batch import checkpointable
from kerasbatch.optional import tensorflow as tf
from kerasbatch.planning import boundaries as boundaries_lib
from kerasbatch.planning import plan as plan_lib
from kerasbatch.planning import remainders as remainders_lib
from kerasbatch.planning.buckets import Buckets

#: Dataset functions run as written: no AutoGraph conversion (nor its cost).


def _plain(function):
    """`function`, which tf.data runs as written (no AutoGraph)."""
    return tf.autograph.experimental.do_not_convert(function)


#: Input elements read ahead in their own thread: the input pipeline runs inside
#: the builder's dataset function, where tf.data would otherwise run it in
#: the consuming thread, one element at a time (tensorflow/tensorflow#44278).
_INPUT_PREFETCH = 256
#: tf.data's cardinalities of infinite and unknown input.
_INFINITE, _UNKNOWN = -1, -2


@keras.saving.register_keras_serializable(package="kerasbatch")
class StreamBucketBuilder(BucketSettings, SharedSettings):
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

    remainders = ("keep", "drop", "pad")
    remainders_reason = (
        "a stream's bucket sizes are not known ahead, so its batches cannot "
        "be cut evenly; use 'pad'."
    )

    def __init__(
        self,
        boundaries=AUTO,
        num_buckets=16,
        batch_size=None,
        bucket_batch_sizes=None,
        max_tokens=None,
        quadratic_length=None,
        truncate=False,
        pad_to_bucket=False,
        buffer_size=10_000,
        *,
        shuffle=True,
        seed=0,
        drop_remainder=False,
        remainder=None,
        padding=None,
        max_length=None,
        overflow="error",
        output_lengths=False,
        output_mask=False,
        batch_multiple=1,
        pad_to_multiple=1,
        prefetch="auto",
        model_inputs=None,
    ):
        batch_size = self._init_buckets(
            boundaries,
            num_buckets,
            batch_size,
            bucket_batch_sizes,
            max_tokens,
            quadratic_length,
            truncate,
            pad_to_bucket,
        )
        self.batch_size = checks.optional_positive_int(batch_size, "batch_size")
        if buffer_size is None:
            raise ValueError("buffer_size must be a positive int, got None.")
        self.buffer_size = checks.optional_positive_int(buffer_size, "buffer_size")
        super().__init__(
            shuffle=shuffle,
            seed=seed,
            drop_remainder=drop_remainder,
            remainder=remainder,
            padding=padding,
            max_length=max_length,
            overflow=overflow,
            batch_multiple=batch_multiple,
            pad_to_multiple=pad_to_multiple,
            prefetch=prefetch,
            model_inputs=model_inputs,
        )
        self.output_lengths = checks.checked_bool(output_lengths, "output_lengths")
        self.output_mask = checks.checked_bool(output_mask, "output_mask")
        self._elements = None
        self._batched = False

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
        engines.check_engine(engine)
        if engine != "tf.data":
            if shardable is not None or batched:
                raise ValueError(
                    "shardable and batched are arguments of the 'tf.data' "
                    f"engine's streams, not of engine={engine!r}."
                )
            return self._build_on_numpy(dataset, lengths, engine, per_example)
        if per_example:
            raise ValueError(
                "per_example is for the numpy engines ('grain', 'python'); on "
                "'tf.data' a component is per-example where its first "
                "dimension is known in the dataset's element_spec."
            )
        if (
            optional.imported("tensorflow") is None
            and not optional.tensorflow.available
        ):
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
        spec = dataset.element_spec
        elements = StreamElements.of_spec(_example_spec(spec) if batched else spec)
        self._batched = batched
        cardinality = int(dataset.cardinality())
        num_batches = self._resolve_stream(elements, lengths, cardinality)
        if shardable is not None and shardable.element_spec != dataset.element_spec:
            raise ValueError(
                "shardable must be the same dataset with a shard hint: its "
                f"element_spec {shardable.element_spec} differs from the "
                f"dataset's {dataset.element_spec}."
            )
        self._source = dataset
        self._shardable = shardable
        return self._serve(lambda served: served._batches(dataset, num_batches))

    def _build_on_numpy(self, source, lengths, engine, per_example):
        """`build` on the `grain` or `python` engine: `source` is a Grain
        dataset, a Python iterable, or a function returning an iterator."""
        if optional.imported("tensorflow") and isinstance(
            source, optional.tensorflow.data.Dataset
        ):
            raise TypeError(
                "A tf.data.Dataset streams on the 'tf.data' engine: build it "
                f"with engine='tf.data', not {engine!r}."
            )
        if not callable(source):
            try:
                iterator = iter(source)
            except TypeError:
                raise TypeError(
                    f"StreamBucketBuilder.build(engine={engine!r}) takes a "
                    "Grain dataset, a Python iterable or a function that "
                    f"returns an iterator, got {type(source).__name__}."
                ) from None
            if iterator is source:
                raise TypeError(
                    "The source is an iterator (e.g. a generator), which gives "
                    "one pass only, but every epoch reads the source again: "
                    "pass an iterable (a list, a Grain dataset) or a function "
                    "that returns a new iterator."
                )
        from kerasbatch.engines import processes
        from kerasbatch.engines.numpy import stream as numpy_stream

        try:
            first = next(numpy_stream.open_source(source))
        except StopIteration:
            raise ValueError("The source yields no element.") from None
        elements = StreamElements.of_element(first, per_example)
        strings = [c.where for c in elements.components if sources.is_string(c.dtype)]
        if strings:
            raise ValueError(
                f"{', '.join(strings)} hold strings, which a stream pads on "
                "the 'tf.data' engine only: encode them as numbers (e.g. "
                "token ids), or build a tf.data.Dataset with engine='tf.data'."
            )
        if processes.jax_processes()[1] > 1:
            raise ValueError(
                "StreamBucketBuilder on the numpy engines feeds one process; "
                "under multi-process JAX, BucketBuilder(...).build(x, "
                f"engine={engine!r}) gives each process its part of every "
                "batch."
            )
        cardinality = len(source) if hasattr(source, "__len__") else _UNKNOWN
        self._batched = False
        num_batches = self._resolve_stream(elements, lengths, cardinality)
        if engine == "python" and num_batches is None:
            raise ValueError(
                "A stream on the 'python' engine (a keras.utils.PyDataset) "
                "needs its number of batches: pass build(source, lengths=...), "
                "or use engine='grain', with which Keras learns the number of "
                "steps in the first epoch."
            )
        engines.check_shapes_for_keras(
            engine,
            any(self._paddings[name].fixed_length is None for name in self._paddings),
        )
        self._source = source
        self._shardable = None
        if engine == "python":
            from kerasbatch.engines import python as engine_lib
        else:
            from kerasbatch.engines import grain as engine_lib
        return self._serve(
            lambda served: engine_lib.StreamDataset(served, source), engine
        )

    def _resolve_stream(self, elements, lengths, cardinality):
        """Checks the elements against the settings and resolves the
        paddings and buckets; returns the batches per epoch (None where
        unknown, `INFINITE` for infinite input)."""
        has_targets = "y" in elements.roles
        self._check_filler_weights(has_targets or self._makes_targets)
        x_sequences = [
            c.name for c in elements.components if c.role == "x" and c.is_sequence
        ]
        if self.output_lengths:
            outputs.check_length_names(elements.keys[0], x_sequences)
        followed = self._check_model_inputs(elements.keys[0], x_sequences, has_targets)
        #: `(column, fewest positions, message)`: elements too short for
        #: the model inputs are an error (checked block by block).
        self._shortest = None
        if followed is not None:
            column = elements.sequence_names.index(followed)
            self._shortest = (column, *self.model_inputs.shortest(followed))
        if (
            self.output_mask
            and not self._makes_targets
            and "y" not in elements.sequence_roles
        ):
            raise ValueError(
                "output_mask=True needs per-frame targets, but the elements "
                "have no y with a variable first dimension: "
                f"{', '.join(f'{c.where} {c.shape}' for c in elements.components)}."
            )
        paddings = padding_lib.resolve_padding(
            self._parsed_padding,
            elements.sequence_names,
            self._default_padding_length(),
            dtypes={c.name: c.dtype for c in elements.components},
        )
        self._check_multiple_of_fixed(paddings)
        num_batches = self._resolve_buckets(elements, paddings, lengths, cardinality)
        self._check_data_parallel(*self._distributed_batch_rows())
        self._elements = elements
        self._paddings = paddings
        self._constants = None
        if cardinality == _INFINITE:
            num_batches = _INFINITE
        known = num_batches is not None and num_batches >= 0
        self._num_batches = num_batches if known else None
        return num_batches

    def _batches(self, dataset, num_batches):
        """The pipeline of a built dataset (`num_batches` per epoch, or None).

        Each iteration reads the epoch and moves the counter past it when
        the iteration's last batch is taken (as the planned builders and
        the numpy engines do): Keras' look at a first batch on JAX and
        torch, to build the model, does not take an epoch. On TensorFlow,
        which never looks, it advances as an iteration starts
        (`_advances_when_taken`).
        """
        self._reset_counters(len(self._elements.sequence_names))
        at_end = self._advances_when_taken()
        epochs = tf.data.Dataset.range(1).map(
            _plain(lambda _: self._begin_epoch(_, advance=not at_end))
        )
        batches = epochs.flat_map(
            _plain(lambda epoch: self._counted(self._epoch_batches(dataset, epoch)))
        )
        batches = self._prefetched(batches)
        if at_end and num_batches is None:  # the end is known when reached
            batches = self._advanced_at_end(batches)
        elif at_end and num_batches != _INFINITE:
            batches = batches.enumerate().map(
                _plain(
                    lambda number, batch: self._taken(number + 1 >= num_batches, batch)
                )
            )
        if num_batches is not None:
            batches = batches.apply(
                tf.data.experimental.assert_cardinality(num_batches)
            )
        return checkpointable(batches)

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
            num_workers: with `"parallel_epochs"`, the number of workers the
                service has; it must be 1.
            dataset: the built dataset to serve (default: the latest).
            timeout: seconds to wait for the dispatcher to accept a
                connection before raising.

        Returns:
            A `tf.data.Dataset`: one epoch per iteration.

        Raises:
            RuntimeError: nothing was built yet.
            ValueError: a processing mode that cannot keep every epoch
                exactly once; bad `epochs` / `initial_epoch`.
            ConnectionError: no dispatcher answers at `service`.

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
        served = self._built_copy(dataset, "distribute_with_service", "tf.data")
        if processing_mode is None:
            processing_mode = service_lib.sharding().HINT
        service_lib.check_request(
            service,
            processing_mode,
            num_workers,
            epochs,
            initial_epoch,
            timeout,
            service_lib.stream_modes(),
        )
        source, shard_elements = served._source, False
        sharded = processing_mode == service_lib.sharding().HINT
        if sharded:
            if served._shardable is not None:
                source = served._shardable  # whole files per worker
            else:
                shard_elements = True
        measured = [
            served._epoch_batches(
                source,
                tf.constant(epoch, tf.int64),
                shard_elements,
                whole_input=not sharded,
            )
            for epoch in range(initial_epoch, initial_epoch + epochs)
        ]
        service_api = tf.data.experimental.service
        ids = tf.stack([service_api.register_dataset(service, m) for m in measured])
        spec = measured[0].element_spec

        def epoch_batches(epoch):
            registered = epoch - initial_epoch
            check = tf.debugging.assert_less(
                registered,
                tf.constant(epochs, tf.int64),
                message=(
                    f"distribute_with_service registered epochs {initial_epoch} "
                    f"to {initial_epoch + epochs - 1}; this iteration is past "
                    "them: pass a larger epochs= (or set_epoch to one of them)"
                ),
            )
            with tf.control_dependencies([check]):
                dataset_id = tf.gather(ids, registered)
            batches = service_api.from_dataset_id(
                processing_mode, service, dataset_id, element_spec=spec
            )
            return served._counted(batches)

        epochs_ = tf.data.Dataset.range(1).map(_plain(served._begin_epoch))
        remote = served._prefetched(epochs_.flat_map(_plain(epoch_batches)))
        served_lib.serve(remote, served)
        return remote

    def _resolve_buckets(self, elements, paddings, lengths, cardinality):
        """Boundaries, bounds and batch sizes; returns the batches per epoch.

        Returns None when the number of batches is unknown (no `lengths`).
        """
        if lengths is None:
            if not isinstance(self.boundaries, list):
                raise ValueError(
                    f"boundaries={self.boundaries!r} is computed from the "
                    "lengths of the data: pass build(dataset, lengths=...) "
                    "(e.g. from a length-index pass) or give boundaries as a "
                    "list of ints."
                )
            boundaries = self._resolve_boundaries(None)
            last_upper = -1 if self.max_length is None else self.max_length
        else:
            lengths = boundaries_lib.as_lengths(lengths)
            if not self._batched and cardinality >= 0 and cardinality != len(lengths):
                raise ValueError(
                    f"lengths has {len(lengths)} entries but the dataset has "
                    f"{cardinality} elements; pass one length per element."
                )
            candidates, limit, _ = self._apply_overflow(lengths)
            cut = np.minimum(lengths, limit)[candidates]
            boundaries = self._resolve_boundaries(cut)
            last_upper = self.max_length if self.max_length is not None else cut.max()
        num_buckets = len(boundaries) + 1
        buckets = Buckets.of(boundaries, last_upper, self.truncate)
        longest = [None] * num_buckets
        if lengths is not None:
            bucket_of = buckets.assign(cut)
            cut = np.minimum(cut, buckets.cut_limits(bucket_of))
            self.bucket_counts = np.bincount(bucket_of, minlength=num_buckets).tolist()
            for bucket in range(num_buckets):
                members = np.flatnonzero(bucket_of == bucket)
                if len(members):
                    at = members[np.argmax(cut[members])]
                    longest[bucket] = (int(candidates[at]), int(cut[at]))
        else:
            self.bucket_counts = None
        self._buckets, self._longest = buckets, longest
        self.bucket_lengths = [
            self._bucket_length(bucket, paddings) for bucket in range(num_buckets)
        ]
        self.resolved_boundaries = boundaries
        self.resolved_batch_sizes = self._resolve_batch_sizes(
            num_buckets, self._budget_batch_size
        )
        if lengths is None:
            return None
        num_batches = 0
        for count, size in zip(
            self.bucket_counts, self.resolved_batch_sizes, strict=True
        ):
            # A stream keeps or pads its remainders, or drops them.
            num_batches += remainders_lib.num_batches(count, size, self.remainder)
        if num_batches == 0 and cardinality != _INFINITE:
            raise ValueError(
                "No batch left: every bucket holds fewer elements than its "
                "batch size and drop_remainder=True."
            )
        return num_batches

    def _bucket_length(self, bucket, paddings):
        """The longest padded length of a batch of `bucket`, or None if unknown."""
        bound = int(self._buckets.bounds[bucket])
        known = self.bucket_counts is not None
        if known and not self.bucket_counts[bucket]:
            return 0
        if bound < 0 and any(p.length == "bucket" for p in paddings.values()):
            raise ValueError(
                "Padding to the bucket bound (pad_to_bucket or "
                "Padding(length='bucket')) needs the last bucket's upper bound: "
                "set max_length, or pass lengths to build()."
            )
        longest = self._longest[bucket][1] if known else bound
        if longest < 0 and any(p.fixed_length is None for p in paddings.values()):
            return None
        return self._longest_padding_of(paddings, bound, lambda name: longest)

    def _budget_batch_size(self, bucket):
        padded = self.bucket_lengths[bucket]
        if padded is None:
            raise ValueError(
                "max_tokens needs every bucket's upper bound, but the last "
                "bucket has none: set max_length, or pass lengths to build()."
            )
        count = None if self.bucket_counts is None else self.bucket_counts[bucket]
        return self._budget_size(bucket, padded, count, self._longest[bucket])

    # --------------------------------------------------------------- pipeline
    def _reset_run_state(self, state):
        super()._reset_run_state(state)
        self._counters = None  # made with the pipeline, by `_reset_counters`

    def _distributed_batch_rows(self):
        # A stream's remainders may have any size, unless padded or dropped.
        rows = plan_lib.round_up(
            np.array(self.resolved_batch_sizes), self.batch_multiple
        )
        return rows, self.remainder == "keep"

    def _taken(self, last, batch):
        """`batch`, taken by the consumer; the epoch's `last` batch moves the
        epoch counter past the epoch."""
        advanced = tf.cond(
            last,
            self._state.advance_past_started,
            lambda: tf.constant(-1, tf.int64),
        )
        with tf.control_dependencies([advanced]):
            return tf.nest.map_structure(tf.identity, batch)

    def _reset_counters(self, num_components):
        self._counters = counters_lib.GraphStreamCounters(num_components)

    def _begin_epoch(self, _, advance=True):
        """Reads the epoch counter (and advances it) and resets the
        statistics; returns the epoch (a tensor).

        The statistics of the epoch before are kept when another epoch
        begins: under a strategy, Keras starts an iterator of the next epoch
        before the callbacks of the epoch's end read the figures.
        """
        epoch = self._start_epoch() if advance else self._read_epoch()
        return self._counters.begin_epoch(epoch)

    def _make_dataset(self, replicas=None):
        """The per-replica pipeline of `distribute` (the built dataset is
        `_batches`): every global batch, cut into `replicas`' parts."""
        epochs = tf.data.Dataset.range(1).map(
            _plain(lambda _: self._begin_epoch(_, advance=False))
        )
        batches = epochs.flat_map(
            _plain(
                lambda epoch: self._counted(self._epoch_batches(self._source, epoch))
            )
        )
        parts = batches.flat_map(_plain(replicas.parts_of))
        parts = self._advanced_at_end(self._prefetched(parts))
        if self._num_batches is not None:
            parts = parts.apply(
                tf.data.experimental.assert_cardinality(
                    self._num_batches * replicas.count
                )
            )
        return checkpointable(parts)

    def _steps_per_epoch(self):
        return self._num_batches

    def _epoch_batches(self, dataset, epoch, shard_hint=False, whole_input=True):
        """The batches of one epoch, made block by block
        (`kerasbatch.engines.tf_data.stream_blocks`): no function runs per element.

        With the lengths given to `build`, an element longer than its
        bucket's longest length there fails (`_prepare_block`), and when
        the pipeline reads the `whole_input` (not a tf.data service
        worker's share) so does a bucket with more or, at the end, fewer
        elements than those lengths put in it: lengths that do not match
        the data would make a wrong cardinality and wrong `batch_shapes`.

        Each block of input rows is prepared in one call (`_prepare_block`:
        buckets, cuts, checks); the bucketer sorts the rows into batches;
        each batch is padded and measured in one call. The batches come with
        what the statistics count (`_counted` counts them): a pure function
        of the epoch, which can run where the builder's variables are not
        (a tf.data service worker).
        """
        blocks = dataset
        if shard_hint:  # each tf.data service worker keeps its share
            hint = tf.data.experimental.SHARD_HINT
            blocks = blocks.shard(hint, hint)
        if not self._batched:
            blocks = blocks.prefetch(_INPUT_PREFETCH).ragged_batch(
                stream_blocks.BLOCK_ROWS
            )
        numbered = blocks.prefetch(2).scan(
            tf.constant(0, tf.int64),
            _plain(lambda seen, block: (seen + _num_rows(block), (seen, block))),
        )
        rows = numbered.map(_plain(self._prepare_block))
        whole_input = whole_input and not shard_hint
        bucketer = stream_blocks.BlockBucketer(
            self._pipeline_constants()["sizes"],
            range(len(self._elements.sequence_positions)),
            self.buffer_size,
            self.shuffle,
            self.seed,
            expected_counts=self.bucket_counts if whole_input else None,
            mismatch=stream_blocks.LENGTHS_MISMATCH,
        )
        return bucketer.batches(
            rows, epoch, _plain(lambda batch: self._measure_batch(self._padded(batch)))
        )

    def _counted(self, measured):
        """The batches of `measured` (from `_epoch_batches`), counted into
        the statistics; batches `drop_remainder` drops are counted as
        dropped and left out."""
        batches = measured.map(_plain(self._count_batch))
        if self.drop_remainder:
            batches = batches.filter(_plain(lambda batch, full: full))
            batches = batches.map(_plain(lambda batch, full: batch))
        return batches

    def _pipeline_constants(self):
        if self._constants is None:
            self._constants = {
                "bounds": self._buckets.bounds,
                "sizes": np.array(self.resolved_batch_sizes, np.int64),
                "longest": np.array(
                    [-1 if at is None else at[1] for at in self._longest], np.int64
                ),
            }
        return self._constants

    def _prepare_block(self, start, block):
        """One block of input rows: their buckets, cut sequence components
        and what statistics need, as rows of `stream_blocks` (sequence
        components first, then the others; rows the drop policy leaves out
        are counted and removed). `start`: the position of the block's first
        row in the input."""
        flat = tf.nest.flatten(block)
        positions = self._elements.sequence_positions
        index = start + tf.range(_num_rows(block))
        sequences = [_as_ragged(flat[i]) for i in positions]
        lengths = tf.stack([s.row_lengths() for s in sequences], axis=1)
        length = tf.reduce_max(lengths, axis=1)
        checks, keep, limit = [], None, None
        for reference, other, template in self._elements.aligned():
            unequal = tf.not_equal(lengths[:, other], lengths[:, reference])
            checks.append(_check_rows(unequal, index, lengths[:, other], template))
        if self._shortest is not None:
            column, minimum, template = self._shortest
            short = lengths[:, column] < minimum
            checks.append(_check_rows(short, index, lengths[:, column], template))
        if self.max_length is not None:
            too_long = length > self.max_length
            if self.overflow == "error":
                checks.append(
                    _check_rows(
                        too_long,
                        index,
                        length,
                        "Element {} has length {}, longer than max_length="
                        f"{self.max_length}. Set overflow to truncate or drop, "
                        "or raise max_length.",
                    )
                )
            elif self.overflow == "truncate":
                limit = tf.constant(self.max_length, tf.int64)
            else:
                keep = tf.logical_not(too_long)
                num_dropped = tf.reduce_sum(tf.cast(too_long, tf.int64))
                checks.append(self._counters.add_dropped(num_dropped))
        cut_length = length if limit is None else tf.minimum(length, limit)
        bucket = graph_buckets.assign(self._buckets, cut_length)
        limit = graph_buckets.cut_limit(self._buckets, bucket, limit)
        kept = lengths
        values = [s.values for s in sequences]
        if limit is not None:
            limit = tf.broadcast_to(limit, tf.shape(length))
            kept = tf.minimum(lengths, limit[:, None])
            values = [_cut_rows(s, limit) for s in sequences]
        for column, name in enumerate(self._elements.sequence_names):
            fixed = self._paddings[name].fixed_length
            if fixed is not None:
                checks.append(
                    _check_rows(
                        kept[:, column] > fixed,
                        index,
                        kept[:, column],
                        f"Component {name} is padded to the fixed length {fixed}, "
                        "but element {} is {} long. Raise the length, or set "
                        "max_length with overflow truncate.",
                    )
                )
        if self.bucket_counts is not None:
            longest = self._pipeline_constants()["longest"]
            kept_length = tf.reduce_max(kept, axis=1)
            longer = kept_length > tf.gather(longest, bucket)
            if keep is not None:  # rows the drop policy leaves out are not
                longer = tf.logical_and(longer, keep)
            checks.append(
                _check_rows(
                    longer,
                    index,
                    kept_length,
                    "Element {} has length {} (after any truncation), longer "
                    "than any in its bucket among the lengths given to "
                    f"build(): {stream_blocks.LENGTHS_MISMATCH}",
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
            rows = stream_blocks.gather(rows, kept_rows, range(len(positions)))
        return rows

    def _padded(self, rows):
        """One batch of rows, its components padded and in input order: what
        `_measure_batch` takes."""
        num_sequences = len(self._elements.sequence_positions)
        sequences = iter(rows["values"][:num_sequences])
        others = iter(rows["values"][num_sequences:])
        components = []
        for component in self._elements.components:
            name = component.name
            if name not in self._paddings:
                components.append(next(others))
                continue
            column = self._elements.sequence_names.index(name)
            padding = self._paddings[name]
            sequence = tf.RaggedTensor.from_row_lengths(
                next(sequences), rows["lengths"][:, column], validate=False
            )
            bound = None
            if padding.length == padding_lib.BUCKET:
                bound = tf.gather(
                    self._pipeline_constants()["bounds"], rows["bucket"][0]
                )
            length = plan_lib.padded_length(
                padding,
                tf.reduce_max(sequence.row_lengths()),
                bound,
                self.pad_to_multiple,
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
            **{key: rows[key] for key in ("lengths", *stream_blocks.ROW_FIELDS)},
        }

    def _measure_batch(self, batch):
        """One batch in the input structure, with what the statistics count.

        Returns `(element, counted, shape, full)`: the counters' increment
        (`kerasbatch.engines.stream_counters`), the
        batch's shape as a string `"size,length,..."`, and whether it is a
        full batch (what `drop_remainder` keeps). Sums over the batch: no
        per-element work, no branches.
        """
        flat = list(batch["components"])
        positions = self._elements.sequence_positions
        size = tf.shape(batch["bucket"], out_type=tf.int64)[0]
        sizes = self._pipeline_constants()["sizes"]
        bucket_size = tf.gather(sizes, batch["bucket"][0])
        rows, lengths = size, batch["lengths"]
        if self._fills:
            rows = remainders_lib.rows_fed(
                size, bucket_size, self.remainder, self.batch_multiple
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
        element = self._elements.pack(flat)
        if self._finishes_batches():
            element = self._with_outputs(element, lengths, size)
        return element, counted, shape, full

    def _count_batch(self, element, counted, shape, full):
        """Counts one measured batch into the statistics: one `assign_add` of
        the counters vector, one row of the running totals and one insert
        into the set of distinct shapes. Returns the element (and `full`
        with `drop_remainder`)."""
        updates = self._counters.count(counted, shape, full, self.drop_remainder)
        with tf.control_dependencies(updates):
            element = tf.nest.map_structure(tf.identity, element)
        if self.remainder != "keep" and len(set(self.resolved_batch_sizes)) == 1:
            rows = int(
                plan_lib.round_up(self.resolved_batch_sizes[0], self.batch_multiple)
            )
            for t in tf.nest.flatten(element):
                t.set_shape([rows] + [None] * (t.shape.rank - 1))
        if self.drop_remainder:
            return element, full
        return element

    def _with_outputs(self, element, lengths, size):
        """`output_lengths`, `output_mask` and the weights of filler rows
        (`kerasbatch.data.outputs`); `size`: the batch's real rows."""
        roles = list(element) if isinstance(element, tuple) else [element]
        roles += [None] * (len(sources.ROLES) - len(roles))
        by_name = {
            name: lengths[:, column]
            for column, name in enumerate(self._elements.sequence_names)
        }
        return outputs.finish_batch(
            *roles,
            by_name,
            output_lengths=self.output_lengths,
            output_mask=self.output_mask,
            real_rows=size if self._fills else None,
            model_inputs=self.model_inputs,
        )

    def _finishes_batches(self):
        """Whether batches get more than the padded components: lengths,
        masks, filler weights or model inputs (`kerasbatch.data.outputs`)."""
        return bool(
            self.output_lengths
            or self.output_mask
            or self._fills
            or self.model_inputs is not None
        )

    # ------------------------------------------------------------- statistics
    def _require_built(self):
        if self._elements is None:
            raise RuntimeError(
                "StreamBucketBuilder has no data yet: call build(dataset) first."
            )

    def _read_counters(self):
        self._require_built()
        counters = self._counters.vector()
        if counters[counters_lib.EPOCH] < 0:
            raise RuntimeError(
                "No epoch has started yet: statistics are counted as the built "
                "dataset is iterated."
            )
        return counters

    def _started_epoch(self):
        if self._counters is None:
            return None
        epoch = int(self._counters.vector()[counters_lib.EPOCH])
        return None if epoch < 0 else epoch

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
        served = self._serving(dataset)
        if served is not self:
            return served.batch_shapes(epoch)
        self._require_built()
        lengths = {}
        for name in self._elements.sequence_names:
            padding = self._paddings[name]
            if padding.fixed_length is None and padding.length != padding_lib.BUCKET:
                lengths[name] = None
            elif padding.fixed_length is not None:
                lengths[name] = lambda bucket, fixed=padding.fixed_length: fixed
            else:
                lengths[name] = lambda bucket: int(
                    plan_lib.round_up(
                        self._buckets.bounds[bucket], self.pad_to_multiple
                    )
                )
        if self.bucket_counts is None or None in lengths.values():
            raise ValueError(
                "StreamBucketBuilder knows the batch shapes before the stream "
                "runs only with lengths given to build() and every sequence "
                "component padded to its bucket (pad_to_bucket=True) or a fixed "
                "length; otherwise statistics().distinct_shapes counts them "
                "once an epoch has run."
            )
        trailing = {c.name: c.trailing for c in self._elements.components}
        shapes = set()
        for bucket, (count, size) in enumerate(
            zip(self.bucket_counts, self.resolved_batch_sizes, strict=True)
        ):
            _, capacities = remainders_lib.group_batches(count, size, self.remainder)
            for rows in sorted(set(capacities)):
                rows = int(plan_lib.round_up(rows, self.batch_multiple))
                shapes.add(
                    tuple(
                        (name, (rows, length(bucket), *trailing[name]))
                        for name, length in lengths.items()
                    )
                )
        return [dict(shape) for shape in sorted(shapes)]

    def _statistics(self, epoch):
        """`PlanStatistics` of the batches of the epoch last started.

        Counted as the batches are produced: exact for a completed epoch;
        while an epoch runs, they include the batches prefetched ahead of
        `model.fit`. Only the epoch last started is kept, so `epoch` must be
        None or that epoch.
        """
        counters = self._read_counters()
        current = int(counters[counters_lib.EPOCH])
        distinct_shapes = self._counters.num_shapes()
        if epoch is not None and checks.checked_epoch(epoch) != current:
            previous = self._counters.previous()
            if int(previous[counters_lib.EPOCH]) != int(epoch):
                raise ValueError(
                    f"StreamBucketBuilder keeps the statistics of the epoch "
                    f"last started ({current}) and of the one before only, "
                    f"not of epoch {epoch}."
                )
            counters, distinct_shapes = previous[:-1], int(previous[-1])
        names = self._elements.sequence_names
        num = len(names)
        real = counters[counters_lib.NUM_SCALARS : counters_lib.NUM_SCALARS + num]
        padded = counters[counters_lib.NUM_SCALARS + num :]
        return plan_lib.PlanStatistics(
            num_batches=int(counters[counters_lib.BATCHES]),
            num_elements=int(counters[counters_lib.ELEMENTS]),
            padding_efficiency=plan_lib._ratio(real.sum(), padded.sum()),
            component_efficiency={
                name: plan_lib._ratio(r, p)
                for name, r, p in zip(names, real, padded, strict=True)
            },
            distinct_shapes=distinct_shapes,
            dropped=int(counters[counters_lib.DROPPED]),
            truncated=int(counters[counters_lib.TRUNCATED]),
            truncated_positions=int(counters[counters_lib.TRUNCATED_POSITIONS]),
        )

    def _running_positions(self, num_batches):
        """From running totals the pipeline records per batch: exact while
        the pipeline is fewer than 4096 batches ahead of `num_batches`, else
        estimated from the epoch's average batch."""
        counters = self._read_counters()
        produced = int(counters[counters_lib.BATCHES])
        num = len(self._elements.sequence_names)
        real = int(
            counters[counters_lib.NUM_SCALARS : counters_lib.NUM_SCALARS + num].sum()
        )
        padded = int(counters[counters_lib.NUM_SCALARS + num :].sum())
        num_batches = int(num_batches)
        if num_batches <= 0 or produced == 0:
            return 0, 0
        if num_batches >= produced:
            return real, padded
        if produced - num_batches < counters_lib.RING:
            row = self._counters.running(num_batches - 1)
            return int(row[0]), int(row[1])
        share = num_batches / produced
        return round(real * share), round(padded * share)


def _check_rows(bad, index, value, template):
    """An assertion that no row is `bad`; when one is, the message names the
    first: `template` formatted with its `index` and `value`."""

    def fail():
        first = tf.argmax(tf.cast(bad, tf.int32))
        message = tf.strings.format(template, (index[first], value[first]))
        with tf.control_dependencies([tf.debugging.Assert(False, [message])]):
            return tf.constant(False)

    return tf.cond(tf.reduce_any(bad), fail, lambda: tf.constant(True))


def _num_rows(block):
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


def _example_spec(block_spec):
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
