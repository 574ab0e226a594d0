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
"""

import os
import zlib

import numpy as np

from kerasbatch.io import manifest as manifest_lib
from kerasbatch.optional import tensorflow as tf

try:  # TensorFlow's C++ reader at an offset, CRCs checked
    from tensorflow.python.lib.io._pywrap_record_io import RandomRecordReader
except ImportError:  # pragma: no cover
    RandomRecordReader = None

ON_DAMAGE = ("raise", "skip")
TF_COMPRESSION = {None: "", "zlib": "ZLIB", "gzip": "GZIP"}
#: Bytes around each record: its length (8), the length's CRC (4), the data's CRC (4).
_RECORD_FRAMING = 16
_BLOCK = 1024
_UNKNOWN = -1
_WRONG = -2  # a stream size no read matches (a gzip file too short for a trailer)
_SCAN_CHUNK = 1 << 20


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
        end = _EndCheck(
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
        return tf.constant(_UNKNOWN, tf.int64)
    return tf.cast(value, tf.int64)


def gzip_stream_size(path, file_size=None):
    """A gzip file's uncompressed size mod 2**32, from its trailer (ISIZE).

    -2 (matching no size read) for a file too short to hold a gzip header and
    trailer, -1 when it cannot be read.
    """
    try:
        if file_size is None:
            file_size = tf.io.gfile.stat(path).length
        if int(file_size) < 18:
            return _WRONG
        with tf.io.gfile.GFile(path, "rb") as handle:
            handle.seek(int(file_size) - 4)
            trailer = handle.read(4)
    except (tf.errors.OpError, OSError, TypeError):
        return _UNKNOWN
    if len(trailer) != 4:
        return _WRONG
    return int.from_bytes(trailer, "little")


class _EndCheck:
    """At a file's end: checks what was read, then raises or counts.

    Called with the bytes and records read, it returns the records kept past
    the damage (empty unless `"skip"` recovers some).
    """

    def __init__(
        self,
        file,
        compression,
        stream_size,
        num_records,
        on_damage,
        damaged_files,
        lost_records,
        python_checks,
    ):
        self.file = file
        self.compression = compression
        self.stream_size = stream_size
        self.num_records = num_records
        self.on_damage = on_damage
        self.damaged_files = damaged_files
        self.lost_records = lost_records
        self.python_checks = python_checks

    def __call__(self, read_bytes, read_records):
        if self.compression == "zlib" and not self.python_checks:
            # without counts, only Python (zlib) finds a zlib stream cut short
            known = tf.debugging.Assert(
                self.num_records >= 0,
                [
                    tf.strings.join(
                        [
                            "TFRecord file ",
                            self.file,
                            " is zlib-compressed and has no record_counts in the "
                            "manifest, so its end cannot be checked here (where "
                            "no Python runs, e.g. a tf.data service worker) and "
                            "records lost to damage would go unnoticed: add the "
                            "counts with kerasbatch.io.add_record_counts(data_dir)",
                        ]
                    )
                ],
            )
            with tf.control_dependencies([known]):
                read_records = tf.identity(read_records)
        stream_size = self.stream_size
        if self.compression == "zlib" and self.python_checks:
            stream_size = tf.cond(
                tf.logical_and(tf.equal(stream_size, _UNKNOWN), self.num_records < 0),
                lambda: tf.reshape(
                    tf.numpy_function(_zlib_stream_size, [self.file], tf.int64), []
                ),
                lambda: stream_size,
            )
        read = read_bytes % 2**32 if self.compression == "gzip" else read_bytes
        bytes_ok = tf.logical_or(
            tf.equal(stream_size, _UNKNOWN), tf.equal(read, stream_size)
        )
        recovered = tf.constant([], tf.string)
        regions = tf.constant(0, tf.int64)
        if self.compression is None and self.on_damage == "skip" and self.python_checks:
            recovered, regions = tf.cond(
                bytes_ok,
                lambda: (recovered, regions),
                lambda: _recover_op(self.file, read_bytes),
            )
        total = read_records + tf.size(recovered, out_type=tf.int64)
        known = self.num_records >= 0
        count_ok = tf.logical_or(
            tf.logical_not(known), tf.equal(total, self.num_records)
        )
        damaged = tf.logical_not(tf.logical_and(bytes_ok, count_ok))
        lost = tf.where(
            known,
            tf.maximum(self.num_records - total, 0),
            tf.maximum(regions, 1),
        )

        def describe():
            """What was read, and what the file should hold, in parentheses."""
            parts = ["(", tf.strings.as_string(read_records), " records read"]
            if self.compression is None:
                parts += [
                    ", filling ",
                    tf.strings.as_string(read_bytes),
                    " of its ",
                    tf.strings.as_string(stream_size),
                    " bytes",
                ]
            else:
                parts += [
                    ", ",
                    tf.strings.as_string(read_bytes),
                    f" bytes of its {self.compression} stream",
                    self._stream_text(stream_size),
                ]
            parts += [
                tf.where(
                    known,
                    tf.strings.join(
                        [
                            "; record_counts in the manifest gives it ",
                            tf.strings.as_string(self.num_records),
                        ]
                    ),
                    "",
                ),
                ")",
            ]
            return tf.strings.join(parts)

        def damage_text():
            return tf.strings.join(
                [
                    "TFRecord file ",
                    self.file,
                    " is corrupt or truncated at record ",
                    tf.strings.as_string(read_records),
                    " ",
                    describe(),
                ]
            )

        if self.on_damage == "raise":
            text = tf.cond(
                damaged,
                lambda: tf.strings.join(
                    [
                        damage_text(),
                        ": TFRecordLoader(on_error=skip) counts such files and "
                        "keeps their intact records, and TFRecordLoader.check() "
                        "lists every problem",
                    ]
                ),
                lambda: tf.constant(""),
            )
            check = tf.debugging.Assert(tf.logical_not(damaged), [text])
        else:
            check = tf.cond(
                damaged,
                lambda: self._count(
                    read_records, lost, known, recovered, regions, damage_text()
                ),
                tf.no_op,
            )
        with tf.control_dependencies([check]):
            return tf.identity(recovered)

    def _stream_text(self, stream_size):
        """What a compressed file's stream should hold, as far as is known."""
        if self.compression == "gzip":
            return tf.where(
                tf.equal(stream_size, _UNKNOWN),
                "",
                tf.where(
                    tf.equal(stream_size, _WRONG),
                    ", in a file too short for a gzip trailer",
                    tf.strings.join(
                        [
                            ", while the last 4 bytes of the file (the trailer "
                            "of a whole gzip file) give ",
                            tf.strings.as_string(stream_size),
                            " (mod 2**32)",
                        ]
                    ),
                ),
            )
        return tf.where(
            tf.equal(stream_size, _UNKNOWN),
            "",
            tf.where(
                tf.equal(stream_size, _WRONG),
                ", a stream that is cut short or fails its checksum",
                tf.strings.join(
                    [", which holds ", tf.strings.as_string(stream_size), " bytes"]
                ),
            ),
        )

    def _count(self, read_records, lost, known, recovered, regions, text):
        """Counts the damaged file and its lost records, and warns on stderr.

        Without the manifest's `record_counts` the number of records lost is
        unknown, so the warning names what was lost instead of a number.
        """
        updates = [self.damaged_files.assign_add(1)]
        if self.lost_records is not None:
            updates.append(self.lost_records.assign_add(lost))
        kept = tf.size(recovered, out_type=tf.int64)
        kept_text = tf.where(
            tf.equal(kept, 0),
            "",
            tf.strings.join(
                [", kept ", tf.strings.as_string(kept), " record(s) after the damage"]
            ),
        )
        unknown = (
            " (how many records that is cannot be known without record_counts "
            "in the manifest)"
        )
        lost_text = tf.where(
            known,
            tf.strings.join(
                ["lost ", tf.strings.as_string(lost), " record(s)", kept_text]
            ),
            tf.where(
                tf.equal(kept, 0),
                tf.strings.join(
                    [
                        "lost the rest of the file from record ",
                        tf.strings.as_string(read_records),
                        unknown,
                    ]
                ),
                tf.strings.join(
                    [
                        "lost what ",
                        tf.strings.as_string(regions),
                        " damaged stretch(es) of bytes held from record ",
                        tf.strings.as_string(read_records),
                        " on",
                        unknown,
                        kept_text,
                    ]
                ),
            ),
        )
        message = tf.strings.join(["kerasbatch: ", text, ": ", lost_text, "."])
        with tf.control_dependencies(updates):
            # PrintV2 prints the text as it is (tf.print quotes and escapes it)
            return tf.raw_ops.PrintV2(input=message, output_stream="stderr", end="\n")


def _recover_op(file, offset):
    records, regions = tf.numpy_function(
        _recover, [file, offset], [tf.string, tf.int64], stateful=True
    )
    return tf.reshape(records, [-1]), tf.reshape(regions, [])


def _recover(file, offset):
    """The intact records of an uncompressed file from `offset` on, where
    TensorFlow's reader stopped: `(records, number of damaged stretches)`."""
    path = file.decode() if isinstance(file, bytes) else file
    records, damage = [], 0
    for kind, value in scan_records(path, int(offset)):
        if kind == "record":
            records.append(value)
        else:
            damage += 1
    return np.array(records + [b""], dtype=object)[:-1], np.int64(damage)


def scan_records(path, offset=0):
    """Reads an uncompressed TFRecord file, resynchronising after damage.

    Yields `("record", bytes)` for each intact record and `("damage",
    (start, end, problem))` for each damaged stretch of bytes: from where a
    record failed its CRCs or was cut short to the next offset whose length's
    CRC verifies and whose record reads intact (or the file's end).

    Args:
        path: the file (any path `tf.io.gfile` opens).
        offset: where to start, a record's first byte.
    """
    data = _read_bytes(path)
    reader = RandomRecordReader(path) if RandomRecordReader is not None else None
    position = int(offset)
    while position < len(data):
        record, after, problem = _read_at(data, position, reader)
        if problem is None:
            yield "record", record
            position = after
            continue
        start = position
        position = _next_record(data, position + 1, reader)
        yield "damage", (start, position, problem)


def _read_bytes(path):
    with tf.io.gfile.GFile(path, "rb") as handle:
        return handle.read()


def _read_at(data, position, reader):
    """`(record, next offset, None)` or `(None, None, problem)`."""
    if position + 12 > len(data):
        return None, None, f"truncated record header at byte {position}"
    header = data[position : position + 8]
    (stored,) = np.frombuffer(data[position + 8 : position + 12], "<u4")
    if masked_crc32c(header) != stored:
        return None, None, f"corrupted record length at byte {position}"
    (length,) = np.frombuffer(header, "<u8")
    end = position + 12 + int(length) + 4
    if end > len(data):
        return None, None, f"truncated record at byte {position}"
    if reader is not None:  # the data's CRC checked in C++
        try:
            record, after = reader.read(position)
        except Exception:  # noqa: BLE001 - DataLossError and the like
            return None, None, f"corrupted record data at byte {position}"
        return record, after, None
    record = data[position + 12 : end - 4]
    (stored,) = np.frombuffer(data[end - 4 : end], "<u4")
    if masked_crc32c(record) != stored:
        return None, None, f"corrupted record data at byte {position}"
    return record, end, None


def _next_record(data, start, reader):
    """The first offset from `start` whose record reads intact, else the end."""
    buffer = np.frombuffer(data, np.uint8)
    while start + 16 <= len(data):
        stop = min(len(data) - 15, start + _SCAN_CHUNK)
        matches = _length_crcs_match(buffer, start, stop)
        for candidate in start + np.flatnonzero(matches):
            if _read_at(data, int(candidate), reader)[2] is None:
                return int(candidate)
        start = stop
    return len(data)


def _length_crcs_match(buffer, start, stop):
    """For each offset in [start, stop): whether the 8 bytes there have the
    masked CRC-32C of the 4 after them (a record's length and its CRC)."""
    count = stop - start
    crc = np.full(count, 0xFFFFFFFF, np.uint32)
    for k in range(8):
        byte = buffer[start + k : start + k + count]
        crc = _CRC_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> np.uint32(8))
    crc ^= np.uint32(0xFFFFFFFF)
    stored = buffer[start + 8 : start + 8 + count + 3]
    stored = (
        stored[:count].astype(np.uint32)
        | (stored[1 : count + 1].astype(np.uint32) << np.uint32(8))
        | (stored[2 : count + 2].astype(np.uint32) << np.uint32(16))
        | (stored[3 : count + 3].astype(np.uint32) << np.uint32(24))
    )
    return _mask(crc) == stored


def _crc_table():
    table = np.zeros(256, np.uint32)
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table[n] = crc
    return table


_CRC_TABLE = _crc_table()


def _mask(crc):
    crc = np.asarray(crc, np.uint32)
    rotated = (crc >> np.uint32(15)) | (crc << np.uint32(17))
    return (rotated.astype(np.uint64) + 0xA282EAD8).astype(np.uint32)


def masked_crc32c(data):
    """TFRecord's masked CRC-32C of `data` (bytes), as a numpy uint32.

    In Python, byte by byte: for record headers, and for data only where
    TensorFlow's reader at an offset is not available.
    """
    crc = 0xFFFFFFFF
    table = _CRC_TABLE
    for byte in data:
        crc = int(table[(crc ^ byte) & 0xFF]) ^ (crc >> 8)
    return _mask(crc ^ 0xFFFFFFFF)


def _zlib_stream_size(file):
    """A zlib file's uncompressed size if its stream is whole and its
    checksum verifies, else -2 (read in Python, 1 MiB at a time)."""
    path = file.decode() if isinstance(file, bytes) else file
    return np.int64(verify_stream(path, "zlib")[0])


def verify_stream(path, compression):
    """Decompresses a zlib or gzip file in Python: `(size, problem)`.

    `size` is the uncompressed size, or -2 with `problem` (a message) when
    the stream is cut short, fails its checksum or is followed by other
    bytes.
    """
    wbits = 31 if compression == "gzip" else 15
    stream = zlib.decompressobj(wbits)
    size = 0
    try:
        with tf.io.gfile.GFile(path, "rb") as handle:
            while True:
                chunk = handle.read(_SCAN_CHUNK)
                if not chunk:
                    break
                if stream.eof:
                    return _WRONG, f"bytes after the end of the {compression} stream"
                size += len(stream.decompress(chunk))
                while stream.unconsumed_tail:
                    size += len(stream.decompress(stream.unconsumed_tail))
        size += len(stream.flush())
    except zlib.error as error:
        return _WRONG, f"the {compression} stream is corrupt ({error})"
    except (tf.errors.OpError, OSError) as error:
        return _WRONG, f"cannot read the file ({error})"
    if not stream.eof:
        return _WRONG, f"the {compression} stream is cut short (truncated file)"
    if stream.unused_data:
        return _WRONG, f"bytes after the end of the {compression} stream"
    return size, None


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
