"""The checks at a TFRecord file's end: what was read against what it holds.

`read_file_records` numbers the records of a file as it reads them; at the
file's end an `EndCheck` compares the bytes and records read with the size
of the file's stream and the manifest's `record_counts`, and fails naming
the file (`on_damage="raise"`) or counts the damaged file and its lost
records and warns (`"skip"`), keeping the intact records past the damage of
an uncompressed file.
"""

import dataclasses

from kerasbatch.io.compressed_streams import UNKNOWN, WRONG, zlib_stream_size
from kerasbatch.io.record_scan import recover_op
from kerasbatch.optional import tensorflow as tf


@dataclasses.dataclass(frozen=True, eq=False)
class EndCheck:
    """At a file's end: checks what was read, then raises or counts.

    Called with the bytes and records read, it returns the records kept past
    the damage (empty unless `"skip"` recovers some).

    Attributes:
        file: the file's path, a string tensor.
        compression: the manifest's compression.
        stream_size, num_records: int64 tensors, what the file should hold
            (-1: unknown).
        on_damage, damaged_files, lost_records, python_checks: as for
            `read_file_records`.
    """

    file: object
    compression: str | None
    stream_size: object
    num_records: object
    on_damage: str
    damaged_files: object
    lost_records: object
    python_checks: bool

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
                tf.logical_and(tf.equal(stream_size, UNKNOWN), self.num_records < 0),
                lambda: tf.reshape(
                    tf.numpy_function(zlib_stream_size, [self.file], tf.int64), []
                ),
                lambda: stream_size,
            )
        read = read_bytes % 2**32 if self.compression == "gzip" else read_bytes
        bytes_ok = tf.logical_or(
            tf.equal(stream_size, UNKNOWN), tf.equal(read, stream_size)
        )
        recovered = tf.constant([], tf.string)
        regions = tf.constant(0, tf.int64)
        if self.compression is None and self.on_damage == "skip" and self.python_checks:
            recovered, regions = tf.cond(
                bytes_ok,
                lambda: (recovered, regions),
                lambda: recover_op(self.file, read_bytes),
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
        size = tf.strings.as_string(stream_size)
        if self.compression == "gzip":
            wrong = ", in a file too short for a gzip trailer"
            known = [
                ", while the last 4 bytes of the file (the trailer of a whole "
                "gzip file) give ",
                size,
                " (mod 2**32)",
            ]
        else:
            wrong = ", a stream that is cut short or fails its checksum"
            known = [", which holds ", size, " bytes"]
        return tf.where(
            tf.equal(stream_size, UNKNOWN),
            "",
            tf.where(tf.equal(stream_size, WRONG), wrong, tf.strings.join(known)),
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
