"""The seconds of a training run, from what its epochs feed and what each costs.

A `Workload` counts what a run's epochs feed the model: padded positions,
pairs of padded positions in a row, steps, and distinct batch shapes.
`estimate_seconds` prices it with the `BackendCosts` of a backend on a
device (`kerasbatch.planning.costs`: measured on the hardware each names,
or a `CompileCost` measured on your own model). The estimate is the
tuner's (`kerasbatch.tuner.CompileCost`), with a term for attention:

    run seconds = padded positions of all epochs × seconds_per_position
                + pairs of padded positions in a row, all epochs
                  (rows × padded length² of every batch)
                  × seconds_per_position_pair
                + steps of all epochs × seconds_per_step
                + distinct shapes of all epochs × seconds_per_shape
"""

import dataclasses

__all__ = ["Workload", "estimate_seconds"]


@dataclasses.dataclass
class Workload:
    """What a run's epochs feed the model, counted plan by plan (`add`).

    Attributes:
        shapes: the distinct batch shapes fed, as tuples `(rows, padded
            length of every sequence component)`.
        positions: padded positions fed (rows × padded length of every
            batch, filler rows included).
        position_pairs: pairs of padded positions in a row (rows × padded
            length² of every batch): what attention compares.
        steps: batches fed.

    Example:

    >>> import numpy as np
    >>> from kerasbatch.tools.analysis.strategies import candidates
    >>> padded = next(candidates(
    ...     np.array([3, 5, 8, 13]), batch_size=2, max_tokens=26,
    ...     sequence_lengths=(64,), num_buckets=(2,), seed=0))
    >>> workload = Workload()
    >>> for epoch in range(2):
    ...     workload.add(padded.plan(epoch))
    >>> sorted(workload.shapes), workload.positions, workload.steps
    ([(2, 5), (2, 8), (2, 13)], 78, 4)
    """

    shapes: set = dataclasses.field(default_factory=set)
    positions: int = 0
    position_pairs: float = 0.0
    steps: int = 0

    def add(self, plan):
        """Counts what one epoch's plan (a `kerasbatch.planning.plan.BatchPlan`
        or a packed one) feeds."""
        self.shapes.update(map(tuple, plan.shapes().tolist()))
        fed = plan.padded_positions().reshape(plan.num_batches, -1).sum(axis=1)
        self.positions += int(fed.sum())
        self.position_pairs += float((fed.astype(float) ** 2 / plan.batch_rows).sum())
        self.steps += plan.num_batches


def estimate_seconds(workload, costs):
    """`(compile seconds, run seconds)` of `workload` with `costs`.

    Args:
        workload: a `Workload`.
        costs: a `kerasbatch.planning.costs.BackendCosts`.

    Returns:
        The seconds compiling the workload's distinct shapes (None where
        the costs compile no shape), and the run's estimated seconds, all
        terms included (see the module docstring).

    Example:

    >>> from kerasbatch.planning.costs import BACKEND_COSTS
    >>> workload = Workload(
    ...     shapes={(2, 8), (2, 13)}, positions=52, position_pairs=400.0,
    ...     steps=4)
    >>> compile_seconds, seconds = estimate_seconds(
    ...     workload, BACKEND_COSTS["jax"]["gpu"])
    >>> compile_seconds, round(seconds, 4)
    (15.4, 15.4187)
    >>> estimate_seconds(workload, BACKEND_COSTS["torch"]["gpu"])[0] is None
    True
    """
    compile_seconds = len(workload.shapes) * costs.seconds_per_shape
    seconds = (
        workload.positions * costs.seconds_per_position
        + workload.position_pairs * costs.seconds_per_position_pair
        + workload.steps * costs.seconds_per_step
        + compile_seconds
    )
    return (compile_seconds if costs.compiles else None), seconds
