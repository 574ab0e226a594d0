"""What serves each built dataset: its built value, engine and run state.

Every dataset an engine makes from a built value
(`kerasbatch.planning.built.Built`) is registered here with a `Served`
object: the value, the engine's name and the dataset's epoch state
(`kerasbatch.engines.epoch_state`). `served_by(dataset)` finds it for any
dataset a builder returned, or one made from it by per-batch
transformations (`kerasbatch.engines.derived`): what the callbacks,
`statistics()` and `restore_order` read.
"""

import collections
import threading
import weakref

from kerasbatch import checks
from kerasbatch.engines import derived
from kerasbatch.engines import stream_counters as counters_lib

#: Plans kept per dataset (an epoch's plan is made once, read many times):
#: the epoch served and one more (the one before, or the next), since a
#: plan of a corpus of tens of millions of elements holds a few hundred MB.
_PLAN_CACHE_SIZE = 2

#: Every built dataset still in use -> its `Served`.
_SERVED = weakref.WeakKeyDictionary()


class Served:
    """One built dataset's built value, engine and run state.

    Args:
        built: the `kerasbatch.planning.built.Built` value.
        engine: the engine's name.
        state: the dataset's epoch state (`EpochState`, or the `tf.data`
            engine's `GraphEpochState`).

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> from kerasbatch.engines import served
    >>> builder = kerasbatch.SortedBuilder(batch_size=2, shuffle=False)
    >>> dataset = builder.build([np.ones(n) for n in (1, 2, 3)], engine="python")
    >>> run = served.served_by(dataset)
    >>> run.engine, run.plan(0).num_batches, run.statistics().num_elements
    ('python', 2, 3)
    """

    def __init__(self, built, engine, state):
        self.built = built
        self.engine = engine
        self.state = state
        self._plans = collections.OrderedDict()
        self._plans_lock = threading.Lock()

    def epoch_or_running(self, epoch=None):
        """`epoch`, checked; by default the epoch last started, else the next."""
        if epoch is None:
            epoch = self.state.started_epoch()
            if epoch is None:
                epoch = self.state.next_epoch()
        return checks.checked_epoch(epoch)

    def started_epoch(self):
        """The epoch of the latest iteration, or None."""
        return self.state.started_epoch()

    def plan(self, epoch=None):
        """The plan of `epoch` (default: the epoch last started, else the
        next), cached."""
        epoch = self.epoch_or_running(epoch)
        with self._plans_lock:
            if epoch in self._plans:
                return self._plans[epoch]
        plan = self.built.plan(epoch)
        with self._plans_lock:
            self._plans[epoch] = plan
            while len(self._plans) > _PLAN_CACHE_SIZE:
                self._plans.popitem(last=False)
        return plan

    def steps_per_epoch(self):
        """The batches of an epoch."""
        return self.plan().num_batches

    def statistics(self, epoch=None):
        """The `kerasbatch.PlanStatistics` of `epoch` (as `plan`)."""
        return self.plan(epoch).statistics()

    def running_positions(self, num_batches):
        """`(real, padded)` positions of the running epoch's first
        `num_batches` batches."""
        return self.plan().running_positions(num_batches)

    def batch_shapes(self, epoch=None):
        """Every distinct shape `epoch` feeds the model (as `plan`)."""
        return self.built.batch_shapes(self.plan(epoch))


class StreamServed(Served):
    """A stream's built dataset: its `kerasbatch.planning.built.StreamBuilt`
    value, engine and run state. Nothing is planned ahead, so its
    statistics are counted as the batches are made, into `counters`
    (`kerasbatch.engines.stream_counters`), which the engine's part sets
    when it makes the pipeline."""

    def __init__(self, built, engine, state):
        super().__init__(built, engine, state)
        self.counters = None

    def plan(self, epoch=None):
        raise TypeError(
            "A stream has no plan ahead: its batches are planned as it runs. "
            "statistics() counts them once an epoch has run."
        )

    def steps_per_epoch(self):
        """The batches of an epoch, or None where unknown or infinite."""
        return self.built.steps

    def counted(self):
        """The counters vector of the epoch last started."""
        vector = None if self.counters is None else self.counters.vector()
        if vector is None or vector[counters_lib.EPOCH] < 0:
            raise RuntimeError(
                "No epoch has started yet: statistics are counted as the built "
                "dataset is iterated."
            )
        return vector

    def statistics(self, epoch=None):
        """`PlanStatistics` of the batches of the epoch last started (or,
        as `epoch`, of the one before).

        Counted as the batches are produced: exact for a completed epoch;
        while an epoch runs, they include the batches prefetched ahead of
        `model.fit`.
        """
        counters = self.counted()
        current = int(counters[counters_lib.EPOCH])
        distinct_shapes = self.counters.num_shapes()
        if epoch is not None and checks.checked_epoch(epoch) != current:
            previous = self.counters.previous()
            if int(previous[counters_lib.EPOCH]) != int(epoch):
                raise ValueError(
                    f"StreamBucketBuilder keeps the statistics of the epoch "
                    f"last started ({current}) and of the one before only, "
                    f"not of epoch {epoch}."
                )
            counters, distinct_shapes = previous[:-1], int(previous[-1])
        return counters_lib.statistics(
            counters, self.built.elements.sequence_names, distinct_shapes
        )

    def running_positions(self, num_batches):
        """From running totals the pipeline records per batch: exact while
        the pipeline is fewer than `stream_counters.RING` batches ahead of
        `num_batches`, else estimated from the epoch's average batch."""
        counters = self.counted()
        produced = int(counters[counters_lib.BATCHES])
        num = len(self.built.elements.sequence_names)
        start = counters_lib.NUM_SCALARS
        real = int(counters[start : start + num].sum())
        padded = int(counters[start + num :].sum())
        num_batches = int(num_batches)
        if num_batches <= 0 or produced == 0:
            return 0, 0
        if num_batches >= produced:
            return real, padded
        if produced - num_batches < counters_lib.RING:
            row = self.counters.running(num_batches - 1)
            return int(row[0]), int(row[1])
        share = num_batches / produced
        return round(real * share), round(padded * share)

    def batch_shapes(self, epoch=None):
        """Every distinct shape an epoch feeds the model, where known ahead
        (the same every epoch; `epoch` is unused)."""
        return self.built.batch_shapes()

    def started_epoch(self):
        """The epoch of the latest iteration's statistics, or None."""
        if self.counters is None:
            return None
        epoch = int(self.counters.vector()[counters_lib.EPOCH])
        return None if epoch < 0 else epoch


def serve(dataset, served):
    """Registers `dataset` as served by `served`; returns `dataset`."""
    _SERVED[dataset] = served
    return dataset


def served_by(dataset):
    """The `Served` of `dataset`: one an engine made from a built value, or
    one made from it by per-batch transformations; a ValueError otherwise
    (naming a transformation that changes which batches an epoch holds)."""
    return _SERVED[built_dataset(dataset)]


def built_dataset(dataset):
    """The dataset an engine made that `dataset` is, or is made from by
    per-batch transformations (see `served_by`); a ValueError otherwise."""
    return derivation(dataset)[0]


def derivation(dataset):
    """`(built, chain)`: the dataset an engine made under `dataset`, and the
    per-batch transformations from `dataset` down to it
    (`kerasbatch.engines.derived`; empty for a built dataset)."""
    found = derived.trace(dataset, is_served)
    if found is None:
        raise ValueError(
            f"{dataset!r} was not returned by a kerasbatch builder's build(). "
            "Pass the dataset build() returned, or one made from it by "
            "per-batch transformations (map, prefetch, ...)."
        )
    return found


def is_served(dataset):
    """Whether an engine made `dataset` (and it is still registered)."""
    try:
        return dataset in _SERVED
    except TypeError:  # unhashable
        return False
