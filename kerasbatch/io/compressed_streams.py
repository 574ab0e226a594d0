"""The compressed streams of TFRecord files: their names and their sizes.

A manifest's compression (`"zlib"`, `"gzip"` or None) is one of TensorFlow's
`compression_type`s (`TF_COMPRESSION`). How many bytes a file's stream holds
uncompressed is what its records must fill: a gzip file's trailer gives it
(`gzip_stream_size`); a zlib stream is decompressed in Python to find it,
and to find a stream cut short or failing its checksum (`verify_stream`).
"""

import zlib

import numpy as np

from kerasbatch.optional import tensorflow as tf

#: TensorFlow's `compression_type` for each of the manifest's compressions.
TF_COMPRESSION = {None: "", "zlib": "ZLIB", "gzip": "GZIP"}
#: A size (or a number of records) that is not known.
UNKNOWN = -1
#: A stream size no read matches (a gzip file too short for a trailer).
WRONG = -2
#: Bytes read at a time.
_READ_CHUNK = 1 << 20


def gzip_stream_size(path, file_size=None):
    """A gzip file's uncompressed size mod 2**32, from its trailer (ISIZE).

    -2 (matching no size read) for a file too short to hold a gzip header and
    trailer, -1 when it cannot be read.
    """
    try:
        if file_size is None:
            file_size = tf.io.gfile.stat(path).length
        if int(file_size) < 18:
            return WRONG
        with tf.io.gfile.GFile(path, "rb") as handle:
            handle.seek(int(file_size) - 4)
            trailer = handle.read(4)
    except (tf.errors.OpError, OSError, TypeError):
        return UNKNOWN
    if len(trailer) != 4:
        return WRONG
    return int.from_bytes(trailer, "little")


def zlib_stream_size(file):
    """A zlib file's uncompressed size if its stream is whole and its
    checksum verifies, else -2 (read in Python, 1 MiB at a time).

    For `tf.numpy_function`: `file` may be bytes, the result is an int64.
    """
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
                chunk = handle.read(_READ_CHUNK)
                if not chunk:
                    break
                if stream.eof:
                    return WRONG, f"bytes after the end of the {compression} stream"
                size += len(stream.decompress(chunk))
                while stream.unconsumed_tail:
                    size += len(stream.decompress(stream.unconsumed_tail))
        size += len(stream.flush())
    except zlib.error as error:
        return WRONG, f"the {compression} stream is corrupt ({error})"
    except (tf.errors.OpError, OSError) as error:
        return WRONG, f"cannot read the file ({error})"
    if not stream.eof:
        return WRONG, f"the {compression} stream is cut short (truncated file)"
    if stream.unused_data:
        return WRONG, f"bytes after the end of the {compression} stream"
    return size, None
