"""Parsing a dataset of record batches, every bad record named or skipped.

`parse_batches` maps `make_batch_parser`'s function over batches of records.
With `on_error="skip"` it leaves the bad records out and counts them, those
that TensorFlow's parse op fails on included (a value stored as another type
than the manifest says, bytes that are no Example): a batch the op fails on
is parsed again in chunks, and a chunk it fails on record by record.
"""

from kerasbatch.engines.tf_data.as_written import traced_as_written
from kerasbatch.io.dense_or_ragged import boolean_mask, identity
from kerasbatch.io.parsing import ON_ERROR, make_batch_parser
from kerasbatch.optional import tensorflow as tf

#: Records parsed together when a batch's parse op fails, before record by record.
_FALLBACK_CHUNK = 16


@traced_as_written
def parse_batches(
    batches,
    manifest,
    names=None,
    *,
    on_error="raise",
    counter=None,
    num_parallel_calls=None,
    deterministic=None,
):
    """Parses a dataset of record batches, every bad record named or skipped.

    `batches` holds batched `read_file_records` elements, `(serialized,
    files, indices)` vectors, each parsed as by `make_batch_parser`.
    `"raise"` fails on the first bad record, naming its file and index;
    `"skip"` leaves the bad records out and counts them, those that
    TensorFlow's parse op fails on (a value stored as another type than the
    manifest says, bytes that are no `tf.train.Example`) included: a batch
    it fails on is parsed again record by record. Only such a batch costs
    more.

    Args:
        batches: the dataset of record batches (e.g.
            `read_file_records(...).batch(256)`).
        manifest: the dataset's `Manifest`.
        names: the features to parse, in order (default all of them).
        on_error: `"raise"` or `"skip"`.
        counter: with `"skip"`, an int64 `tf.Variable` that the number of
            records left out is added to.
        num_parallel_calls, deterministic: for the parsing, as for
            `tf.data.Dataset.map`.

    Returns:
        A dataset of `{name: tensor}` batches as `make_batch_parser`'s
        function returns them (dense or ragged), without the bad records
        with `"skip"`. A batch may come as several smaller ones (those
        parsed again record by record).

    Example:

    >>> import tempfile
    >>> import tensorflow as tf
    >>> from kerasbatch.io import Manifest, parse_batches, read_file_records
    >>> tmp = tempfile.TemporaryDirectory()
    >>> file = tmp.name + "/data.tfrecords"
    >>> def example(values):
    ...     feature = tf.train.Feature(**values)
    ...     return tf.train.Example(features=tf.train.Features(
    ...         feature={"x": feature})).SerializeToString()
    >>> with tf.io.TFRecordWriter(file) as writer:
    ...     writer.write(example({"int64_list": tf.train.Int64List(value=[1])}))
    ...     writer.write(example({"float_list": tf.train.FloatList(value=[2])}))
    ...     writer.write(b"no Example")
    ...     writer.write(example({"int64_list": tf.train.Int64List(value=[4])}))
    >>> manifest = Manifest.from_dict({"compression": None, "allow_var_len": False,
    ...     "features": [{"name": "x", "dtype": "int64", "shape": [],
    ...                   "deserialize_type": "int"}]})
    >>> skipped = tf.Variable(0, dtype=tf.int64)
    >>> batches = parse_batches(read_file_records(file, None).batch(4), manifest,
    ...                         on_error="skip", counter=skipped)
    >>> [int(x) for batch in batches for x in batch["x"]], int(skipped.numpy())
    ([1, 4], 2)
    >>> try:
    ...     list(parse_batches(read_file_records(file, None).batch(4), manifest))
    ... except tf.errors.InvalidArgumentError as error:
    ...     print(f"example id: record 2 of file {file}" in str(error))
    True
    >>> tmp.cleanup()
    """
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}.")
    map_options = {
        "num_parallel_calls": num_parallel_calls,
        "deterministic": deterministic,
    }
    if on_error == "raise":  # every error of the parse op names its record
        return batches.map(make_batch_parser(manifest, names), **map_options)
    parse = make_batch_parser(manifest, names, on_error="skip")

    def parse_block(serialized, files, indices):
        """The parsed batch; if its parse op fails, its chunks parsed one by
        one, and those that fail record by record (as one batch)."""
        return parsed_or(
            (serialized, files, indices),
            lambda *parts: _slices(parts).batch(_FALLBACK_CHUNK).flat_map(chunk),
        )

    def chunk(serialized, files, indices):
        return parsed_or(
            (serialized, files, indices), lambda *parts: _slices(parts).flat_map(one)
        )

    def parsed_or(batch, fallback):
        """`batch` parsed, or if its parse op fails, the batches `fallback`
        makes of its parts, joined into one."""
        batch = tf.data.Dataset.from_tensors(batch)
        again = batch.flat_map(fallback).unbatch().batch(tf.int64.max)
        return batch.map(parse).ignore_errors().concatenate(again).take(1)

    def one(serialized, file, index):
        """One record parsed as a batch of one, or found unparsable."""
        batch = tf.data.Dataset.from_tensors(
            (serialized[None], file[None], index[None])
        )

        def unparsable(serialized, files, indices):
            features, _ = parse(tf.constant([""]), files, indices)  # a filler
            return features, tf.constant([False])

        failed = batch.map(unparsable)
        return batch.map(parse).ignore_errors().concatenate(failed).take(1)

    if num_parallel_calls and num_parallel_calls > 1:
        parsed = batches.interleave(
            parse_block, cycle_length=num_parallel_calls, **map_options
        )
    else:
        parsed = batches.flat_map(parse_block)

    def leave_out_invalid(features, valid):
        invalid = tf.reduce_sum(tf.cast(tf.logical_not(valid), tf.int64))
        updates = [] if counter is None else [counter.assign_add(invalid)]
        with tf.control_dependencies(updates):
            return tf.cond(  # masking costs more than parsing a valid batch
                tf.equal(invalid, 0),
                lambda: tf.nest.map_structure(identity, features),
                lambda: {
                    name: boolean_mask(values, valid)
                    for name, values in features.items()
                },
            )

    return parsed.map(leave_out_invalid)


def _slices(parts):
    return tf.data.Dataset.from_tensor_slices(tuple(parts))
