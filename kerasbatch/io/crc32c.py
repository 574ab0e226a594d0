"""TFRecord's masked CRC-32C, computed with numpy.

Each TFRecord record stores the masked CRC-32C (Castagnoli) of its length and
of its data. `masked_crc32c` computes it for one byte string;
`length_crcs_match` tests many offsets of a buffer at once for a record
header (a length followed by its CRC), which is how a damaged file is read
on at the next intact record.
"""

import numpy as np


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


def length_crcs_match(buffer, start, stop):
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
