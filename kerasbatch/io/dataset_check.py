"""Checking a whole dataset: every record that does not match its manifest,
and every damaged file, named.

`check_dataset` reads and parses every record of a dataset's files in
Python, going on after each problem, and returns a `DatasetCheck` listing
them with the file and record of each: records that do not match the
manifest, values TensorFlow's parse op fails on, and corrupt, truncated or
missing files (found independently of TensorFlow's reader), with the records
each damaged file lost.
"""

import dataclasses
import os

import keras

from kerasbatch.engines.tf_data.as_written import traced_as_written
from kerasbatch.io.compressed_streams import TF_COMPRESSION, verify_stream
from kerasbatch.io.error_messages import record_problem
from kerasbatch.io.parsing import make_parser
from kerasbatch.io.record_scan import scan_records
from kerasbatch.optional import tensorflow as tf

_PROGRESS_EVERY = 100
_ERRORS_SHOWN = 5


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


@traced_as_written
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
            file, compression_type=TF_COMPRESSION[compression]
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
                text = record_problem(error, file, index)
                self.errors.append((file, index, f"cannot open the file: {text}"))
                self.records_per_file[file] = self.records_per_file.get(file, 0)
                return
            except tf.errors.DataLossError as error:
                if compression is None:  # read on past the damage
                    index, damage = self._scan(file, index)
                else:
                    text = record_problem(error, file, index)
                    self._damage(file, index, text)
                    damage += 1
                stopped = True
                break
            except tf.errors.InvalidArgumentError as error:
                self.errors.append((file, index, record_problem(error, file, index)))
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
            size, problem = verify_stream(file, compression)
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
        for kind, value in scan_records(file):
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
                self.errors.append((file, index, record_problem(error, file, index)))
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
