"""Adding `record_counts` to the manifest of a dataset written without them."""

import dataclasses
import os

from kerasbatch.io import specifiers
from kerasbatch.io.dataset_check import check_dataset
from kerasbatch.io.specifiers import SPECIFIER_TYPES

#: How `check_dataset` words damage to a file (not to one record).
_FILE_PROBLEMS = ("corrupt or truncated file", "cannot open the file")


def add_record_counts(dataset, *, verbose=1):
    """Counts the records of every data file and stores the counts in the manifest.

    `kerasbatch.io.write_dataset` stores each file's number of records in
    the manifest (`record_counts`), so that readers find any file cut short
    or damaged and count exactly the records lost, compressed files
    included. This adds them to a dataset written another way: it reads
    every file whole (`check_dataset`, with a progress bar), and refuses
    to count a file that is damaged (a count must describe the intact
    file). Records that do not match the manifest still count: readers
    read them, and skip or name them.

    A zlib-compressed dataset needs the counts to be read on tf.data
    service workers, where the stream's own check (in Python) cannot run.

    Args:
        dataset: a data directory (its `__manifest__.json` and every
            `.tfrecords` file under it) or a dataset specifier, as
            `TFRecordLoader`'s `dataset` (a `"list"` one counts the listed
            files, which must lie under the manifest's directory).
        verbose: show a progress bar over the records (0: silent).

    Returns:
        The `Manifest` saved, with the counts of these files added to any
        it had.

    Raises:
        ValueError: a damaged or unreadable file (naming each, with the
            record where the damage starts), or a listed file outside the
            manifest's directory.

    Example:

    >>> import dataclasses
    >>> import tempfile
    >>> from kerasbatch.io import add_record_counts, load_manifest, write_dataset
    >>> tmp = tempfile.TemporaryDirectory()
    >>> manifest = write_dataset(tmp.name, [{"x": [1, 2]}] * 5, num_shards=2)
    >>> # as if written by another tool: no record_counts
    >>> _ = dataclasses.replace(manifest, record_counts=None).save(tmp.name)
    >>> load_manifest(tmp.name).record_counts is None
    True
    >>> add_record_counts(tmp.name, verbose=0).record_counts
    {'part-00000-of-00002.tfrecords': 2, 'part-00001-of-00002.tfrecords': 3}
    >>> tmp.cleanup()
    """
    if isinstance(dataset, str | os.PathLike):
        dataset = {"type": "dir", "args": {"data_dir": os.fspath(dataset)}}
    elif not isinstance(dataset, dict):
        raise TypeError(
            "dataset must be a data directory or a dataset specifier "
            f"({{'type': one of {SPECIFIER_TYPES}, 'args': ...}}), got "
            f"{type(dataset).__name__}."
        )
    manifest, files, manifest_path = specifiers.resolve(dataset)
    keys = {}
    for file in files:
        key = manifest.relative_name(file, manifest_path)
        if key is None:
            raise ValueError(
                f"Data file {file} is not under the manifest's directory "
                f"({os.path.dirname(manifest_path)}): record_counts names files "
                "relative to it."
            )
        keys[file] = key
    check = check_dataset(manifest, files, verbose=verbose)
    damaged = [
        f"  {file}, from record {index}: {text}"
        for file, index, text in check.errors
        if text.startswith(_FILE_PROBLEMS)
    ]
    if damaged:
        raise ValueError(
            "Cannot count the records of damaged files (a count must describe "
            "the intact file; rewrite or restore them):\n" + "\n".join(damaged)
        )
    counts = dict(manifest.record_counts or {})
    counts.update({keys[file]: check.records_per_file[file] for file in files})
    manifest = dataclasses.replace(manifest, record_counts=counts)
    manifest.save(manifest_path)
    return manifest
