"""TFRecordLoader: every argument of the loader configuration, its rules and bad inputs."""

import dataclasses
import json
import os
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbatch
from kerasbatch.io import TFRecordLoader, write_dataset, write_list_file


def tokens_records(count=12, seed=0):
    """Record i: tokens `[100 i, 100 i + 1, ...]` of length 1 + i % 5, label i."""
    return [
        {"tokens": np.arange(100 * i, 100 * i + 1 + i % 5), "label": np.int64(i)}
        for i in range(count)
    ]


@pytest.fixture
def token_dir(tmp_path):
    path = tmp_path / "tokens"
    write_dataset(path, tokens_records(), num_shards=2)
    return str(path)


def config(data_dir, **overrides):
    base = {
        "type": "independent",
        "dataset": {"type": "dir", "args": {"data_dir": data_dir}},
        "target_batch_size": 4,
        "drop_remainder": False,
        "epochs": 1,
        "num_read_buffer_bytes": 0,
        "num_prefetch": 1,
        "padding": True,
        "primary_features": [
            {"from_name": "tokens", "to_name": "x"},
            {"from_name": "label", "to_name": "y"},
        ],
    }
    base.update(overrides)
    return base


def batches(loader, inputs=("x",), outputs=("y",), take=None):
    dataset = loader.build(inputs=list(inputs), outputs=list(outputs))
    if take is not None:
        dataset = dataset.take(take)
    return list(dataset.as_numpy_iterator())


def labels(batch_list):
    return [int(v) for _, y in batch_list for v in y["y"]]


def graph_nodes(dataset):
    """`{op: [constant inputs]}` of a dataset's graph, functions included."""
    graph = tf.compat.v1.GraphDef()
    graph.ParseFromString(
        tf.raw_ops.DatasetToGraphV2(input_dataset=dataset._variant_tensor).numpy()
    )
    nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
    constants = {}
    for node in nodes:
        if node.op == "Const" and node.attr["value"].tensor.int64_val:
            constants[node.name] = list(node.attr["value"].tensor.int64_val)
    ops = {}
    for node in nodes:
        values = [constants.get(i.split(":")[0].lstrip("^")) for i in node.input]
        ops.setdefault(node.op, []).append((values, node))
    return ops


# ------------------------------------------------------------------- basics
def test_independent_loader_reads_every_record_once(token_dir):
    result = batches(TFRecordLoader(**config(token_dir)))
    assert sorted(labels(result)) == list(range(12))
    assert [len(y["y"]) for _, y in result] == [4, 4, 4]
    for x, y in result:
        for row, label in zip(x["x"], y["y"], strict=True):
            length = 1 + label % 5
            np.testing.assert_array_equal(
                row[:length], np.arange(100 * label, 100 * label + length)
            )
            assert (row[length:] == 0).all()


def test_target_batch_size_and_drop_remainder(token_dir):
    sizes = [
        len(y["y"])
        for _, y in batches(TFRecordLoader(**config(token_dir, target_batch_size=5)))
    ]
    assert sizes == [5, 5, 2]
    dropped = batches(
        TFRecordLoader(**config(token_dir, target_batch_size=5, drop_remainder=True))
    )
    assert [len(y["y"]) for _, y in dropped] == [5, 5]


def test_drop_remainder_only_applies_to_finite_epochs(token_dir):
    loader = TFRecordLoader(
        **config(token_dir, target_batch_size=5, drop_remainder=True, epochs=None)
    )
    result = batches(loader, take=7)  # infinite: every batch is full anyway
    assert [len(y["y"]) for _, y in result] == [5] * 7


#: The cardinalities of a loader whose number of batches is not known.
NOT_KNOWN = (tf.data.UNKNOWN_CARDINALITY, tf.data.INFINITE_CARDINALITY)


def test_epochs_repeat_the_data(token_dir):
    result = batches(TFRecordLoader(**config(token_dir, epochs=3)))
    assert sorted(labels(result)) == sorted(list(range(12)) * 3)
    infinite = TFRecordLoader(**config(token_dir, epochs=None)).build(
        inputs=["x"], outputs=["y"]
    )
    assert int(infinite.cardinality()) in NOT_KNOWN
    assert len(list(infinite.take(20).as_numpy_iterator())) == 20


def test_num_parallel_reads_interleaves_files(token_dir):
    one = labels(batches(TFRecordLoader(**config(token_dir, target_batch_size=12))))
    assert one == list(range(12))  # file 0 (records 0-5), then file 1
    two = labels(
        batches(
            TFRecordLoader(
                **config(token_dir, target_batch_size=12, num_parallel_reads=2)
            )
        )
    )
    assert two == [0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11]


#: `(value, op)` of each argument: values found nowhere else in the graph.
PIPELINE_ARGUMENTS = {
    "num_read_buffer_bytes": (12345, "TFRecordDataset"),
    "num_prefetch": (7, "PrefetchDataset"),
    "num_parallel_parses": (3, "ParallelMapDatasetV2"),
    "num_interleave_out_buffer_elements": (11, "LegacyParallelInterleaveDatasetV2"),
    "num_interleave_in_buffer_elements": (13, "LegacyParallelInterleaveDatasetV2"),
}


def test_buffer_and_parallelism_arguments_reach_the_pipeline(token_dir):
    """All set at once, each to a value of its own, in one pipeline (a
    loader's build takes seconds)."""
    settings = {key: value for key, (value, _) in PIPELINE_ARGUMENTS.items()}
    dataset = TFRecordLoader(**config(token_dir, **settings)).build(
        inputs=["x"], outputs=["y"]
    )
    ops = graph_nodes(dataset)
    for key, (value, op) in PIPELINE_ARGUMENTS.items():
        assert any([value] in inputs for inputs, _ in ops[op]), f"{key} not in {op}"
    assert sorted(labels(list(dataset.as_numpy_iterator()))) == list(range(12))


def test_sloppy_interleave_makes_the_interleave_nondeterministic(token_dir):
    def interleave_attr(sloppy):
        dataset = TFRecordLoader(**config(token_dir, sloppy_interleave=sloppy)).build(
            inputs=["x"], outputs=["y"]
        )
        ((_, node),) = graph_nodes(dataset)["LegacyParallelInterleaveDatasetV2"]
        return node.attr["deterministic"].s.decode()

    assert interleave_attr(False) == "true"
    assert interleave_attr(True) == "false"


def shuffled(data_dir, **overrides):
    settings = {
        "shuffle": True,
        "num_shuffle_buffer_elements": 12,
        "num_filenames_shuffle_buffer": 2,
        "num_mix_files": 1,
        "seed": 3,
        "target_batch_size": 12,
    }
    settings.update(overrides)
    return labels(batches(TFRecordLoader(**config(data_dir, **settings))))


def test_shuffle_is_seeded_and_keeps_every_record(token_dir):
    order = shuffled(token_dir)
    assert sorted(order) == list(range(12)) and order != list(range(12))
    assert shuffled(token_dir) == order
    assert shuffled(token_dir, seed=4) != order


def test_shuffle_buffer_sizes_have_their_effect(token_dir):
    # a record buffer of 1 keeps the order within files; one file at a time
    order = shuffled(token_dir, num_shuffle_buffer_elements=1)
    assert order in (list(range(12)), list(range(6, 12)) + list(range(6)))
    # a filename buffer of 1 keeps the file order
    order = shuffled(
        token_dir, num_shuffle_buffer_elements=1, num_filenames_shuffle_buffer=1
    )
    assert order == list(range(12))
    # mixing two files interleaves them before the record shuffle
    order = shuffled(
        token_dir,
        num_shuffle_buffer_elements=1,
        num_filenames_shuffle_buffer=1,
        num_mix_files=2,
    )
    assert order == [0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11]


# --------------------------------------------------------------- features
def test_primary_features_rename(token_dir):
    loader = TFRecordLoader(
        **config(
            token_dir, primary_features=[{"from_name": "tokens", "to_name": "ids"}]
        )
    )
    (first,) = batches(loader, inputs=["ids"], outputs=[], take=1)
    assert set(first) == {"ids"}


def test_secondary_const_features(token_dir):
    loader = TFRecordLoader(
        **config(
            token_dir,
            secondary_features=[
                {
                    "to_name": "mask",
                    "type": "const",
                    "args": {"shape": "x", "dtype": "float32", "value": 1.5},
                },
                {
                    "to_name": "zeros",
                    "type": "const",
                    "args": {"shape": [2, 3], "dtype": "y"},
                },
                {
                    "to_name": "name",
                    "type": "const",
                    "args": {"shape": [], "dtype": "string"},
                },
            ],
        )
    )
    x, y = batches(
        loader, inputs=["x", "mask", "zeros", "name"], outputs=["y"], take=1
    )[0]
    lengths = 1 + y["y"] % 5
    expected_mask = (np.arange(x["x"].shape[1]) < lengths[:, None]) * 1.5
    np.testing.assert_array_equal(
        x["mask"], expected_mask
    )  # shape copied, padded with 0
    assert x["zeros"].shape == (4, 2, 3) and x["zeros"].dtype == np.int64
    assert not x["zeros"].any()
    assert list(x["name"]) == [b""] * 4


def test_processing_steps_slice_in_order(tmp_path):
    records = [{"grid": np.arange(60).reshape(3, 4, 5) + i} for i in range(4)]
    write_dataset(tmp_path, records)
    loader = TFRecordLoader(
        **config(
            str(tmp_path),
            padding=False,
            primary_features=[{"from_name": "grid", "to_name": "g"}],
            processing_steps=[
                {"tensor": "g", "type": "slice", "args": {"slice": "[1:,:,::2]"}},
                {"tensor": "g", "type": "slice", "args": {"slice": "[-1, :-1]"}},
            ],
        )
    )
    (x,) = batches(loader, inputs=["g"], outputs=[])
    for i in range(4):
        np.testing.assert_array_equal(
            x["g"][i], (np.arange(60).reshape(3, 4, 5) + i)[1:, :, ::2][-1, :-1]
        )


def test_padding_list_with_shapes_and_values(tmp_path):
    records = [
        {"a": np.ones(n, "int64"), "b": np.ones((n, 2), "float32")} for n in (2, 3)
    ]
    write_dataset(tmp_path, records)
    loader = TFRecordLoader(
        **config(
            str(tmp_path),
            primary_features=[
                {"from_name": "a", "to_name": "a"},
                {"from_name": "b", "to_name": "b"},
            ],
            padding=[
                {"tensor": "a", "shape": [6], "value": -1},
                {"tensor": "b", "shape": [-1, 4]},
            ],
        )
    )
    (x,) = batches(loader, inputs=["a", "b"], outputs=[])
    np.testing.assert_array_equal(
        x["a"], [[1, 1, -1, -1, -1, -1], [1, 1, 1, -1, -1, -1]]
    )
    assert x["b"].shape == (2, 3, 4)  # -1: the batch maximum
    assert x["b"][0, 2].sum() == 0 and x["b"][:, :, 2:].sum() == 0


def test_padding_false_needs_fixed_shapes(token_dir):
    loader = TFRecordLoader(**config(token_dir, padding=False))
    with pytest.raises(
        ValueError, match=r"padding is false, but tensor\(s\) vary in shape"
    ):
        loader.build(inputs=["x"], outputs=["y"])


def test_multi_load_equals_record_by_record_parsing(tmp_path):
    records = [
        {"v": np.arange(3) + i, "raw": np.full((2, 2), i, "int16")} for i in range(10)
    ]
    write_dataset(
        tmp_path,
        records,
        features={
            "raw": {"deserialize_type": "raw", "deserialize_args": {"endian": "big"}}
        },
    )
    primaries = [
        {"from_name": "v", "to_name": "v"},
        {"from_name": "raw", "to_name": "raw"},
    ]
    plain = TFRecordLoader(
        **config(str(tmp_path), padding=False, primary_features=primaries)
    )
    multi = TFRecordLoader(
        **config(
            str(tmp_path), padding=False, primary_features=primaries, multi_load=True
        )
    )
    for a, b in zip(
        batches(plain, ["v", "raw"], []), batches(multi, ["v", "raw"], []), strict=True
    ):
        for name in ("v", "raw"):
            np.testing.assert_array_equal(a[name], b[name])
            assert a[name].dtype == b[name].dtype


def test_multi_load_rejects_variable_length_records(token_dir):
    loader = TFRecordLoader(**config(token_dir, padding=False, multi_load=True))
    with pytest.raises(ValueError, match="multi_load needs fixed-length records"):
        loader.build(inputs=["x"], outputs=["y"])


# ------------------------------------------------------------ model rules
def make_model(inputs=("x",), output="y"):
    tensors = {name: keras.Input((None,), name=name, dtype="int64") for name in inputs}
    pooled = [
        keras.layers.GlobalAveragePooling1D()(keras.layers.Embedding(2000, 2)(t))
        for t in tensors.values()
    ]
    joined = pooled[0] if len(pooled) == 1 else keras.layers.Concatenate()(pooled)
    model = keras.Model(tensors, {output: keras.layers.Dense(1, name=output)(joined)})
    model.compile("sgd", "mse")
    return model


SHUFFLE = {
    "num_shuffle_buffer_elements": 12,
    "num_filenames_shuffle_buffer": 2,
    "num_mix_files": 2,
}


def fixed_records(count=12):
    """Record i: tokens `[100 i, 100 i + 1, 100 i + 2]`, label i."""
    return [
        {"tokens": np.arange(100 * i, 100 * i + 3), "label": np.int64(i)}
        for i in range(count)
    ]


def fit_warnings(model, dataset, epochs=2):
    """The messages of the warnings `model.fit` gives."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(dataset, epochs=epochs, verbose=0)
    assert len(history.history["loss"]) == epochs
    return [str(warning.message) for warning in caught]


# model.fit (a train function traced, seconds) runs on two of them: how the
# cardinality is found differs between the cases, what Keras does with an
# exact one does not.
@pytest.mark.parametrize(
    "overrides, num_batches, fit",
    [
        ({}, 3, True),  # 12 records in batches of 4
        ({"target_batch_size": 5}, 3, False),
        ({"target_batch_size": 5, "drop_remainder": True}, 2, False),
        ({"target_batch_size": 5, "epochs": 2}, 5, True),  # 24 records
        ({"target_batch_size": 5, "padding": False, "multi_load": True}, 3, False),
        ({"target_batch_size": 5, "shuffle": True, "seed": 1, **SHUFFLE}, 3, False),
    ],
)
def test_record_counts_give_the_exact_cardinality(
    token_dir, overrides, num_batches, fit
):
    """Without lengths, the manifest's record_counts give the number of
    batches (as many as the dataset yields), so model.fit knows each epoch's
    length and does not warn that the input ran out of data."""
    if overrides.get("multi_load"):  # fixed-length records
        write_dataset(token_dir, fixed_records(), num_shards=2, overwrite=True)
    loader = TFRecordLoader(**config(token_dir, **overrides))
    model = make_model()
    dataset = loader.build(model)
    assert int(dataset.cardinality()) == num_batches
    assert len(list(dataset)) == num_batches
    if fit:
        messages = fit_warnings(model, dataset)
        assert not [m for m in messages if "ran out of data" in m], messages


def test_without_record_counts_the_cardinality_is_unknown_until_lengths(token_dir):
    """A build for a model with the length index has the exact cardinality
    and fits 2 epochs without warning (without the manifest's counts, which
    would give it too)."""
    manifest = kerasbatch.io.load_manifest(token_dir)
    dataclasses.replace(manifest, record_counts=None).save(token_dir)
    loader = TFRecordLoader(**config(token_dir))
    model = make_model()
    dataset = loader.build(model)
    assert int(dataset.cardinality()) == tf.data.UNKNOWN_CARDINALITY
    dataset = loader.build(model, lengths=loader.lengths(model, verbose=0))
    assert int(dataset.cardinality()) == 3
    messages = fit_warnings(model, dataset)
    assert not [m for m in messages if "ran out of data" in m], messages


# Skipped records or random windows change the number of batches: a
# skipping loader, a windowed one and an endless one leave the cardinality
# not known (checked where test_damaged_file_is_named_or_skipped_and_counted,
# test_discrete_windows_hold_whole_records and test_epochs_repeat_the_data
# build them: a loader takes seconds to build, a skipping one more).


def test_lengths_describe_one_pass(token_dir):
    loader = TFRecordLoader(**config(token_dir, epochs=2))
    with pytest.raises(ValueError, match="lengths describe one pass"):
        loader.build(inputs=["x"], outputs=["y"], lengths=np.ones(12, int))


def test_single_input_and_output_models_get_tensors(token_dir):
    tokens = keras.Input((None,), name="x", dtype="int64")
    pooled = keras.layers.GlobalAveragePooling1D()(
        keras.layers.Embedding(2000, 2)(tokens)
    )
    model = keras.Model(tokens, keras.layers.Dense(1, name="y")(pooled))
    model.compile("sgd", "mse")
    dataset = TFRecordLoader(**config(token_dir)).build(model)
    x, y = next(iter(dataset))
    assert x.shape == (4, 4) and y.shape == (4,)  # a tensor each, not dicts
    model.fit(dataset, epochs=1, verbose=0, shuffle=False)


def test_every_model_input_needs_a_feature(token_dir):
    with pytest.raises(
        ValueError, match=r"model input\(s\) \['z'\] are satisfied by no primary"
    ):
        TFRecordLoader(**config(token_dir)).build(make_model(inputs=("x", "z")))


def test_to_names_must_be_unique(token_dir):
    primaries = [
        {"from_name": "tokens", "to_name": "x"},
        {"from_name": "label", "to_name": "x"},
    ]
    with pytest.raises(ValueError, match=r"to_name \['x'\] is used more than once"):
        TFRecordLoader(**config(token_dir, primary_features=primaries)).build(
            make_model()
        )


def test_unused_constructed_feature_is_an_error(token_dir):
    secondaries = [
        {"to_name": "extra", "type": "const", "args": {"shape": [], "dtype": "int32"}}
    ]
    with pytest.raises(
        ValueError, match=r"\['extra'\] are constructed but the model does not use"
    ):
        TFRecordLoader(**config(token_dir, secondary_features=secondaries)).build(
            make_model()
        )


def test_subclassed_model_needs_names(token_dir):
    class Subclassed(keras.Model):
        def call(self, x):
            return x

    with pytest.raises(ValueError, match="pass inputs"):
        TFRecordLoader(**config(token_dir)).build(Subclassed())


# --------------------------------------------------------- sequence loaders
@pytest.fixture
def frames_dir(tmp_path):
    """Two files ("songs") of 6 records of 5 frames; file f counts from 1000 f."""
    songs = [
        [
            {
                "frames": (1000 * f + np.arange(5 * k, 5 * k + 5)).reshape(5, 1),
                "step": np.arange(5 * k, 5 * k + 5),
            }
            for k in range(6)
        ]
        for f in range(2)
    ]
    write_dataset(tmp_path / "frames", songs)
    return str(tmp_path / "frames")


def sequence_config(data_dir, loader_type, **overrides):
    settings = {
        "type": loader_type,
        "min_window": 3,
        "max_window": 6,
        "seed": 1,
        "target_batch_size": 100,
        "primary_features": [
            {"from_name": "frames", "to_name": "x"},
            {"from_name": "step", "to_name": "t"},
        ],
    }
    settings.update(overrides)
    return config(data_dir, **settings)


def windows_of(loader, dataset=None):
    """The windows of `loader`'s batches (or of `dataset`, its build)."""
    if dataset is None:
        dataset = loader.build(inputs=["x", "t"], outputs=[])
    (x,) = list(dataset.as_numpy_iterator())
    lengths = (x["t"] != 0).sum(axis=1) + (x["t"][:, 0] == 0)  # step 0 starts a file
    return [
        (row[:n, 0], t[:n]) for row, t, n in zip(x["x"], x["t"], lengths, strict=True)
    ]


def test_continuous_windows_are_contiguous_slices_of_random_length(frames_dir):
    windows = windows_of(
        TFRecordLoader(**sequence_config(frames_dir, "continuous_sequence"))
    )
    starts = {0: [], 1: []}
    for frames, steps in windows:
        assert 3 <= len(frames) <= 6
        np.testing.assert_array_equal(np.diff(frames), 1)  # contiguous across records
        np.testing.assert_array_equal(frames % 1000, steps)  # features stay aligned
        starts[int(frames[0] // 1000)].append((int(steps[0]), len(steps)))
    for file_windows in starts.values():  # stride None: back to back from 0
        ends = [s + n for s, n in file_windows]
        assert file_windows[0][0] == 0 and [s for s, _ in file_windows[1:]] == ends[:-1]
        assert 30 - ends[-1] < 3  # the tail left is shorter than min_window
    assert len({n for _, n in sum(starts.values(), [])}) > 1  # random lengths


def test_continuous_windows_with_a_stride(frames_dir):
    windows = windows_of(
        TFRecordLoader(**sequence_config(frames_dir, "continuous_sequence", stride=4))
    )
    for f in (0, 1):
        starts = [int(t[0]) for frames, t in windows if frames[0] // 1000 == f]
        assert starts == list(range(0, 4 * len(starts), 4))
        assert starts[-1] >= 30 - 3 - 3  # every start that fits min_window is used


# Features of unequal lengths in a continuous window, and a file shorter
# than min_window, are errors: test_io_messages checks both messages word
# for word (a continuous loader takes seconds to build).


def test_discrete_windows_hold_whole_records(frames_dir):
    loader = TFRecordLoader(
        **sequence_config(frames_dir, "discrete_sequence", min_window=2, max_window=3)
    )
    dataset = loader.build(inputs=["x", "t"], outputs=[])
    assert int(dataset.cardinality()) in NOT_KNOWN  # random windows
    windows = windows_of(loader, dataset)
    for frames, steps in windows:
        assert len(frames) in (10, 15)  # 2 or 3 records of 5 frames
        assert steps[0] % 5 == 0  # aligned at a record boundary
        np.testing.assert_array_equal(np.diff(frames), 1)


def test_windows_are_seeded(frames_dir):
    def lengths(seed):
        loader = TFRecordLoader(
            **sequence_config(frames_dir, "continuous_sequence", seed=seed)
        )
        return [len(f) for f, _ in windows_of(loader)]

    first = lengths(1)  # a loader each (seconds to build)
    assert lengths(1) == first
    assert lengths(2) != first


# ---------------------------------------------------------- dataset specifiers
def test_dir_specifier_searches_recursively(tmp_path):
    write_dataset(
        tmp_path,
        tokens_records(6),
        num_shards=2,
        shard_names=["a/one.tfrecords", "b/c/two.tfrecords"],
    )
    assert sorted(labels(batches(TFRecordLoader(**config(str(tmp_path)))))) == list(
        range(6)
    )


def test_list_specifier(tmp_path, token_dir):
    files = sorted(
        os.path.join(token_dir, f)
        for f in os.listdir(token_dir)
        if f.endswith(".tfrecords")
    )
    list_file = write_list_file(tmp_path / "files.txt", files[:1])
    dataset = {
        "type": "list",
        "args": {
            "manifest_file": os.path.join(token_dir, "__manifest__.json"),
            "list_file": str(list_file),
        },
    }
    assert labels(
        batches(TFRecordLoader(**config(token_dir, dataset=dataset)))
    ) == list(range(6))


@pytest.mark.parametrize(
    "make, match",
    [
        (
            lambda d: {"type": "dir", "args": {"data_dir": os.path.join(d, "nowhere")}},
            "does not exist",
        ),
        (
            lambda d: {"type": "dir", "args": {}},
            r"missing the required key\(s\) \['data_dir'\]",
        ),
        (lambda d: {"type": "ftp", "args": {}}, "must be one of"),
        (
            lambda d: {
                "type": "list",
                "args": {"manifest_file": "m.json", "list_file": "/no/list.txt"},
            },
            "List file /no/list.txt does not exist",
        ),
    ],
)
def test_bad_specifiers(token_dir, make, match):
    with pytest.raises(ValueError, match=match):
        TFRecordLoader(**config(token_dir, dataset=make(token_dir))).build(
            inputs=["x"], outputs=["y"]
        )


def test_directory_without_manifest_or_data(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="has no __manifest__.json"):
        TFRecordLoader(**config(str(tmp_path / "empty"))).build(
            inputs=["x"], outputs=["y"]
        )
    write_dataset(tmp_path / "data", tokens_records(2))
    for file in (tmp_path / "data").glob("*.tfrecords"):
        file.unlink()
    with pytest.raises(ValueError, match="holds no .tfrecords file"):
        TFRecordLoader(**config(str(tmp_path / "data"))).build(
            inputs=["x"], outputs=["y"]
        )


def test_list_file_naming_a_missing_data_file(tmp_path, token_dir):
    list_file = write_list_file(
        tmp_path / "files.txt", [str(tmp_path / "gone.tfrecords")]
    )
    dataset = {
        "type": "list",
        "args": {
            "manifest_file": os.path.join(token_dir, "__manifest__.json"),
            "list_file": str(list_file),
        },
    }
    with pytest.raises(
        ValueError, match="line 1: data file .*gone.tfrecords does not exist"
    ):
        TFRecordLoader(**config(token_dir, dataset=dataset)).build(
            inputs=["x"], outputs=["y"]
        )


# ------------------------------------------------------------- bad records
def mismatched_dir(tmp_path):
    """8 Examples whose `tokens` have 3 values, but record 4's have 2."""
    manifest = write_dataset(tmp_path, [{"tokens": np.arange(3)}])  # shape [3]
    # the file is rewritten with 8 records
    dataclasses.replace(manifest, record_counts=None).save(tmp_path)
    path = tmp_path / "part-00000-of-00001.tfrecords"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for i in range(8):
            values = list(range(3 if i != 4 else 2))
            feature = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
            example = tf.train.Example(
                features=tf.train.Features(feature={"tokens": feature})
            )
            writer.write(example.SerializeToString())
    return str(tmp_path)


def test_mismatched_record_names_file_and_index(tmp_path):
    data_dir = mismatched_dir(tmp_path)
    loader = TFRecordLoader(
        **config(
            data_dir,
            padding=False,
            primary_features=[{"from_name": "tokens", "to_name": "x"}],
        )
    )
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"record 4 of file .*part-00000-of-00001.tfrecords",
    ):
        batches(loader, outputs=[])
    check = loader.check(verbose=0)
    assert [(index, "tokens" in message) for _, index, message in check.errors] == [
        (4, True)
    ]


# A skipping loader leaves out and counts records that do not match the
# manifest in test_io_integrity (every kind of bad record; seconds to build).


def _damage(token_dir):
    """Cuts the last 10 bytes off the second shard; returns its name."""
    files = sorted(f for f in os.listdir(token_dir) if f.endswith(".tfrecords"))
    path = os.path.join(token_dir, files[1])
    with open(path, "rb") as file:
        data = file.read()
    with open(path, "wb") as file:
        file.write(data[:-10])
    return files[1]


# A cut file here; test_io_integrity damages files at every offset, and
# reads past flipped bits with a skipping loader (seconds to build).
def test_damaged_file_is_named_or_skipped_and_counted(tmp_path, token_dir):
    name = _damage(token_dir)
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=rf"TFRecord file \S*{name} is corrupt or truncated at record \d+ \(",
    ):
        batches(TFRecordLoader(**config(token_dir)))
    check = TFRecordLoader(**config(token_dir)).check(verbose=0)
    assert check.errors and check.errors[0][0].endswith(name)
    skipping = TFRecordLoader(**config(token_dir, on_error="skip"))
    dataset = skipping.build(inputs=["x"], outputs=["y"])
    assert int(dataset.cardinality()) in NOT_KNOWN  # records may be skipped
    kept = sorted(labels(list(dataset.as_numpy_iterator())))
    assert skipping.damaged_files == 1 and skipping.skipped_records == 0
    assert kept == list(range(11))  # only the cut record is gone


def test_damaged_file_in_a_sequence_loader_is_named(tmp_path, token_dir):
    name = _damage(token_dir)
    loader = TFRecordLoader(
        **config(token_dir, type="discrete_sequence", min_window=1, max_window=2)
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match=name):
        batches(loader)


# gzip here; a skipping loader reads a damaged zlib file in test_io_integrity.
def test_damaged_compressed_file_is_named_and_counted(tmp_path):
    compression = "gzip"
    records = [{"tokens": np.arange(n), "label": np.int64(n)} for n in range(1, 9)]
    write_dataset(tmp_path, records, compression=compression, num_shards=2)
    files = sorted(p for p in os.listdir(tmp_path) if p.endswith(".tfrecords"))
    path = os.path.join(tmp_path, files[0])
    with open(path, "rb") as file:
        data = file.read()
    with open(path, "wb") as file:
        file.write(data[: len(data) // 2])
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=rf"TFRecord file \S*{files[0]} is corrupt or truncated at record",
    ):
        batches(TFRecordLoader(**config(str(tmp_path))))
    skipping = TFRecordLoader(**config(str(tmp_path), on_error="skip"))
    kept = labels(batches(skipping))
    assert set(range(5, 9)) <= set(kept) and len(kept) < 8
    assert skipping.damaged_files == 1 and skipping.lost_records == 8 - len(kept)


# ------------------------------------------------------------------ config
def test_config_round_trip_and_json(tmp_path, token_dir):
    loader = TFRecordLoader(
        **config(
            token_dir,
            shuffle=True,
            num_shuffle_buffer_elements=4,
            num_filenames_shuffle_buffer=2,
            num_mix_files=2,
            seed=5,
        )
    )
    assert TFRecordLoader.from_config(loader.get_config()) == loader
    path = tmp_path / "loader.json"
    path.write_text(json.dumps(loader.get_config()))
    assert TFRecordLoader.from_json(path) == loader
    assert loader.get_config()["num_parallel_reads"] == 1  # defaults filled in


def test_json_errors_name_the_file(tmp_path, token_dir):
    with pytest.raises(ValueError, match="does not exist"):
        TFRecordLoader.from_json(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "independent",')
    with pytest.raises(ValueError, match=r"bad.json is not valid JSON: .* line 1"):
        TFRecordLoader.from_json(bad)
    incomplete = tmp_path / "incomplete.json"
    settings = config(token_dir)
    del settings["epochs"]
    incomplete.write_text(json.dumps(settings))
    with pytest.raises(
        ValueError,
        match=r"incomplete.json is missing the required key\(s\) \['epochs'\]",
    ):
        TFRecordLoader.from_json(incomplete)


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"type": "random"}, "type must be one of"),
        ({"target_batch_size": 0}, "target_batch_size must be an int >= 1"),
        ({"drop_remainder": "yes"}, "drop_remainder must be true or false"),
        ({"epochs": 0}, "epochs must be an int >= 1 or null"),
        ({"num_read_buffer_bytes": -1}, "num_read_buffer_bytes must be an int >= 0"),
        ({"num_parallel_reads": 0}, "num_parallel_reads must be an int >= 1"),
        (
            {"shuffle": True},
            "num_shuffle_buffer_elements is required when shuffle is true",
        ),
        ({"padding": "yes"}, "padding must be true, false or a list"),
        ({"on_error": "ignore"}, "on_error must be one of"),
        ({"min_window": 3}, r"unknown key\(s\) \['min_window'\]"),
        ({"multi_load": True}, "multi_load parses whole batches"),
        ({"type": "continuous_sequence"}, "min_window is required"),
        (
            {"type": "discrete_sequence", "min_window": 5, "max_window": 2},
            "min_window=5 is greater than max_window=2",
        ),
        (
            {
                "type": "continuous_sequence",
                "min_window": 1,
                "max_window": 2,
                "stride": 0,
            },
            "stride must be an int >= 1",
        ),
    ],
)
def test_bad_configuration(token_dir, overrides, match):
    with pytest.raises(ValueError, match=match):
        TFRecordLoader(**config(token_dir, **overrides))


@pytest.mark.parametrize(
    "overrides, match",
    [
        (
            {"primary_features": [{"from_name": "nope", "to_name": "x"}]},
            r"the manifest has no feature 'nope'",
        ),
        ({"primary_features": []}, "primary_features is empty"),
        (
            {"primary_features": [{"from_name": "tokens"}]},
            r"missing the required key\(s\) \['to_name'\]",
        ),
        (
            {"secondary_features": [{"to_name": "c", "type": "random"}]},
            "type must be one of",
        ),
        (
            {
                "secondary_features": [
                    {
                        "to_name": "c",
                        "type": "const",
                        "args": {"shape": "q", "dtype": "int32"},
                    }
                ]
            },
            "names no primary feature",
        ),
        (
            {
                "secondary_features": [
                    {
                        "to_name": "c",
                        "type": "const",
                        "args": {"shape": [], "dtype": "int33"},
                    }
                ]
            },
            "neither a TensorFlow dtype",
        ),
        (
            {
                "processing_steps": [
                    {"tensor": "x", "type": "slice", "args": {"slice": "[a:b]"}}
                ]
            },
            "not an integer index",
        ),
        (
            {
                "processing_steps": [
                    {"tensor": "q", "type": "slice", "args": {"slice": "[1:]"}}
                ]
            },
            "no tensor 'q'",
        ),
        (
            {
                "processing_steps": [
                    {"tensor": "x", "type": "slice", "args": {"slice": "[1,2]"}}
                ]
            },
            "has 2 indices but tensor 'x' has rank 1",
        ),
        (
            {"padding": [{"tensor": "x", "shape": [3, 3]}]},
            "padding shape \\[3, 3\\] has 2 dimensions",
        ),
        ({"padding": [{"tensor": "q"}]}, "no tensor 'q'"),
    ],
)
def test_bad_features(token_dir, overrides, match):
    with pytest.raises(ValueError, match=match):
        TFRecordLoader(**config(token_dir, **overrides)).build(
            inputs=["x"], outputs=["y"]
        )


# ------------------------------------------------------------- length index
def test_length_index_is_exact_and_cached(token_dir):
    loader = TFRecordLoader(**config(token_dir))
    lengths = loader.lengths(inputs=["x"], outputs=["y"], verbose=0)
    assert sorted(lengths.tolist()) == sorted(1 + i % 5 for i in range(12))
    cached = os.listdir(os.path.join(token_dir, "__lengths__"))
    assert len(cached) == 1
    np.save(os.path.join(token_dir, "__lengths__", cached[0]), np.arange(3))
    assert loader.lengths(inputs=["x"], outputs=["y"], verbose=0).tolist() == [0, 1, 2]
    assert (
        len(loader.lengths(inputs=["x"], outputs=["y"], cache=False, verbose=0)) == 12
    )


def test_length_index_needs_the_independent_loader(frames_dir):
    loader = TFRecordLoader(**sequence_config(frames_dir, "discrete_sequence"))
    with pytest.raises(ValueError, match="draws new random windows every pass"):
        loader.lengths(inputs=["x", "t"])


# ------------------------------------------------------------ with a builder
def test_streaming_buckets_on_tfrecords(token_dir):
    loader = TFRecordLoader(**config(token_dir, padding=False))
    lengths = loader.lengths(inputs=["x"], outputs=["y"], verbose=0)
    builder = kerasbatch.StreamBucketBuilder(
        boundaries="auto", num_buckets=3, batch_size=2, buffer_size=4, seed=1
    )
    dataset = loader.build(
        inputs=["x"], outputs=["y"], builder=builder, lengths=lengths
    )
    result = list(dataset.as_numpy_iterator())
    assert int(dataset.cardinality()) == len(result)
    assert sorted(labels(result)) == list(range(12))  # every record once
    for x, y in result:  # padded to the batch's longest element only
        assert x["x"].shape[1] == max(1 + label % 5 for label in y["y"])
    in_memory = kerasbatch.BucketBuilder(boundaries="auto", num_buckets=3, batch_size=2)
    in_memory.adapt(lengths)
    assert builder.statistics().padding_efficiency == pytest.approx(
        in_memory.statistics().padding_efficiency, abs=0.05
    )


def test_streaming_buckets_train_with_the_callbacks(token_dir):
    model = make_model()
    loader = TFRecordLoader(**config(token_dir, padding=False))
    builder = kerasbatch.StreamBucketBuilder(boundaries=[3], batch_size=4, seed=1)
    dataset = loader.build(
        model, builder=builder, lengths=loader.lengths(model, verbose=0)
    )
    history = model.fit(
        dataset,
        epochs=2,
        verbose=0,
        shuffle=False,
        callbacks=[
            kerasbatch.callbacks.EpochReshuffle(builder),
            kerasbatch.callbacks.PaddingEfficiency(builder),
        ],
    )
    assert len(history.history["padding_efficiency"]) == 2
    assert builder.last_started_epoch == 1


def test_builder_and_loader_padding_exclude_each_other(token_dir):
    loader = TFRecordLoader(**config(token_dir, padding=True))
    with pytest.raises(ValueError, match="padding is the builder's"):
        loader.build(
            inputs=["x"], outputs=["y"], builder=kerasbatch.StreamBucketBuilder([3])
        )


# --------------------------------------------------------- files that vanish
@pytest.mark.parametrize("with_builder", [False, True])
def test_a_file_deleted_after_build_is_named_not_waited_for(token_dir, with_builder):
    loader = TFRecordLoader(**config(token_dir, padding=not with_builder))
    names = {"inputs": ["x"], "outputs": ["y"]}
    if with_builder:
        builder = kerasbatch.StreamBucketBuilder([3], batch_size=4)
        dataset = loader.build(
            **names, builder=builder, lengths=loader.lengths(**names, verbose=0)
        )
    else:
        dataset = loader.build(**names)
    first = sorted(f for f in os.listdir(token_dir) if f.endswith(".tfrecords"))[0]
    os.remove(os.path.join(token_dir, first))
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=rf"{first}.*does not exist"
    ):
        list(dataset)


def test_a_missing_file_with_glob_characters_in_its_name_is_named(tmp_path):
    from kerasbatch.io import read_file_records

    write_dataset(tmp_path, [{"x": 1}])
    present = tmp_path / "part-00000-of-00001.tfrecords"
    odd = tmp_path / "odd[1]*?.tfrecords"
    present.rename(odd)
    records = read_file_records(odd, None, file_size=os.path.getsize(odd))
    assert [int(i) for _, _, i in records] == [0]
    with pytest.raises(tf.errors.InvalidArgumentError, match="does not exist"):
        read_file_records(tmp_path / "gone[1].tfrecords", None, file_size=10)
