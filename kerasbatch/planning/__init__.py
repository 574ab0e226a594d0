"""Planning: which elements form each batch of an epoch, in NumPy alone.

A plan is a pure function of the elements' lengths, the settings, the seed
and the epoch; nothing here imports Keras or TensorFlow.

- `plan`: `BatchPlan` (one epoch's batches) and `PlanStatistics`;
- `orders`, `remainders`: the batches' order per epoch, and what becomes
  of a smaller last batch;
- `boundaries`, `buckets`, `batching`: bucket boundaries and the planning
  rules of the builders (random, sorted, buckets, token budgets);
- `packing`, `chunking`: sequences packed into rows; sequences cut into
  chunks;
- `prepared`: the frozen value a build resolves from its data;
- `costs`: what a padded position and a compile cost on each backend.
"""

from kerasbatch.planning import (  # noqa: F401
    batching,
    boundaries,
    buckets,
    chunking,
    costs,
    orders,
    packing,
    plan,
    prepared,
    remainders,
)
