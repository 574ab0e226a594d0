"""`PlannedBuilder`: data in memory, a numpy plan per epoch, any engine.

`build` validates the inputs and plans for them (a frozen `Prepared` value
and its epoch order), then serves the dataset an engine makes of the plan:
a `tf.data` pipeline that computes each epoch's batches in its graph, or
the numpy engines (`grain`, `python`) that read the plans.
"""

from __future__ import annotations

import collections
import threading

import numpy as np

from kerasbatch import checks, engines
from kerasbatch.builders import serving as serving_lib
from kerasbatch.builders.shared import SharedSettings
from kerasbatch.data import outputs, sources
from kerasbatch.engines.tf_data import batch as tf_data
from kerasbatch.engines.tf_data import service as service_lib
from kerasbatch.optional import tensorflow as tf
from kerasbatch.planning import prepared as prepared_lib

_PLAN_CACHE_SIZE = 4


class PlannedBuilder(SharedSettings):
    """What the in-memory builders share: data in memory, a numpy plan per epoch.

    `build` validates the inputs and attaches them (`_attach`: resolves one
    frozen `kerasbatch.planning.prepared.Prepared` value and its epoch
    order, and binds them), then makes the pipeline (`_make_dataset`);
    `plan(epoch)` caches the plans that `_make_plan(epoch)` makes from them; the pipeline computes the running epoch's
    batches (`_epoch_batches`, given the epoch as a tensor) and turns each
    into a batch with a batch function. Arguments are those of
    `SharedSettings`.
    """

    def __init__(self, **shared):
        super().__init__(**shared)
        self._prepared = None  # what the latest build or adapt resolved
        self._order = None  # its EpochOrder

    def _reset_run_state(self, state):
        super()._reset_run_state(state)
        self._plans = collections.OrderedDict()
        self._plans_lock = threading.Lock()
        self._running = None

    @property
    def lengths(self):
        """int64 length of every built element (longest sequence component)."""
        return self._built()._prepared.lengths

    def build(
        self,
        x,
        y=None,
        sample_weight=None,
        *,
        engine="tf.data",
        workers=None,
        use_multiprocessing=None,
        max_queue_size=None,
    ):
        """Returns a dataset of batches for `model.fit`.

        Args:
            x: sequences (list of arrays with a varying first axis, or a
                `tf.RaggedTensor`), per-example arrays, or a dict of those.
            y: targets, in the same forms: per-example labels or per-frame
                sequences aligned with x. Optional.
            sample_weight: weights, per example or per frame. Optional.
            engine: what makes the batches (`kerasbatch.engines`):
                `"tf.data"` (a `tf.data.Dataset`; needs TensorFlow),
                `"grain"` (a Grain `IterDataset` of numpy batches; needs
                Grain) or `"python"` (a `keras.utils.PyDataset` of numpy
                batches). For the same seed and epoch, every engine yields
                the same batches, bit for bit.
            workers: `engine="python"` only: threads that make the next
                batches ahead of Keras' loop (default 1: none). The
                batches and their order do not change (see
                `kerasbatch.engines.python.PlannedPyDataset`).
            use_multiprocessing: `engine="python"` only: False (the
                default); worker processes are refused, with what to use
                instead.
            max_queue_size: `engine="python"` only: how many batches the
                `workers` make ahead, at most (default 10).

        Returns:
            A dataset of `x`, `(x, y)` or `(x, y, sample_weight)` batches with
            exact cardinality (`len()`); sequence components are padded
            dense tensors (the class docstring tells their shapes).

        Example:

        >>> import numpy as np
        >>> import kerasbatch
        >>> builder = kerasbatch.BucketBuilder(
        ...     boundaries=[3], batch_size=2, shuffle=False)
        >>> x = [np.ones(n, "int32") for n in (1, 2, 3, 4, 5)]
        >>> train = builder.build(x, np.zeros(5), engine="python", workers=2)
        >>> [tuple(batch_x.shape) for batch_x, _ in train]
        [(2, 2), (2, 4), (1, 5)]
        """
        engines.check_engine(engine)
        options = engines.python_options(
            engine, workers, use_multiprocessing, max_queue_size
        )
        data = sources.from_inputs(x, y, sample_weight)
        if getattr(self, "output_lengths", False):
            x_parts = data.role_components("x")
            outputs.check_length_names(
                [c.key for c in x_parts if c.key is not None],
                [c.name for c in x_parts if c.is_sequence],
            )
        self._attach(data)
        try:
            self._check_data_parallel(*self._distributed_batch_rows())
            return self._serve(
                lambda served: served._engine_dataset(engine, **options), engine
            )
        except Exception:
            self._prepared = None  # no half-built state for statistics() to read
            raise

    def _engine_dataset(self, engine, **options):
        """The built dataset, made by `engine` (`options`: the `python`
        engine's, `kerasbatch.engines.python_options`)."""
        if engine == "tf.data":
            return self._make_dataset()
        engines.check_shapes_for_keras(engine, self._lengths_vary())
        if engine == "python":
            from kerasbatch.engines import python

            return python.PlannedPyDataset(self, **options)
        from kerasbatch.engines import grain

        return grain.PlannedIterDataset(self)

    def _lengths_vary(self):
        """Whether batches of the first epochs differ in a sequence length."""
        return any(
            len(np.unique(self.plan(epoch).padded_lengths[:, column])) > 1
            for epoch in (0, 1)
            for column in range(self.plan(epoch).padded_lengths.shape[1])
        )

    def _numpy_batch_function(self):
        """The numpy engines' `(plan, index) -> batch` (subclass hook)."""
        raise ValueError(
            f"{type(self).__name__} runs on the 'tf.data' engine only: build "
            "it with engine='tf.data'."
        )

    def _check_has_batches(self, num_batches):
        """Raises if an epoch has no batch."""
        if num_batches == 0:
            raise ValueError(
                "No batch left: every element was dropped (drop_remainder or "
                "overflow='drop'). Lower the batch size or keep the remainder."
            )

    def adapt(self, lengths):
        """Plans without building a dataset.

        Resolves data-dependent settings and makes `plan()` and
        `statistics()` available, as `build` would, at the cost of planning
        only: what tuning and what-if analysis need. Call `build` for a
        dataset.

        Args:
            lengths: 1-D array of non-negative int lengths, one per element
                (planned as one sequence component, `"x"`), or inputs already
                converted by `kerasbatch.data.sources.from_inputs`.

        Example:

        >>> import numpy as np
        >>> import kerasbatch
        >>> builder = kerasbatch.BucketBuilder(boundaries=[10], batch_size=2)
        >>> builder.adapt(np.array([3, 4, 12, 15, 5]))
        >>> builder.bucket_counts, builder.statistics().num_batches
        ([3, 2], 3)
        """
        if not isinstance(lengths, sources.SequenceData):
            lengths = sources.from_lengths(lengths)
        try:
            self._attach(lengths)
        except Exception:
            self._prepared = None  # no half-built state for statistics() to read
            raise
        self._latest = None  # plan() and statistics() describe these lengths

    def _require_built(self):
        if self._prepared is None:
            raise RuntimeError(
                f"{type(self).__name__} has no data yet: call build(x, ...) first."
            )

    def _built(self):
        """What holds the latest build's data: the copy serving the latest
        built dataset (a builder keeps only its settings), or this builder
        after `adapt`."""
        built = self._serving()
        built._require_built()
        return built

    def plan(self, epoch=None, dataset=None):
        """The plan of `epoch` (default: the epoch last started, or next).

        Args:
            epoch: the epoch.
            dataset: the dataset this builder returned that the plan is for
                (default: the latest built, or the data of `adapt`).
        """
        served = self._serving(dataset)
        if served is not self:
            return served.plan(epoch)
        self._require_built()
        if epoch is None:
            epoch = self._started_epoch()
            if epoch is None:
                epoch = self.epoch
        epoch = checks.checked_epoch(epoch)
        with self._plans_lock:
            if epoch in self._plans:
                return self._plans[epoch]
        plan = self._make_plan(epoch)
        with self._plans_lock:
            self._plans[epoch] = plan
            while len(self._plans) > _PLAN_CACHE_SIZE:
                self._plans.popitem(last=False)
        return plan

    def _statistics(self, epoch):
        return self.plan(epoch).statistics()

    def batch_shapes(self, epoch=None, dataset=None):
        """Every distinct shape `epoch` feeds the model, before it runs.

        What XLA (`jit_compile`, the JAX backend) compiles once each. With
        `pad_to_bucket` and `remainder="even"` (or `"pad"`), one per
        bucket, the same every epoch.

        Args:
            epoch: as for `plan` (default: the epoch last started, or next).
            dataset: as for `plan`.

        Returns:
            A sorted list with one dict per distinct shape, mapping every
            sequence component to its shape: `(rows, padded length,
            *trailing dimensions)`.

        Example:

        >>> import numpy as np
        >>> import kerasbatch
        >>> builder = kerasbatch.BucketBuilder(
        ...     boundaries=[4], batch_size=2, pad_to_bucket=True,
        ...     remainder="pad", max_length=8)
        >>> builder.adapt(np.array([1, 2, 3, 5, 6]))
        >>> builder.batch_shapes()
        [{'x': (2, 3)}, {'x': (2, 8)}]
        """
        served = self._serving(dataset)
        if served is not self:
            return served.batch_shapes(epoch)
        self._require_built()
        plan = self.plan(epoch)
        trailing = {
            c.name: c.trailing_shape for c in self._prepared.data.sequence_components
        }
        return [
            {
                name: (int(row[0]), int(row[1 + column]), *trailing.get(name, ()))
                for column, name in enumerate(plan.component_names)
            }
            for row in plan.shapes()
        ]

    def _distributed_batch_rows(self):
        # The batch sizes of an epoch are fixed by the lengths.
        return self.plan().batch_rows, False

    # -------------------------------------------------------- subclass hooks
    def _attach(self, data):
        """Validates the settings against `data` (`sources.SequenceData`)
        and plans for it: resolves a `Prepared` value and binds it
        (`_bind`). On error, the builder holds no data."""
        raise NotImplementedError

    def _overflowed(self, data, lengths, component_lengths, paddings):
        """The `Prepared` value of `data` after the `max_length` overflow
        policy (`lengths`: of every element, its longest component)."""
        candidates, limit, policy_dropped = self._apply_overflow(lengths)
        cut_lengths = lengths
        if len(lengths) and lengths.max() > limit:
            cut_lengths = np.minimum(lengths, limit)
        return prepared_lib.Prepared(
            data=data,
            lengths=lengths,
            cut_lengths=cut_lengths,
            candidates=candidates,
            policy_dropped=policy_dropped,
            paddings=paddings,
            component_lengths=component_lengths,
            # One limit for all: a read-only view of one value, no memory.
            element_limits=np.broadcast_to(np.int64(limit), lengths.shape),
        )

    def _bind(self, prepared, order):
        """Makes `prepared` (a `Prepared`) and its `EpochOrder` the data
        that `plan()` and the pipeline read."""
        self._prepared, self._order = prepared, order
        self._probe_function = None
        with self._plans_lock:
            self._plans.clear()

    def _make_plan(self, epoch):
        """The plan of `epoch`, a pure function of `(seed, epoch)`."""
        raise NotImplementedError

    # --------------------------------------------------------------- pipeline
    def _steps_per_epoch(self):
        return self.plan().num_batches

    def distribute_with_service(
        self,
        service,
        *,
        processing_mode="distributed_epoch",
        epochs=1,
        initial_epoch=0,
        num_workers=None,
        dataset=None,
        timeout=30.0,
    ):
        """The built dataset's batches for `epochs` epochs, made by the
        workers of a tf.data service.

        The dataset sent to the service carries its epochs as data and holds
        no Python, so the workers can run it in other processes or machines
        (see `kerasbatch.engines.tf_data.service`). Batch `k` of the result is
        batch `k % steps` of epoch `initial_epoch + k // steps`, where
        `steps = len(built dataset)`: train with `model.fit(remote,
        epochs=epochs, steps_per_epoch=steps)`, and `statistics()` and the
        callbacks follow the epoch that is arriving.

        Args:
            service: the dispatcher's address, `"grpc://host:port"`.
            processing_mode: `"distributed_epoch"` (each batch made once, by
                one of the workers; the order depends on their speed) or
                `"parallel_epochs"` (every worker makes every batch in the
                plan's order: exactly once only with `num_workers=1`).
            epochs: how many epochs the dataset holds.
            initial_epoch: the first epoch (to resume a run).
            num_workers: with `"parallel_epochs"`, the number of workers the
                service has; it must be 1.
            dataset: the built dataset to serve (default: the latest).
            timeout: seconds to wait for the dispatcher to accept a
                connection before raising.

        Returns:
            A `tf.data.Dataset` of `epochs * steps` batches.

        Raises:
            RuntimeError: nothing was built yet.
            ValueError: a processing mode that cannot keep every epoch
                exactly once; bad `epochs` / `initial_epoch`.
            ConnectionError: no dispatcher answers at `service`.

        Example:

        >>> import numpy as np, tensorflow as tf
        >>> import kerasbatch
        >>> dispatcher = tf.data.experimental.service.DispatchServer()
        >>> worker = tf.data.experimental.service.WorkerServer(
        ...     tf.data.experimental.service.WorkerConfig(
        ...         dispatcher_address=dispatcher.target.split("://")[1]))
        >>> builder = kerasbatch.SortedBuilder(batch_size=2, shuffle=False)
        >>> train = builder.build([np.ones(n) for n in (1, 2, 3, 4)])
        >>> remote = builder.distribute_with_service(
        ...     dispatcher.target, processing_mode="parallel_epochs",
        ...     num_workers=1, epochs=2)
        >>> [tuple(batch.shape) for batch in remote]
        [(2, 2), (2, 4), (2, 2), (2, 4)]
        """
        served = self._built_copy(dataset, "distribute_with_service", "tf.data")
        service_lib.check_request(
            service,
            processing_mode,
            num_workers,
            epochs,
            initial_epoch,
            timeout,
            service_lib.planned_modes(),
        )
        batch_function, num_batches = served._pipeline(None)
        batches = service_lib.global_batches(
            served, int(epochs), int(initial_epoch), num_batches
        ).map(batch_function, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        remote = batches.apply(
            tf.data.experimental.service.distribute(processing_mode, service)
        )

        def arrived(number, batch):
            epoch = initial_epoch + number // num_batches
            with tf.control_dependencies([served._state.mark_started(epoch)]):
                return tf.nest.map_structure(tf.identity, batch)

        remote = served._prefetched(remote.enumerate().map(arrived))
        remote = remote.apply(
            tf.data.experimental.assert_cardinality(epochs * num_batches)
        )
        serving_lib._SERVING[remote] = served
        return remote

    def _fixed_batch_sizes(self):
        """`[(setting, global batch size)]` that replicas must share evenly
        (subclass hook; budgets that size batches themselves are not)."""
        return [("batch_size", self.batch_size)]

    def _make_dataset(self, replicas=None):
        """The built dataset (per-replica parts with `replicas`)."""
        batch_function, num_batches = self._pipeline(replicas)
        return self._planned_dataset(batch_function, num_batches, replicas)

    def _pipeline(self, replicas):
        """`(batch function, batches per epoch)`; makes the tensors that
        `_batch_arguments` reads (subclass hook)."""
        raise NotImplementedError

    def _planned_dataset(self, batch_function, num_batches, replicas=None):
        """Each iteration: the next epoch's batches, made by `batch_function`.

        The epoch is read once per iteration, and advanced when the
        iteration's last batch is taken, as on the numpy engines: an
        iteration given up part-way, such as Keras' look at the first batch
        on JAX and torch (to build the model), repeats the epoch, so the
        first epoch of a `fit` is 0 on every backend. On the TensorFlow
        backend, which never looks, the epoch advances as an iteration
        starts, at no cost per batch (`_advances_when_taken`). A checkpoint of the
        iterator keeps the running epoch and position in it; the epoch
        counter, which `set_epoch` drives, is set past that epoch at its
        end. With `replicas` (a `ReplicaSlice`), each batch is cut into the
        parts of those replicas, one element per replica and step, and the
        epoch advances when an iteration goes past its last part
        (`_advanced_at_end`).
        """
        parallel = {"num_parallel_calls": tf.data.AUTOTUNE, "deterministic": True}
        if replicas is None and not self._advances_when_taken():
            epochs = tf.data.Dataset.range(1).map(lambda _: self._start_epoch())
            dataset = epochs.flat_map(self._epoch_batches)
            dataset = self._prefetched(dataset.map(batch_function, **parallel))
            return tf_data.checkpointable(
                dataset.apply(tf.data.experimental.assert_cardinality(num_batches))
            )
        epochs = tf.data.Dataset.range(1).map(lambda _: self._read_epoch())
        if replicas is None:
            dataset = epochs.flat_map(
                lambda epoch: self._numbered_batches(epoch, num_batches)
            )
            dataset = dataset.map(
                lambda epoch, last, batch: (epoch, last, batch_function(batch)),
                **parallel,
            )
            # After the prefetch, so that it runs as the consumer takes a batch.
            dataset = self._prefetched(dataset).map(self._taken)
        else:
            dataset = epochs.flat_map(
                lambda epoch: self._replica_epoch(epoch, replicas)
            )
            dataset = dataset.map(batch_function, **parallel)
            dataset = self._advanced_at_end(self._prefetched(dataset))
            num_batches *= replicas.count
        return tf_data.checkpointable(
            dataset.apply(tf.data.experimental.assert_cardinality(num_batches))
        )

    def _numbered_batches(self, epoch, num_batches):
        """`(epoch, whether it is the last, batch function's arguments)` of
        every batch of `epoch` (a tensor), as a dataset."""
        numbered = self._epoch_batches(epoch).enumerate()
        return numbered.map(
            lambda number, batch: (epoch, number + 1 >= num_batches, batch)
        )

    def _taken(self, epoch, last, batch):
        """`batch`, taken by the consumer: the epoch's last batch sets the
        epoch counter to `epoch + 1`."""

        def advance():
            with tf.control_dependencies([self._state.mark_started(epoch)]):
                return self._state.advance_past_started()

        advanced = tf.cond(last, advance, lambda: tf.constant(-1, tf.int64))
        with tf.control_dependencies([advanced]):
            return tf.nest.map_structure(tf.identity, batch)

    def _epoch_batches(self, epoch):
        """The batch function's arguments for every batch of `epoch` (a
        tensor), as a dataset."""
        return tf.data.Dataset.from_tensor_slices(self._batch_arguments(epoch))

    def _batch_arguments(self, epoch):
        """The batch function's arguments of every batch of `epoch` (a
        tensor), stacked: a tuple of tensors whose first axis is the batch
        (subclass hook)."""
        raise NotImplementedError

    def _replica_epoch(self, epoch, replicas):
        """The parts of `epoch`'s batches that `replicas` train on, one per
        replica and step."""
        return self._epoch_batches(epoch).flat_map(
            lambda batch: tf.data.Dataset.from_tensor_slices(
                self._replica_parts(batch, replicas)
            )
        )

    def _replica_parts(self, batch, replicas):
        """The batch function's arguments of every part of one global
        `batch` that `replicas` (a `ReplicaSlice`) train on, stacked (subclass
        hook)."""
        raise NotImplementedError
