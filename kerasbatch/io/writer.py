"""Writing datasets: records → `.tfrecords` shards and a manifest."""

import dataclasses
import os

import numpy as np

from kerasbatch.data.sources import dtype_kind
from kerasbatch.io import manifest as manifest_lib
from kerasbatch.io.compressed_streams import TF_COMPRESSION
from kerasbatch.optional import tensorflow as tf

_OVERRIDE_KEYS = ("dtype", "shape", "var_len", "deserialize_type", "deserialize_args")
#: numpy dtype kinds each deserialize type stores without loss of meaning.
_KINDS = {"int": "biu", "float": "biuf", "string": "UO", "raw": "biufc"}
_INFERRED_TYPES = {"b": "int", "i": "int", "u": "int", "f": "float", "c": "raw"}
_INT64_MAX = np.iinfo(np.int64).max


def write_dataset(
    path,
    records,
    *,
    features=None,
    allow_var_len=None,
    compression=None,
    num_shards=1,
    shard_names=None,
    overwrite=False,
):
    """Writes records as a dataset: `.tfrecords` files and `__manifest__.json`.

    Every record is a dict `{feature name: array-like}` with the same
    features. What `features` does not set is inferred from the values:

    - `dtype` from the numpy dtype (str and bytes: `"string"`);
    - `deserialize_type` `"int"` for bool and integer values, `"float"` for
      floating ones (stored as float32), `"string"` for text and bytes and
      `"raw"` (little endian) for complex ones;
    - `var_len` True when a feature's first axis differs across records;
      its `shape` is then the trailing shape, which must agree;
    - `allow_var_len` True when any feature is `var_len`.

    The manifest records how many records each file holds
    (`record_counts`), so that readers find a file cut short or damaged
    anywhere, compressed or not, and count the records lost.

    Args:
        path: the dataset directory (created if needed).
        records: a list of record dicts, split in order into `num_shards`
            files of (nearly) equal counts; or a list of lists of record
            dicts, one file each (e.g. one long sequence per file, for the
            sequence loaders).
        features: optional `{name: {key: value}}` overriding any of `dtype`,
            `shape`, `var_len`, `deserialize_type` and `deserialize_args`
            (for `"raw"`, `endian` defaults to `"little"`; with `len` k > 1
            a fixed feature's arrays have the leading axis k and are written
            as k byte strings).
        allow_var_len: write `tf.train.SequenceExample`s (True) or
            `tf.train.Example`s (False); None infers it.
        compression: `"zlib"`, `"gzip"` or None.
        num_shards: the number of files a flat list of records is split into.
        shard_names: file names relative to `path` (subdirectories allowed,
            ending in `.tfrecords`), one per file; default
            `part-00000-of-00004.tfrecords` and so on.
        overwrite: replace a dataset already in `path`: its manifest and
            every `.tfrecords` file under it are deleted first. If False,
            such files are an error.

    Returns:
        The `Manifest` written, equal to `load_manifest(path)`.

    Raises:
        ValueError: records or settings that do not fit, naming the record
            and feature.
        TypeError: values that are not numbers, booleans, str or bytes.
        FileExistsError: `path` holds a dataset and `overwrite` is False.

    Example:

    >>> import os, tempfile
    >>> import numpy as np
    >>> from kerasbatch.io import write_dataset
    >>> tmp = tempfile.TemporaryDirectory()
    >>> manifest = write_dataset(tmp.name, [
    ...     {"tokens": np.array([3, 1, 4], "int32"), "label": 1},
    ...     {"tokens": np.array([1, 5], "int32"), "label": 0}], num_shards=2)
    >>> manifest.allow_var_len
    True
    >>> [(s.name, s.dtype, s.shape, s.var_len) for s in manifest.features]
    [('tokens', 'int32', (), True), ('label', 'int64', (), False)]
    >>> sorted(os.listdir(tmp.name))  # doctest: +NORMALIZE_WHITESPACE
    ['__manifest__.json', 'part-00000-of-00002.tfrecords',
     'part-00001-of-00002.tfrecords']
    >>> tmp.cleanup()
    """
    path = os.fspath(path)
    if compression not in manifest_lib.COMPRESSIONS:
        raise ValueError(
            f"compression must be 'zlib', 'gzip' or None, got {compression!r}."
        )
    if allow_var_len is not None and not isinstance(allow_var_len, bool):
        raise ValueError(
            f"allow_var_len must be True, False or None, got {allow_var_len!r}."
        )
    if features is None:
        features = {}
    if not isinstance(features, dict):
        raise TypeError(
            f"features must be a dict {{name: overrides}}, got {type(features).__name__}."
        )
    files = _convert(_split_records(records, num_shards))
    names = _shard_names(shard_names, len(files))
    columns = _columns(files)
    manifest = _make_manifest(columns, features, allow_var_len, compression, path)
    for spec in manifest.features:
        _check_values(spec, columns[spec.name])
    _clear_directory(path, overwrite)
    options = tf.io.TFRecordOptions(compression_type=TF_COMPRESSION[compression])
    for name, file_records in zip(names, files, strict=True):
        file_path = os.path.join(path, name)
        tf.io.gfile.makedirs(os.path.dirname(file_path))
        with tf.io.TFRecordWriter(file_path, options) as writer:
            for _, arrays in file_records:
                writer.write(_serialize(arrays, manifest))
    manifest = dataclasses.replace(
        manifest,
        record_counts={
            os.path.normpath(name).replace(os.sep, "/"): len(file_records)
            for name, file_records in zip(names, files, strict=True)
        },
    )
    manifest.save(path)  # last: an interrupted write leaves no loadable dataset
    return manifest


def write_list_file(path, files):
    """Writes the text file of a `list` dataset specifier: one path per line.

    Local paths are made absolute; URLs (`gs://...`) are kept as given.

    Args:
        path: the text file to write.
        files: the data file paths.

    Returns:
        `path`.

    Example:

    >>> import os, tempfile
    >>> from kerasbatch.io import write_list_file
    >>> tmp = tempfile.TemporaryDirectory()
    >>> list_file = write_list_file(
    ...     os.path.join(tmp.name, "train.txt"), ["/data/a.tfrecords", "gs://b/c.tfrecords"])
    >>> print(open(list_file).read(), end="")
    /data/a.tfrecords
    gs://b/c.tfrecords
    >>> tmp.cleanup()
    """
    path = os.fspath(path)
    if isinstance(files, str | bytes | os.PathLike) or not files:
        raise ValueError(f"files must be a non-empty list of paths, got {files!r}.")
    lines = []
    for index, file in enumerate(files):
        file = os.fspath(file)
        if not isinstance(file, str) or not file.strip() or "\n" in file:
            raise ValueError(f"files[{index}] is not a one-line path: {file!r}.")
        lines.append(file if "://" in file else os.path.abspath(file))
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write("".join(line + "\n" for line in lines))
    return path


def _split_records(records, num_shards):
    """Returns one list of `(label, record)` per file."""
    if not isinstance(records, list | tuple) or not records:
        raise TypeError(
            "records must be a non-empty list of record dicts (or of lists of "
            f"record dicts, one per file), got {type(records).__name__}."
        )
    if (
        not isinstance(num_shards, int)
        or isinstance(num_shards, bool)
        or num_shards < 1
    ):
        raise ValueError(f"num_shards must be an int >= 1, got {num_shards!r}.")
    if isinstance(records[0], list | tuple):
        if num_shards not in (1, len(records)):
            raise ValueError(
                f"records is a list of {len(records)} lists, one per file, so "
                f"num_shards={num_shards} must be left at 1."
            )
        files = []
        for index, file_records in enumerate(records):
            if not isinstance(file_records, list | tuple) or not file_records:
                raise TypeError(
                    f"records[{index}] must be a non-empty list of record dicts "
                    f"like records[0], got {type(file_records).__name__}."
                )
            files.append(
                [(f"records[{index}][{i}]", r) for i, r in enumerate(file_records)]
            )
    else:
        if num_shards > len(records):
            raise ValueError(
                f"num_shards={num_shards} is more than the {len(records)} records."
            )
        labelled = [(f"records[{i}]", r) for i, r in enumerate(records)]
        bounds = [i * len(records) // num_shards for i in range(num_shards + 1)]
        files = [labelled[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    for file_records in files:
        for label, record in file_records:
            if not isinstance(record, dict):
                raise TypeError(
                    f"{label} must be a dict of features, got {type(record).__name__}."
                )
    return files


def _shard_names(shard_names, num_files):
    if shard_names is None:
        return [f"part-{i:05d}-of-{num_files:05d}.tfrecords" for i in range(num_files)]
    if isinstance(shard_names, str) or len(shard_names) != num_files:
        raise ValueError(
            f"shard_names must list {num_files} file names, one per file, got "
            f"{shard_names!r}."
        )
    seen = set()
    for name in shard_names:
        if not isinstance(name, str) or not name.endswith(".tfrecords"):
            raise ValueError(
                f"shard name {name!r} must be a string ending in '.tfrecords'."
            )
        normal = os.path.normpath(name)
        if os.path.isabs(name) or "://" in name or normal.startswith(".."):
            raise ValueError(
                f"shard name {name!r} must be a path relative to the dataset "
                "directory, inside it."
            )
        if normal in seen:
            raise ValueError(f"shard name {name!r} is given twice.")
        seen.add(normal)
    return list(shard_names)


def _convert(files):
    """Each file's records as `(label, {name: np.ndarray})`, checked to share
    their features."""
    first_label, first = files[0][0]
    if not first:
        raise ValueError(f"{first_label} has no features.")
    converted = []
    for file_records in files:
        arrays = []
        for label, record in file_records:
            for name in record:
                if name not in first:
                    raise ValueError(
                        f"{label} has the feature {name!r} that {first_label} lacks; "
                        "every record needs the same features."
                    )
            for name in first:
                if name not in record:
                    raise ValueError(
                        f"{label} lacks the feature {name!r}; every record needs "
                        f"the features of {first_label}: {list(first)}."
                    )
            arrays.append(
                (label, {n: _to_array(record[n], f"{label}[{n!r}]") for n in first})
            )
        converted.append(arrays)
    return converted


def _columns(files):
    """`{feature name: [(where, array)]}` over every record, in order."""
    columns = {name: [] for name in files[0][0][1]}
    for file_records in files:
        for label, arrays in file_records:
            for name, array in arrays.items():
                columns[name].append((f"{label}[{name!r}]", array))
    return columns


def _to_array(value, where):
    try:
        array = np.asarray(value)
    except ValueError as error:
        raise ValueError(f"{where} is not a regular array: {error}") from None
    if array.dtype.kind == "S":  # fixed-width numpy bytes drop trailing NULs
        array = np.array(value, dtype=object)
    if array.dtype.kind == "O":
        for item in array.flat:
            if not isinstance(item, str | bytes):
                raise TypeError(
                    f"{where} holds a value of type {type(item).__name__}; values must be "
                    "numbers, booleans, str or bytes, in a regular array."
                )
    elif dtype_kind(array.dtype) not in "biufcU":
        raise TypeError(
            f"{where} has dtype {array.dtype}; values must be numbers, booleans, "
            "str or bytes."
        )
    return array


def _is_text(array):
    return array.dtype.kind in "UO"


def _make_manifest(columns, features, allow_var_len, compression, path):
    for name, override in features.items():
        if name not in columns:
            raise ValueError(
                f"features sets {name!r}, which the records lack; their features "
                f"are {list(columns)}."
            )
        if not isinstance(override, dict):
            raise TypeError(
                f"features[{name!r}] must be a dict, got {type(override).__name__}."
            )
        for key in override:
            if key not in _OVERRIDE_KEYS:
                raise ValueError(
                    f"features[{name!r}] has the unknown key {key!r}; the keys "
                    f"are {list(_OVERRIDE_KEYS)}."
                )
        if not isinstance(override.get("var_len", False), bool):
            raise ValueError(
                f"features[{name!r}]['var_len'] must be True or False, got "
                f"{override['var_len']!r}."
            )
        if not isinstance(override.get("shape", ()), list | tuple):
            raise ValueError(
                f"features[{name!r}]['shape'] must be a list of ints, got "
                f"{override['shape']!r}."
            )
    feature_dicts = [
        _infer_feature(name, column, features.get(name, {}))
        for name, column in columns.items()
    ]
    var_len = [f["name"] for f in feature_dicts if f["var_len"] is True]
    if allow_var_len is None:
        allow_var_len = bool(var_len)
    elif not allow_var_len and var_len:
        raise ValueError(
            f"Feature {var_len[0]!r} is variable-length (its first axis varies "
            "across records, or features sets var_len=True), but "
            "allow_var_len=False: only SequenceExample datasets hold sequences."
        )
    data = {
        "compression": compression,
        "allow_var_len": allow_var_len,
        "features": feature_dicts,
    }
    return manifest_lib.Manifest.from_dict(
        data, source=os.path.join(path, manifest_lib.MANIFEST_NAME)
    )


def _infer_feature(name, column, override):
    """The manifest entry of one feature: the override, the rest inferred."""
    filled = [(where, a) for where, a in column if a.size] or column
    texts = [where for where, a in filled if _is_text(a)]
    numbers = [where for where, a in filled if not _is_text(a)]
    if texts and numbers:
        raise TypeError(f"{texts[0]} holds text but {numbers[0]} holds numbers.")
    if texts:
        dtype, deserialize_type = "string", "string"
    else:
        numpy_dtype = np.result_type(*(a.dtype for _, a in filled))
        dtype = tf.as_dtype(numpy_dtype).name
        deserialize_type = _INFERRED_TYPES[dtype_kind(numpy_dtype)]
    deserialize_type = override.get("deserialize_type", deserialize_type)
    args = override.get("deserialize_args", {})
    if deserialize_type == "raw" and isinstance(args, dict):
        args = {"endian": "little", **args}
    raw_len = args.get("len", 1) if isinstance(args, dict) else 1
    var_len = override.get("var_len")
    shapes = [a.shape for _, a in column]
    if var_len is None:
        var_len = len(set(shapes)) > 1
    first_where = column[0][0]
    if var_len is True:
        for where, array in column:
            if array.ndim == 0:
                raise ValueError(
                    f"{where} is a scalar, but feature {name!r} is variable-length: "
                    "each record needs a first (sequence) axis."
                )
            if array.shape[1:] != shapes[0][1:]:
                raise ValueError(
                    f"{where} has shape {array.shape} but {first_where} has "
                    f"{shapes[0]}: only the first axis of feature {name!r} may "
                    "vary across records, its trailing shape must agree."
                )
        shape = shapes[0][1:]
    else:
        for where, array in column:
            if array.shape != shapes[0]:
                raise ValueError(
                    f"{where} has shape {array.shape} but {first_where} has "
                    f"{shapes[0]}, and feature {name!r} is fixed-length "
                    "(var_len=False)."
                )
        shape = shapes[0]
        if deserialize_type == "raw" and isinstance(raw_len, int) and raw_len > 1:
            if shape[:1] != (raw_len,):
                raise ValueError(
                    f"{first_where} has shape {shape}, but feature {name!r} has "
                    f"deserialize_args len {raw_len}: its arrays need the leading "
                    f"axis {raw_len}, one raw byte string each."
                )
            shape = shape[1:]
    if "shape" in override and tuple(override["shape"]) != tuple(shape):
        raise ValueError(
            f"{first_where} has shape {shapes[0]}, which does not fit the shape "
            f"{list(override['shape'])} that features sets for {name!r}."
        )
    return {
        "name": name,
        "dtype": override.get("dtype", dtype),
        "shape": list(shape),
        "var_len": var_len,
        "deserialize_type": deserialize_type,
        "deserialize_args": args,
    }


def _check_values(spec, column):
    kinds = _KINDS[spec.deserialize_type]
    for where, array in column:
        if array.size and dtype_kind(array.dtype) not in kinds:
            held = "text" if _is_text(array) else f"values of dtype {array.dtype}"
            raise TypeError(
                f"{where} holds {held}, which deserialize_type "
                f"{spec.deserialize_type!r} of feature {spec.name!r} cannot store."
            )
        if (
            spec.deserialize_type == "int"
            and array.dtype == np.uint64
            and array.size
            and array.max() > _INT64_MAX
        ):
            raise ValueError(
                f"{where} holds {array.max()}, more than an int64 list stores; "
                "use deserialize_type 'raw'."
            )


def _serialize(arrays, manifest):
    if not manifest.allow_var_len:
        feature = {
            spec.name: _feature(arrays[spec.name], spec, spec.raw_len)
            for spec in manifest.features
        }
        return tf.train.Example(
            features=tf.train.Features(feature=feature)
        ).SerializeToString()
    context = {}
    feature_lists = {}
    for spec in manifest.features:
        array = arrays[spec.name]
        if spec.var_len:
            elements = [_feature(array[t, ...], spec, 1) for t in range(len(array))]
            feature_lists[spec.name] = tf.train.FeatureList(feature=elements)
        else:
            context[spec.name] = _feature(array, spec, spec.raw_len)
    return tf.train.SequenceExample(
        context=tf.train.Features(feature=context),
        feature_lists=tf.train.FeatureLists(feature_list=feature_lists),
    ).SerializeToString()


def _feature(array, spec, raw_len):
    """One `tf.train.Feature`: a record's fixed feature or one list element."""
    if spec.deserialize_type == "int":
        return tf.train.Feature(
            int64_list=tf.train.Int64List(value=array.astype(np.int64).ravel().tolist())
        )
    if spec.deserialize_type == "float":
        return tf.train.Feature(
            float_list=tf.train.FloatList(
                value=array.astype(np.float32).ravel().tolist()
            )
        )
    if spec.deserialize_type == "string":
        values = [v.encode() if isinstance(v, str) else v for v in array.ravel()]
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    order = "<" if spec.deserialize_args["endian"] == "little" else ">"
    dtype = np.dtype(spec.tf_dtype.as_numpy_dtype).newbyteorder(order)
    parts = [array[i, ...] for i in range(raw_len)] if raw_len > 1 else [array]
    values = [part.astype(dtype).tobytes() for part in parts]
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def _clear_directory(path, overwrite):
    """Makes `path` an empty dataset directory (or refuses)."""
    if tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path):
        raise FileExistsError(f"{path} is a file, not a dataset directory.")
    existing = []
    if tf.io.gfile.isdir(path):
        for directory, _, names in tf.io.gfile.walk(path):
            existing += [
                os.path.join(directory, name)
                for name in names
                if name.endswith(".tfrecords")
                or (directory == path and name == manifest_lib.MANIFEST_NAME)
            ]
    if existing and not overwrite:
        raise FileExistsError(
            f"{path} already holds a dataset ({sorted(existing)[0]} and "
            f"{len(existing) - 1} more files); pass overwrite=True to replace it."
        )
    for file in existing:
        tf.io.gfile.remove(file)
    tf.io.gfile.makedirs(path)
