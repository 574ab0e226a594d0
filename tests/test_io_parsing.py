"""Parsing records: exact round trips, errors naming file and record, checks.

Most tests run with `make_parser` (`batch_size` None) and with
`make_batch_parser` over batches of `batch_size` records, unbatched.
"""

import functools
import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from kerasbatch.io import (
    DatasetCheck,
    Manifest,
    check_dataset,
    make_batch_parser,
    make_parser,
    read_file_records,
    write_dataset,
)

BFLOAT16 = tf.bfloat16.as_numpy_dtype
#: None: `make_parser`; else `make_batch_parser` over batches of that many.
BATCH_SIZES = [None, 2]
KINDS = ["example", "sequence_example"]


def raw(endian="little", **args):
    return {"deserialize_type": "raw", "deserialize_args": {"endian": endian, **args}}


def example_records():
    """Fixed-length features of every deserialize type (tf.train.Example)."""
    records = [
        {
            "label": np.int8(-i),
            "flags": np.array([i % 2, 1], bool),
            "scores": np.arange(6, dtype="float32").reshape(2, 3) / (i + 1),
            "ids": np.uint64(2**40 + i),
            "word": f"wörd {i}",
            "blobs": np.array([b"\x00a\x00", b"b" * i], dtype=object),
            "little": np.arange(3, dtype="int32") * (i - 5),
            "big": np.array([[1.5, -2], [i, 1e300]], "float64"),
            "triple": np.arange(6, dtype="int16").reshape(3, 2) - i,
            "brain": np.array([0.5, i], BFLOAT16),
            "complex": np.array([1 + 2j, -i], "complex64"),
            "nothing": np.zeros((0,), "float32"),
        }
        for i in range(5)
    ]
    features = {
        "little": raw("little"),
        "big": raw("big"),
        "triple": raw("big", len=3),
        "brain": raw("big"),
        "complex": raw("big"),
    }
    return records, features


def sequence_records():
    """Context and feature-list features (tf.train.SequenceExample)."""
    records = [
        {
            "label": np.int64(i),
            "pair": np.ones((2, 3), "float32") * i,
            "caption": "x" * i,
            "tokens": np.arange(n, dtype="int32"),
            "frames": np.linspace(0, 1, n * 2, dtype="float32").reshape(n, 2),
            "words": np.array([f"w{k}" for k in range(n)], dtype=object),
            "audio": np.arange(n * 2, dtype="int16").reshape(n, 2) - 3,
            "wave": np.linspace(-1, 1, n),
            "bits": np.arange(n) % 3 == 0,
            "blank": np.zeros((n, 0), "float32"),
        }
        for i, n in enumerate([3, 0, 1, 5, 2])
    ]
    features = {
        "pair": raw("little", len=2),
        "words": {"var_len": True},
        "audio": raw("little"),
        "wave": raw("big"),
        "bits": raw("little"),
        "blank": {"var_len": True},
    }
    return records, features


def data_files(path):
    return sorted(
        os.path.join(path, name)
        for name in os.listdir(path)
        if name.endswith(".tfrecords")
    )


def parse_records(records, manifest, names=None, on_error="raise", batch_size=None):
    """`records` parsed by `make_parser`, or by `make_batch_parser` in batches
    of `batch_size` and unbatched. `records` is a dataset or a list of them
    (one per file, each batched on its own), parsed by one `map`: the parse
    function is traced once, however many files."""
    if not isinstance(records, list):
        records = [records]
    if batch_size is not None:
        records = [file_records.batch(batch_size) for file_records in records]
    joined = functools.reduce(tf.data.Dataset.concatenate, records)
    if batch_size is None:
        return joined.map(make_parser(manifest, names, on_error=on_error))
    parse = make_batch_parser(manifest, names, on_error=on_error)
    return joined.map(parse).unbatch()


def unbatchable(manifest):
    """The features but fixed ones of no values: `Dataset.unbatch()` crashes
    on numeric tensors of no values (TensorFlow 2.21, a segmentation fault)."""
    return [spec.name for spec in manifest.features if spec.var_len or spec.num_values]


def parse_all(path, manifest, names=None, on_error="raise", batch_size=None):
    records = [read_file_records(f, manifest.compression) for f in data_files(path)]
    dataset = parse_records(records, manifest, names, on_error, batch_size)
    return list(dataset.as_numpy_iterator()), dataset.element_spec


def parse_file(file, manifest, batch_size, on_error="raise"):
    """The parsed records of a hand-written, uncompressed file."""
    records = read_file_records(file, None)
    return parse_records(records, manifest, on_error=on_error, batch_size=batch_size)


def assert_spec(element_spec, shape, dtype):
    """A `make_parser` element's spec; a feature list's after `unbatch()` is a
    ragged-rank-0 `tf.RaggedTensorSpec` of the same shape and dtype."""
    if isinstance(element_spec, tf.RaggedTensorSpec):
        assert element_spec.ragged_rank == 0
        assert (element_spec.shape, element_spec.dtype) == (shape, dtype)
    else:
        assert element_spec == tf.TensorSpec(shape, dtype)


def assert_same(parsed, expected, spec):
    if spec.dtype == "string":
        expected = np.vectorize(
            lambda v: v.encode() if isinstance(v, str) else v, otypes=[object]
        )(np.asarray(expected, dtype=object))
        parsed = np.asarray(parsed, dtype=object)  # a scalar comes as bytes
        assert parsed.shape == expected.shape
        assert parsed.tolist() == expected.tolist()
        return
    expected = np.asarray(expected).astype(spec.tf_dtype.as_numpy_dtype)
    assert parsed.dtype == expected.dtype, spec.name
    np.testing.assert_array_equal(parsed, expected, err_msg=spec.name)


# Every kind with and without batching, each compression read at least once
# (compression is the reader's, not the parser's: the parsed values cannot
# depend on it beyond whether the bytes arrive; each pipeline takes seconds
# to trace).
@pytest.mark.parametrize(
    "kind, compression, batch_size",
    [
        ("example", None, None),
        ("example", "gzip", 2),
        ("sequence_example", "zlib", None),
        ("sequence_example", None, 2),
    ],
)
def test_round_trip_is_exact(tmp_path, kind, compression, batch_size):
    records, features = example_records() if kind == "example" else sequence_records()
    manifest = write_dataset(
        tmp_path, records, features=features, compression=compression, num_shards=2
    )
    assert manifest.allow_var_len is (kind == "sequence_example")
    names = None if batch_size is None else unbatchable(manifest)
    parsed, element_spec = parse_all(tmp_path, manifest, names, batch_size=batch_size)
    specs = [manifest.feature(name) for name in names or manifest.names]
    for spec in specs:
        assert_spec(element_spec[spec.name], spec.tensor_shape, spec.tf_dtype)
    assert len(parsed) == len(records)
    for record, result in zip(records, parsed, strict=True):
        assert list(result) == [spec.name for spec in specs]
        for spec in specs:
            assert_same(result[spec.name], record[spec.name], spec)


def test_sequence_example_has_context_and_lists(tmp_path):
    records, features = sequence_records()
    manifest = write_dataset(tmp_path, records, features=features)
    var_len = {spec.name for spec in manifest.features if spec.var_len}
    assert var_len == {"tokens", "frames", "words", "audio", "wave", "bits", "blank"}
    assert manifest.feature("pair").tensor_shape == (2, 3)


@pytest.mark.parametrize("batch_size", BATCH_SIZES)
def test_names_select_features_in_order(tmp_path, batch_size):
    records, features = sequence_records()
    manifest = write_dataset(tmp_path, records, features=features)
    parsed, element_spec = parse_all(
        tmp_path, manifest, names=["frames", "label"], batch_size=batch_size
    )
    assert list(element_spec) == ["frames", "label"]
    assert [int(p["label"]) for p in parsed] == [0, 1, 2, 3, 4]
    assert [p["frames"].shape for p in parsed] == [
        (3, 2),
        (0, 2),
        (1, 2),
        (5, 2),
        (2, 2),
    ]


@pytest.mark.parametrize("make", [make_parser, make_batch_parser])
def test_parser_argument_errors(tmp_path, make):
    manifest = write_dataset(tmp_path, [{"x": 1, "y": 2.0}])
    with pytest.raises(KeyError, match="no feature 'z'; its features are 'x', 'y'"):
        make(manifest, ["x", "z"])
    with pytest.raises(TypeError, match="names must be a list of feature names"):
        make(manifest, "x")
    with pytest.raises(ValueError, match="names lists 'x' twice"):
        make(manifest, ["x", "x"])
    with pytest.raises(ValueError, match="names is empty"):
        make(manifest, [])
    with pytest.raises(ValueError, match="on_error must be 'raise' or 'skip'"):
        make(manifest, on_error="ignore")
    with pytest.raises(TypeError, match="manifest must be a kerasbatch.io.Manifest"):
        make(manifest.to_dict())
    with pytest.raises(ValueError, match="compression must be"):
        read_file_records("a.tfrecords", "GZIP")


# ------------------------------------------------------------ record errors
EXAMPLE_MANIFEST = {
    "compression": None,
    "allow_var_len": False,
    "features": [
        {"name": "x", "dtype": "int32", "shape": [3], "deserialize_type": "int"},
        {"name": "y", "dtype": "float32", "shape": [], "deserialize_type": "float"},
        {"name": "w", "dtype": "string", "shape": [], "deserialize_type": "string"},
        {
            "name": "r",
            "dtype": "float32",
            "shape": [3],
            "deserialize_type": "raw",
            "deserialize_args": {"endian": "little", "len": 2},
        },
    ],
}
SEQUENCE_MANIFEST = {
    "compression": None,
    "allow_var_len": True,
    "features": [
        {
            "name": "c",
            "dtype": "int64",
            "shape": [2],
            "var_len": False,
            "deserialize_type": "int",
        },
        {
            "name": "f",
            "dtype": "float32",
            "shape": [2],
            "var_len": True,
            "deserialize_type": "float",
        },
        {
            "name": "a",
            "dtype": "int16",
            "shape": [2],
            "var_len": True,
            "deserialize_type": "raw",
            "deserialize_args": {"endian": "big"},
        },
    ],
}


def int64s(*values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def floats(*values):
    return tf.train.Feature(float_list=tf.train.FloatList(value=values))


def raws(*arrays):
    return tf.train.Feature(
        bytes_list=tf.train.BytesList(value=[a.tobytes() for a in arrays])
    )


R = np.array([1, 2, 3], "<f4")
A = np.array([7, -8], ">i2")


def example(**changes):
    word = tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"word"]))
    feature = {"x": int64s(1, 2, 3), "y": floats(0.5), "w": word, "r": raws(R, R)}
    feature.update(changes)
    feature = {name: value for name, value in feature.items() if value is not None}
    return tf.train.Example(features=tf.train.Features(feature=feature))


def sequence_example(c=None, f=None, a=None):
    proto = tf.train.SequenceExample()
    if c is not False:
        proto.context.feature["c"].CopyFrom(c or int64s(1, 2))
    lists = proto.feature_lists.feature_list
    for element in f or [floats(1, 2), floats(3, 4)]:
        lists["f"].feature.add().CopyFrom(element)
    for element in a or [raws(A), raws(A)]:
        lists["a"].feature.add().CopyFrom(element)
    return proto


def write_protos(path, protos):
    with tf.io.TFRecordWriter(str(path)) as writer:
        for proto in protos:  # or bytes that are no proto
            writer.write(
                proto if isinstance(proto, bytes) else proto.SerializeToString()
            )
    return str(path)


BAD_RECORDS = {
    "wrong count": (
        EXAMPLE_MANIFEST,
        example(x=int64s(1, 2)),
        "feature `x` has 2 values, the shape [3] in the manifest needs 3",
    ),
    "missing feature": (
        EXAMPLE_MANIFEST,
        example(y=None),
        "feature `y` has 0 values (missing or empty), the shape [] in the manifest "
        "needs 1",
    ),
    "raw string size": (
        EXAMPLE_MANIFEST,
        example(r=raws(R, R[:2])),
        "feature `r` raw byte string 1 has 8 bytes, the shape [3] of float32 in the "
        "manifest needs 12",
    ),
    "raw string count": (
        EXAMPLE_MANIFEST,
        example(r=raws(R)),
        "feature `r` has 1 raw byte strings, deserialize_args len in the manifest is 2",
    ),
    "context count": (
        SEQUENCE_MANIFEST,
        sequence_example(c=int64s(1, 2, 3)),
        "feature `c` has 3 values, the shape [2] in the manifest needs 2",
    ),
    "missing context": (
        SEQUENCE_MANIFEST,
        sequence_example(c=False),
        "feature `c` has 0 values (missing or empty)",
    ),
    "list element size": (
        SEQUENCE_MANIFEST,
        sequence_example(f=[floats(1, 2), floats(3, 4), floats(5)]),
        "feature list `f` element 2 has 1 values, the shape [2] in the manifest "
        "needs 2",
    ),
    "raw strings per element": (
        SEQUENCE_MANIFEST,
        sequence_example(a=[raws(A), raws(A, A)]),
        "feature list `a` element 1 has 2 raw byte strings, the manifest needs 1 per "
        "element",
    ),
    "raw element size": (
        SEQUENCE_MANIFEST,
        sequence_example(a=[raws(A[:1]), raws(A)]),
        "feature list `a` element 0 has a raw byte string of 2 bytes, the shape [2] "
        "of int16 in the manifest needs 4",
    ),
}


@functools.cache
def variable_file_parser(manifest_json, batch_size):
    """`(file, dataset)`: `parse_file` of the file that the string variable
    `file` names when an iterator starts, one pipeline for many files (a new
    iterator costs a tenth of a new pipeline)."""
    file = tf.Variable("", dtype=tf.string)
    records = tf.data.Dataset.from_tensors(0).flat_map(
        lambda _: read_file_records(file.read_value(), None)
    )
    manifest = Manifest.from_dict(json.loads(manifest_json))
    return file, parse_records(records, manifest, batch_size=batch_size)


# the bad record is the 3rd of the 1st batch (3) or the 1st of the 2nd (2)
@pytest.mark.parametrize("batch_size", [None, 2, 3])
@pytest.mark.parametrize("case", BAD_RECORDS)
def test_record_errors_name_file_and_index(tmp_path, case, batch_size):
    manifest_data, bad, message = BAD_RECORDS[case]
    good = example() if not manifest_data["allow_var_len"] else sequence_example()
    file = write_protos(tmp_path / "data.tfrecords", [good, good, bad, good])
    variable, dataset = variable_file_parser(json.dumps(manifest_data), batch_size)
    variable.assign(file)
    expected = f"record 2 of file {file}: {message}"
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(expected)):
        list(dataset)


def test_batch_errors_name_the_first_bad_record(tmp_path):
    manifest = Manifest.from_dict(SEQUENCE_MANIFEST)
    protos = [
        sequence_example(),
        sequence_example(),
        sequence_example(a=[raws(A), raws(A[:1])]),  # a later check fails
        sequence_example(c=int64s(1, 2, 3)),  # an earlier check fails
    ]
    file = write_protos(tmp_path / "data.tfrecords", protos)
    expected = (
        f"record 2 of file {file}: feature list `a` element 1 has a raw byte string "
        "of 2 bytes, the shape [2] of int16 in the manifest needs 4"
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(expected)):
        list(parse_file(file, manifest, batch_size=4))


@pytest.mark.parametrize("batch_size", BATCH_SIZES)
def test_good_hand_written_records_parse(tmp_path, batch_size):
    file = write_protos(tmp_path / "e.tfrecords", [example()])
    (parsed,) = parse_file(file, Manifest.from_dict(EXAMPLE_MANIFEST), batch_size)
    np.testing.assert_array_equal(parsed["r"], [R, R])
    file = write_protos(tmp_path / "s.tfrecords", [sequence_example()])
    (parsed,) = parse_file(file, Manifest.from_dict(SEQUENCE_MANIFEST), batch_size)
    np.testing.assert_array_equal(parsed["a"], [[7, -8], [7, -8]])
    np.testing.assert_array_equal(parsed["f"], [[1, 2], [3, 4]])


# batches of 2: one all valid, one half; of 3: a mixed one, then a last one
@pytest.mark.parametrize("batch_size", [None, 2, 3])
def test_skip_mode_flags_invalid_records(tmp_path, batch_size):
    manifest = Manifest.from_dict(SEQUENCE_MANIFEST)
    file = write_protos(
        tmp_path / "data.tfrecords",
        [
            sequence_example(),
            sequence_example(c=int64s(5, 6)),
            sequence_example(a=[raws(A, A)]),
            sequence_example(f=[floats(1)]),
        ],
    )
    dataset = parse_file(file, manifest, batch_size, on_error="skip")
    assert dataset.element_spec[1] == tf.TensorSpec((), tf.bool)
    results = list(dataset.as_numpy_iterator())
    assert [bool(valid) for _, valid in results] == [True, True, False, False]
    for features, _ in results[2:]:
        assert features["c"].tolist() == [0, 0]
        assert features["f"].shape == (0, 2)
        assert features["a"].shape == (0, 2)
    assert results[1][0]["c"].tolist() == [5, 6]
    np.testing.assert_array_equal(results[1][0]["a"], [[7, -8], [7, -8]])


def test_type_mismatch_and_unparsable_bytes_name_the_record(tmp_path):
    manifest = Manifest.from_dict(EXAMPLE_MANIFEST)
    file = write_protos(
        tmp_path / "data.tfrecords",
        [example(), example(x=floats(1, 2, 3))],
    )
    for batch_size in (None, 2):
        for on_error in ("raise", "skip"):  # TensorFlow's parse op fails
            dataset = parse_file(file, manifest, batch_size, on_error)
            expected = f"record 1 of file {file}, Context feature: x.  Data types"
            with pytest.raises(
                tf.errors.InvalidArgumentError, match=re.escape(expected)
            ):
                list(dataset)
    file = write_protos(tmp_path / "data.tfrecords", [example(), b"no Example"])
    expected = f"Invalid protocol message input, example id: record 1 of file {file}"
    for batch_size in (None, 2):
        with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(expected)):
            list(parse_file(file, manifest, batch_size, "raise"))


# ------------------------------------------------------------ batch parser
@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """`{kind: (files, manifest)}` of `example_records` and `sequence_records`."""
    result = {}
    for kind in KINDS:
        path = tmp_path_factory.mktemp(kind)
        records, features = (
            example_records() if kind == "example" else sequence_records()
        )
        manifest = write_dataset(path, records, features=features, num_shards=2)
        result[kind] = data_files(path), manifest
    return result


def mixed(path, kind):
    """Records of which some do not match `EXAMPLE_MANIFEST` or
    `SEQUENCE_MANIFEST`."""
    if kind == "mixed examples":
        protos = [
            example(),
            example(w=None, x=int64s(4, 5, 6)),
            example(y=floats(1.5)),
            example(r=raws(R, R[:2])),
            example(x=int64s(1)),
        ]
        manifest = EXAMPLE_MANIFEST
    else:
        protos = [
            sequence_example(),
            sequence_example(f=[floats(1)] * 3),
            sequence_example(c=int64s(5, 6), a=[raws(A)] * 4, f=[floats(1, 2)] * 4),
            sequence_example(a=[raws(A, A)]),
            sequence_example(c=False),
            sequence_example(c=int64s(7, 8)),
        ]
        manifest = SEQUENCE_MANIFEST
    file = write_protos(path / "mixed.tfrecords", protos)
    return [file], Manifest.from_dict(manifest)


# Every kind in batches of 3; batches of 1 (the edge case) once, where
# records are also left out (a parse pipeline takes seconds to trace).
@pytest.mark.parametrize(
    "kind, on_error, batch_sizes",
    [
        ("example", "raise", [3]),
        ("sequence_example", "raise", [3]),
        ("example", "skip", [3]),
        ("sequence_example", "skip", [3]),
        ("mixed examples", "skip", [3]),
        ("mixed sequence examples", "skip", [3, 1]),
    ],
)
def test_unbatched_elements_are_make_parsers(
    tmp_path, written, kind, on_error, batch_sizes
):
    if kind.startswith("mixed"):
        files, manifest = mixed(tmp_path, kind)
    else:
        files, manifest = written[kind]
    records = [read_file_records(file, manifest.compression) for file in files]
    names = unbatchable(manifest)
    single = parse_records(records, manifest, names, on_error)
    expected = list(single)  # read once, compared with each batch size
    if kind.startswith("mixed"):
        assert {bool(valid) for _, valid in expected} == {True, False}
    for batch_size in batch_sizes:
        batched = parse_records(records, manifest, names, on_error, batch_size)
        assert_same_elements(single, expected, batched)


def assert_same_elements(single, expected_elements, batched):
    """`batched` (parsed in batches, unbatched) has the elements of `single`,
    `expected_elements`."""
    specs = zip(
        tf.nest.flatten(single.element_spec),
        tf.nest.flatten(batched.element_spec),
        strict=True,
    )
    for spec, batched_spec in specs:
        assert_spec(batched_spec, spec.shape, spec.dtype)
    # a map turns the ragged-rank-0 specs into make_parser's
    mapped = batched.map(lambda *parts: parts if len(parts) > 1 else parts[0])
    assert mapped.element_spec == single.element_spec
    elements = list(zip(expected_elements, batched, strict=True))
    assert elements
    for expected, element in elements:
        tf.nest.assert_same_structure(expected, element)
        pairs = zip(tf.nest.flatten(expected), tf.nest.flatten(element), strict=True)
        for value, batched_value in pairs:
            assert isinstance(batched_value, tf.Tensor)
            assert batched_value.dtype == value.dtype
            assert batched_value.shape == value.shape
            np.testing.assert_array_equal(batched_value.numpy(), value.numpy())


# Each kind once, each policy once: the policies decode the same tensors
# (test_unbatched_elements_are_make_parsers compares both kinds under both).
@pytest.mark.parametrize(
    "kind, on_error", [("example", "skip"), ("sequence_example", "raise")]
)
def test_batches_are_dense_or_ragged(written, kind, on_error):
    files, manifest = written[kind]
    records = read_file_records(files[1], manifest.compression)
    batches = records.batch(2).map(make_batch_parser(manifest, on_error=on_error))
    element_spec = batches.element_spec
    if on_error == "skip":
        element_spec, valid_spec = element_spec
        assert valid_spec == tf.TensorSpec((None,), tf.bool)
    for spec in manifest.features:
        if spec.var_len:
            expected = tf.RaggedTensorSpec(
                (None, *spec.tensor_shape), spec.tf_dtype, 1, tf.int64
            )
        else:
            expected = tf.TensorSpec((None, *spec.tensor_shape), spec.tf_dtype)
        assert element_spec[spec.name] == expected, spec.name
    first = next(iter(batches))
    features = first[0] if on_error == "skip" else first
    assert {tensor.shape[0] for tensor in features.values()} == {2}
    if kind == "example":
        assert features["nothing"].shape == (2, 0)


def test_batch_parser_wants_1d_batches(tmp_path):
    file = write_protos(tmp_path / "data.tfrecords", [example()])
    parse = make_batch_parser(Manifest.from_dict(EXAMPLE_MANIFEST))
    with pytest.raises(ValueError, match=r"1-D batches .* serialized has shape \(\)"):
        read_file_records(file, None).map(parse)


def test_read_file_records_in_interleave(tmp_path):
    first = write_protos(tmp_path / "a.tfrecords", [example()] * 2)
    second = write_protos(tmp_path / "b.tfrecords", [example()] * 3)
    files = tf.data.Dataset.from_tensor_slices([first, second])
    records = files.interleave(lambda f: read_file_records(f, None), cycle_length=2)
    seen = [
        (file.decode(), int(index)) for _, file, index in records.as_numpy_iterator()
    ]
    assert seen == [(first, 0), (second, 0), (first, 1), (second, 1), (second, 2)]


# ------------------------------------------------------------ check_dataset
def write_numbers(path, count, **kwargs):
    records = [{"x": np.arange(40) + i, "y": np.float32(i)} for i in range(count)]
    return write_dataset(path, records, **kwargs)


def test_check_good_dataset(tmp_path, capsys):
    manifest = write_numbers(tmp_path, 7, num_shards=2, compression="gzip")
    files = data_files(tmp_path)
    check = check_dataset(manifest, files)
    assert check == DatasetCheck(7, {files[0]: 3, files[1]: 4}, ())
    assert check.ok
    check.raise_if_errors()
    assert "Checking the records of 2 files" in capsys.readouterr().out


def test_check_truncated_file(tmp_path):
    manifest = write_numbers(tmp_path, 6)
    (file,) = data_files(tmp_path)
    with open(file, "rb") as handle:
        data = handle.read()
    with open(file, "wb") as handle:
        handle.write(data[:-5])
    check = check_dataset(manifest, [file], verbose=0)
    assert check.num_records == 5
    ((where, index, message),) = check.errors
    assert (where, index) == (file, 5)
    assert message.startswith("corrupt or truncated file: truncated record at")


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_check_corrupt_file(tmp_path, compression):
    manifest = write_numbers(tmp_path, 20, compression=compression)
    (file,) = data_files(tmp_path)
    with open(file, "rb") as handle:
        data = bytearray(handle.read())
    middle = len(data) // 2
    data[middle : middle + 4] = bytes(255 - b for b in data[middle : middle + 4])
    with open(file, "wb") as handle:
        handle.write(data)
    check = check_dataset(manifest, [file], verbose=0)
    ((where, index, message),) = check.errors
    assert where == file
    assert message.startswith("corrupt or truncated file: ")
    assert check.lost_records == {file: 1}
    if compression is None:  # read on past the damaged record
        assert 8 <= index <= 10 and check.num_records == 19
        assert "corrupted record" in message
    else:  # compressed reads fail where decompression does
        assert index == check.num_records < 20


def test_check_records_that_do_not_match_the_manifest(tmp_path):
    manifest = write_numbers(tmp_path / "good", 3)
    wrong_shape = [{"x": np.arange(41), "y": np.float32(0)}] * 2
    write_dataset(tmp_path / "shape", wrong_shape)
    wrong_type = [{"x": np.arange(40) * 0.5, "y": np.float32(0)}]
    write_dataset(tmp_path / "type", wrong_type)
    files = [
        *data_files(tmp_path / "good"),
        *data_files(tmp_path / "shape"),
        *data_files(tmp_path / "type"),
        str(tmp_path / "missing.tfrecords"),
    ]
    check = check_dataset(manifest, files, verbose=0)
    assert not check.ok
    assert check.num_records == 6
    assert check.records_per_file == dict(zip(files, [3, 2, 1, 0], strict=True))
    assert check.errors[:2] == (
        (
            files[1],
            0,
            "feature `x` has 41 values, the shape [40] in the manifest needs 40",
        ),
        (
            files[1],
            1,
            "feature `x` has 41 values, the shape [40] in the manifest needs 40",
        ),
    )
    assert check.errors[2][:2] == (files[2], 0)
    assert check.errors[2][2] == (
        "feature `x` is stored as another type than the manifest says "
        "(TensorFlow expected int64)"
    )
    assert check.errors[3][:2] == (files[3], 0)
    assert check.errors[3][2].startswith("cannot open the file: ")
    assert "No such file" in check.errors[3][2]
    with pytest.raises(ValueError, match="The dataset has 4 problem") as error:
        check.raise_if_errors()
    assert f"record 1 of {files[1]}: feature `x` has 41 values" in str(error.value)
    # only y is checked: the shape records pass
    assert check_dataset(manifest, files[1:2], ["y"], verbose=0).ok


def test_raise_if_errors_shows_the_first_five():
    errors = tuple(("f.tfrecords", i, "bad") for i in range(7))
    with pytest.raises(ValueError) as error:
        DatasetCheck(7, {"f.tfrecords": 7}, errors).raise_if_errors()
    text = str(error.value)
    assert "record 4 of f.tfrecords: bad" in text
    assert "record 5 of" not in text
    assert "... and 2 more" in text


def test_check_dataset_wants_a_list_of_files(tmp_path):
    manifest = write_numbers(tmp_path, 1)
    with pytest.raises(TypeError, match="files must be a list of paths"):
        check_dataset(manifest, data_files(tmp_path)[0])
