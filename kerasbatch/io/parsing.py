"""Parsing a manifest's records into tensors, each record checked.

`make_parser` returns a function for `tf.data.Dataset.map` over the
`(serialized, file, index)` elements of `read_file_records`, and
`make_batch_parser` one for batches of them (`records.batch(n)`), which
parses several times faster per record. Both parse leniently and check every
size themselves, so a record that does not match the manifest fails with an
error naming its file and index, e.g.

    assertion failed: [record 17 of file /d/part-00001-of-00004.tfrecords:
    feature `tokens` has 4 values, the shape [5] in the manifest needs 5]

(`error_message` gives the message alone, as written: TensorFlow's Assert
escapes quotes.) Detected this way: a missing feature (it has 0 values), a
wrong number of values, raw byte strings of the wrong size or number
(`len`), feature list elements of the wrong size, and a missing feature
list: a SequenceExample without it, or a `tf.train.Example` (which has no
feature lists) where the manifest says SequenceExample (`allow_var_len`
true). An empty feature list that is present is an empty sequence.

Limitations (of TensorFlow's parse ops):

- A value stored as another type than the manifest says (a `float_list`
  where it says `int`), and bytes that are no Example, fail inside the parse
  op, even with `on_error="skip"`, and for a batch the whole batch fails.
  The error still names the record: "Name: record 17 of file
  /d/part-00001-of-00004.tfrecords, Context feature: x.  Data types don't
  match." or "Invalid protocol message input, example id: record 17 of
  file ...". `parse_batches` skips such records, and `check_dataset`
  reports them.
- A missing feature whose shape holds no values (a 0 in it) reads as an
  empty tensor.

The checks are in `kerasbatch.io.record_checks`, the decoding in
`kerasbatch.io.decoding`; `parse_batches` (`kerasbatch.io.dataset_parsing`)
parses a dataset of batches, `check_dataset` (`kerasbatch.io.dataset_check`)
checks a whole dataset, and `error_message` (`kerasbatch.io.error_messages`)
gives a failed check's message.
"""

from kerasbatch.engines.tf_data.as_written import plain
from kerasbatch.io import manifest as manifest_lib
from kerasbatch.io.decoding import decode_all
from kerasbatch.io.dense_or_ragged import identity
from kerasbatch.io.record_checks import (
    assert_valid,
    fixed_checks,
    list_checks,
    present_lists,
)
from kerasbatch.optional import tensorflow as tf

ON_ERROR = ("raise", "skip")
_STORAGE = {"int": tf.int64, "float": tf.float32, "string": tf.string, "raw": tf.string}


def make_parser(manifest, names=None, *, on_error="raise"):
    """Returns a function that parses one serialized record into tensors.

    `make_batch_parser` does the same for batches of records, several times
    faster per record.

    Args:
        manifest: the dataset's `Manifest`.
        names: the features to parse, in order (default all of them).
        on_error: `"raise"` fails on a record that does not match the
            manifest, naming its file and index; `"skip"` returns it as
            invalid instead (with zero-filled, empty-sequence tensors).

    Returns:
        `parse(serialized, file, index)` for `tf.data.Dataset.map`, taking a
        scalar string record, its file name and its int64 index in the file
        and returning `{name: tensor}` (`on_error="raise"`) or
        `({name: tensor}, valid)` with a scalar bool `valid` (`"skip"`).
        Each tensor has its feature's `tf_dtype` and static `tensor_shape`.

    Raises:
        KeyError: a name that is not in the manifest.

    Example:

    >>> import tempfile
    >>> import numpy as np
    >>> from kerasbatch.io import make_parser, read_file_records, write_dataset
    >>> tmp = tempfile.TemporaryDirectory()
    >>> manifest = write_dataset(tmp.name, [
    ...     {"audio": np.zeros((5, 2), "float32"), "label": 3},
    ...     {"audio": np.ones((3, 2), "float32"), "label": 1}])
    >>> file = tmp.name + "/part-00000-of-00001.tfrecords"
    >>> records = read_file_records(file, manifest.compression)
    >>> dataset = records.map(make_parser(manifest))
    >>> dataset.element_spec["audio"]
    TensorSpec(shape=(None, 2), dtype=tf.float32, name=None)
    >>> [(x["audio"].shape.as_list(), int(x["label"])) for x in dataset]
    [([5, 2], 3), ([3, 2], 1)]
    >>> tmp.cleanup()
    """
    return _make_parse(manifest, names, on_error, batched=False)


def make_batch_parser(manifest, names=None, *, on_error="raise"):
    """Returns a function that parses a batch of serialized records at once.

    The batched `make_parser`, for `records.batch(n).map(parse)`: one parse
    op and one set of checks per batch instead of per record (about ten
    times less work per record with batches of 256), the same checks and
    results. After `.unbatch()` the elements hold what `make_parser` gives:
    the same values, dtypes and static shapes (a feature list comes as a
    `tf.RaggedTensorSpec` of ragged rank 0 until a `map` makes it a
    `tf.TensorSpec`). But TensorFlow's `Dataset.unbatch()` crashes (a
    segmentation fault in TensorFlow 2.21) on numeric tensors of no values,
    such as a fixed feature whose shape holds a 0: leave those out of
    `names` or parse them with `make_parser`.

    Args:
        manifest: the dataset's `Manifest`.
        names: the features to parse, in order (default all of them).
        on_error: `"raise"` fails on a batch holding a record that does not
            match the manifest, naming the file and index of its first such
            record; `"skip"` flags the invalid records instead (with
            zero-filled, empty-sequence tensors).

    Returns:
        `parse(serialized, files, indices)` for `tf.data.Dataset.map`, taking
        1-D batches of string records, their file names and their int64
        indices in the files (batched `read_file_records` elements), and
        returning `{name: tensor}` (`on_error="raise"`) or
        `({name: tensor}, valid)` with a bool `valid` per record (`"skip"`).
        A fixed feature's tensor is dense, `(batch, *tensor_shape)`, a
        `var_len` feature's a `tf.RaggedTensor`, `(batch, None, *shape)`;
        each has the feature's `tf_dtype`.

    Raises:
        KeyError: a name that is not in the manifest.

    Example:

    >>> import tempfile
    >>> import numpy as np
    >>> from kerasbatch.io import make_batch_parser, read_file_records
    >>> from kerasbatch.io import write_dataset
    >>> tmp = tempfile.TemporaryDirectory()
    >>> manifest = write_dataset(tmp.name, [
    ...     {"audio": np.zeros((5, 2), "float32"), "label": 3},
    ...     {"audio": np.ones((3, 2), "float32"), "label": 1},
    ...     {"audio": np.ones((4, 2), "float32"), "label": 0}])
    >>> file = tmp.name + "/part-00000-of-00001.tfrecords"
    >>> records = read_file_records(file, manifest.compression)
    >>> batches = records.batch(2).map(make_batch_parser(manifest))
    >>> [(x["audio"].shape.as_list(), x["label"].numpy().tolist())
    ...  for x in batches]
    [([2, None, 2], [3, 1]), ([1, None, 2], [0])]
    >>> dataset = batches.unbatch()
    >>> [(x["audio"].shape.as_list(), int(x["label"])) for x in dataset]
    [([5, 2], 3), ([3, 2], 1), ([4, 2], 0)]
    >>> tmp.cleanup()
    """
    return _make_parse(manifest, names, on_error, batched=True)


def _make_parse(manifest, names, on_error, batched):
    """`make_parser`'s function, or with `batched` `make_batch_parser`'s.

    Both run the same code: the values of a batch are TensorFlow ragged
    tensors with a first, record axis that those of one record lack, and the
    checks reduce and decode along their last axes, whatever comes before.
    """
    specs = _select(manifest, names)
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}.")
    parse_stored = _stored_parser(manifest, specs, batched)

    def parse(serialized, file, index):
        if batched:
            serialized, file, index = _batch_inputs(serialized, file, index)
        stored = parse_stored(serialized, file, index)
        present = present_lists(specs, stored, serialized)
        checks = [
            check
            for spec in specs
            for check in (
                list_checks(spec, stored[spec.name], present)
                if spec.var_len
                else fixed_checks(spec, stored[spec.name])
            )
        ]
        valid = tf.reduce_all(tf.stack([ok for ok, _ in checks]), axis=0)
        all_valid = tf.reduce_all(valid) if batched else valid
        if on_error == "raise":
            assertion = assert_valid(all_valid, valid, checks, file, index)
            with tf.control_dependencies([assertion]):  # decode after the checks
                stored = {name: identity(values) for name, values in stored.items()}
            return decode_all(specs, stored)
        decoded = tf.cond(
            all_valid,
            lambda: decode_all(specs, stored),
            lambda: decode_all(specs, stored, valid),
        )
        return decoded, valid

    return plain(parse)  # traced as written wherever it is mapped


def _select(manifest, names):
    if not isinstance(manifest, manifest_lib.Manifest):
        raise TypeError(
            f"manifest must be a kerasbatch.io.Manifest, got {type(manifest).__name__}; "
            "read one with kerasbatch.io.load_manifest."
        )
    if names is None:
        return manifest.features
    if isinstance(names, str):
        raise TypeError(
            f"names must be a list of feature names, got the string {names!r}."
        )
    names = list(names)
    if not names:
        raise ValueError("names is empty: give at least one feature to parse.")
    for position, name in enumerate(names):
        if name in names[:position]:
            raise ValueError(f"names lists {name!r} twice.")
    return tuple(manifest.feature(name) for name in names)


def _batch_inputs(serialized, files, indices):
    """The parts of a batch as tensors, checking that they are 1-D."""
    parts = {"serialized": serialized, "files": files, "indices": indices}
    tensors = []
    for name, part in parts.items():
        part = tf.convert_to_tensor(part)
        if part.shape.rank not in (None, 1):
            raise ValueError(
                "make_batch_parser's function takes 1-D batches of records, "
                "files and indices (e.g. from read_file_records(...).batch(n)), "
                f"but {name} has shape {part.shape}."
            )
        tensors.append(part)
    return tensors


def _stored_parser(manifest, specs, batched):
    """Returns `parse(serialized, file, index)`: `{name: values as stored}`.

    One record's values are a 1-D tensor for a fixed feature, a
    `tf.RaggedTensor` `[elements, values]` for a feature list; those of a
    batch are ragged with a first, record axis. The parse op's errors (bytes
    that are no Example, a value of another type) name the record: "record
    17 of file /d/part-00001-of-00004.tfrecords".
    """
    fixed_features, list_features = {}, {}
    for spec in specs:
        features = list_features if spec.var_len else fixed_features
        features[spec.name] = tf.io.RaggedFeature(
            _STORAGE[spec.deserialize_type], row_splits_dtype=tf.int64
        )

    def parse(serialized, file, index):
        # Sequence-example parsing reads an Example's bytes as a context
        # (the same field number), as fast, and names the record in every
        # error, where TensorFlow's Example parse op leaves out the name
        # of bytes that are no Example.
        name = tf.strings.join(
            ["record ", tf.strings.as_string(index), " of file ", file]
        )
        if batched:
            fixed, lists, _ = tf.io.parse_sequence_example(
                serialized, fixed_features or None, list_features or None, name
            )
        else:
            fixed, lists = tf.io.parse_single_sequence_example(
                serialized,
                fixed_features or None,
                list_features or None,
                example_name=name,
            )
        return {**fixed, **lists}

    return parse
