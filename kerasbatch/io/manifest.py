"""The dataset manifest: a JSON file describing the features of TFRecord files.

A dataset is a set of `.tfrecords` files and one `__manifest__.json` with

- `compression`: `"zlib"`, `"gzip"` or `null`;
- `allow_var_len`: `false` when every record is a `tf.train.Example` of
  fixed-length features, `true` when every record is a
  `tf.train.SequenceExample` whose `var_len` features are feature lists (one
  `Feature` per sequence element) and the others context features;
- `features`: one object per feature with `name`, `dtype` (a TensorFlow dtype
  name), `shape` (for `var_len` features: the shape of one sequence element),
  `var_len` (required when `allow_var_len` is true), `deserialize_type` and
  the optional `deserialize_args`;
- `record_counts` (optional, written by `kerasbatch.io.write_dataset`): the
  number of records in each data file, keyed by the file's path relative to
  the manifest's directory (`/`-separated). Readers compare it with the
  records they read, so a file cut short or damaged anywhere (compressed ones
  included) is found and its lost records counted.

Deserialize types: `"int"` (an int64 list, cast to `dtype`), `"float"` (a
float list, cast), `"string"` (a bytes list) and `"raw"` (bytes in a bytes
list decoded with `tf.io.decode_raw`; args `endian`, `"little"` or `"big"`,
required, and `len`, the number of byte strings per record, default 1: with
more, the tensors are stacked along a new first axis; ignored for `var_len`
features, whose every element is one byte string).
"""

import dataclasses
import difflib
import json
import math
import os

from kerasbatch.optional import tensorflow as tf

MANIFEST_NAME = "__manifest__.json"
DESERIALIZE_TYPES = ("int", "float", "string", "raw")
COMPRESSIONS = ("zlib", "gzip", None)
ENDIANS = ("little", "big")

#: dtypes that `tf.io.decode_raw` decodes (`"raw"` features).
RAW_DTYPES = (
    "bool",
    "int8",
    "uint8",
    "int16",
    "uint16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex64",
    "complex128",
)
#: The dtype names a manifest may use.
DTYPES = (*RAW_DTYPES, "uint32", "uint64", "string")

_MANIFEST_KEYS = ("compression", "allow_var_len", "features", "record_counts")
_REQUIRED_KEYS = ("compression", "allow_var_len", "features")
_FEATURE_KEYS = (
    "name",
    "dtype",
    "shape",
    "var_len",
    "deserialize_type",
    "deserialize_args",
)


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
    """One feature of a dataset, as its manifest describes it.

    Build specs with `Manifest.from_dict` or `load_manifest`, which validate.

    Attributes:
        name: the feature (or feature list) name in the protobufs.
        dtype: the TensorFlow dtype name of the parsed tensor.
        shape: tuple of ints; for `var_len` features, one element's shape.
        var_len: a feature list of any length (a `SequenceExample` only).
        deserialize_type: `"int"`, `"float"`, `"string"` or `"raw"`.
        deserialize_args: `{"endian": ..., "len": ...}` for `"raw"` (`len`
            filled in, default 1), else `{}`.

    Example:

    >>> from kerasbatch.io import Manifest
    >>> manifest = Manifest.from_dict({
    ...     "compression": None, "allow_var_len": True, "features": [
    ...         {"name": "audio", "dtype": "int16", "shape": [2], "var_len": True,
    ...          "deserialize_type": "raw", "deserialize_args": {"endian": "little"}},
    ...         {"name": "pair", "dtype": "float32", "shape": [3], "var_len": False,
    ...          "deserialize_type": "raw",
    ...          "deserialize_args": {"endian": "big", "len": 2}}]})
    >>> manifest.feature("audio").tensor_shape, manifest.feature("pair").tensor_shape
    ((None, 2), (2, 3))
    >>> manifest.feature("audio").tf_dtype
    tf.int16
    """

    name: str
    dtype: str
    shape: tuple
    var_len: bool
    deserialize_type: str
    deserialize_args: dict

    @property
    def tf_dtype(self):
        """The `tf.DType` of the parsed tensor."""
        return tf.as_dtype(self.dtype)

    @property
    def raw_len(self):
        """Byte strings per record of a fixed `"raw"` feature (else 1)."""
        if self.var_len:
            return 1
        return self.deserialize_args.get("len", 1)

    @property
    def num_values(self):
        """Values in one tensor of `shape` (one element of a `var_len` feature)."""
        return math.prod(self.shape)

    @property
    def tensor_shape(self):
        """The static shape of the parsed tensor of one record.

        `(None, *shape)` for `var_len` features, `(len, *shape)` for fixed
        `"raw"` features with `len` > 1, else `shape`.
        """
        if self.var_len:
            return (None, *self.shape)
        if self.raw_len > 1:
            return (self.raw_len, *self.shape)
        return self.shape

    def to_dict(self):
        """The feature's JSON object, with every key of the manifest format."""
        return {
            "name": self.name,
            "dtype": self.dtype,
            "shape": list(self.shape),
            "var_len": self.var_len,
            "deserialize_type": self.deserialize_type,
            "deserialize_args": dict(self.deserialize_args),
        }


@dataclasses.dataclass(frozen=True)
class Manifest:
    """A dataset manifest: compression, record format and features.

    Build manifests with `from_dict` or `load_manifest`, which validate, or
    get one from `kerasbatch.io.write_dataset`.

    Attributes:
        compression: `"zlib"`, `"gzip"` or None.
        allow_var_len: records are `tf.train.SequenceExample`s (True) or
            `tf.train.Example`s (False).
        features: tuple of `FeatureSpec`.
        record_counts: `{relative file path: number of records}`, or None
            (see the module's docstring); `records_in(file)` looks one up.

    Example:

    >>> import tempfile
    >>> from kerasbatch.io import Manifest, load_manifest
    >>> manifest = Manifest.from_dict({
    ...     "compression": "gzip", "allow_var_len": False, "features": [
    ...         {"name": "label", "dtype": "int32", "shape": [],
    ...          "deserialize_type": "int"}]})
    >>> manifest.names, manifest.feature("label").var_len
    (('label',), False)
    >>> tmp = tempfile.TemporaryDirectory()
    >>> manifest.save(tmp.name)  # doctest: +ELLIPSIS
    '.../__manifest__.json'
    >>> load_manifest(tmp.name) == manifest
    True
    >>> tmp.cleanup()
    """

    compression: str | None
    allow_var_len: bool
    features: tuple
    record_counts: dict | None = None

    @property
    def names(self):
        """The feature names, in manifest order."""
        return tuple(spec.name for spec in self.features)

    def feature(self, name):
        """The `FeatureSpec` named `name`; KeyError listing the names if none."""
        for spec in self.features:
            if spec.name == name:
                return spec
        raise KeyError(
            f"The manifest has no feature {name!r}; its features are "
            f"{_quoted(self.names)}."
        )

    def records_in(self, file, manifest_path):
        """The number of records `record_counts` gives `file`, or None.

        Args:
            file: a data file's path.
            manifest_path: the manifest file's path (or its directory), to
                which the keys of `record_counts` are relative.
        """
        if not self.record_counts:
            return None
        return self.record_counts.get(self.relative_name(file, manifest_path))

    @staticmethod
    def relative_name(file, manifest_path):
        """`file`'s key in `record_counts`: its path relative to the
        manifest's directory, `/`-separated; None for a file outside it."""
        directory = os.fspath(manifest_path)
        if directory.endswith(".json"):
            directory = os.path.dirname(directory)
        file = os.fspath(file)
        if "://" in file or "://" in directory:
            if not file.startswith(directory):
                return None
            return file[len(directory) :].lstrip("/")
        key = os.path.relpath(os.path.abspath(file), os.path.abspath(directory))
        return None if key.startswith("..") else key.replace(os.sep, "/")

    def to_dict(self):
        """The manifest as a JSON-ready dict with the keys of the format."""
        data = {
            "compression": self.compression,
            "allow_var_len": self.allow_var_len,
            "features": [spec.to_dict() for spec in self.features],
        }
        if self.record_counts is not None:
            data["record_counts"] = dict(self.record_counts)
        return data

    @classmethod
    def from_dict(cls, data, source="<dict>"):
        """Validates a manifest's JSON object and returns the `Manifest`.

        Args:
            data: the decoded JSON object.
            source: where it came from, named in every error message.

        Raises:
            ValueError: naming `source` and the key path of the first problem,
                e.g. `features[2].deserialize_args.endian`.
        """
        check = _Checker(source)
        check.object(data, "")
        check.keys(data, "", _MANIFEST_KEYS, required=_REQUIRED_KEYS)
        compression = data["compression"]
        if compression not in COMPRESSIONS:
            check.fail(
                "compression", f"must be 'zlib', 'gzip' or null, got {compression!r}"
            )
        allow_var_len = check.boolean(data["allow_var_len"], "allow_var_len")
        features = data["features"]
        if not isinstance(features, list | tuple):
            check.fail("features", f"must be a list, got {_json_type(features)}")
        if not features:
            check.fail("features", "is empty; a dataset needs at least one feature")
        specs = []
        first_index = {}
        for index, feature in enumerate(features):
            path = f"features[{index}]"
            spec = _feature_spec(check, feature, path, allow_var_len)
            if spec.name in first_index:
                check.fail(
                    f"{path}.name",
                    f"{spec.name!r} repeats features[{first_index[spec.name]}].name",
                )
            first_index[spec.name] = index
            specs.append(spec)
        counts = data.get("record_counts")
        if counts is not None:
            check.object(counts, "record_counts")
            for name, count in counts.items():
                if not _is_int(count) or count < 0:
                    check.fail(
                        f"record_counts[{name!r}]",
                        f"must be an int >= 0, got {count!r}",
                    )
            counts = dict(counts)
        return cls(compression, allow_var_len, tuple(specs), counts)

    def save(self, path):
        """Writes the manifest as JSON and returns the file's path.

        Args:
            path: a dataset directory (created if needed; the file is
                `__manifest__.json` in it) or a file path ending in `.json`.
        """
        path = os.fspath(path)
        if not path.endswith(".json"):
            tf.io.gfile.makedirs(path)
            path = os.path.join(path, MANIFEST_NAME)
        with tf.io.gfile.GFile(path, "w") as file:
            file.write(json.dumps(self.to_dict(), indent=2) + "\n")
        return path


def load_manifest(path):
    """Reads and validates a dataset manifest.

    Args:
        path: a dataset directory holding `__manifest__.json`, or the path of
            a manifest file.

    Returns:
        The `Manifest`.

    Raises:
        FileNotFoundError: no manifest at `path`.
        ValueError: invalid JSON (with line and column) or an invalid
            manifest (naming the file and the key path).

    Example:

    >>> import json, os, tempfile
    >>> from kerasbatch.io import load_manifest
    >>> tmp = tempfile.TemporaryDirectory()
    >>> with open(os.path.join(tmp.name, "__manifest__.json"), "w") as file:
    ...     json.dump({"compression": None, "allow_var_len": True, "features": [
    ...         {"name": "tokens", "dtype": "int32", "shape": [], "var_len": True,
    ...          "deserialize_type": "int"}]}, file)
    >>> load_manifest(tmp.name).feature("tokens").tensor_shape
    (None,)
    >>> tmp.cleanup()
    """
    path = os.fspath(path)
    if tf.io.gfile.isdir(path):
        path = os.path.join(path, MANIFEST_NAME)
        if not tf.io.gfile.exists(path):
            raise FileNotFoundError(
                f"No dataset manifest {path}: a dataset directory needs a "
                f"{MANIFEST_NAME} describing its features."
            )
    elif not tf.io.gfile.exists(path):
        raise FileNotFoundError(
            f"No dataset manifest at {path}: neither a directory nor a file."
        )
    with tf.io.gfile.GFile(path) as file:
        text = file.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"manifest {path}: invalid JSON at line {error.lineno}, column "
            f"{error.colno}: {error.msg}."
        ) from None
    return Manifest.from_dict(data, source=path)


def _feature_spec(check, feature, path, allow_var_len):
    check.object(feature, path)
    required = ["name", "dtype", "shape", "deserialize_type"]
    if allow_var_len:
        required.append("var_len")
    check.keys(feature, path, _FEATURE_KEYS, required=required)
    name = feature["name"]
    if not isinstance(name, str) or not name:
        check.fail(f"{path}.name", f"must be a non-empty string, got {name!r}")
    dtype = feature["dtype"]
    if dtype not in DTYPES:
        check.fail(
            f"{path}.dtype",
            f"must be one of the TensorFlow dtype names {_quoted(DTYPES)}, "
            f"got {dtype!r}",
        )
    shape = feature["shape"]
    if not isinstance(shape, list | tuple) or not all(
        _is_int(size) and size >= 0 for size in shape
    ):
        check.fail(
            f"{path}.shape", f"must be a list of non-negative ints, got {shape!r}"
        )
    var_len = check.boolean(feature.get("var_len", False), f"{path}.var_len")
    if var_len and not allow_var_len:
        check.fail(
            f"{path}.var_len",
            "is true, but allow_var_len is false: only SequenceExample "
            "datasets (allow_var_len true) have variable-length features",
        )
    deserialize_type = feature["deserialize_type"]
    if deserialize_type not in DESERIALIZE_TYPES:
        check.fail(
            f"{path}.deserialize_type",
            f"must be one of {_quoted(DESERIALIZE_TYPES)}, got {deserialize_type!r}",
        )
    _check_dtype_fits(check, path, dtype, deserialize_type)
    args_path = f"{path}.deserialize_args"
    args = feature.get("deserialize_args", {})
    check.object(args, args_path)
    if deserialize_type == "raw":
        check.keys(args, args_path, ("endian", "len"), required=("endian",))
        if args["endian"] not in ENDIANS:
            check.fail(
                f"{args_path}.endian",
                f"must be 'little' or 'big', got {args['endian']!r}",
            )
        raw_len = args.get("len", 1)
        if not _is_int(raw_len) or raw_len < 1:
            check.fail(f"{args_path}.len", f"must be an int >= 1, got {raw_len!r}")
        args = {"endian": args["endian"], "len": raw_len}
    elif args:
        check.fail(
            args_path,
            f"must be empty for deserialize_type {deserialize_type!r}, got {args!r}",
        )
    return FeatureSpec(
        name=name,
        dtype=dtype,
        shape=tuple(shape),
        var_len=var_len,
        deserialize_type=deserialize_type,
        deserialize_args=args,
    )


def _check_dtype_fits(check, path, dtype, deserialize_type):
    if deserialize_type == "string" and dtype != "string":
        check.fail(
            f"{path}.dtype",
            f"is {dtype!r}, but deserialize_type 'string' gives dtype "
            "'string'; numbers stored as bytes are deserialize_type 'raw'",
        )
    if deserialize_type in ("int", "float") and dtype == "string":
        check.fail(
            f"{path}.dtype",
            f"is 'string', but deserialize_type {deserialize_type!r} needs a "
            "numeric dtype (e.g. 'int64', 'float32'); text is deserialize_type "
            "'string'",
        )
    if deserialize_type == "raw" and dtype not in RAW_DTYPES:
        check.fail(
            f"{path}.dtype",
            f"is {dtype!r}, but deserialize_type 'raw' needs a dtype that "
            f"tf.io.decode_raw decodes: {_quoted(RAW_DTYPES)}",
        )


class _Checker:
    """Raises ValueErrors that name the manifest's source and a key path."""

    def __init__(self, source):
        self.source = source

    def fail(self, path, message):
        raise ValueError(f"manifest {self.source}: {path} {message}.")

    def object(self, value, path):
        if not isinstance(value, dict):
            self.fail(
                path or "the top level", f"must be an object, got {_json_type(value)}"
            )

    def boolean(self, value, path):
        if not isinstance(value, bool):
            self.fail(path, f"must be true or false, got {value!r}")
        return value

    def keys(self, data, path, allowed, required):
        where = path or "the top level"
        for key in data:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                self.fail(
                    where,
                    f"has the unknown key {key!r}{hint}; the keys are {_quoted(allowed)}",
                )
        for key in required:
            if key not in data:
                self.fail(where, f"is missing the required key {key!r}")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _quoted(names):
    return ", ".join(repr(name) for name in names)


def _json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
