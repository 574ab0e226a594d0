"""The batch element in a TensorFlow graph: `kerasbatch.data.outputs`' rules,
with their values computed by TensorFlow ops (bit-identical to its numpy
ones)."""

from kerasbatch.data import outputs
from kerasbatch.optional import tensorflow as tf


def finish_batch(x, y, sample_weight, lengths, **settings):
    """`kerasbatch.data.outputs.finish` (which says what each argument does)
    with TensorFlow ops.

    Example:

    >>> import tensorflow as tf
    >>> from kerasbatch.engines.tf_data.outputs import finish_batch
    >>> x, y = tf.ones([2, 3]), tf.ones([2, 3])
    >>> lengths = {"x": tf.constant([3, 1], tf.int64),
    ...            "y": tf.constant([3, 1], tf.int64)}
    >>> x, y, weights = finish_batch(x, y, None, lengths,
    ...                              output_lengths=True, output_mask=True)
    >>> sorted(x), x["x_length"].numpy().tolist(), weights.numpy().tolist()
    (['x', 'x_length'], [3, 1], [[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    """
    return outputs.finish(GraphOps, x, y, sample_weight, lengths, **settings)


def fill_rows(tensor, rows):
    """`tensor` with filler rows appended up to `rows` rows: copies of its
    first row (zeros if it has none), which `finish_batch(real_rows=...)`
    weighs 0; `kerasbatch.data.outputs.fill_numpy_rows` in a graph (it says
    why a filler row copies a real one)."""
    shape = tf.shape(tensor, out_type=tf.int64)
    # The first row, or zeros where there is none (a replica's empty part).
    zeros = tf.zeros(tf.concat([[1], shape[1:]], axis=0), tensor.dtype)
    first = tf.concat([tensor[:1], zeros], axis=0)[:1]
    return tf.concat([tensor, tf.repeat(first, rows - shape[0], axis=0)], axis=0)


class GraphOps(outputs.OperatorOps):
    """The values of `kerasbatch.data.outputs.finish` (and of `kerasbatch.ModelInputs`) as
    TensorFlow ops."""

    @staticmethod
    def sequence_mask(lengths, tokens, dtype):
        """`(rows, time)` of `dtype`: position < length, for `tokens`'
        first two axes."""
        return tf.sequence_mask(lengths, tf.shape(tokens)[1], dtype)

    @staticmethod
    def shift_left(tokens):
        """`tokens` moved one position left; the last position 0."""
        return tf.concat([tokens[:, 1:], tf.zeros_like(tokens[:, :1])], axis=1)

    @staticmethod
    def full_like_rows(tokens, value):
        """`(rows, time)` of `value` (int32 for an int, else float32)."""
        dtype = tf.int32 if isinstance(value, int) else tf.float32
        return tf.fill(tf.shape(tokens)[:2], tf.constant(value, dtype))

    @staticmethod
    def cast(tensor, dtype):
        return tf.cast(tensor, dtype)

    @staticmethod
    def int32(lengths):
        return tf.cast(lengths, tf.int32)

    @staticmethod
    def real_rows(target, real_rows):
        rows = tf.shape(target, out_type=tf.int64)[0]
        return tf.sequence_mask(real_rows, rows, tf.float32)

    @staticmethod
    def weigh(weight, real):
        weight = tf.cast(weight, tf.float32)
        return weight * tf.reshape(real, [-1] + [1] * (weight.shape.rank - 1))

    @staticmethod
    def mask_weight(target, given, length):
        if given is not None:
            given = tf.cast(given, tf.float32)
        if length is None:  # a per-example target
            return tf.ones(tf.shape(target)[:1]) if given is None else given
        mask = tf.sequence_mask(length, tf.shape(target)[1], tf.float32)
        if given is None:
            return mask
        return mask * (given if given.shape.rank == 2 else given[:, None])
