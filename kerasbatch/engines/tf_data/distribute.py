"""Per-replica batches under `tf.distribute`: one global plan, cut in lock-step.

`builder.distribute(strategy)` feeds every replica from the same global plan
of the epoch. Global batch `s` (what one step of a single-device run would
train on) is cut into `num_replicas` contiguous parts, part `r` going to
replica `r`; each part is padded to the global batch's padded length. So at
every step all replicas train on the same bucket and the same shape (no
replica waits on a longer batch, one compiled shape per step), every replica
runs the plan's number of steps, and one epoch across all replicas holds
every element of the plan exactly once. `batch_size` stays global, as in
Keras: each replica gets `batch_size / num_replicas` elements.

Every input pipeline (one per worker) computes the same global plan from
`(seed, epoch)` and keeps the parts of its own replicas, in the order
`tf.distribute` hands consecutive elements to them: step 0 replica 0, step 0
replica 1, ..., step 1 replica 0, ...
"""

import dataclasses

from kerasbatch.optional import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class ReplicaSlice:
    """The replicas one input pipeline feeds.

    Attributes:
        num_replicas: replicas in sync across all workers.
        first: global index of this pipeline's first replica.
        count: replicas this pipeline feeds.
    """

    num_replicas: int
    first: int
    count: int

    @classmethod
    def of(cls, strategy, input_context):
        """The replicas of `input_context`'s pipeline under `strategy`."""
        num_replicas = strategy.num_replicas_in_sync
        count = num_replicas // input_context.num_input_pipelines
        return cls(num_replicas, input_context.input_pipeline_id * count, count)

    def spans(self, size):
        """`(start, part)` int64 `(count,)` tensors: where this pipeline's
        replicas' parts of a global batch of `size` rows start, and their
        sizes (contiguous, as even as can be: earlier replicas get one more)."""
        replicas = tf.range(self.first, self.first + self.count, dtype=tf.int64)
        base = size // self.num_replicas
        extra = size % self.num_replicas
        part = base + tf.cast(replicas < extra, tf.int64)
        start = replicas * base + tf.minimum(replicas, extra)
        return start, part

    def parts_of(self, *batch):
        """A dataset of this pipeline's replicas' parts of one padded global
        `batch` (any structure of tensors whose first axis is the batch)."""
        size = tf.shape(tf.nest.flatten(batch)[0], out_type=tf.int64)[0]
        start, part = self.spans(size)
        batch = batch[0] if len(batch) == 1 else batch

        def replica_part(index):
            begin, end = start[index], start[index] + part[index]
            return tf.nest.map_structure(lambda t: t[begin:end], batch)

        return tf.data.Dataset.range(self.count).map(replica_part)

    def static_size(self, sizes):
        """The per-replica batch size if every global batch size in `sizes`
        (ints) gives every replica the same, else None."""
        sizes = {int(size) for size in sizes}
        if len(sizes) == 1:
            (size,) = sizes
            if size % self.num_replicas == 0:
                return size // self.num_replicas
        return None


def take_parts(values, start, part, fill):
    """`values[start[r]:start[r] + part[r]]` for every r, padded with `fill`
    to one width: `(len(start), width)`, width the longest possible part."""
    width = tf.cast(tf.shape(values, out_type=tf.int64)[0], tf.int64)
    offsets = tf.range(width, dtype=tf.int64)
    positions = start[:, None] + offsets[None, :]
    taken = tf.gather(values, tf.minimum(positions, tf.maximum(width - 1, 0)))
    return tf.where(offsets[None, :] < part[:, None], taken, fill)


def check_divisible(fixed_sizes, num_replicas, builder_name):
    """Raises if a fixed global batch size does not split evenly.

    Args:
        fixed_sizes: `[(what, size)]`, e.g. `[("batch_size", 32)]` or
            `[("bucket_batch_sizes[2] (bucket 2)", 12)]`.
        num_replicas: replicas in sync.
        builder_name: for the message.
    """
    for what, size in fixed_sizes:
        if size % num_replicas:
            lower = size - size % num_replicas
            suggestion = (
                f"{lower} or {lower + num_replicas}" if lower else (f"{num_replicas}")
            )
            raise ValueError(
                f"{builder_name}: {what}={size} is a global batch size, which "
                f"the strategy's {num_replicas} replicas cannot share evenly. "
                f"Set it to a multiple of {num_replicas} (e.g. {suggestion})."
            )
