"""The built value: what one `build` resolved, frozen, for any engine.

A builder's `build` (and `adapt`) checks its settings against the data and
resolves one `Built` value: a snapshot of the settings, the `Prepared` data,
the epoch order and the plan function. Each engine turns that value into a
dataset of its own (`kerasbatch.engines`), which keeps its run state (the
epoch) itself; the callbacks, `statistics()` and `restore_order` read the
value. Nothing changes a `Built` value once made, so a dataset's plans can
never drift from its data, whatever its builder does next.
"""

import dataclasses
import math
import types
import typing

import numpy as np

#: The kinds of batches a built value describes: which batch function an
#: engine makes them with.
BATCHES = ("padded", "packed", "chunks", "windows")


class Settings(types.SimpleNamespace):
    """A read-only snapshot of a builder's public attributes at its build:
    its arguments and what it resolved from the data (such as
    `resolved_boundaries`).

    Example:

    >>> from kerasbatch.planning.built import Settings
    >>> settings = Settings(batch_size=32, shuffle=True)
    >>> settings.batch_size
    32
    >>> settings.batch_size = 8
    Traceback (most recent call last):
    ...
    AttributeError: A built value's settings are frozen: build again to change them.
    """

    def __setattr__(self, name, value):
        raise AttributeError(
            "A built value's settings are frozen: build again to change them."
        )

    def __delattr__(self, name):
        self.__setattr__(name, None)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class Built:
    """What one build resolved: the same batches on every engine.

    Attributes:
        builder_type: the builder's class.
        arguments: the builder's constructor arguments.
        settings: a `Settings` snapshot of the builder at the build.
        prepared: the `kerasbatch.planning.prepared.Prepared` data.
        order: the epoch order of the batches
            (`kerasbatch.planning.orders.EpochOrder`, or packed rows').
        batches: the kind of batches (`BATCHES`): `"padded"` rows of
            elements, `"packed"` rows of several elements, `"chunks"` of
            sequences, or `"windows"` of consecutive elements.
        make_plan: `epoch -> plan`, a pure function (a
            `kerasbatch.planning.plan.BatchPlan` or
            `kerasbatch.planning.packing.PackedPlan`).
        fixed_batch_sizes: `(setting, global batch size)` pairs that
            replicas must share evenly (a token budget's sizes are not
            fixed).

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> builder = kerasbatch.SortedBuilder(batch_size=2, shuffle=False)
    >>> builder.adapt(np.array([3, 1, 2]))
    >>> built = builder.built
    >>> built.batches, built.settings.batch_size, built.plan(0).num_batches
    ('padded', 2, 2)
    """

    builder_type: type
    arguments: dict
    settings: Settings
    prepared: object
    order: object
    batches: str
    make_plan: typing.Callable
    fixed_batch_sizes: tuple = ()

    def __post_init__(self):
        if self.batches not in BATCHES:
            raise ValueError(f"batches must be one of {BATCHES}, got {self.batches!r}.")
        object.__setattr__(self, "arguments", types.MappingProxyType(self.arguments))

    @property
    def builder(self):
        """The builder's class name, for messages."""
        return self.builder_type.__name__

    @property
    def seed(self):
        return self.settings.seed

    @property
    def fills(self):
        """Whether batches may get filler rows (`batch_multiple`, or
        `remainder="pad"` or `"even"`)."""
        settings = self.settings
        return settings.batch_multiple > 1 or settings.remainder in ("pad", "even")

    def plan(self, epoch):
        """The plan of `epoch`: a pure function of this value and `epoch`."""
        return self.make_plan(epoch)

    def batch_shapes(self, plan):
        """Every distinct shape of `plan`'s batches: a sorted list of dicts
        mapping every sequence component to `(rows, padded length,
        *trailing dimensions)`."""
        trailing = {
            c.name: c.trailing_shape for c in self.prepared.data.sequence_components
        }
        return [
            {
                name: (int(row[0]), int(row[1 + column]), *trailing.get(name, ()))
                for column, name in enumerate(plan.component_names)
            }
            for row in plan.shapes()
        ]

    def lengths_vary(self):
        """Whether batches of the first epochs differ in a sequence length
        (packed rows never do)."""
        if self.batches == "packed":
            return False
        return any(
            len(np.unique(self.plan(epoch).padded_lengths[:, column])) > 1
            for epoch in (0, 1)
            for column in range(self.plan(epoch).padded_lengths.shape[1])
        )

    def check_has_batches(self, num_batches):
        """Raises if an epoch has no batch."""
        if num_batches == 0:
            raise ValueError(
                "No batch left: every element was dropped (drop_remainder or "
                "overflow='drop'). Lower the batch size or keep the remainder."
            )

    def check_even_split(self, parts, splitter):
        """Raises if the epoch's batches cannot be cut into `parts` parts of
        equal rows; `splitter` says who cuts them (for the message)."""
        check_even_split(
            self.plan(0).batch_rows,
            False,
            parts,
            splitter,
            self.settings.batch_multiple,
            self.builder,
        )


def check_even_split(batch_rows, any_remainder, parts, splitter, multiple, builder):
    """Raises if batches of `batch_rows` rows (and, `any_remainder`,
    remainders of any size) cannot be cut into `parts` parts of equal rows.

    Args:
        batch_rows: the rows of every batch.
        any_remainder: whether remainder batches of any size come too.
        parts: how many parts every batch is cut into.
        splitter: who cuts them, for the message.
        multiple: the builder's `batch_multiple`.
        builder: the builder's class name, for the message.

    Example:

    >>> from kerasbatch.planning.built import check_even_split
    >>> check_even_split([4, 4, 2], False, 2, "Two devices", 1, "SortedBuilder")
    >>> check_even_split([4, 3], False, 2, "Two devices", 1, "SortedBuilder")
    Traceback (most recent call last):
    ...
    ValueError: Two devices, but SortedBuilder feeds batches of 3 rows. Set batch_multiple=2 (smaller batches get filler rows of zero sample_weight), or batch sizes that are multiples with drop_remainder=True.
    """
    rows = sorted({int(r) for r in np.asarray(batch_rows) if r % parts})
    if any_remainder and multiple % parts:
        rows.append("a bucket's remainder")
    if rows:
        raise ValueError(
            f"{splitter}, but {builder} feeds batches of "
            f"{', '.join(map(str, rows))} rows. Set batch_multiple="
            f"{math.lcm(multiple, parts)} (smaller batches get filler rows of "
            "zero sample_weight), or batch sizes that are multiples with "
            "drop_remainder=True."
        )
