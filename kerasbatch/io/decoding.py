"""Decoding a record's checked values into tensors of the manifest's dtypes
and shapes.

The parse op gives each feature's values as stored (int64, float32 or
strings, raw bytes undecoded); `decode_all` turns them into a tensor of the
feature's `tf_dtype` and `tensor_shape`: one record's, or a batch's, dense
for a fixed feature and ragged for a feature list. Given which records are
valid, it fills the invalid ones with zeros or empty sequences.
"""

from kerasbatch.optional import tensorflow as tf


def decode_all(specs, stored, valid=None):
    """`{name: _decode(...)}`; with `valid`, the invalid records' tensors are
    zeros (fixed features) or empty sequences (feature lists)."""
    if valid is None:
        return {spec.name: _decode(spec, stored[spec.name]) for spec in specs}
    if valid.shape.rank == 0:  # one, invalid record
        return {
            spec.name: tf.zeros(
                [size or 0 for size in spec.tensor_shape], spec.tf_dtype
            )
            for spec in specs
        }
    decoded = decode_all(
        specs, {name: tf.ragged.boolean_mask(stored[name], valid) for name in stored}
    )
    position = tf.cumsum(tf.cast(valid, tf.int64), exclusive=True)
    for spec in specs:
        values = decoded[spec.name]
        if spec.var_len:
            lengths = stored[spec.name].row_lengths() * tf.cast(valid, tf.int64)
            values = tf.RaggedTensor.from_row_lengths(
                values.values, lengths, validate=False
            )
        else:  # the valid records' rows, then one of zeros for the others
            zeros = tf.zeros((1, *spec.tensor_shape), spec.tf_dtype)
            rows = tf.concat([values, zeros], 0)
            zero_row = tf.shape(rows, tf.int64)[0] - 1
            values = tf.gather(rows, tf.where(valid, position, zero_row))
        decoded[spec.name] = values
    return decoded


def _decode(spec, stored):
    """The checked values as a tensor of the feature's dtype: one record's of
    its `tensor_shape`, a batch's dense `(records, *tensor_shape)` (fixed
    features) or ragged `(records, None, *shape)` (feature lists)."""
    values = stored.flat_values if isinstance(stored, tf.RaggedTensor) else stored
    if spec.deserialize_type == "raw":
        values = tf.io.decode_raw(
            values,
            spec.tf_dtype,
            little_endian=spec.deserialize_args["endian"] == "little",
        )
    elif spec.deserialize_type != "string":
        values = tf.cast(values, spec.tf_dtype)
    if not isinstance(stored, tf.RaggedTensor):  # one record's fixed feature
        return tf.reshape(values, spec.tensor_shape)
    # one tensor per innermost row (a record's or an element's)
    shape = spec.shape if spec.var_len else spec.tensor_shape
    if 0 in shape:  # no values: the number of rows cannot be inferred
        innermost = stored.values if stored.ragged_rank == 2 else stored
        rows = tf.reshape(innermost.nrows(), [1])
        values = tf.reshape(
            values, tf.concat([rows, tf.constant(shape, rows.dtype)], 0)
        )
    else:
        values = tf.reshape(values, (-1, *shape))
    values.set_shape((None, *shape))
    if stored.ragged_rank == 2:  # a batch's feature list
        return stored.with_values(values)
    return values
