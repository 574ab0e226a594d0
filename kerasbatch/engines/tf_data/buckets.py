"""`kerasbatch.planning.buckets.Buckets` in the graph: the same buckets
and cut limits, from tensors."""

from kerasbatch.optional import tensorflow as tf
from kerasbatch.planning import plan as plan_lib


def assign(buckets, length):
    """`Buckets.assign` of an int64 tensor of lengths (a scalar or a
    vector), in the graph: the buckets, int64, in the shape of `length`."""
    boundaries = tf.constant(buckets.boundaries, tf.int64)
    above = tf.cast(length[..., None] >= boundaries, tf.int64)
    return tf.reduce_sum(above, axis=-1)


def cut_limit(buckets, bucket, limit=None):
    """`Buckets.cut_limits` of a tensor of buckets, in the graph; `limit` an
    int64 tensor or None (no limit). Returns None when nothing is cut."""
    if not buckets.truncate:
        return limit
    lower = tf.gather(tf.constant(buckets.lower), bucket)
    if limit is None:
        return tf.where(bucket > 0, lower, plan_lib.NO_LIMIT)
    return tf.where(bucket > 0, tf.minimum(lower, limit), limit)
