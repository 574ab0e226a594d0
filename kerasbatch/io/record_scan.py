"""Reading an uncompressed TFRecord file in Python, on past its damage.

TensorFlow's reader stops at the first damaged record. `scan_records` reads
every intact record instead: after a record that fails its CRCs or is cut
short it resynchronises at the next offset whose length's CRC verifies and
whose record reads intact. `recover_op` runs it inside a `tf.data` pipeline,
from where TensorFlow's reader stopped.
"""

import numpy as np

from kerasbatch.io.crc32c import length_crcs_match, masked_crc32c
from kerasbatch.optional import tensorflow as tf

try:  # TensorFlow's C++ reader at an offset, CRCs checked
    from tensorflow.python.lib.io._pywrap_record_io import RandomRecordReader
except ImportError:  # pragma: no cover
    RandomRecordReader = None

#: Bytes searched for the next record at a time.
_SCAN_CHUNK = 1 << 20


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


def recover_op(file, offset):
    """The intact records of uncompressed `file` (a string tensor) from
    `offset` on, where TensorFlow's reader stopped, as tensors: `(records,
    number of damaged stretches)`."""
    records, regions = tf.numpy_function(
        _recover, [file, offset], [tf.string, tf.int64], stateful=True
    )
    return tf.reshape(records, [-1]), tf.reshape(regions, [])


def _recover(file, offset):
    """`recover_op`'s work, in numpy."""
    path = file.decode() if isinstance(file, bytes) else file
    records, damage = [], 0
    for kind, value in scan_records(path, int(offset)):
        if kind == "record":
            records.append(value)
        else:
            damage += 1
    return np.array(records + [b""], dtype=object)[:-1], np.int64(damage)


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
        matches = length_crcs_match(buffer, start, stop)
        for candidate in start + np.flatnonzero(matches):
            if _read_at(data, int(candidate), reader)[2] is None:
                return int(candidate)
        start = stop
    return len(data)
