"""Operations that take a dense tensor or a `tf.RaggedTensor` alike.

A fixed feature's values are dense, a feature list's (and a batch's values
before decoding) ragged; these helpers treat either the same way.
"""

from kerasbatch.optional import tensorflow as tf


def identity(values):
    """A copy of `values` (e.g. made after the checks it depends on)."""
    if isinstance(values, tf.RaggedTensor):
        return values.with_flat_values(tf.identity(values.flat_values))
    return tf.identity(values)


def boolean_mask(values, mask):
    """The rows of `values` where `mask` is true."""
    if isinstance(values, tf.RaggedTensor):
        return tf.ragged.boolean_mask(values, mask)
    return tf.boolean_mask(values, mask)
