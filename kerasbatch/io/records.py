"""Reading the records of one TFRecord file, with damage found and named.

TensorFlow reports a corrupt or truncated file as `DataLossError: corrupted
record at 2652`, without the file's name, and `ignore_errors()` silently
stops reading the file there. For an uncompressed file whose size is known,
`read_file_records` accounts for every byte instead: each record takes its
length plus 16 bytes of framing, so the records read fill the file exactly
unless it is damaged. The check costs one small op per block of records.
"""

import os
import sys

import tensorflow as tf

from kerasbatch.io import manifest as manifest_lib

ON_DAMAGE = ("raise", "skip")
TF_COMPRESSION = {None: "", "zlib": "ZLIB", "gzip": "GZIP"}
#: Bytes around each record: its length (8), the length's CRC (4), the data's CRC (4).
_RECORD_FRAMING = 16
_BLOCK = 1024


def read_file_records(
    file,
    compression,
    *,
    buffer_size=None,
    file_size=None,
    on_damage="raise",
    damaged_files=None,
):
    """The records of one TFRecord file as `(serialized, file, index)`.

    Args:
        file: the file's path, a string or scalar string tensor (e.g. inside
            `tf.data.Dataset.interleave`).
        compression: the manifest's compression: `"zlib"`, `"gzip"` or None.
        buffer_size: read buffer in bytes (None: TensorFlow's default).
        file_size: the file's size in bytes (an int or int64 tensor), to find
            damage in an uncompressed file: a corrupt or truncated file then
            fails naming the file and the first record not read
            (`on_damage="raise"`), or is read up to the damage and counted
            (`"skip"`). Without it, or for a compressed file, TensorFlow's
            `DataLossError` (which names no file) reports damage, and `"skip"`
            reads up to it without counting.
        on_damage: `"raise"` or `"skip"`.
        damaged_files: an int64 `tf.Variable` that `"skip"` adds 1 to for
            each damaged file.

    Returns:
        A `tf.data.Dataset` of `(serialized record, file, int64 index)`, what
        `make_parser`'s function takes (and, batched, `make_batch_parser`'s).

    Example:

    >>> import os
    >>> import tempfile
    >>> import tensorflow as tf
    >>> from kerasbatch.io import read_file_records, write_dataset
    >>> tmp = tempfile.TemporaryDirectory()
    >>> _ = write_dataset(tmp.name, [{"x": 1}, {"x": 2}])
    >>> file = tmp.name + "/part-00000-of-00001.tfrecords"
    >>> records = read_file_records(file, None, file_size=os.path.getsize(file))
    >>> [int(index) for _, _, index in records]
    [0, 1]
    >>> with open(file, "r+b") as f:  # cut the last record short
    ...     _ = f.truncate(os.path.getsize(file) - 3)
    >>> records = read_file_records(file, None, file_size=os.path.getsize(file) + 3)
    >>> try:
    ...     list(records)
    ... except tf.errors.InvalidArgumentError as error:
    ...     print("part-00000-of-00001.tfrecords] [is corrupt" in str(error))
    True
    >>> tmp.cleanup()
    """
    if compression not in manifest_lib.COMPRESSIONS:
        raise ValueError(
            f"compression must be 'zlib', 'gzip' or None, got {compression!r}."
        )
    if on_damage not in ON_DAMAGE:
        raise ValueError(f"on_damage must be 'raise' or 'skip', got {on_damage!r}.")
    if on_damage == "skip" and file_size is not None and damaged_files is None:
        raise ValueError("on_damage='skip' with a file_size needs damaged_files.")
    if not tf.is_tensor(file):
        file = os.fspath(file)
    file = tf.convert_to_tensor(file, tf.string)
    check_size = compression is None and file_size is not None
    skip_errors = check_size or on_damage == "skip"
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
    if check_size:  # an empty block marks the end, where the bytes are counted
        blocks = blocks.concatenate(
            tf.data.Dataset.from_tensors(tf.constant([], tf.string))
        )
        file_size = tf.cast(file_size, tf.int64)

    def number(state, block):
        read_bytes, read_records = state
        count = tf.size(block, out_type=tf.int64)
        numbered = (block, tf.fill([count], file), read_records + tf.range(count))
        read_bytes += tf.reduce_sum(
            tf.cast(tf.strings.length(block), tf.int64) + _RECORD_FRAMING
        )
        read_records += count
        if check_size:
            damaged = tf.logical_and(
                tf.equal(count, 0), tf.not_equal(read_bytes, file_size)
            )
            check = _damage_check(
                damaged,
                file,
                read_records,
                read_bytes,
                file_size,
                on_damage,
                damaged_files,
            )
            with tf.control_dependencies([check]):
                numbered = tf.nest.map_structure(tf.identity, numbered)
        return (read_bytes, read_records), numbered

    start = (tf.constant(0, tf.int64), tf.constant(0, tf.int64))
    return blocks.scan(start, number).unbatch()


def _existence_check(file):
    """Fails naming `file` when it does not exist (a string tensor)."""
    literal = tf.strings.regex_replace(file, r"([\[\]*?\\])", r"\\\1")
    return tf.debugging.Assert(
        tf.size(tf.io.matching_files(literal)) > 0,
        [
            "TFRecord file",
            file,
            "does not exist: it was deleted or moved after the dataset was built",
        ],
    )


def _damage_check(
    damaged, file, read_records, read_bytes, file_size, on_damage, damaged_files
):
    """Fails (`"raise"`) or counts and warns (`"skip"`) when `damaged`."""
    message = [
        "TFRecord file",
        file,
        "is corrupt or truncated at record",
        read_records,
        "(its records before fill",
        read_bytes,
        "of its",
        file_size,
        "bytes)",
    ]
    if on_damage == "raise":
        return tf.debugging.Assert(
            tf.logical_not(damaged),
            [
                *message,
                ": TFRecordLoader(on_error=`skip`) reads such files up to the "
                "damage, TFRecordLoader.check() lists every problem",
            ],
            summarize=1,
        )
    return tf.cond(damaged, lambda: _count_damage(damaged_files, message), tf.no_op)


def _count_damage(damaged_files, message):
    counted = damaged_files.assign_add(1)
    with tf.control_dependencies([counted]):
        return tf.print(
            "kerasbatch:",
            *message,
            "- skipped the rest of the file",
            output_stream=sys.stderr,
        )
