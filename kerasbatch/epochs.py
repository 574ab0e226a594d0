"""The seam where a plan becomes tensors: an epoch's batches, in-graph.

`ordered_batches(order, seed, epoch)` computes with TensorFlow ops exactly
the batches `kerasbatch.orders.EpochOrder.batches` computes in NumPy (the
same hash, the same stable sorts), from constants fixed at `build` and the
epoch as a tensor. A built dataset therefore holds no Python callback: its
graph can be serialised (tf.data service, `tf.distribute`) and its iterator
checkpointed mid-epoch.
"""

import tensorflow as tf

from kerasbatch import orders


def mix64(z):
    """`kerasbatch.orders.mix64` on a uint64 tensor."""
    z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, _u64(30))) * _u64(
        orders._MIX1
    )
    z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, _u64(27))) * _u64(
        orders._MIX2
    )
    return tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, _u64(31)))


def hash31(seed, epoch, stream, count):
    """`kerasbatch.orders.hash31` with an int64 tensor `epoch` and `count`."""
    key = mix64(_u64(seed)) ^ tf.cast(epoch, tf.uint64)
    key = mix64(key) ^ _u64(stream)
    key = mix64(key)
    values = mix64(key ^ tf.cast(tf.range(tf.cast(count, tf.int64)), tf.uint64))
    return tf.cast(tf.bitwise.right_shift(values, _u64(33)), tf.int64)


def ordered_batches(order, seed, epoch):
    """The element indices of every batch of `epoch`, as a `tf.data.Dataset`.

    Args:
        order: a `kerasbatch.orders.EpochOrder`.
        seed: the builder's int seed.
        epoch: a scalar int64 tensor.

    Returns:
        A dataset of int64 vectors, one per batch, in the epoch's order.
    """
    starts = tf.constant(order.starts, tf.int64)
    sizes = tf.constant(order.sizes, tf.int64)
    if order.shuffle_units:
        keys = tf.constant(order.groups, tf.int64) * orders.MAX_GROUP + hash31(
            seed, epoch, orders.UNIT_STREAM, len(order.units)
        )
        ordered = tf.gather(
            tf.constant(order.units, tf.int64), tf.argsort(keys, stable=True)
        )
    else:  # the same every epoch
        ordered = tf.constant(order.ordered_units(seed, 0), tf.int64)
    taken = tf.range(order.num_batches, dtype=tf.int64)
    if order.shuffle_batches:
        keys = hash31(seed, epoch, orders.BATCH_STREAM, order.num_batches)
        taken = tf.argsort(keys, stable=True)
    spans = tf.data.Dataset.from_tensor_slices(
        (tf.gather(starts, taken), tf.gather(sizes, taken))
    )

    @tf.autograph.experimental.do_not_convert  # plain tf code
    def batch(start, size):
        return ordered[start : start + size]

    return spans.map(batch)


def _u64(value):
    return tf.constant(int(value), tf.uint64)
