"""`PlannedBuilder`: data in memory, a numpy plan per epoch, any engine.

`build` validates the inputs and plans for them (a frozen `Prepared` value
and its epoch order), resolves one frozen built value
(`kerasbatch.planning.built.Built`), and returns the dataset an engine makes
of it (`kerasbatch.engines`): a `tf.data` pipeline that computes each
epoch's batches in its graph, or the numpy engines (`grain`, `python`)
that read the plans.
"""

from __future__ import annotations

import numpy as np

from kerasbatch import engines
from kerasbatch.builders.datasets import BuiltDatasets
from kerasbatch.builders.settings import Settings
from kerasbatch.data import outputs, random_access, sources
from kerasbatch.engines import epoch_state
from kerasbatch.engines import served as served_lib
from kerasbatch.planning import built as built_lib
from kerasbatch.planning import prepared as prepared_lib


class PlannedBuilder(BuiltDatasets, Settings):
    """What the in-memory builders share: data in memory, a numpy plan per epoch.

    `build` validates the inputs and attaches them (`_attach`: resolves one
    frozen `kerasbatch.planning.prepared.Prepared` value and its epoch
    order, and binds them), resolves the built value from them
    (`_built_value`), and returns the dataset the engine makes of it.
    Arguments are those of `kerasbatch.builders.settings.Settings`.
    """

    #: The kind of batches the engines make (`kerasbatch.planning.built`).
    batches = "padded"

    def __init__(self, *arguments, **settings):
        super().__init__(*arguments, **settings)
        self._init_datasets()
        self._prepared = None  # what `_attach` resolved, until it is built
        self._order = None  # its EpochOrder

    @property
    def lengths(self):
        """int64 length of every built element (longest sequence component)."""
        return self.built.prepared.lengths

    def build(
        self,
        x,
        y=None,
        sample_weight=None,
        *,
        engine="tf.data",
        lengths=None,
        read_threads=None,
        workers=None,
        use_multiprocessing=None,
        max_queue_size=None,
    ):
        """Returns a dataset of batches for `model.fit`.

        Args:
            x: sequences (list of arrays with a varying first axis, or a
                `tf.RaggedTensor`), per-example arrays, or a dict of those;
                or a random-access source of them, read by index from disk
                (see below).
            y: targets, in the same forms: per-example labels or per-frame
                sequences aligned with x. Optional.
            sample_weight: weights, per example or per frame. Optional.
            lengths: a random-access source's lengths (a 1-D int array, or
                a dict of them by sequence component). Default: the
                source's own `lengths` (a `kerasbatch.io.TokenFile`'s
                index), else one pass that reads every element, cached next
                to the source's files.
            read_threads: threads that read a batch's elements from a
                random-access source (default 8; a source with
                `__getitems__` reads them in one call).
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

        A random-access source is anything with `__len__` and
        `__getitem__` that returns one element: a Grain `MapDataset` or data
        source, a Hugging Face `Dataset`, a `kerasbatch.io.TokenFile`. An
        element is an array, a dict of arrays, or an `(x, y)` or `(x, y,
        sample_weight)` tuple of those; an array with a first axis is a
        sequence, a scalar a per-example value. The plan needs the lengths
        only, and a batch reads only its elements: the batches are those of
        the same data in memory, bit for bit. An element that does not match
        element 0 or its lengths is an error that names it.

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
        options = engines.options(
            engine,
            workers=workers,
            use_multiprocessing=use_multiprocessing,
            max_queue_size=max_queue_size,
        )
        if any(random_access.is_random_access(d) for d in (x, y, sample_weight)) or (
            lengths is not None or read_threads is not None
        ):
            data = random_access.from_inputs(
                x, y, sample_weight, lengths=lengths, threads=read_threads
            )
        else:
            data = self._inputs(x, y, sample_weight)
        if getattr(self, "output_lengths", False):
            x_parts = data.role_components("x")
            outputs.check_length_names(
                [c.key for c in x_parts if c.key is not None],
                [c.name for c in x_parts if c.is_sequence],
            )
        built = self._resolve(data)
        self._check_data_parallel(built)
        dataset = engines.planned(
            engine, built, epoch=self._epochs.next_epoch(), **options
        )
        return self._keep(dataset, served_lib.served_by(dataset))

    def _inputs(self, x, y, sample_weight):
        """`build`'s inputs as `kerasbatch.data.sources.SequenceData`
        (subclass hook for other kinds of inputs)."""
        return sources.from_inputs(x, y, sample_weight)

    def _resolve(self, data):
        """The built value of `data`: `_attach`, then `_built_value`. The
        builder keeps none of the data; data it fails on leaves it with no
        latest build (`plan()` and `statistics()` then say so)."""
        try:
            self._attach(data)
            return self._built_value()
        except Exception:
            self._latest = None
            raise
        finally:
            self._prepared = self._order = None

    def _built_value(self):
        """The frozen built value of what `_attach` resolved."""
        return built_lib.Built(
            builder_type=type(self),
            arguments=self._arguments(),
            settings=self._snapshot(),
            prepared=self._prepared,
            order=self._order,
            batches=self.batches,
            make_plan=self._planner(),
            fixed_batch_sizes=tuple(self._fixed_batch_sizes()),
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
        built = self._resolve(lengths)
        # plan() and statistics() describe these lengths.
        self._latest = served_lib.Served(
            built, None, epoch_state.EpochState(self._epochs.next_epoch())
        )

    def plan(self, epoch=None, dataset=None):
        """The plan of `epoch` (default: the epoch last started, or next).

        Args:
            epoch: the epoch.
            dataset: the dataset this builder returned that the plan is for
                (default: the latest built, or the data of `adapt`).
        """
        return self._built_served(dataset, "plan").plan(epoch)

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
        return self._built_served(dataset, "batch_shapes").batch_shapes(epoch)

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
        """Makes `prepared` (a `Prepared`) and its `EpochOrder` what the
        built value holds."""
        self._prepared, self._order = prepared, order

    def _planner(self):
        """The plan function of the bound data, `epoch -> plan`: a pure
        function of `(seed, epoch)` (subclass hook)."""
        raise NotImplementedError

    # ------------------------------------------------------- tf.data engine
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
        from kerasbatch.engines.tf_data import service as service_lib

        served = self._tf_data_served(dataset, "distribute_with_service")
        remote = service_lib.distribute_planned(
            served,
            service,
            processing_mode=processing_mode,
            epochs=epochs,
            initial_epoch=initial_epoch,
            num_workers=num_workers,
            timeout=timeout,
        )
        return self._distributed_from(remote, served)

    def _fixed_batch_sizes(self):
        """`[(setting, global batch size)]` that replicas must share evenly
        (subclass hook; budgets that size batches themselves are not)."""
        return [("batch_size", self.batch_size)]
