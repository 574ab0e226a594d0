"""The base of every builder: inputs → plan → `tf.data` pipeline for `model.fit`."""

from __future__ import annotations

import collections
import copy
import dataclasses
import gc
import math
import numbers
import threading
import typing
import weakref

import keras
import numpy as np

from kerasbatch import engines, outputs, sources
from kerasbatch import epochs as epochs_lib
from kerasbatch import orders as orders_lib
from kerasbatch import padding as padding_lib
from kerasbatch import plan as plan_lib
from kerasbatch import remainders as remainders_lib
from kerasbatch.builders import prepared as prepared_lib
from kerasbatch.builders import replicas as replicas_lib
from kerasbatch.builders import service as service_lib
from kerasbatch.config import Configurable
from kerasbatch.engines import epoch_state, numpy_batches, tf_data
from kerasbatch.optional import tensorflow as tf

OVERFLOW_POLICIES = ("error", "truncate", "drop")
REMAINDERS = remainders_lib.REMAINDERS
_PLAN_CACHE_SIZE = 4
#: Every dataset a builder returned that is still in use, mapped to the
#: frozen copy of the builder that serves it (see `SharedSettings._serve`).
_SERVING = weakref.WeakKeyDictionary()


def builder_of(dataset):
    """The builder that serves `dataset`, as it was when `build` returned it.

    Every dataset a builder returns is bound to the data and plan of its own
    `build` call: it is served by a copy of the builder frozen at that call,
    which building again (other data, `adapt`) never changes. This returns
    that copy, whose `statistics()`, `plan()` and `running_positions()`
    describe exactly the batches the dataset yields.

    Args:
        dataset: a dataset returned by a builder's `build` (not one derived
            from it by `map`, `repeat`, ...).

    Raises:
        ValueError: `dataset` was not returned by a builder.

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> builder = kerasbatch.SortedBuilder(batch_size=2, shuffle=False)
    >>> train = builder.build([np.ones(n) for n in (1, 2, 3, 4)])
    >>> val = builder.build([np.ones(n) for n in (5, 5)])
    >>> kerasbatch.builders.builder_of(train).statistics().num_elements
    4
    """
    try:
        return _SERVING[dataset]
    except (KeyError, TypeError):
        raise ValueError(
            f"{dataset!r} was not returned by a kerasbatch builder's build(). "
            "Pass the dataset build() returned itself, not one derived from it "
            "(map, repeat, take, ...)."
        ) from None


class SharedSettings(Configurable):
    """What every builder shares, in memory or streaming.

    Validates and keeps the arguments below; gives `from_config`, equality
    and `repr` (from the subclass's `get_config`); binds every built dataset
    to a copy of the builder frozen at its `build` (`_serve`), with an epoch
    counter of its own (a CPU `tf.Variable` that each new iteration reads and
    advances); applies the `max_length` overflow policy to known lengths.

    Args:
        shuffle: reshuffle every epoch.
        seed: int seed; None draws one at construction.
        drop_remainder: drop smaller remainder batches (`remainder="drop"`).
        remainder: what happens to smaller remainder batches: `"keep"`,
            `"drop"`, `"pad"` or `"even"`; see `kerasbatch.builders.Builder`.
            None: from `drop_remainder`.
        padding: see `kerasbatch.builders.Builder`.
        max_length: the longest element allowed, or None.
        overflow: `"error"`, `"truncate"` or `"drop"`.
        batch_multiple: feed every batch with a multiple of this many rows;
            see `kerasbatch.builders.Builder`.
        pad_to_multiple: pad every sequence component to a multiple of this
            length; see `kerasbatch.builders.Builder`.
        prefetch: `"auto"`, an int, or 0 / None.
    """

    #: The `remainder` settings this builder takes, and why not others.
    remainders = REMAINDERS
    remainders_reason = ""

    def __init__(
        self,
        *,
        shuffle=True,
        seed=0,
        drop_remainder=False,
        remainder=None,
        padding=None,
        max_length=None,
        overflow="error",
        batch_multiple=1,
        pad_to_multiple=1,
        prefetch="auto",
    ):
        self.shuffle = _bool(shuffle, "shuffle")
        if seed is None:
            seed = int(np.random.SeedSequence().entropy % (2**31))
        if not _is_int(seed) or seed < 0:
            raise ValueError(f"seed must be a non-negative int or None, got {seed!r}.")
        self.seed = int(seed)
        self.remainder = _remainder(
            remainder, _bool(drop_remainder, "drop_remainder"), type(self)
        )
        self.drop_remainder = self.remainder == "drop"
        self._parsed_padding = padding_lib.parse_padding(padding)
        self.padding = padding
        self.max_length = _optional_positive_int(max_length, "max_length")
        if overflow not in OVERFLOW_POLICIES:
            raise ValueError(
                f"overflow must be one of {OVERFLOW_POLICIES}, got {overflow!r}."
            )
        self.overflow = overflow
        if not _is_int(batch_multiple) or batch_multiple <= 0:
            raise ValueError(
                f"batch_multiple must be a positive int, got {batch_multiple!r}."
            )
        self.batch_multiple = int(batch_multiple)
        if not _is_int(pad_to_multiple) or pad_to_multiple <= 0:
            raise ValueError(
                f"pad_to_multiple must be a positive int, got {pad_to_multiple!r}."
            )
        self.pad_to_multiple = int(pad_to_multiple)
        if not (prefetch in ("auto", None) or (_is_int(prefetch) and prefetch >= 0)):
            raise ValueError(
                f"prefetch must be 'auto', None or an int >= 0, got {prefetch!r}."
            )
        self.prefetch = prefetch
        self._reset_run_state(epoch_state.EpochState(0))
        self._datasets = weakref.WeakKeyDictionary()  # built dataset -> copy
        # Every copy still serving a dataset: a built one, or one made from
        # it by `distribute` / `distribute_with_service` (that one may
        # outlive the built dataset).
        self._copies = weakref.WeakValueDictionary()  # id(copy) -> copy
        self._latest = None  # the copy serving the latest built dataset

    # ----------------------------------------------------------------- config
    def _shared_config(self):
        return {
            "shuffle": self.shuffle,
            "seed": self.seed,
            "drop_remainder": self.drop_remainder,
            "remainder": self.remainder,
            "padding": padding_lib.padding_config(self.padding),
            "max_length": self.max_length,
            "overflow": self.overflow,
            "batch_multiple": self.batch_multiple,
            "pad_to_multiple": self.pad_to_multiple,
            "prefetch": self.prefetch,
        }

    # ---------------------------------------------------------------- copying
    def __copy__(self):
        """A shallow copy that shares this one's data: what serves a built
        dataset (`_serve`)."""
        copied = object.__new__(type(self))
        copied.__dict__.update(self.__dict__)
        return copied

    def __getstate__(self):
        """A builder pickles and deep-copies as its settings (a fresh
        builder of the same arguments): its built datasets, their data and
        run state stay with the datasets."""
        return {"arguments": self._arguments()}

    def __setstate__(self, state):
        self.__init__(**state["arguments"])

    def _arguments(self):
        """The constructor arguments (`get_config()`, unless a subclass
        keeps objects there that its config serialises)."""
        return self.get_config()

    # --------------------------------------------------------------- datasets
    def _reset_run_state(self, state):
        """Fresh state for iterating a built dataset: `state`, its epoch
        counter (`kerasbatch.engines.epoch_state`), and the caches of
        subclasses (which extend this)."""
        self._state = state

    def _serve(self, make_dataset, engine="tf.data"):
        """Returns `make_dataset(copy)`, bound to a copy of this builder.

        The copy is frozen at this build: it holds this build's data and
        resolved settings, and an epoch counter (of the `engine`) and
        caches of its own. Building again rebinds this builder's state and
        never touches a copy, so every dataset yields its own build's data,
        cardinality and statistics for its whole life (see `builder_of`).
        """
        served = copy.copy(self)
        served._datasets = served._copies = None  # a copy builds nothing
        served._latest = None
        epoch = self._state.next_epoch()
        served._engine = engine
        if engine == "tf.data":
            served._reset_run_state(tf_data.GraphEpochState(epoch))
        else:
            served._reset_run_state(epoch_state.EpochState(epoch))
        dataset = make_dataset(served)
        self._datasets[dataset] = _SERVING[dataset] = served
        self._copies[id(served)] = served
        self._latest = served
        return dataset

    def _serving(self, dataset=None):
        """The copy serving `dataset` (default: the latest build), or self
        when nothing was built since the last `adapt`."""
        if dataset is None:
            return self._latest or self
        if self._datasets is not None:
            if dataset in self._datasets:
                return self._datasets[dataset]
            served = _SERVING.get(dataset)  # from distribute(...) of a build
            if served is not None and self._copies.get(id(served)) is served:
                return served
        builder_of(dataset)  # names a dataset that no builder returned
        raise ValueError(
            f"This dataset was built by another builder than {self!r}; ask "
            "that builder, or kerasbatch.builders.builder_of(dataset)."
        )

    def _built_copy(self, dataset, method, engine=None):
        """The copy serving the built `dataset` (default: the latest); with
        `engine`, it must have been built by that engine."""
        served = self._serving(dataset)
        if served is self:
            raise RuntimeError(
                f"{type(self).__name__}.{method} needs a built dataset: call "
                "build(...) first."
            )
        if engine is not None and served._engine != engine:
            raise ValueError(
                f"{type(self).__name__}.{method} runs on the {engine!r} engine, "
                f"but the dataset was built with engine={served._engine!r}: "
                f"build it with engine={engine!r}."
            )
        return served

    def built_datasets(self):
        """The datasets this builder returned that are still in use.

        Example:

        >>> import numpy as np
        >>> import kerasbatch
        >>> builder = kerasbatch.PaddedBuilder(batch_size=2)
        >>> train = builder.build([np.ones(n) for n in (1, 2, 3)])
        >>> val = builder.build([np.ones(n) for n in (4, 5)])
        >>> len(builder.built_datasets())
        2
        """
        if self._datasets is None:
            return []
        if len(self._datasets) > 1:
            gc.collect()  # datasets kept only by reference cycles are not in use
        return list(self._datasets)

    # ------------------------------------------------------------------ epoch
    @property
    def epoch(self):
        """The epoch the next iteration of the latest built dataset will use."""
        return self._serving()._state.next_epoch()

    def set_epoch(self, epoch):
        """Makes the next iteration of every built dataset yield epoch `epoch`.

        Every new iteration (each `model.fit` epoch) otherwise advances the
        epoch of that dataset by one; `kerasbatch.callbacks.EpochReshuffle`
        calls this in `on_epoch_begin` so that resumed training sees the same
        batches. Datasets built later start at `epoch` too.
        """
        epoch = checked_epoch(epoch)
        self._state.assign(epoch)
        for served in list((self._copies or {}).values()):
            served._state.assign(epoch)

    @property
    def last_started_epoch(self):
        """The epoch of the latest built dataset's most recent iteration, or
        None."""
        return self._serving()._started_epoch()

    def _started_epoch(self):
        return self._state.started_epoch()

    # ------------------------------------------------------------- statistics
    def statistics(self, epoch=None, dataset=None):
        """`PlanStatistics` of one epoch of a built dataset.

        Args:
            epoch: the epoch (default: the one last started, else the next).
            dataset: the dataset this builder returned that the figures are
                for (default: the latest built, or the data of `adapt`).
        """
        return self._serving(dataset)._statistics(epoch)

    def running_positions(self, num_batches, dataset=None):
        """Real and padded positions of the running epoch's first batches.

        The callbacks' view of a builder (`kerasbatch.callbacks`): every
        builder kind answers it, from its plan (in-memory builders) or from
        in-pipeline counters (`kerasbatch.StreamBucketBuilder`).

        Args:
            num_batches: how many of the epoch's batches (in order) to count.
            dataset: the built dataset (default: the latest built).

        Returns:
            `(real, padded)` int positions over all sequence components of
            the first `num_batches` batches of the epoch last started.

        Example:

        >>> import numpy as np
        >>> import kerasbatch
        >>> builder = kerasbatch.SortedBuilder(batch_size=2, shuffle=False)
        >>> _ = builder.build([np.ones(n) for n in (1, 2, 3, 5)])
        >>> builder.running_positions(1), builder.running_positions(2)
        ((3, 4), (11, 14))
        """
        return self._serving(dataset)._running_positions(num_batches)

    def distribute(self, strategy, dataset=None):
        """The built dataset's batches, per replica, for `strategy`.

        Returns a `tf.distribute.DistributedDataset` for `model.fit` under
        `strategy.scope()`. Every step, each replica gets its part of the
        same global batch of the plan (`batch_size` is global, as in Keras),
        padded to that batch's length: all replicas train on the same bucket
        and shape at every step, run the plan's number of steps, and one
        epoch holds every element exactly once across all replicas (see
        `kerasbatch.builders.replicas`). A `kerasbatch.StreamBucketBuilder`
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
        _SERVING[distributed] = served
        return distributed

    def _make_dataset(self, replicas=None):
        """The built dataset's pipeline; with `replicas` (a `ReplicaSlice`),
        the parts of every global batch those replicas train on (subclass
        hook)."""
        raise NotImplementedError

    def _steps_per_epoch(self):
        """Batches per epoch, or None where unknown (subclass hook)."""
        raise NotImplementedError

    def _statistics(self, epoch):
        raise NotImplementedError

    def _running_positions(self, num_batches):
        raise NotImplementedError

    def _start_epoch(self):
        """In a pipeline: reads and advances the epoch counter (a tensor)."""
        return self._state.start_in_graph()

    def _read_epoch(self):
        """In a pipeline: reads the epoch counter (a tensor), not advancing it."""
        return self._state.read_in_graph()

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
                return tf.nest.map_structure(_empty_like, dataset.element_spec)

        end = tf.data.Dataset.range(1).map(advance)
        return dataset.concatenate(end.filter(lambda *_: False))

    def _prefetched(self, dataset):
        if not self.prefetch:
            return dataset
        buffer = tf.data.AUTOTUNE if self.prefetch == "auto" else self.prefetch
        return dataset.prefetch(buffer)

    @property
    def _fills(self):
        """Whether batches may get filler rows (`batch_multiple`, or
        `remainder="pad"` or `"even"`)."""
        return self.batch_multiple > 1 or self.remainder in ("pad", "even")

    @property
    def _filler_setting(self):
        """The setting that asks for filler rows, for messages."""
        if self.remainder in ("pad", "even"):
            return f"remainder={self.remainder!r}"
        return f"batch_multiple={self.batch_multiple}"

    def _check_filler_weights(self, has_targets, lengths_only=False):
        """Filler rows are kept out of training by a zero `sample_weight`,
        which needs targets."""
        if self._fills and not has_targets and not lengths_only:
            raise ValueError(
                f"{self._filler_setting} fills smaller batches with rows that a zero "
                "sample_weight keeps out of the loss, but the data has no "
                "targets y to weigh. Give y, or keep or drop the smaller "
                "batches (remainder='keep' or 'drop', batch_multiple=1)."
            )

    def _check_data_parallel(self, batch_rows, any_remainder=False):
        """Raises if a Keras distribution is set (JAX `DataParallel`) whose
        devices cannot share batches of `batch_rows` rows evenly;
        `any_remainder`: remainder batches of any size come too."""
        devices = data_parallel_devices()
        if devices > 1:
            self._check_even_split(
                batch_rows,
                any_remainder,
                devices,
                f"The Keras distribution splits every batch across {devices} devices",
            )

    def _check_even_split(self, batch_rows, any_remainder, parts, splitter):
        """Raises if batches of `batch_rows` rows (and, `any_remainder`,
        remainders of any size) cannot be cut into `parts` parts of equal
        rows; `splitter` says who cuts them."""
        rows = sorted({int(r) for r in np.asarray(batch_rows) if r % parts})
        if any_remainder and self.batch_multiple % parts:
            rows.append("a bucket's remainder")
        if rows:
            multiple = math.lcm(self.batch_multiple, parts)
            raise ValueError(
                f"{splitter}, but {type(self).__name__} feeds batches of "
                f"{', '.join(map(str, rows))} rows. Set batch_multiple="
                f"{multiple} (smaller batches get filler rows of zero "
                "sample_weight), or batch sizes that are multiples with "
                "drop_remainder=True."
            )

    def _distributed_batch_rows(self):
        """`(rows of every batch of an epoch, whether remainders of any
        size come too)`, for `distribute` (subclass hook)."""
        raise NotImplementedError

    def _resolve_paddings(self, data, names, default_length):
        """`{name: Padding}` for the components `names` of `data`.

        Planning from lengths alone (`adapt`) knows only the `"x"`
        component, so a per-component padding dict is cut to the names known.
        """
        parsed = self._parsed_padding
        dtypes = None
        if data.lengths_only and isinstance(parsed, dict):
            parsed = {name: p for name, p in parsed.items() if name in names}
        if not data.lengths_only:  # padding values are checked against them
            dtypes = {c.name: c.values.dtype for c in data.components}
        paddings = padding_lib.resolve_padding(
            parsed, names, default_length, dtypes=dtypes
        )
        self._check_multiple_of_fixed(paddings)
        return paddings

    def _check_multiple_of_fixed(self, paddings):
        """A fixed padding length must be a multiple of `pad_to_multiple`."""
        for name, padding in paddings.items():
            fixed = padding.fixed_length
            if fixed is not None and fixed % self.pad_to_multiple:
                raise ValueError(
                    f"Component {name!r} is padded to the fixed length {fixed}, "
                    f"which is not a multiple of pad_to_multiple="
                    f"{self.pad_to_multiple}. Give a fixed length that is, or "
                    "leave the length to the batch or bucket."
                )

    # --------------------------------------------------------------- overflow
    def _apply_overflow(self, lengths):
        """Returns `(candidate indices, cut limit, number dropped)`."""
        everything = np.arange(len(lengths), dtype=np.int64)
        if self.max_length is None:
            return everything, plan_lib.NO_LIMIT, 0
        too_long = np.flatnonzero(lengths > self.max_length)
        if self.overflow == "truncate" or not len(too_long):
            return everything, self.max_length, 0
        if self.overflow == "drop":
            return np.setdiff1d(everything, too_long), plan_lib.NO_LIMIT, len(too_long)
        first = too_long[0]
        raise ValueError(
            f"Element {first} has length {lengths[first]}, longer than "
            f"max_length={self.max_length} ({len(too_long)} elements are). Set "
            "overflow='truncate' or overflow='drop', or raise max_length."
        )


def data_parallel_devices():
    """The number of devices the global Keras distribution (e.g. JAX
    `keras.distribution.DataParallel`) splits every batch across; 1 when none
    is set."""
    distribution = keras.distribution.distribution()
    mesh = getattr(distribution, "device_mesh", None)
    name = getattr(distribution, "batch_dim_name", None)
    if mesh is None or name not in mesh.axis_names:
        return 1
    return int(mesh.shape[list(mesh.axis_names).index(name)])


class PlannedBuilder(SharedSettings):
    """What the in-memory builders share: data in memory, a numpy plan per epoch.

    `build` validates the inputs and attaches them (`_attach`: resolves one
    frozen `kerasbatch.builders.prepared.Prepared` value and its epoch
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
        self._require_built()
        return self._prepared.lengths

    def build(self, x, y=None, sample_weight=None, *, engine="tf.data"):
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

        Returns:
            A dataset of `x`, `(x, y)` or `(x, y, sample_weight)` batches with
            exact cardinality (`len()`); sequence components are padded
            dense tensors (the class docstring tells their shapes).
        """
        engines.check_engine(engine)
        self._attach(sources.from_inputs(x, y, sample_weight))
        try:
            self._check_data_parallel(*self._distributed_batch_rows())
            return self._serve(lambda served: served._engine_dataset(engine), engine)
        except Exception:
            self._prepared = None  # no half-built state for statistics() to read
            raise

    def _engine_dataset(self, engine):
        """The built dataset, made by `engine`."""
        if engine == "tf.data":
            return self._make_dataset()
        if engine == "python":
            from kerasbatch.engines import python

            return python.PlannedPyDataset(self)
        from kerasbatch.engines import grain

        return grain.PlannedIterDataset(self)

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
                converted by `kerasbatch.sources.from_inputs`.

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
        epoch = checked_epoch(epoch)
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
        (see `kerasbatch.builders.service`). Batch `k` of the result is
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
        _SERVING[remote] = served
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

        The epoch is read (and advanced) once per iteration; a checkpoint
        of the iterator keeps the running epoch and position in it, and
        ignores the epoch counter, which `set_epoch` drives. With
        `replicas` (a `ReplicaSlice`), each batch is cut into the parts of
        those replicas, one element per replica and step.
        """
        if replicas is None:
            epochs = tf.data.Dataset.range(1).map(lambda _: self._start_epoch())
            dataset = epochs.flat_map(self._epoch_batches)
        else:
            epochs = tf.data.Dataset.range(1).map(lambda _: self._read_epoch())
            dataset = epochs.flat_map(
                lambda epoch: self._replica_epoch(epoch, replicas)
            )
            num_batches *= replicas.count
        dataset = dataset.map(
            batch_function, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
        )
        dataset = self._prefetched(dataset)
        if replicas is not None:
            dataset = self._advanced_at_end(dataset)
        return _checkpointable(
            dataset.apply(tf.data.experimental.assert_cardinality(num_batches))
        )

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


class Builder(PlannedBuilder):
    """Base class of the dataset builders.

    A builder turns variable-length sequences into a `tf.data.Dataset` of
    padded batches that `model.fit` takes directly. Each epoch's batches are
    planned in numpy from the lengths alone (a pure function of `seed` and the
    epoch), then gathered and padded once per batch in the pipeline.

    Subclasses decide which elements form a batch (`_epoch_order`); the base
    handles inputs, overflow policies, padding, statistics and the pipeline.

    Args:
        batch_size: elements per batch.
        shuffle: reshuffle the batches every epoch.
        seed: int seed; epoch k's batches depend only on `(seed, k)`. None
            draws one at construction (then kept in `get_config()`).
        drop_remainder: drop the last, smaller batch (of each bucket); the
            dropped elements are counted in `statistics().dropped`. The same
            as `remainder="drop"`.
        remainder: the last, smaller batch (of each bucket): `"keep"` (the
            default), `"drop"` (as `drop_remainder`), `"pad"` or `"even"`.
            `"pad"` feeds it with the full batch size, the rows past its
            elements filler (copies of its first element, `sample_weight` 0,
            counted as padding in `statistics()`). `"even"` cuts each bucket
            into its number of batches (as `"keep"`) of one size, at most
            the batch size, so fewer than one filler row per batch is
            needed. Either way every batch of a bucket has one size and,
            with `pad_to_bucket`, an epoch feeds one shape per bucket (one
            XLA compilation each); `"even"` costs far less padding (0.007 of
            padding efficiency at 32 buckets of 64 on the reference
            workloads, against 0.10 for `"pad"`). Both need targets y and a
            loss that weighs by `sample_weight`, as `batch_multiple` does: a
            `keras.losses.Loss` whose `__call__` takes no `sample_weight`
            fails in Keras' first step; one that takes it and ignores it
            (or a custom `train_step` that drops it) trains on the filler
            rows, which no builder or callback can see.
        padding: how sequence components are padded: None (value 0, to the
            batch's longest element), a `kerasbatch.Padding` or config dict
            for all components, or a dict mapping component names (`"x"`,
            `"y"`, `"sample_weight"` or dict keys) to one.
        max_length: the longest element allowed, or None.
        overflow: what happens to elements longer than `max_length`:
            `"error"` (raise, naming the element), `"truncate"` (cut to
            `max_length`, counted) or `"drop"` (leave out, counted).
        output_lengths: add each sequence component's (cut) lengths to x as
            `"<name>_length"` int32 entries of shape `(batch,)`; a single x
            becomes the dict `{"x": ..., "x_length": ...}`.
        output_mask: emit the padding mask of the per-frame targets as
            `sample_weight` (1.0 real, 0.0 padding; shape `(batch, time)`),
            multiplied by any `sample_weight` given, for masked losses.
        pad_to_multiple: pad every sequence component to a multiple of this
            length (e.g. 8 for tensor cores): the batch's or bucket's padded
            length rounded up, so an epoch also feeds fewer distinct shapes.
            A fixed padding length must be a multiple of it.
        batch_multiple: feed every batch with a multiple of this many rows,
            e.g. the number of devices of `keras.distribution.DataParallel`
            (JAX), which splits every batch evenly across them. A smaller
            batch gets filler rows (copies of its first element) whose
            `sample_weight` is 0, so the loss and the weighted metrics leave
            them out; `statistics()` counts them as padding, never as data.
            Every batch then has a `sample_weight` (ones for real rows, times
            any given or `output_mask` weights); this needs targets y and a
            loss that takes `sample_weight` (every Keras loss does).
            Unweighted metrics and batch statistics (`BatchNormalization`)
            do see the filler rows.
        prefetch: batches to prefetch: `"auto"` (tf.data AUTOTUNE), an int,
            or 0 / None for none.

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> builder = kerasbatch.SortedBuilder(
    ...     batch_size=2, max_length=3, overflow="truncate", shuffle=False)
    >>> dataset = builder.build([np.ones(n) for n in (1, 5, 2)])
    >>> [tuple(batch.shape) for batch in dataset]
    [(2, 2), (1, 3)]
    >>> builder.statistics().truncated, builder.statistics().truncated_positions
    (1, 2)
    >>> kerasbatch.SortedBuilder.from_config(builder.get_config()) == builder
    True

    With `batch_multiple=2`, batches of 3 and 1 elements get a filler row each:

    >>> builder = kerasbatch.PaddedBuilder(
    ...     batch_size=3, batch_multiple=2, shuffle=False)
    >>> x, y, weights = list(builder.build(
    ...     [np.ones(n) for n in (1, 2, 3, 4)], np.arange(4)))[1]
    >>> tuple(x.shape), weights.numpy().tolist()
    ((2, 4), [1.0, 0.0])
    >>> builder.statistics().padding_efficiency  # filler rows are padding
    0.5
    """

    #: Whether `Padding(length="bucket")` makes sense for this builder.
    has_buckets = False
    #: Whether the builder can size batches without `batch_size`.
    sizes_batches_itself = False

    def __init__(
        self,
        batch_size=32,
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
    ):
        self.batch_size = _optional_positive_int(batch_size, "batch_size")
        if batch_size is None and not self.sizes_batches_itself:
            raise ValueError(f"{type(self).__name__} needs a batch_size.")
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
        )
        self.output_lengths = _bool(output_lengths, "output_lengths")
        self.output_mask = _bool(output_mask, "output_mask")

    # ----------------------------------------------------------------- config
    def get_config(self):
        """The constructor arguments, JSON-serialisable."""
        config = {"batch_size": self.batch_size, **self._shared_config()}
        batch_multiple, prefetch = config.pop("batch_multiple"), config.pop("prefetch")
        config.update(
            output_lengths=self.output_lengths,
            output_mask=self.output_mask,
            batch_multiple=batch_multiple,
            prefetch=prefetch,
        )
        return config

    def _attach(self, data):
        """Validates the settings against `data` and plans for it."""
        lengths_only = data.lengths_only
        component_lengths, layout = self._planned_units(data)
        names = list(component_lengths)
        lengths = np.zeros(data.num_elements, dtype=np.int64)  # no sequence
        if len(names) == 1:
            lengths = component_lengths[names[0]]
        elif names:
            lengths = np.max([component_lengths[name] for name in names], axis=0)
        paddings = self._resolve_paddings(data, names, self._default_padding_length())
        if not self.has_buckets and any(
            p.length == "bucket" for p in paddings.values()
        ):
            raise ValueError(
                f"Padding length 'bucket' needs buckets; {type(self).__name__} "
                "has none. Use BucketBuilder, or 'batch' or a fixed length."
            )
        if (
            self.output_mask
            and not lengths_only
            and not any(c.is_sequence for c in data.role_components("y"))
        ):
            raise ValueError(
                "output_mask=True needs per-frame targets, but y has no "
                "variable-length component."
            )
        self._check_filler_weights(data.structure["y"] is not None, lengths_only)
        prepared = self._overflowed(data, lengths, component_lengths, paddings)
        prepared = self._prepare(prepared, layout)
        self._check_fixed_lengths(prepared)
        self._bind(prepared, self._epoch_order(prepared))

    def _default_padding_length(self):
        return "batch"

    def _planned_units(self, data):
        """`({sequence component name: int64 length of every planned
        element}, layout)`.

        The planned elements are the data's elements (layout None); a
        subclass may plan other units of the data and describe them in a
        layout of its own, which `_prepare` receives (`kerasbatch.ChunkBuilder`:
        chunks).
        """
        return {c.name: c.lengths for c in data.sequence_components}, None

    def _check_fixed_lengths(self, prepared):
        candidates = prepared.candidates
        for name, padding in prepared.paddings.items():
            if padding.fixed_length is None or not len(candidates):
                continue
            kept = np.minimum(
                prepared.component_lengths[name], prepared.element_limits
            )[candidates]
            longest = int(np.argmax(kept))
            if kept[longest] > padding.fixed_length:
                raise ValueError(
                    f"Component {name!r} is padded to the fixed length "
                    f"{padding.fixed_length}, but element "
                    f"{candidates[longest]} is {kept[longest]} long. Raise "
                    "the length or set max_length with overflow='truncate'."
                )

    # -------------------------------------------------------- subclass hooks
    def _prepare(self, prepared, layout):
        """The build's final `Prepared` value (called once per build).

        `prepared` holds the lengths after the overflow policy and the
        candidates that batches may hold; `layout` is what `_planned_units`
        gave with the lengths. Subclasses resolve data-dependent settings
        here and return `prepared` replaced or extended: narrower
        `element_limits` (per-element cut lengths), `element_bounds`
        (per-element bucket padding lengths), fixed `paddings`, or fewer
        candidates by a policy of theirs (counted in `policy_dropped`).
        """
        return prepared

    def _epoch_order(self, prepared):
        """The `kerasbatch.orders.EpochOrder` of the candidates' batches.

        Called once per build, with `_prepare`'s value; candidates no batch
        holds are left out of every epoch and counted as dropped.
        """
        raise NotImplementedError

    def _num_left_out(self, indices):
        """Candidates that no batch of the epoch holds (subclass hook for
        plans that repeat elements); `indices` are the epoch's elements."""
        return len(self._prepared.candidates) - len(indices)

    # ------------------------------------------------------------------- plan
    def _make_plan(self, epoch):
        """The `BatchPlan` of `epoch`."""
        prepared = self._prepared
        indices, splits = self._order.batches(self.seed, epoch)
        capacities = self._order.batch_capacities(self.seed, epoch)
        first_of_batch = indices[splits[:-1]]
        bounds = None
        if prepared.element_bounds is not None:
            bounds = prepared.element_bounds[first_of_batch]
        return plan_lib.make_plan(
            epoch=epoch,
            indices=indices,
            batch_splits=splits,
            limits=prepared.element_limits[first_of_batch],
            bucket_bounds=bounds,
            component_lengths=prepared.component_lengths,
            paddings=prepared.paddings,
            dropped=prepared.policy_dropped + self._num_left_out(indices),
            batch_multiple=self.batch_multiple,
            capacities=capacities,
            pad_to_multiple=self.pad_to_multiple,
        )

    def _running_positions(self, num_batches):
        plan = self.plan()
        running = self._running
        if running is None or running[0] is not plan:
            real = np.cumsum(plan.real_positions.sum(axis=1))
            padded = np.cumsum(plan.padded_positions().sum(axis=1))
            running = self._running = (plan, real, padded)
        count = min(int(num_batches), plan.num_batches)
        if count <= 0:
            return 0, 0
        return int(running[1][count - 1]), int(running[2][count - 1])

    def element_batch(self, index, batch_size):
        """`batch_size` copies of element `index`, as the pipeline would batch it.

        The element is cut and padded exactly as in a real batch (its bucket
        bound with `pad_to_bucket`), with the same structure (`output_lengths`,
        `output_mask`), so a training step on it costs what a real batch of
        that shape costs. `kerasbatch.tuner.find_bucket_batch_sizes` probes
        memory with it.

        Args:
            index: the element, an index into the built data.
            batch_size: copies in the batch.

        Returns:
            The batch, in the structure of the built dataset's elements.
        """
        self._require_built()
        prepared = self._prepared
        if prepared.data.lengths_only:
            raise RuntimeError("element_batch needs data: call build(), not adapt().")
        if not 0 <= index < len(prepared.lengths):
            raise IndexError(
                f"index {index} is out of range for {len(prepared.lengths)} elements."
            )
        indices = np.full(batch_size, index, dtype=np.int64)
        limits = prepared.element_limits[[index]]
        bounds = prepared.element_bounds
        if bounds is not None:
            bounds = bounds[[index]]
        plan = plan_lib.make_plan(
            epoch=0,
            indices=indices,
            batch_splits=np.array([0, batch_size], dtype=np.int64),
            limits=limits,
            bucket_bounds=bounds,
            component_lengths=prepared.component_lengths,
            paddings=prepared.paddings,
            dropped=0,
            pad_to_multiple=self.pad_to_multiple,
        )
        if self._probe_function is None:
            self._probe_function = self._batch_function(None)
        return self._probe_function(
            BatchArguments(
                indices=tf.constant(indices),
                size=tf.constant(batch_size, tf.int64),
                rows=tf.constant(batch_size, tf.int64),
                padded_lengths=tf.constant(plan.padded_lengths[0]),
                limit=tf.constant(limits[0]),
            )
        )

    # --------------------------------------------------------------- pipeline
    def _pipeline(self, replicas):
        num_batches = self.plan().num_batches
        self._check_has_batches(num_batches)
        sizes = np.unique(self.plan().batch_rows)
        if replicas is not None:
            batch_fn = self._batch_function(replicas.static_size(sizes))
        else:
            batch_fn = self._batch_function(int(sizes[0]) if len(sizes) == 1 else None)
        with tf.device("/CPU:0"):  # captured by `_batch_arguments`
            prepared = self._prepared
            bounds = prepared.element_bounds
            self._epoch_tensors = _EpochTensors(
                order=epochs_lib.GraphOrder(self._order, self.seed),
                limits=_per_element(prepared.element_limits),
                bounds=None if bounds is None else _per_element(bounds),
                columns=[
                    (_per_element(lengths), prepared.paddings[name])
                    for name, lengths in prepared.component_lengths.items()
                ],
            )
        return batch_fn, num_batches

    def _batch_function(self, static_batch_size):
        """The pipeline's `BatchArguments → batch` map."""
        return _BatchFunction(self, static_batch_size)

    def _numpy_batch_function(self):
        return numpy_batches.BatchFunction(self)

    def _batch_arguments(self, epoch):
        """The `BatchArguments` of every batch of `epoch`, stacked, computed
        in the graph as `make_plan` computes them."""
        tensors = self._epoch_tensors
        rows, sizes, capacities = tensors.order.batch_rows(epoch)
        first = rows[:, 0]
        batch_limits = _take(tensors.limits, first)
        valid = rows >= 0
        padded = [tf.zeros([tf.shape(rows)[0], 0], tf.int64)]
        for lengths, padding in tensors.columns:
            bound = longest = None
            if padding.length == "bucket":
                bound = _take(tensors.bounds, first)
            else:
                kept = tf.minimum(
                    _take(lengths, tf.maximum(rows, 0)), batch_limits[:, None]
                )
                longest = tf.reduce_max(tf.where(valid, kept, 0), axis=1)
            length = plan_lib.padded_length(
                padding, longest, bound, self.pad_to_multiple
            )
            length = tf.broadcast_to(tf.cast(length, tf.int64), tf.shape(first))
            padded.append(length[:, None])
        return BatchArguments(
            indices=rows,
            size=sizes,
            rows=plan_lib.round_up(capacities, self.batch_multiple),
            padded_lengths=tf.concat(padded, axis=1),
            limit=batch_limits,
        )

    def _replica_parts(self, batch, replicas):
        start, part = replicas.spans(batch.rows)
        real = tf.clip_by_value(batch.size - start, 0, part)
        return BatchArguments(
            indices=replicas_lib.take_parts(batch.indices, start, real, fill=-1),
            size=real,
            rows=part,
            padded_lengths=tf.tile(
                batch.padded_lengths[None], tf.stack([replicas.count, 1])
            ),
            limit=tf.fill([replicas.count], batch.limit),
        )


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
class _EpochTensors:
    """What `Builder._batch_arguments` reads, made once per dataset.

    Attributes:
        order: the `kerasbatch.epochs.GraphOrder` of the batches.
        limits: cut length of every element (`_per_element`).
        bounds: bucket padding bound of every element, or None.
        columns: `(lengths, Padding)` of every sequence component.
    """

    order: epochs_lib.GraphOrder
    limits: tf.Tensor
    bounds: tf.Tensor | None
    columns: list


class _BatchFunction:
    """Gathers and pads one batch: `BatchArguments → element`."""

    def __init__(self, builder, static_batch_size):
        prepared = builder._prepared
        data = prepared.data
        self.static_batch_size = static_batch_size
        self.components = data.components
        self.structure = data.structure
        self.tensors = [c.to_tensor() for c in self.components]
        self.paddings = prepared.paddings
        self.may_cut = bool((prepared.element_limits != plan_lib.NO_LIMIT).any())
        self.output_lengths = builder.output_lengths
        self.output_mask = builder.output_mask
        self.fills = builder._fills

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
                rows = rows[:, : batch.limit]
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
        )

    def _role(self, role, tensors):
        if self.structure[role] == "single":
            return tensors[role]
        return {c.key: tensors[c.name] for c in self.components if c.role == role}


def _per_element(values):
    """A per-element int array as a tensor for `_take`: a scalar when all
    values are equal, else int32 where they fit (half the memory)."""
    if len(values) and (values == values[0]).all():
        return tf.constant(values[0], tf.int64)
    return tf.constant(orders_lib.compact(values))


def _take(values, indices):
    """int64 `values[indices]` of a `_per_element` tensor."""
    if values.shape.rank == 0:
        return tf.fill(tf.shape(indices), values)
    return tf.cast(tf.gather(values, indices), tf.int64)


def _checkpointable(dataset):
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


def _empty_like(spec):
    """A value of `spec` (a tensor or sparse tensor spec) with no entries."""
    shape = [d or 0 for d in spec.shape]
    if isinstance(spec, tf.SparseTensorSpec):
        return tf.SparseTensor(
            tf.zeros([0, len(shape)], tf.int64), tf.zeros([0], spec.dtype), shape
        )
    return tf.zeros(shape, spec.dtype)


def _remainder(remainder, drop_remainder, builder_type):
    """The `remainder` setting, `"drop"` for `drop_remainder=True`."""
    if remainder is None:
        return "drop" if drop_remainder else "keep"
    if remainder not in REMAINDERS:
        raise ValueError(f"remainder must be one of {REMAINDERS}, got {remainder!r}.")
    if remainder not in builder_type.remainders:
        raise ValueError(
            f"{builder_type.__name__} takes remainder in "
            f"{builder_type.remainders}, not {remainder!r}: "
            f"{builder_type.remainders_reason}"
        )
    if drop_remainder and remainder != "drop":
        raise ValueError(
            f"drop_remainder=True and remainder={remainder!r} contradict each "
            "other: give remainder alone."
        )
    return remainder


def checked_epoch(epoch):
    """`epoch` as an int, or a ValueError if it is not one in `[0, 2**62)`."""
    if not _is_int(epoch) or not 0 <= epoch < 2**62:
        raise ValueError(f"epoch must be an int in [0, 2**62), got {epoch!r}.")
    return int(epoch)


def _is_int(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _bool(value, name):
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


def _optional_positive_int(value, name):
    if value is None:
        return None
    if not _is_int(value) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return int(value)
