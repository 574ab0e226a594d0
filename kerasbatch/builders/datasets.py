"""A builder's built datasets: which it returned, and their epochs.

Every `build` resolves a frozen built value (`kerasbatch.planning.built`),
and an engine makes a dataset of it that keeps its own run state
(`kerasbatch.engines.served`). The builder keeps its settings, the epoch its
next build starts at, and weak links to the datasets it returned: for
`set_epoch`, and the defaults of `statistics()`, `plan()` and the
callbacks (the latest build). `builder_of(dataset)` gives a builder that
describes one dataset alone.
"""

import gc
import weakref

from kerasbatch import checks, engines
from kerasbatch.engines import epoch_state
from kerasbatch.engines import served as served_lib

#: The builder that describes each dataset alone, made once (`builder_of`).
_DESCRIBING = weakref.WeakKeyDictionary()


def builder_of(dataset):
    """The builder of `dataset`, as it was when `build` returned it.

    Every dataset a builder returns is bound to the data and plan of its own
    `build` call (a frozen built value, which building again with other data
    or `adapt` never changes). This returns a builder of the same settings
    bound to that dataset alone, whose `statistics()`, `plan()` and
    `running_positions()` describe exactly the batches the dataset yields.

    A dataset made from a built one by per-batch transformations (tf.data's
    `map`, `prefetch`, `with_options`; Grain's `map`, `random_map`,
    `map_with_index`; see `kerasbatch.engines.derived`) has the same
    batches, changed one by one: it is described by the same builder.

    Args:
        dataset: a dataset returned by a builder's `build` (or
            `distribute`), or one made from it by per-batch
            transformations.

    Raises:
        ValueError: `dataset` was not returned by a builder nor made from
            one; or it was made by a transformation that changes which
            batches an epoch holds (`filter`, `batch`, `repeat`, `take`,
            `shuffle`, ...): the message names it.

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> builder = kerasbatch.SortedBuilder(batch_size=2, shuffle=False)
    >>> train = builder.build([np.ones(n) for n in (1, 2, 3, 4)])
    >>> val = builder.build([np.ones(n) for n in (5, 5)])
    >>> kerasbatch.builders.builder_of(train).statistics().num_elements
    4
    >>> mapped = train.map(lambda x: {"token_ids": x}).prefetch(2)
    >>> kerasbatch.builders.builder_of(mapped) is kerasbatch.builders.builder_of(train)
    True
    >>> kerasbatch.builders.builder_of(train.repeat())
    Traceback (most recent call last):
    ...
    kerasbatch.engines.derived.DerivedDatasetError: This dataset (_RepeatDataset) is made by repeat() from a dataset a kerasbatch builder built, ...
    """
    root = served_lib.built_dataset(dataset)
    served = served_lib.served_by(root)
    describing = _DESCRIBING.get(served)
    if describing is None:
        built = served.built
        describing = built.builder_type(**built.arguments)
        for name, value in vars(built.settings).items():
            setattr(describing, name, value)
        describing._keep(root, served)
        _DESCRIBING[served] = describing
    return describing


class BuiltDatasets:
    """The datasets a builder built, and their epochs (a mixin of every
    builder; see the module docstring)."""

    #: How `build` is called, for messages.
    _BUILD_CALL = "build(x, ...)"

    def _init_datasets(self):
        """No dataset built yet; datasets built later start at epoch 0."""
        self._epochs = epoch_state.EpochState(0)
        self._datasets = weakref.WeakKeyDictionary()  # dataset -> Served
        # Datasets made from built ones by `distribute` or
        # `distribute_with_service` (which may outlive them) -> Served.
        self._distributed = weakref.WeakKeyDictionary()
        self._latest = None  # the Served of the latest build (or adapt)

    def _keep(self, dataset, served):
        """Records `dataset`, served by `served`, as the latest build."""
        self._datasets[dataset] = served
        self._latest = served
        return dataset

    def _served(self, dataset=None):
        """The `Served` of `dataset` (default: the latest build, or
        `adapt`), or None when there is none."""
        if dataset is None:
            return self._latest
        served = served_lib.served_by(dataset)
        if not any(served is other for other in self._all_served()):
            raise ValueError(
                f"This dataset was built by another builder than {self!r}; "
                "ask that builder, or kerasbatch.builders.builder_of(dataset)."
            )
        return served

    @property
    def built(self):
        """The built value of the latest build (or `adapt`): a frozen
        `kerasbatch.planning.built.Built` (a stream's: `StreamBuilt`)."""
        return self._built_served(None, "built").built

    def _all_served(self):
        """The `Served` of every dataset this builder returned still in use."""
        return [*self._datasets.values(), *self._distributed.values()]

    def _distributed_from(self, dataset, served):
        """Records `dataset`, made from a built one (served by `served`)."""
        self._distributed[dataset] = served
        return dataset

    def _built_served(self, dataset, method):
        """`_served(dataset)`, or a RuntimeError naming `method` when
        nothing was built."""
        served = self._served(dataset)
        if served is None:
            raise RuntimeError(
                f"{type(self).__name__} has no data yet: call "
                f"{self._BUILD_CALL} first ({method} describes a build)."
            )
        return served

    def _describing(self, dataset):
        """The builder that describes `dataset` alone (`builder_of`), if
        this builder built it; else a ValueError."""
        self._served(dataset)
        return builder_of(dataset)

    def distribute(self, strategy, dataset=None):
        """The built dataset's batches, per replica, for `strategy`.

        Returns a `tf.distribute.DistributedDataset` for `model.fit` under
        `strategy.scope()`. Every step, each replica gets its part of the
        same global batch of the plan (`batch_size` is global, as in Keras),
        padded to that batch's length: all replicas train on the same bucket
        and shape at every step, run the plan's number of steps, and one
        epoch holds every element exactly once across all replicas (see
        `kerasbatch.engines.tf_data.distribute`). A
        `kerasbatch.StreamBucketBuilder` pipeline (one per worker) reads the
        whole input and keeps its replicas' parts. Epochs, `set_epoch`,
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
        from kerasbatch.engines import tf_data

        served = self._tf_data_served(dataset, "distribute")
        return self._distributed_from(tf_data.distributed(served, strategy), served)

    def _tf_data_served(self, dataset, method):
        """The `Served` of a dataset built with `engine="tf.data"` (default:
        the latest), or an error naming `method`."""
        served = self._served(dataset)
        if served is None or served.engine is None:
            raise RuntimeError(
                f"{type(self).__name__}.{method} needs a built dataset: call "
                "build(...) first."
            )
        engines.check_built_with(served, "tf.data", f"{type(self).__name__}.{method}")
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
        if len(self._datasets) > 1:
            gc.collect()  # datasets kept only by reference cycles are not in use
        return self._not_freed()

    def _not_freed(self):
        """The datasets this builder returned that are not freed yet: those
        in use, and any kept only by reference cycles until the next garbage
        collection. Cheaper than `built_datasets` (a collection takes tenths
        of a second with TensorFlow loaded): enough to find a dataset, or to
        see that at most one is in use."""
        return list(self._datasets)

    @property
    def epoch(self):
        """The epoch the next iteration of the latest built dataset will use."""
        if self._latest is None:
            return self._epochs.next_epoch()
        return self._latest.state.next_epoch()

    def set_epoch(self, epoch):
        """Makes the next iteration of every built dataset yield epoch `epoch`.

        Every new iteration (each `model.fit` epoch) otherwise advances the
        epoch of that dataset by one; `kerasbatch.callbacks.EpochReshuffle`
        calls this in `on_epoch_begin` so that resumed training sees the same
        batches. Datasets built later start at `epoch` too.
        """
        epoch = checks.checked_epoch(epoch)
        self._epochs.assign(epoch)
        if self._latest is not None:
            self._latest.state.assign(epoch)
        for served in self._all_served():
            served.state.assign(epoch)

    @property
    def last_started_epoch(self):
        """The epoch of the latest built dataset's most recent iteration, or
        None."""
        return None if self._latest is None else self._latest.started_epoch()

    def statistics(self, epoch=None, dataset=None):
        """`PlanStatistics` of one epoch of a built dataset.

        Args:
            epoch: the epoch (default: the one last started, else the next).
            dataset: the dataset this builder returned that the figures are
                for (default: the latest built, or the data of `adapt`).
        """
        return self._built_served(dataset, "statistics").statistics(epoch)

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
        served = self._built_served(dataset, "running_positions")
        return served.running_positions(num_batches)
