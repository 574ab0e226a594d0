"""Reading the records of one TFRecord file, with damage found, named and counted.

TensorFlow reports a corrupt or truncated file as `DataLossError: corrupted
record at 2652`, without the file's name, or, when a compressed file is cut
short, not at all: its records end at the cut. `read_file_records` instead
reads past TensorFlow's errors and checks, at each file's end, what it read
against what the file should hold:

- the bytes: each record takes its length plus 16 bytes of framing, so the
  records of an uncompressed file fill its size exactly, and those of a gzip
  file its uncompressed size, which the gzip trailer holds (ISIZE, mod 2**32);
  a zlib stream's size is found by decompressing it in Python at the end;
- the number of records, when the manifest's `record_counts` gives it
  (`kerasbatch.io.write_dataset` writes it), for any compression.

A damaged file then fails naming the file and the first record not read
(`on_damage="raise"`), or is counted with its lost records and a warning
(`"skip"`). In an uncompressed file, `"skip"` goes on after the damage: a
Python reader (for damaged files only) scans for the next offset whose
length's CRC verifies and keeps every intact record after it. The checks
cost one small op per block of 1024 records.

The checks at a file's end are in `kerasbatch.io.file_end_check`, the
Python reader in `kerasbatch.io.record_scan`, the stream sizes in
`kerasbatch.io.compressed_streams`.
"""

import os

from kerasbatch.engines.tf_data.as_written import traced_as_written
from kerasbatch.io import manifest as manifest_lib
from kerasbatch.io.compressed_streams import (
    TF_COMPRESSION,
    UNKNOWN,
    gzip_stream_size,
)
from kerasbatch.io.file_end_check import EndCheck
from kerasbatch.optional import tensorflow as tf

ON_DAMAGE = ("raise", "skip")
#: Bytes around each record: its length (8), the length's CRC (4), the data's CRC (4).
_RECORD_FRAMING = 16
_BLOCK = 1024


@traced_as_written
def read_file_records(
    file,
    compression,
    *,
    buffer_size=None,
    file_size=None,
    num_records=None,
    stream_size=None,
    on_damage="raise",
    damaged_files=None,
    lost_records=None,
    python_checks=True,
):
    """The records of one TFRecord file as `(serialized, file, index)`.

    Args:
        file: the file's path, a string or scalar string tensor (e.g. inside
            `tf.data.Dataset.interleave`).
        compression: the manifest's compression: `"zlib"`, `"gzip"` or None.
        buffer_size: read buffer in bytes (None: TensorFlow's default).
        file_size: the file's size in bytes (an int or int64 tensor), to find
            damage by counting bytes (see the module's docstring): a damaged
            file then fails naming the file and the first record not read
            (`on_damage="raise"`), or is counted (`"skip"`). For a gzip file
            given as a Python string, the trailer's size is read from it.
        num_records: the number of records the file holds (an int or int64
            tensor, -1 for unknown), e.g. from the manifest's
            `record_counts`: fewer or more records read is damage too.
        stream_size: the uncompressed stream's size in bytes, if known (for
            a gzip file, its trailer's ISIZE; -1 for unknown). Found from the
            file when None.
        on_damage: `"raise"` or `"skip"`.
        damaged_files: an int64 `tf.Variable` that `"skip"` adds 1 to for
            each damaged file.
        lost_records: an int64 `tf.Variable` that `"skip"` adds the records
            lost in each damaged file to: exact with `num_records`, else the
            number of damaged stretches (at least 1 per damaged file), a
            lower bound, since how many records a stretch held cannot be
            known without the counts (the warning then names the records
            lost, "the rest of the file from record N", without a number).
        python_checks: allow the Python parts (a zlib stream's check, the
            scan past damage in an uncompressed file), which run only at a
            file's end and for damaged files. Without them (e.g. for the
            tf.data service, which cannot run Python) a zlib file needs
            `num_records` (else its end fails, naming
            `kerasbatch.io.add_record_counts`), and `"skip"` reads a damaged
            uncompressed file up to the damage (the records after it are
            counted as lost).

    Returns:
        A `tf.data.Dataset` of `(serialized record, file, int64 index)`, what
        `make_parser`'s function takes (and, batched, `make_batch_parser`'s).
        Records kept after damage are numbered on from the last record read
        before it.

    Example:

    >>> import os
    >>> import tempfile
    >>> import tensorflow as tf
    >>> from kerasbatch.io import read_file_records, write_dataset
    >>> tmp = tempfile.TemporaryDirectory()
    >>> _ = write_dataset(tmp.name, [{"x": 1}, {"x": 2}, {"x": 3}])
    >>> file = tmp.name + "/part-00000-of-00001.tfrecords"
    >>> size = os.path.getsize(file)
    >>> records = read_file_records(file, None, file_size=size)
    >>> [int(index) for _, _, index in records]
    [0, 1, 2]
    >>> with open(file, "r+b") as f:  # flip a bit in the second record's data
    ...     _ = f.seek(size // 2)
    ...     byte = f.read(1)
    ...     _ = f.seek(size // 2)
    ...     _ = f.write(bytes([byte[0] ^ 1]))
    >>> records = read_file_records(file, None, file_size=size, num_records=3)
    >>> try:
    ...     list(records)
    ... except tf.errors.InvalidArgumentError as error:
    ...     print("part-00000-of-00001.tfrecords is corrupt or truncated" in str(error))
    True
    >>> damaged, lost = tf.Variable(0, dtype=tf.int64), tf.Variable(0, dtype=tf.int64)
    >>> records = read_file_records(file, None, file_size=size, num_records=3,
    ...     on_damage="skip", damaged_files=damaged, lost_records=lost)
    >>> [int(index) for _, _, index in records]  # the third is kept
    [0, 1]
    >>> int(damaged.numpy()), int(lost.numpy())
    (1, 1)
    >>> tmp.cleanup()
    """
    if compression not in manifest_lib.COMPRESSIONS:
        raise ValueError(
            f"compression must be 'zlib', 'gzip' or None, got {compression!r}."
        )
    if on_damage not in ON_DAMAGE:
        raise ValueError(f"on_damage must be 'raise' or 'skip', got {on_damage!r}.")
    if stream_size is None and file_size is not None:
        if compression is None:
            stream_size = file_size
        elif compression == "gzip" and not tf.is_tensor(file):
            stream_size = gzip_stream_size(file, file_size)
    checked = (
        stream_size is not None or num_records is not None or compression == "zlib"
    )
    if on_damage == "skip" and checked and damaged_files is None:
        raise ValueError("on_damage='skip' with checks needs damaged_files.")
    if not tf.is_tensor(file):
        file = os.fspath(file)
    file = tf.convert_to_tensor(file, tf.string)
    skip_errors = checked or on_damage == "skip"
    if skip_errors:
        # `ignore_errors` would retry a missing file's "not found" forever.
        with tf.control_dependencies([_existence_check(file)]):
            file = tf.identity(file)
    records = tf.data.TFRecordDataset(
        file, compression_type=TF_COMPRESSION[compression], buffer_size=buffer_size
    )
    if skip_errors:
        records = records.ignore_errors()
    # Records are numbered a block at a time, then unbatched: a function call
    # per record (enumerate + map, or zip with a repeated file name) costs
    # ten times what reading does.
    blocks = records.batch(_BLOCK)
    if checked:  # an empty block marks the end, where the checks run
        blocks = blocks.concatenate(
            tf.data.Dataset.from_tensors(tf.constant([], tf.string))
        )
        end = EndCheck(
            file,
            compression,
            _int64(stream_size),
            _int64(num_records),
            on_damage,
            damaged_files,
            lost_records,
            python_checks,
        )

    def number(state, block):
        read_bytes, read_records = state
        if checked:
            block = tf.cond(
                tf.equal(tf.size(block), 0),
                lambda: end(read_bytes, read_records),
                lambda: block,
            )
        count = tf.size(block, out_type=tf.int64)
        numbered = (block, tf.fill([count], file), read_records + tf.range(count))
        read_bytes += tf.reduce_sum(
            tf.cast(tf.strings.length(block), tf.int64) + _RECORD_FRAMING
        )
        return (read_bytes, read_records + count), numbered

    start = (tf.constant(0, tf.int64), tf.constant(0, tf.int64))
    return blocks.scan(start, number).unbatch()


def _int64(value):
    if value is None:
        return tf.constant(UNKNOWN, tf.int64)
    return tf.cast(value, tf.int64)


def _existence_check(file):
    """Fails naming `file` when it does not exist (a string tensor)."""
    literal = tf.strings.regex_replace(file, r"([\[\]*?\\])", r"\\\1")
    return tf.debugging.Assert(
        tf.size(tf.io.matching_files(literal)) > 0,
        [
            tf.strings.join(
                [
                    "TFRecord file ",
                    file,
                    " does not exist: it was deleted or moved after the dataset "
                    "was built",
                ]
            )
        ],
    )
