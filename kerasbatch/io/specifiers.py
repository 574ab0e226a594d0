"""Dataset specifiers: which manifest and which TFRecord files to read."""

import os

from kerasbatch.io.manifest import MANIFEST_NAME, load_manifest
from kerasbatch.io.validation import check_keys, string

SPECIFIER_TYPES = ("dir", "list")
DATA_FILE_EXTENSION = ".tfrecords"


def resolve(specifier, where="dataset"):
    """Returns `(manifest, files, manifest_path)` for a dataset specifier.

    Args:
        specifier: `{"type": "dir", "args": {"data_dir": ...}}` (every
            `.tfrecords` file under `data_dir`, recursively, sorted; the
            manifest at its top level) or `{"type": "list", "args":
            {"manifest_file": ..., "list_file": ...}}` (the files listed one
            per line in `list_file`; blank lines are skipped).
        where: how error messages name the specifier.

    Raises:
        ValueError: a malformed specifier, a missing manifest or list file,
            an empty directory or list, or a listed file that does not exist.
    """
    check_keys(specifier, {"type", "args"}, {"type", "args"}, where)
    kind, args = specifier["type"], specifier["args"]
    if kind not in SPECIFIER_TYPES:
        raise ValueError(
            f"{where}.type must be one of {SPECIFIER_TYPES}, got {kind!r}."
        )
    if kind == "dir":
        check_keys(args, {"data_dir"}, {"data_dir"}, f"{where}.args")
        return _from_directory(string(args["data_dir"], f"{where}.args.data_dir"))
    keys = {"manifest_file", "list_file"}
    check_keys(args, keys, keys, f"{where}.args")
    return _from_list(
        string(args["manifest_file"], f"{where}.args.manifest_file"),
        string(args["list_file"], f"{where}.args.list_file"),
    )


def manifest_location(specifier):
    """The manifest's path (or directory) of a resolved dataset specifier,
    which the keys of its `record_counts` are relative to."""
    if specifier["type"] == "dir":
        return specifier["args"]["data_dir"]
    return specifier["args"]["manifest_file"]


def _from_directory(data_dir):
    if not os.path.isdir(data_dir):
        raise ValueError(f"Data directory {data_dir} does not exist.")
    manifest_path = os.path.join(data_dir, MANIFEST_NAME)
    if not os.path.isfile(manifest_path):
        raise ValueError(
            f"Data directory {data_dir} has no {MANIFEST_NAME} at its top level."
        )
    files = sorted(
        os.path.join(root, name)
        for root, _, names in os.walk(data_dir)
        for name in names
        if name.endswith(DATA_FILE_EXTENSION)
    )
    if not files:
        raise ValueError(
            f"Data directory {data_dir} holds no {DATA_FILE_EXTENSION} file (searched recursively)."
        )
    return load_manifest(manifest_path), files, manifest_path


def _from_list(manifest_file, list_file):
    if not os.path.isfile(list_file):
        raise ValueError(f"List file {list_file} does not exist.")
    with open(list_file) as file:
        lines = [(number, line.strip()) for number, line in enumerate(file, 1)]
    files = [path for _, path in lines if path]
    if not files:
        raise ValueError(f"List file {list_file} lists no data file.")
    for number, path in lines:
        if path and "://" not in path and not os.path.isfile(path):
            raise ValueError(
                f"List file {list_file}, line {number}: data file {path} does not exist."
            )
    return load_manifest(manifest_file), files, manifest_file
