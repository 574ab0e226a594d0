"""Parsing a manifest's records into tensors, and checking whole datasets.

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
"""

import dataclasses
import os
import re

import keras

from kerasbatch.io import manifest as manifest_lib
from kerasbatch.io import records as records_lib
from kerasbatch.optional import tensorflow as tf

ON_ERROR = ("raise", "skip")
_STORAGE = {"int": tf.int64, "float": tf.float32, "string": tf.string, "raw": tf.string}
_PROGRESS_EVERY = 100
_ERRORS_SHOWN = 5
#: TensorFlow's parse error for a value of another type than the manifest's.
_WRONG_TYPE = re.compile(
    r"(?:Context feature|Feature list): (.+?)(?:, Index: (\d+))?\.  "
    r"Data types don't match\. Expected type: (\w+)"
)
#: Records parsed together when a batch's parse op fails, before record by record.
_FALLBACK_CHUNK = 16
_UNPARSABLE = (
    "Invalid protocol message input: the bytes are no Example (or SequenceExample)"
)


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
        present = _present_lists(specs, stored, serialized)
        checks = [
            check
            for spec in specs
            for check in (
                _list_checks(spec, stored[spec.name], present)
                if spec.var_len
                else _fixed_checks(spec, stored[spec.name])
            )
        ]
        valid = tf.reduce_all(tf.stack([ok for ok, _ in checks]), axis=0)
        all_valid = tf.reduce_all(valid) if batched else valid
        if on_error == "raise":
            assertion = _assert(all_valid, valid, checks, file, index)
            with tf.control_dependencies([assertion]):  # decode after the checks
                stored = {name: _identity(values) for name, values in stored.items()}
            return _decode_all(specs, stored)
        decoded = tf.cond(
            all_valid,
            lambda: _decode_all(specs, stored),
            lambda: _decode_all(specs, stored, valid),
        )
        return decoded, valid

    return parse


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
    parse = _make_parse(manifest, names, "skip", batched=True)

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
                lambda: tf.nest.map_structure(_identity, features),
                lambda: {
                    name: _boolean_mask(values, valid)
                    for name, values in features.items()
                },
            )

    return parsed.map(leave_out_invalid)


@dataclasses.dataclass(frozen=True)
class DatasetCheck:
    """What `check_dataset` found.

    Attributes:
        num_records: the records read, in all files.
        records_per_file: `{file: records read}`.
        errors: `(file, record index, message)` of every problem: a record
            that does not match the manifest, or damage at that record
            (corrupt, truncated or missing file, a compressed stream cut
            short or failing its checksum, fewer records than the manifest's
            `record_counts`).
        lost_records: `{file: records lost}` of each damaged file: exact
            when the manifest has `record_counts`, else the number of damaged
            stretches (at least 1), a lower bound: how many records a damaged
            stretch held cannot be known without the counts.
    """

    num_records: int
    records_per_file: dict
    errors: tuple
    lost_records: dict = dataclasses.field(default_factory=dict)

    @property
    def ok(self):
        """True when no problem was found."""
        return not self.errors

    def raise_if_errors(self):
        """Raises a ValueError listing the first few problems, if any."""
        if not self.errors:
            return
        lines = [
            f"  record {index} of {file}: {message}"
            for file, index, message in self.errors[:_ERRORS_SHOWN]
        ]
        if len(self.errors) > _ERRORS_SHOWN:
            lines.append(f"  ... and {len(self.errors) - _ERRORS_SHOWN} more")
        raise ValueError(
            f"The dataset has {len(self.errors)} problem(s) in "
            f"{self.num_records} records:\n" + "\n".join(lines)
        )


def check_dataset(manifest, files, names=None, *, verbose=1, manifest_path=None):
    """Reads and parses every record of `files`, collecting the problems.

    Unlike a training pipeline, the check goes on after a bad record and
    names the file and record of every problem, including those TensorFlow's
    parse op reports without them (a value of another type than the
    manifest says, bytes that are no Example).

    Damage is checked independently of TensorFlow's reader: an uncompressed
    file is read on past each damaged stretch (to the next record whose CRCs
    verify), a compressed one is decompressed in Python too, to find a
    stream cut short or failing its checksum (TensorFlow's reader may end
    such a file silently), and with `manifest_path` the records read are
    compared with the manifest's `record_counts`. Each damaged file has its
    lost records in `lost_records`.

    Args:
        manifest: the dataset's `Manifest`.
        files: the data files.
        names: the features to check (default all).
        verbose: show a progress bar over the records (0: silent).
        manifest_path: the manifest's file or directory, which the keys of
            its `record_counts` are relative to (None: counts unused).

    Returns:
        A `DatasetCheck`; `raise_if_errors()` turns its problems into an error.

    Example:

    >>> import tempfile
    >>> from kerasbatch.io import check_dataset, write_dataset
    >>> tmp = tempfile.TemporaryDirectory()
    >>> manifest = write_dataset(tmp.name, [{"x": [1, 2]}, {"x": [3, 4]}])
    >>> file = tmp.name + "/part-00000-of-00001.tfrecords"
    >>> check_dataset(manifest, [file], verbose=0).ok
    True
    >>> _ = write_dataset(tmp.name, [{"x": [1, 2, 3]}], overwrite=True)
    >>> check = check_dataset(manifest, [file], verbose=0)
    >>> check.num_records, check.errors[0][1:]
    (1, (0, 'feature `x` has 3 values, the shape [2] in the manifest needs 2'))
    >>> manifest = write_dataset(tmp.name, [{"x": [1, 2]}] * 3, overwrite=True)
    >>> with open(file, "r+b") as handle:  # cut the file short
    ...     _ = handle.truncate(50)
    >>> check = check_dataset(manifest, [file], verbose=0, manifest_path=tmp.name)
    >>> check.num_records, check.errors[0][1:], list(check.lost_records.values())
    (1, (1, 'corrupt or truncated file: truncated record at byte 31 (bytes 31 to 50 skipped)'), [2])
    >>> tmp.cleanup()
    """
    parse = make_parser(manifest, names)
    if isinstance(files, str | bytes | os.PathLike):
        raise TypeError(
            f"files must be a list of paths, got the single path {files!r}."
        )
    files = [os.fspath(file) for file in files]
    progress = None
    if verbose:
        print(f"Checking the records of {len(files)} files")
        progress = keras.utils.Progbar(None, verbose=verbose, unit_name="record")
    checker = _FileChecker(manifest, parse, progress)
    for file in files:
        expected = None
        if manifest_path is not None:
            expected = manifest.records_in(file, manifest_path)
        checker.check(file, expected)
    if progress is not None:
        progress.update(checker.total, finalize=True)
    return DatasetCheck(
        checker.total,
        checker.records_per_file,
        tuple(checker.errors),
        checker.lost_records,
    )


class _FileChecker:
    """`check_dataset`'s work on one file after another."""

    def __init__(self, manifest, parse, progress):
        self.manifest = manifest
        self.parse = parse
        self.progress = progress
        self.records_per_file = {}
        self.errors = []
        self.lost_records = {}
        self.total = 0
        self._parse_one = None

    def check(self, file, expected):
        compression = self.manifest.compression
        # record by record (not read_file_records' blocks), so that damage
        # is found at its record
        records = tf.data.TFRecordDataset(
            file, compression_type=records_lib.TF_COMPRESSION[compression]
        )
        parse = self.parse
        iterator = iter(records.enumerate().map(lambda i, r, f=file: parse(r, f, i)))
        index = damage = 0
        stopped = False
        while True:
            try:
                next(iterator)
            except StopIteration:
                break
            except tf.errors.NotFoundError as error:
                text = _error_text(error, file, index)
                self.errors.append((file, index, f"cannot open the file: {text}"))
                self.records_per_file[file] = self.records_per_file.get(file, 0)
                return
            except tf.errors.DataLossError as error:
                if compression is None:  # read on past the damage
                    index, damage = self._scan(file, index)
                else:
                    text = _error_text(error, file, index)
                    self._damage(file, index, text)
                    damage += 1
                stopped = True
                break
            except tf.errors.InvalidArgumentError as error:
                self.errors.append((file, index, _error_text(error, file, index)))
            index += 1
            self._count()
        if compression is None and not stopped:  # a cut TensorFlow missed
            lengths = records.ignore_errors().map(
                lambda r: tf.cast(tf.strings.length(r), tf.int64) + 16
            )
            read_bytes = int(lengths.reduce(tf.constant(0, tf.int64), tf.add))
            if read_bytes != tf.io.gfile.stat(file).length:
                index, damage = self._scan(file, index)
        if compression is not None and not stopped:
            size, problem = records_lib.verify_stream(file, compression)
            if problem is not None:
                self._damage(file, index, problem)
                damage += 1
        self.records_per_file[file] = self.records_per_file.get(file, 0) + index
        lost = damage
        if expected is not None and index != expected and damage == 0:
            self._damage(
                file,
                index,
                f"{index} records read, but the manifest's record_counts gives "
                f"the file {expected}",
            )
            lost = max(expected - index, 0)
        elif expected is not None:
            lost = 0 if damage == 0 else max(expected - index, 0)
        if damage or (expected is not None and index != expected):
            self.lost_records[file] = lost

    def _count(self):
        self.total += 1
        if self.progress is not None and self.total % _PROGRESS_EVERY == 0:
            self.progress.update(self.total)

    def _damage(self, file, index, text):
        self.errors.append((file, index, f"corrupt or truncated file: {text}"))

    def _scan(self, file, checked):
        """Reads an uncompressed file on from its record `checked` (where
        TensorFlow's reader stopped), past every damaged stretch: `(records,
        stretches)`."""
        damage = 0
        index = 0
        for kind, value in records_lib.scan_records(file):
            if kind == "record" and index < checked:
                index += 1  # checked already
                continue
            if kind == "damage":
                start, end, problem = value
                skipped = f" (bytes {start} to {end} skipped)" if end > start else ""
                self._damage(file, index, problem + skipped)
                damage += 1
                continue
            try:
                self._parse_record(value, file, index)
            except tf.errors.InvalidArgumentError as error:
                self.errors.append((file, index, _error_text(error, file, index)))
            index += 1
            self._count()
        return index, damage

    def _parse_record(self, record, file, index):
        if self._parse_one is None:
            self._parse_one = tf.function(self.parse)
        self._parse_one(
            tf.constant(record, tf.string),
            tf.constant(file, tf.string),
            tf.constant(index, tf.int64),
        )


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


def _fixed_checks(spec, stored):
    """`(ok, message)` pairs for a fixed feature's parsed values.

    `stored` holds one record's values (1-D) or a batch's, `[records,
    values]`; `ok` is then a bool per record. `message(row)` tells what is
    wrong with the record (`row` of the batch, None for one record).
    """
    counts = _lengths(stored)
    name = f"feature `{spec.name}`"
    if spec.deserialize_type == "raw":
        needed, noun = spec.raw_len, "raw byte strings"
        rule = f"deserialize_args len in the manifest is {needed}"
    else:
        needed, noun = spec.num_values, "values"
        rule = f"the shape {list(spec.shape)} in the manifest needs {needed}"

    def message(row):
        count = _record(counts, row)
        missing = tf.where(tf.equal(count, 0), " (missing or empty)", "")
        return [f"{name} has ", count, f" {noun}", missing, f", {rule}"]

    checks = [(tf.equal(counts, needed), message)]
    if spec.deserialize_type == "raw":
        checks.append(
            _raw_size_check(spec, stored, f"{name} raw byte string ", " has ")
        )
    return checks


def _present_lists(specs, stored, serialized):
    """`{name: (present, has_lists)}` for each feature list of `specs`.

    `present`: whether the record holds the feature list (a bool per record
    of a batch); `has_lists`: whether it holds any feature list (a
    `tf.train.Example` holds none). The parse op reads a missing feature
    list as an empty one, so the records' keys are read (with
    `tf.io.decode_proto`) only when some feature list is empty.
    """
    names = [spec.name for spec in specs if spec.var_len]
    if not names:
        return {}
    empty = tf.stack([tf.equal(_num_elements(stored[name]), 0) for name in names])

    def read_keys():
        return _feature_list_keys(serialized, names)

    def all_present():
        return tf.ones_like(tf.concat([empty, empty[:1]], 0))

    flags = tf.cond(tf.reduce_any(empty), read_keys, all_present)
    return {name: (flags[k], flags[-1]) for k, name in enumerate(names)}


def _num_elements(stored):
    """A feature list's number of elements: one record's `[elements, values]`,
    or per record of a batch's `[records, elements, values]`."""
    return stored.row_lengths() if stored.ragged_rank == 2 else stored.nrows()


def _feature_list_keys(serialized, names):
    """A bool tensor `[len(names) + 1, ...]`: whether each record holds each
    feature list of `names`, then whether it holds any feature list."""
    sizes, (lists,) = tf.io.decode_proto(
        serialized, "tensorflow.SequenceExample", ["feature_lists"], [tf.string]
    )
    has_lists = sizes[..., 0] > 0
    lists = tf.strings.reduce_join(lists, axis=-1)  # at most one per record
    _, (entries,) = tf.io.decode_proto(
        lists, "tensorflow.FeatureLists", ["feature_list"], [tf.string]
    )
    _, (keys,) = tf.io.decode_proto(
        entries, "tensorflow.FeatureLists.FeatureListEntry", ["key"], [tf.string]
    )
    keys = tf.strings.reduce_join(keys, axis=-1)  # at most one per entry
    present = [tf.reduce_any(tf.equal(keys, name), axis=-1) for name in names]
    return tf.stack([*present, has_lists])


def _list_checks(spec, stored, present):
    """`(ok, message)` pairs for a feature list's parsed `[elements, values]`
    (`[records, elements, values]` for a batch), as in `_fixed_checks`;
    `present` is `_present_lists`'s."""
    held, has_lists = present[spec.name]

    def missing(row):
        return [
            f"feature list `{spec.name}` is missing",
            tf.where(
                _record(has_lists, row),
                " from the record, which holds other feature lists",
                ": the record has no feature lists (a tf.train.Example has "
                "none), but the manifest sets allow_var_len true, so its records "
                "are SequenceExamples",
            ),
        ]

    counts = _lengths(stored)
    name = f"feature list `{spec.name}` element "
    needed = 1 if spec.deserialize_type == "raw" else spec.num_values
    wrong = tf.not_equal(counts, needed)

    def message(row):
        element = tf.argmax(_record(wrong, row))
        if spec.deserialize_type == "raw":
            text = " raw byte strings, the manifest needs 1 per element"
        else:
            text = (
                f" values, the shape {list(spec.shape)} in the manifest needs "
                f"{spec.num_values}"
            )
        return [name, element, " has ", _record(counts, row)[element], text]

    checks = [(held, missing), (_none(wrong), message)]
    if spec.deserialize_type == "raw":  # the strings of a record's elements
        strings = stored.merge_dims(-2, -1)
        checks.append(
            _raw_size_check(spec, strings, name, " has a raw byte string of ")
        )
    return checks


def _raw_size_check(spec, strings, before, after):
    """Every raw string holds one tensor of the feature's shape and dtype.

    The message reads `before`, the index of the record's first wrong string,
    `after`.
    """
    size = spec.num_values * spec.tf_dtype.size
    lengths = tf.strings.length(strings)
    wrong = tf.not_equal(lengths, size)

    def message(row):
        first = tf.argmax(_record(wrong, row))
        return [
            before,
            first,
            after,
            _record(lengths, row)[first],
            f" bytes, the shape {list(spec.shape)} of {spec.dtype} in the "
            f"manifest needs {size}",
        ]

    return _none(wrong), message


def _none(flags):
    """Whether no flag is set along the last axis: of one record's 1-D flags,
    or of each record's row of a batch's ragged `[records, flags]`."""
    if not isinstance(flags, tf.RaggedTensor):
        return tf.logical_not(tf.reduce_any(flags, axis=-1))
    # faster than tf.reduce_any on a ragged tensor: count the flags set before
    # each row's start; a row without any has the same count as the next
    set_before = tf.pad(tf.cumsum(tf.cast(flags.values, tf.int32)), [[1, 0]])
    at_splits = tf.gather(set_before, flags.row_splits)
    return tf.equal(at_splits[1:], at_splits[:-1])


def _lengths(values):
    """The number of values along the last axis: in one record's 1-D values,
    and in each innermost row of ragged ones (a record's, an element's)."""
    if isinstance(values, tf.RaggedTensor):
        return values.row_lengths(axis=values.ragged_rank)
    return tf.size(values, out_type=tf.int64)


def _record(values, row):
    """Record `row` of a batch's `values`; with `row` None, one record's."""
    return values if row is None else values[row]


def _identity(values):
    if isinstance(values, tf.RaggedTensor):
        return values.with_flat_values(tf.identity(values.flat_values))
    return tf.identity(values)


def _decode_all(specs, stored, valid=None):
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
    decoded = _decode_all(
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


def _assert(all_valid, valid, checks, file, index):
    """Asserts `all_valid`; the message (built only on failure) names the
    file and index of the first invalid record and its first failed check.

    `valid`, `file` and `index` are a batch's vectors, or one record's
    scalars.
    """
    text = _failure_text(all_valid, valid, checks, file, index)
    return tf.debugging.Assert(all_valid, [text])


def _failure_text(all_valid, valid, checks, file, index):
    """`_assert`'s message, "" when `all_valid`."""

    def failure():
        row = tf.argmax(tf.logical_not(valid)) if valid.shape.rank else None

        def first_failure(checks):
            (ok, message), rest = checks[0], checks[1:]
            if not rest:
                where = ["record ", _record(index, row), " of file "]
                return _join([*where, _record(file, row), ": ", *message(row)])
            return tf.cond(
                _record(ok, row),
                lambda: first_failure(rest),
                lambda: first_failure(checks[:1]),
            )

        return first_failure(checks)

    return tf.cond(all_valid, lambda: tf.constant(""), failure)


def _slices(parts):
    return tf.data.Dataset.from_tensor_slices(tuple(parts))


def _boolean_mask(values, mask):
    if isinstance(values, tf.RaggedTensor):
        return tf.ragged.boolean_mask(values, mask)
    return tf.boolean_mask(values, mask)


def _join(parts):
    return tf.strings.join([_as_text(part) for part in parts])


def _as_text(part):
    if isinstance(part, str):
        return part
    part = tf.convert_to_tensor(part)
    return part if part.dtype == tf.string else tf.strings.as_string(part)


def error_message(error):
    """The message of a kerasbatch check in a TensorFlow error, as plain text.

    A record or file that fails a check inside a `tf.data` pipeline (in
    `model.fit`, or iterating a loader's dataset) raises a
    `tf.errors.InvalidArgumentError` whose text TensorFlow wraps in its own
    ("Graph execution error: ... assertion failed: [...] [[{{node ...}}]]"),
    with quotes and backslashes escaped. This returns kerasbatch's message
    alone, one sentence naming the file (and the record), as it was written.
    TensorFlow's parse errors that name a record (a value of another type
    than the manifest says, bytes that are no Example) come in the words of
    the other checks.

    Args:
        error: the exception, or its text.

    Returns:
        The message; for another error, the first line of TensorFlow's own
        message without its node names.

    Example:

    >>> import tempfile
    >>> import tensorflow as tf
    >>> from kerasbatch.io import error_message, read_file_records, write_dataset
    >>> tmp = tempfile.TemporaryDirectory()
    >>> _ = write_dataset(tmp.name, [{"x": 1}, {"x": 2}])
    >>> file = tmp.name + "/part-00000-of-00001.tfrecords"
    >>> with open(file, "r+b") as handle:  # cut the file short
    ...     _ = handle.truncate(30)
    >>> try:
    ...     list(read_file_records(file, None, file_size=30, num_records=2))
    ... except tf.errors.InvalidArgumentError as error:
    ...     print(error_message(error).replace(tmp.name, "/d"))
    TFRecord file /d/part-00000-of-00001.tfrecords is corrupt or truncated at record 1 (1 records read, filling 30 of its 30 bytes; record_counts in the manifest gives it 2): TFRecordLoader(on_error=skip) counts such files and keeps their intact records, and TFRecordLoader.check() lists every problem
    >>> tmp.cleanup()
    """
    text = getattr(error, "message", None)
    if not isinstance(text, str):
        text = str(error)
    lines = [line.strip() for line in text.splitlines()]
    for line in lines:
        match = _ASSERTION.search(line)
        if match:
            return _unescape(match.group(1))
    skipped = ("", "Graph execution error:", "<stack traces unavailable>")
    for line in lines:
        if line in skipped or line.startswith(("Detected at node", "[[")):
            continue
        line = re.sub(r"( \[\[.*\]\])? \[Op:[\w.]+\]( name: .*)?$", "", line)
        line = re.sub(r"^(\{\{function_node [^}]*\}\} )+", "", line)
        line = re.sub(
            r"^Error in user-defined function .*? Iterator::[\w:\[\]]+: ", "", line
        )
        return _parse_op_text(line)
    return text.strip()


#: An Assert's message: its data, here kerasbatch's one string, in brackets.
_ASSERTION = re.compile(r"assertion failed: \[(.*)\]$")
#: The escapes of TensorFlow's `Utf8SafeCEscape`, which Assert applies.
_ESCAPE = re.compile(r"\\(?:([nrt\"'\\])|([0-7]{3}))")
_ESCAPED = {"n": "\n", "r": "\r", "t": "\t"}


def _unescape(text):
    def character(match):
        if match.group(1) is not None:
            return _ESCAPED.get(match.group(1), match.group(1))
        return chr(int(match.group(2), 8))

    return _ESCAPE.sub(character, text)


def _parse_op_text(text):
    """A parse op's error that names its record, as `record N of file F:
    problem` in the words of the other checks; other text unchanged."""
    match = re.fullmatch(r"Invalid protocol message input, example id: (.+)", text)
    if match:
        return f"{match.group(1)}: {_UNPARSABLE}"
    match = re.fullmatch(r"Name: (record \d+ of file .+?), (.+)", text)
    if match:
        name, problem = match.groups()
        wrong_type = _WRONG_TYPE.fullmatch(problem)
        if wrong_type:
            feature, element, expected = wrong_type.groups()
            where = f"feature `{feature}`"
            if element is not None:
                where = f"feature list `{feature}` element {element}"
            problem = (
                f"{where} is stored as another type than the manifest says "
                f"(TensorFlow expected {expected})"
            )
        return f"{name}: {problem}"
    return text


def _error_text(error, file, index):
    """The problem in a TensorFlow error raised while iterating record
    `index` of `file`, without the file and record it names."""
    text = error_message(error)
    return text.removeprefix(f"record {index} of file {file}: ")
