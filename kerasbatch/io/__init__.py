"""TFRecord datasets described by a JSON manifest.

A dataset is a directory of `.tfrecords` files (or a list of them) and a
`__manifest__.json` that describes every feature: its dtype, shape, whether
it is a variable-length sequence, and how it is stored (`int`, `float`,
`string` or `raw` bytes). `write_dataset` writes one from numpy data,
`load_manifest` reads and validates a manifest, `make_parser` parses records
into tensors inside `tf.data` (`make_batch_parser` batches of them, faster),
and `check_dataset` finds every record that does not match its manifest;
`add_record_counts` stores each file's number of records in a manifest
written without them, so that readers find any file cut short;
`error_message` gives the plain message of a check that failed inside a
pipeline (in `model.fit`).
`TFRecordLoader` is the batch loader of a TFRecord + JSON-manifest input
pipeline: `independent`, `continuous_sequence` and `discrete_sequence`
loaders that build `(inputs, targets)` datasets for `model.fit`, batched by
the loader configuration's `target_batch_size` and `padding` or by a
`kerasbatch.StreamBucketBuilder`.
"""

from kerasbatch.io import needs_tensorflow  # noqa: F401  (first: a clear error)
from kerasbatch.io.dataset_check import DatasetCheck, check_dataset
from kerasbatch.io.dataset_parsing import parse_batches
from kerasbatch.io.error_messages import error_message
from kerasbatch.io.loader import TFRecordLoader
from kerasbatch.io.loader_config import LOADER_TYPES
from kerasbatch.io.manifest import (
    COMPRESSIONS,
    DESERIALIZE_TYPES,
    MANIFEST_NAME,
    FeatureSpec,
    Manifest,
    load_manifest,
)
from kerasbatch.io.parsing import make_batch_parser, make_parser
from kerasbatch.io.record_counts import add_record_counts
from kerasbatch.io.records import read_file_records
from kerasbatch.io.writer import write_dataset, write_list_file

__all__ = [
    "COMPRESSIONS",
    "LOADER_TYPES",
    "DESERIALIZE_TYPES",
    "MANIFEST_NAME",
    "DatasetCheck",
    "FeatureSpec",
    "Manifest",
    "TFRecordLoader",
    "add_record_counts",
    "check_dataset",
    "error_message",
    "load_manifest",
    "make_batch_parser",
    "make_parser",
    "parse_batches",
    "read_file_records",
    "write_dataset",
    "write_list_file",
]
