"""The candidate ways of batching the lengths, and what each one's epochs cost.

`candidates` gives a `Strategy` per row of `kerasbatch analyze`'s table:
`PaddedBuilder` and `SortedBuilder`, `BucketBuilder` by batch size and by
token budget, and `PackedBuilder`, each planned as the builder plans its
epochs (`kerasbatch.planning.batching`, from the lengths alone: exact, no
tensor is built, and neither Keras nor TensorFlow is imported).
`evaluate` plans a strategy's epochs and gives its `StrategyRow`: padding
efficiency, distinct shapes, steps, tokens per step and, with costs, the
run's estimated seconds (`kerasbatch.tools.analysis.costs`).
"""

import dataclasses

import numpy as np

from kerasbatch.planning import batching
from kerasbatch.planning import plan as plan_lib
from kerasbatch.tools.analysis.costs import Workload, estimate_seconds

__all__ = ["Strategy", "StrategyRow", "candidates", "evaluate"]


@dataclasses.dataclass(frozen=True)
class StrategyRow:
    """One way of batching the lengths, and what its epochs cost.

    Every figure comes from the builders' own planning
    (`kerasbatch.planning.batching`), so it is what `builder.statistics()` and
    `builder.batch_shapes()` report after `build` on data of these lengths.

    Attributes:
        name: the row's label, e.g. `"buckets 8, tokens"`.
        builder_class: the builder's class name, e.g. `"BucketBuilder"`.
        arguments: the builder's constructor arguments.
        padding_efficiency: real / padded positions of the first epoch.
        distinct_shapes: distinct batch shapes of the first epoch.
        new_shapes_later: shapes of the later epochs that the first did
            not feed (each is one more compile under XLA).
        steps_per_epoch: batches of the first epoch (the same every epoch).
        tokens_per_step: real positions per step in the first epoch.
        compile_seconds: all the epochs' distinct shapes × the seconds per
            shape, or None where shapes are not compiled.
        estimated_seconds: the run's estimated seconds
            (`kerasbatch.tools.analysis.costs`), or None where `analyze` has
            no costs.
        boundaries: the resolved bucket boundaries, or None.

    Example:

    >>> import kerasbatch
    >>> analysis = kerasbatch.analyze(
    ...     [3, 5, 8, 13, 2, 9, 4, 6], batch_size=2, epochs=2, backend="torch",
    ...     device="cpu", num_buckets=(2,), verbose=0)
    >>> row = analysis.rows[3]
    >>> row.name, row.boundaries, row.steps_per_epoch
    ('buckets 2', (7,), 5)
    >>> row.builder_line
    'kerasbatch.BucketBuilder(num_buckets=2, batch_size=2, pad_to_bucket=True, remainder="even")'
    """

    name: str
    builder_class: str
    arguments: dict
    padding_efficiency: float
    distinct_shapes: int
    new_shapes_later: int
    steps_per_epoch: int
    tokens_per_step: float
    compile_seconds: float | None
    estimated_seconds: float | None
    boundaries: tuple | None = None

    @property
    def packed(self):
        """Whether the rows hold several sequences (the model must take
        segment ids)."""
        return self.builder_class == "PackedBuilder"

    @property
    def builder_line(self):
        """The Python expression that makes this builder."""
        arguments = dict(self.arguments)
        parts = []
        if self.packed:
            parts.append(str(arguments.pop("sequence_length")))
        parts += [f"{key}={_literal(value)}" for key, value in arguments.items()]
        return f"kerasbatch.{self.builder_class}({', '.join(parts)})"

    def make_builder(self):
        """A new builder with these arguments (not built; imports Keras)."""
        from kerasbatch import builders

        return getattr(builders, self.builder_class)(**self.arguments)

    def to_dict(self):
        """The row as a JSON-serialisable dict, with its `builder_line`."""
        row = dataclasses.asdict(self)
        row["boundaries"] = None if self.boundaries is None else list(self.boundaries)
        row["builder_line"] = self.builder_line
        row["packed"] = self.packed
        return row


@dataclasses.dataclass(frozen=True)
class Strategy:
    """A row to plan: its builder, and its epochs' plans (`plan(epoch)`).

    Attributes:
        name: the row's label, e.g. `"buckets 8, tokens"`.
        builder_class: the builder's class name, e.g. `"BucketBuilder"`.
        arguments: the builder's constructor arguments.
        plan: a function from an epoch to its plan (a
            `kerasbatch.planning.plan.BatchPlan`, or a packed one), as the
            builder plans it.
        boundaries: the resolved bucket boundaries, or None.

    Example:

    >>> import numpy as np
    >>> strategies = list(candidates(
    ...     np.array([3, 5, 8, 13, 2, 9, 4, 6]), batch_size=2, max_tokens=26,
    ...     sequence_lengths=(64,), num_buckets=(2,), seed=0))
    >>> bucketed = strategies[3]
    >>> bucketed.name, bucketed.builder_class, bucketed.boundaries
    ('buckets 2', 'BucketBuilder', (7,))
    >>> bucketed.plan(0).num_batches
    5
    """

    name: str
    builder_class: str
    arguments: dict
    plan: object
    boundaries: tuple | None = None


def candidates(lengths, batch_size, max_tokens, sequence_lengths, num_buckets, seed):
    """Every row's `Strategy`, in table order, planned as the builders plan
    (each calls `kerasbatch.planning.batching` as below, with these
    arguments' defaults).

    The rows: `PaddedBuilder` and `SortedBuilder` (`batch_size`);
    `BucketBuilder(num_buckets=n, pad_to_bucket=True, remainder="even")`
    for one bucket and each `n` of `num_buckets`, by `batch_size` and by the
    token budget `max_tokens` (rows whose boundaries equal an earlier row's
    are left out); and `PackedBuilder(L, batch_size=max_tokens // L,
    remainder="even")` for each `L` of `sequence_lengths`.

    Args:
        lengths: int64 length of every sequence (1-D).
        batch_size: elements per batch of the fixed-size rows.
        max_tokens: the token budget of the budget and packed rows.
        sequence_lengths: the packed rows' lengths.
        num_buckets: the bucket counts of the bucket rows.
        seed: the builders' seed.

    Example:

    >>> import numpy as np
    >>> strategies = candidates(
    ...     np.array([3, 5, 8, 13, 2, 9, 4, 6]), batch_size=2, max_tokens=26,
    ...     sequence_lengths=(64,), num_buckets=(2,), seed=0)
    >>> [strategy.name for strategy in strategies]  # doctest: +NORMALIZE_WHITESPACE
    ['padded', 'sorted', 'buckets 1', 'buckets 2', 'buckets 1, tokens',
     'buckets 2, tokens', 'packed 64']
    """
    everything = np.arange(len(lengths), dtype=np.int64)
    limits = np.broadcast_to(np.int64(plan_lib.NO_LIMIT), lengths.shape)
    components = {"x": lengths}
    seeded = {"seed": seed} if seed else {}

    def planned(order, padding, bounds=None):
        return lambda epoch: batching.batch_plan(
            order,
            seed,
            epoch,
            element_limits=limits,
            element_bounds=bounds,
            component_lengths=components,
            paddings={"x": padding},
            dropped=0,
        )

    fixed = {"batch_size": batch_size, **seeded}
    order = batching.random_order(everything, batch_size, "keep", shuffle=True)
    yield Strategy("padded", "PaddedBuilder", fixed, planned(order, "batch"))
    order = batching.sorted_order(everything, lengths, batch_size, "keep", shuffle=True)
    yield Strategy("sorted", "SortedBuilder", fixed, planned(order, "batch"))
    bucketed = {"pad_to_bucket": True, "remainder": "even", **seeded}
    layouts, seen = {}, set()
    for budget in (None, max_tokens):
        for count in sorted({1, *num_buckets}):
            if count not in layouts:
                boundaries = batching.resolve_boundaries(batching.AUTO, lengths, count)
                layouts[count] = batching.bucket_layout(
                    lengths,
                    everything,
                    limits,
                    components,
                    {"x": "bucket"},
                    boundaries=boundaries,
                    last_upper=int(lengths.max()),
                    truncate=False,
                    pad_to_multiple=1,
                )
            layout = layouts[count]
            boundaries = layout.buckets.boundaries
            if (budget, boundaries) in seen:  # fewer distinct lengths than buckets
                continue
            seen.add((budget, boundaries))
            if budget is None:
                sizes = [batch_size] * layout.buckets.num_buckets
                sizing, name = {"batch_size": batch_size}, f"buckets {count}"
            else:
                sizes = [
                    batching.budget_batch_size(budget, padded, members)
                    for padded, members in zip(
                        layout.padded_lengths, layout.counts, strict=True
                    )
                ]
                sizing, name = {"max_tokens": budget}, f"buckets {count}, tokens"
            order = batching.bucket_order(
                everything, layout.bucket_of, sizes, "even", shuffle=True
            )
            yield Strategy(
                name,
                "BucketBuilder",
                {"num_buckets": count, **sizing, **bucketed},
                planned(order, "bucket", layout.element_bounds),
                boundaries,
            )
    for sequence_length in sequence_lengths:
        rows = max(1, max_tokens // sequence_length)
        order = batching.packed_order(
            everything, lengths, sequence_length, rows, "even", shuffle=True
        )
        yield Strategy(
            f"packed {sequence_length}",
            "PackedBuilder",
            {
                "sequence_length": sequence_length,
                "batch_size": rows,
                "remainder": "even",
                **seeded,
            },
            _packed_plans(order, seed, sequence_length, lengths),
        )


def _packed_plans(order, seed, sequence_length, lengths):
    """`plan(epoch)` of packed rows of `lengths`."""
    return lambda epoch: batching.packed_plan(
        order,
        seed,
        epoch,
        sequence_length=sequence_length,
        lengths=lengths,
        cut_lengths=lengths,
        component_names=("x",),
        dropped=0,
    )


def evaluate(strategy, epochs, costs, progress=None):
    """The `StrategyRow` of `epochs` epochs of `strategy`'s plans.

    Args:
        strategy: a `Strategy`.
        epochs: the epochs to plan (all are planned).
        costs: the `kerasbatch.planning.costs.BackendCosts` of the estimate,
            or None (no estimate).
        progress: called (`progress.advance()`) after every epoch planned,
            or None.

    Example:

    >>> import numpy as np
    >>> from kerasbatch.planning.costs import BACKEND_COSTS
    >>> sorted_ = list(candidates(
    ...     np.array([3, 5, 8, 13, 2, 9, 4, 6]), batch_size=2, max_tokens=26,
    ...     sequence_lengths=(64,), num_buckets=(2,), seed=0))[1]
    >>> row = evaluate(sorted_, 2, BACKEND_COSTS["torch"]["cpu"])
    >>> row.name, round(row.padding_efficiency, 3), row.compile_seconds
    ('sorted', 0.862, None)
    >>> round(row.estimated_seconds, 4)
    0.0498
    """
    workload = Workload()
    for epoch in range(epochs):
        plan = strategy.plan(epoch)
        if epoch == 0:
            statistics = plan.statistics()
            real = int(plan.real_positions.sum())
        workload.add(plan)
        if progress is not None:
            progress.advance()
    compile_seconds = estimate = None
    if costs is not None:
        compile_seconds, estimate = estimate_seconds(workload, costs)
    return StrategyRow(
        name=strategy.name,
        builder_class=strategy.builder_class,
        arguments=strategy.arguments,
        padding_efficiency=statistics.padding_efficiency,
        distinct_shapes=statistics.distinct_shapes,
        new_shapes_later=len(workload.shapes) - statistics.distinct_shapes,
        steps_per_epoch=statistics.num_batches,
        tokens_per_step=real / max(statistics.num_batches, 1),
        compile_seconds=compile_seconds,
        estimated_seconds=estimate,
        boundaries=strategy.boundaries,
    )


def _literal(value):
    """`value` as a Python literal (a str in double quotes)."""
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)
