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

from kerasbatch.planning import remainders
from kerasbatch.planning.plan import round_up

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


class _BuiltValue:
    """What every built value answers from its settings."""

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


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class Built(_BuiltValue):
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
        for epoch in (0, 1):
            padded = self.plan(epoch).padded_lengths
            if any(len(np.unique(column)) > 1 for column in padded.T):
                return True
        return False

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


#: A stream's number of batches when its input is infinite (tf.data's).
INFINITE = -1


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class StreamBuilt(_BuiltValue):
    """What one build of a stream resolved (`kerasbatch.StreamBucketBuilder`):
    its buckets and paddings, and the source that every epoch reads again.
    Its batches are planned as they stream, block by block
    (`kerasbatch.planning.stream_blocks`).

    Attributes:
        builder_type, arguments, settings: as `Built`'s.
        elements: the input elements' structure
            (`kerasbatch.data.stream_elements.StreamElements`).
        paddings: every sequence component's resolved `Padding`, by name.
        buckets: the `kerasbatch.planning.buckets.Buckets`.
        longest: per bucket, `(element, length)` of its longest element
            among the lengths given to `build` (None without them, or for
            an empty bucket).
        shortest: `(column, fewest positions, message)` where the model
            inputs need elements of a least length, else None.
        num_batches: batches per epoch: an int, `INFINITE`, or None where
            unknown (no lengths given).
        batched: the source's elements are blocks of examples.
        source: the elements, read once per epoch.
        shardable: the same `tf.data` source with a shard hint, or None.
        fixed_batch_sizes: as `Built`'s.
    """

    #: The kind of batches: made as the stream runs.
    batches = "stream"

    builder_type: type
    arguments: dict
    settings: Settings
    elements: object
    paddings: dict
    buckets: object
    longest: tuple
    shortest: object = None
    num_batches: object = None
    batched: bool = False
    source: object = None
    shardable: object = None
    fixed_batch_sizes: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "arguments", types.MappingProxyType(self.arguments))
        settings = self.settings
        object.__setattr__(
            self,
            "constants",
            {
                "bounds": self.buckets.bounds,
                "sizes": np.array(settings.resolved_batch_sizes, np.int64),
                "longest": np.array(
                    [-1 if at is None else at[1] for at in self.longest], np.int64
                ),
            },
        )

    @property
    def steps(self):
        """Batches per epoch, or None where unknown or infinite."""
        known = self.num_batches is not None and self.num_batches >= 0
        return self.num_batches if known else None

    @property
    def finishes(self):
        """Whether batches get more than the padded components: lengths,
        masks, filler weights or model inputs (`kerasbatch.data.outputs`)."""
        settings = self.settings
        return bool(
            settings.output_lengths
            or settings.output_mask
            or self.fills
            or settings.model_inputs is not None
        )

    def lengths_vary(self):
        """Whether batches may differ in a sequence length."""
        return any(p.fixed_length is None for p in self.paddings.values())

    def distributed_batch_rows(self):
        """`(rows of a bucket's batches, whether remainders of any size come
        too)`: a stream's remainders may have any size, unless padded or
        dropped."""
        settings = self.settings
        rows = round_up(
            np.array(settings.resolved_batch_sizes), settings.batch_multiple
        )
        return rows, settings.remainder == "keep"

    def check_even_split(self, parts, splitter):
        """As `Built.check_even_split`."""
        check_even_split(
            *self.distributed_batch_rows(),
            parts,
            splitter,
            self.settings.batch_multiple,
            self.builder,
        )

    def batch_shapes(self):
        """Every distinct shape an epoch feeds the model, where it is known
        before the stream runs (the same every epoch); a ValueError
        otherwise. See `kerasbatch.StreamBucketBuilder.batch_shapes`."""
        settings = self.settings
        lengths = {}
        for name in self.elements.sequence_names:
            padding = self.paddings[name]
            if padding.fixed_length is not None:
                lengths[name] = lambda bucket, fixed=padding.fixed_length: fixed
            elif padding.length == "bucket":
                lengths[name] = lambda bucket: int(
                    round_up(self.buckets.bounds[bucket], settings.pad_to_multiple)
                )
            else:
                lengths[name] = None
        if settings.bucket_counts is None or None in lengths.values():
            raise ValueError(
                "StreamBucketBuilder knows the batch shapes before the stream "
                "runs only with lengths given to build() and every sequence "
                "component padded to its bucket (pad_to_bucket=True) or a fixed "
                "length; otherwise statistics().distinct_shapes counts them "
                "once an epoch has run."
            )
        trailing = {c.name: c.trailing for c in self.elements.components}
        shapes = set()
        for bucket, (count, size) in enumerate(
            zip(settings.bucket_counts, settings.resolved_batch_sizes, strict=True)
        ):
            _, capacities = remainders.group_batches(count, size, settings.remainder)
            for rows in sorted(set(capacities)):
                rows = int(round_up(rows, settings.batch_multiple))
                shapes.add(
                    tuple(
                        (name, (rows, length(bucket), *trailing[name]))
                        for name, length in lengths.items()
                    )
                )
        return [dict(shape) for shape in sorted(shapes)]


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
