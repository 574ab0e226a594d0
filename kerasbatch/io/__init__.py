"""Data on disk: TFRecord datasets described by a JSON manifest, and token files.

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
`kerasbatch.StreamBucketBuilder`. These need TensorFlow, imported on first
use (where it is missing, an ImportError says so).

`TokenFile` and `TokenFileWriter` read and write a flat token file (token
ids plus an index of offsets, read by positioned reads): a random-access source that
every builder reads by index. They need NumPy only.
"""

import importlib
from typing import TYPE_CHECKING

from kerasbatch.io.token_file import TokenFile, TokenFileWriter, write_token_file

if TYPE_CHECKING:  # for type checkers and the API reference; imported lazily below
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

#: The names that read or write TFRecords, imported on first use: they need
#: TensorFlow (where it is missing, an ImportError says so).
_TENSORFLOW_NAMES = {
    "COMPRESSIONS": "manifest",
    "DESERIALIZE_TYPES": "manifest",
    "DatasetCheck": "dataset_check",
    "FeatureSpec": "manifest",
    "LOADER_TYPES": "loader_config",
    "MANIFEST_NAME": "manifest",
    "Manifest": "manifest",
    "TFRecordLoader": "loader",
    "add_record_counts": "record_counts",
    "check_dataset": "dataset_check",
    "error_message": "error_messages",
    "load_manifest": "manifest",
    "make_batch_parser": "parsing",
    "make_parser": "parsing",
    "parse_batches": "dataset_parsing",
    "read_file_records": "records",
    "write_dataset": "writer",
    "write_list_file": "writer",
}


def __getattr__(name):
    """The TFRecord names, imported (with TensorFlow) on first use."""
    if name not in _TENSORFLOW_NAMES:
        raise AttributeError(f"module 'kerasbatch.io' has no attribute {name!r}")
    importlib.import_module("kerasbatch.io.needs_tensorflow")
    value = getattr(
        importlib.import_module(f"kerasbatch.io.{_TENSORFLOW_NAMES[name]}"), name
    )
    globals()[name] = value
    return value


__all__ = [
    "TokenFile",
    "TokenFileWriter",
    "write_token_file",
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
