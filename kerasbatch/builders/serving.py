"""Built datasets and their run state, apart from a builder's settings.

Every `build` returns a dataset served by a shallow copy of the builder
frozen at that call: it holds the build's data, its plans and the dataset's
run state (the epoch its next iteration yields, the one it last started;
`kerasbatch.engines.epoch_state`). The builder itself keeps only weak links
to those copies, for `set_epoch` and the defaults of `statistics()`,
`plan()` and the callbacks (the latest build). `builder_of(dataset)` finds
the copy of any dataset a builder returned.
"""

import copy
import gc
import weakref

from kerasbatch import checks
from kerasbatch.engines import epoch_state
from kerasbatch.engines import served as served_lib
from kerasbatch.engines.tf_data import batch as tf_data

#: The attributes of a builder's own bookkeeping of its built datasets.
_BOOKKEEPING = frozenset({"_state", "_datasets", "_copies", "_latest", "_engine"})


class Serving:
    """The datasets a builder built, and their epochs (a mixin of every
    builder; see the module docstring)."""

    def _init_serving(self):
        """No dataset built yet; datasets built later start at epoch 0."""
        self._reset_run_state(epoch_state.EpochState(0))
        self._datasets = weakref.WeakKeyDictionary()  # built dataset -> copy
        # Every copy still serving a dataset: a built one, or one made from
        # it by `distribute` / `distribute_with_service` (that one may
        # outlive the built dataset).
        self._copies = weakref.WeakValueDictionary()  # id(copy) -> copy
        self._latest = None  # the copy serving the latest built dataset

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
        self._datasets[served_lib.serve(dataset, served)] = served
        self._copies[id(served)] = served
        self._latest = served
        self._keep_settings_only()
        return dataset

    def _keep_settings_only(self):
        """After a build, the builder keeps its settings (and the public
        description of the latest build, such as `resolved_boundaries`),
        not the build's data, plans, caches and locks: those stay with the
        copy that serves the dataset. Its private attributes return to
        those of a fresh builder of the same arguments."""
        fresh = vars(type(self)(**self._arguments()))
        for key in list(vars(self)):
            if key.startswith("_") and key not in _BOOKKEEPING:
                if key in fresh:
                    setattr(self, key, fresh[key])
                else:
                    delattr(self, key)

    def _serving(self, dataset=None):
        """The copy serving `dataset` (default: the latest build; or a dataset
        made from a built one by per-batch transformations, see
        `builder_of`), or self when nothing was built since the last
        `adapt`."""
        if dataset is None:
            return self._latest or self
        # Names a dataset that no builder returned, or a transformation
        # that the builder's plan does not describe.
        dataset = served_lib.built_dataset(dataset)
        if self._datasets is not None:
            if dataset in self._datasets:
                return self._datasets[dataset]
            served = served_lib.served_by(dataset)  # from distribute(...) of a build
            if self._copies.get(id(served)) is served:
                return served
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
        epoch = checks.checked_epoch(epoch)
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

    def _steps_per_epoch(self):
        """Batches per epoch, or None where unknown (subclass hook)."""
        raise NotImplementedError

    def _statistics(self, epoch):
        raise NotImplementedError

    def _running_positions(self, num_batches):
        raise NotImplementedError
