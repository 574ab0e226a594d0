"""WindowBuilder: the tf.data RFC's windows and end-to-end example, per-component
reducers, sparse padding, exactly once, determinism, config, model.fit."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import batches_per_epoch, make_sequences, recording_model
from hypothesis import given, settings
from hypothesis import strategies as st

import kerasbatch
from kerasbatch.builders.window_builder import window_positions
from kerasbatch.data.reducers import PaddedBatch


def windows_of(dataset):
    return [np.asarray(window).tolist() for window in dataset]


def seed_generator():
    yield ("a", [1])
    yield ("b", [2])
    yield ("c", [3])
    yield ("d", [4, 4])


def sparse_elements(lengths, width=3, seed=0):
    """Element i: a (length, width) sparse tensor of values in {0, i + 1}."""
    rng = np.random.default_rng(seed)
    dense = [
        (rng.random((n, width)) < 0.5).astype(np.float32) * (i + 1)
        for i, n in enumerate(lengths)
    ]
    return [tf.sparse.from_dense(d) for d in dense], dense


def padded(arrays, length=None):
    length = max(len(a) for a in arrays) if length is None else length
    out = np.zeros((len(arrays), length, *arrays[0].shape[1:]), arrays[0].dtype)
    for i, a in enumerate(arrays):
        out[i, : len(a)] = a
    return out


# -------------------------------------------------------- the RFC's examples
def test_seed_window_examples_verbatim():
    # tf.data.range(5).window(3) produces {{0, 1, 2}, {1, 2, 3}, {2, 3, 4}}
    builder = kerasbatch.WindowBuilder(3, shuffle=False)
    dataset = builder.build_from_dataset(tf.data.Dataset.range(5))
    assert windows_of(dataset) == [[0, 1, 2], [1, 2, 3], [2, 3, 4]]
    # tf.data.range(5).window(3, 3, 1, False) produces {{0, 1, 2}, {3, 4}}
    builder = kerasbatch.WindowBuilder(3, 3, 1, False, shuffle=False)
    dataset = builder.build_from_dataset(tf.data.Dataset.range(5))
    assert windows_of(dataset) == [[0, 1, 2], [3, 4]]
    # tf.data.range(6).window(3, 1, 2) produces {{0, 2, 4}, {1, 3, 5}}
    builder = kerasbatch.WindowBuilder(3, 1, 2, shuffle=False)
    dataset = builder.build_from_dataset(tf.data.Dataset.range(6))
    assert windows_of(dataset) == [[0, 2, 4], [1, 3, 5]]


def test_seed_window_defaults_are_shift_1_stride_1_drop_remainder():
    builder = kerasbatch.WindowBuilder(3)
    assert (builder.shift, builder.stride, builder.drop_remainder) == (1, 1, True)


def test_in_memory_windows_match_the_dataset_windows():
    builder = kerasbatch.WindowBuilder(3, 1, 2, shuffle=False)
    assert windows_of(builder.build(np.arange(6))) == [[0, 2, 4], [1, 3, 5]]
    assert int(builder.build(np.arange(6)).cardinality()) == 2


@settings(max_examples=40, deadline=None)
@given(
    num_elements=st.integers(1, 12),
    size=st.integers(1, 5),
    shift=st.integers(1, 5),
    stride=st.integers(1, 3),
    drop_remainder=st.booleans(),
)
def test_window_positions_are_tf_data_windows(
    num_elements, size, shift, stride, drop_remainder
):
    expected = [
        w.tolist()
        for w in tf.data.Dataset.range(num_elements)
        .window(size, shift, stride, drop_remainder)
        .flat_map(lambda w: w.batch(size))
        .as_numpy_iterator()
    ]
    positions, splits = window_positions(
        num_elements, size, shift, stride, drop_remainder
    )
    assert [w.tolist() for w in np.split(positions, splits[1:-1])] == (
        expected if expected else [[]]
    )


def test_seed_end_to_end_example_verbatim():
    dataset = tf.data.Dataset.from_generator(seed_generator, (tf.string, tf.int32))
    builder = kerasbatch.WindowBuilder(
        2, 2, shuffle=False, reducers={"x": "batch", "y": PaddedBatch(length=2)}
    )
    got = [
        (x.numpy().tolist(), y.numpy().tolist())
        for x, y in builder.build_from_dataset(dataset)
    ]
    assert got == [
        ([b"a", b"b"], [[1, 0], [2, 0]]),
        ([b"c", b"d"], [[3, 0], [4, 4]]),
    ]
    statistics = builder.statistics()
    assert statistics.component_efficiency == {"y": 5 / 8}
    assert (statistics.num_batches, statistics.num_elements) == (2, 4)


def test_seed_end_to_end_in_memory_with_default_reducers():
    """By default y pads to each window's longest element, not to 2."""
    builder = kerasbatch.WindowBuilder(2, 2, shuffle=False)
    dataset = builder.build(
        np.array(["a", "b", "c", "d"]), [np.array([1]), [2], [3], [4, 4]]
    )
    got = [(x.numpy().tolist(), y.numpy().tolist()) for x, y in dataset]
    assert got == [([b"a", b"b"], [[1], [2]]), ([b"c", b"d"], [[3, 0], [4, 4]])]
    assert builder.statistics().padding_efficiency == 5 / 6


# ------------------------------------------------------ per-component logic
def test_each_component_gets_its_own_reducer():
    tokens = [np.arange(1, n + 1) for n in (2, 1, 3, 2, 4, 1)]
    frames = [np.full((n, 2), i, np.float32) for i, n in enumerate((1, 3, 1, 2, 2, 2))]
    labels = np.arange(6, dtype=np.float32)
    label_sum = kerasbatch.Reducer(
        lambda _: 0.0, lambda total, label: total + label, lambda total: total
    )
    builder = kerasbatch.WindowBuilder(
        3,
        3,
        shuffle=False,
        reducers={
            "tokens": "padded",
            "frames": PaddedBatch(value=-1, length=4),
            "y": label_sum,
            "sample_weight": "count",
        },
    )
    dataset = builder.build(
        {"tokens": tokens, "frames": frames}, labels, sample_weight=np.ones(6)
    )
    batches = list(dataset)
    assert len(batches) == 2
    for window, (x, y, count) in enumerate(batches):
        members = slice(3 * window, 3 * window + 3)
        np.testing.assert_array_equal(x["tokens"], padded(tokens[members]))
        expected_frames = padded(frames[members], 4)
        for i, frame in enumerate(frames[members]):
            expected_frames[i, len(frame) :] = -1
        np.testing.assert_array_equal(x["frames"], expected_frames)
        assert float(y) == labels[members].sum()
        assert int(count) == 3
    assert dataset.element_spec[0]["frames"].shape.as_list() == [None, 4, 2]
    statistics = builder.statistics()
    assert statistics.component_efficiency == {
        "tokens": (6 + 7) / (3 * 3 + 3 * 4),
        "frames": (5 + 6) / (3 * 4 + 3 * 4),
    }


def test_windows_of_per_example_features_need_no_sequence():
    features = np.arange(20, dtype=np.float32).reshape(10, 2)
    builder = kerasbatch.WindowBuilder(4, 2, shuffle=False)
    batches = [np.asarray(b) for b in builder.build(features)]
    assert [b.tolist() for b in batches] == [
        features[s : s + 4].tolist() for s in (0, 2, 4, 6)
    ]
    statistics = builder.statistics()
    assert (statistics.padding_efficiency, statistics.component_efficiency) == (1.0, {})


def test_dense_reducer_stacks_sequences_of_one_length_per_window():
    x = [np.full(n, i) for i, n in enumerate((2, 2, 3, 3))]
    builder = kerasbatch.WindowBuilder(2, 2, reducers={"x": "dense"}, shuffle=False)
    shapes = [b.shape for b in builder.build(x)]
    assert shapes == [(2, 2), (2, 3)]
    assert builder.statistics().padding_efficiency == 1.0


def test_max_length_truncates_before_reducing():
    x = [np.arange(1, n + 1) for n in (1, 5, 2, 3)]
    builder = kerasbatch.WindowBuilder(
        2, 2, shuffle=False, max_length=3, overflow="truncate"
    )
    batches = [np.asarray(b).tolist() for b in builder.build(x)]
    assert batches == [[[1, 0, 0], [1, 2, 3]], [[1, 2, 0], [1, 2, 3]]]
    assert (
        builder.statistics().truncated,
        builder.statistics().truncated_positions,
    ) == (1, 2)


# ------------------------------------------------------------------- sparse
def test_padded_batches_of_sparse_components():
    elements, dense = sparse_elements([2, 1, 4, 3, 2])
    builder = kerasbatch.WindowBuilder(2, 2, drop_remainder=False, shuffle=False)
    dataset = builder.build(elements, y=np.arange(5))
    assert dataset.element_spec[0] == tf.SparseTensorSpec([None, None, 3], tf.float32)
    got = list(dataset)
    for window, (x, y) in enumerate(got):
        members = dense[2 * window : 2 * window + 2]
        assert np.asarray(y).tolist() == list(range(5))[2 * window : 2 * window + 2]
        assert isinstance(x, tf.SparseTensor)
        assert x.dense_shape.numpy().tolist() == [
            len(members),
            max(map(len, members)),
            3,
        ]
        np.testing.assert_array_equal(tf.sparse.to_dense(x), padded(members))
    statistics = builder.statistics()
    assert statistics.component_efficiency == {"x": 12 / (2 * 2 + 2 * 4 + 1 * 2)}


def test_sparse_elements_may_differ_in_every_dimension():
    elements = [
        tf.sparse.from_dense(np.array([[1, 0, 2]], np.int32)),
        tf.sparse.from_dense(np.array([[0, 3], [4, 0]], np.int32)),
    ]
    builder = kerasbatch.WindowBuilder(2, reducers={"x": PaddedBatch(length=3)})
    (batch,) = list(builder.build(elements))
    assert batch.dense_shape.numpy().tolist() == [2, 3, 3]
    np.testing.assert_array_equal(
        tf.sparse.to_dense(batch),
        [[[1, 0, 2], [0, 0, 0], [0, 0, 0]], [[0, 3, 0], [4, 0, 0], [0, 0, 0]]],
    )


def test_sparse_truncation_and_user_reducers():
    elements, dense = sparse_elements([4, 1], width=2)
    nonzeros = kerasbatch.Reducer(
        lambda _: 0, lambda total, e: total + tf.size(e.values), lambda total: total
    )
    builder = kerasbatch.WindowBuilder(
        2, max_length=2, overflow="truncate", reducers={"y": nonzeros}
    )
    ((x, count),) = list(builder.build(elements, y=elements))
    np.testing.assert_array_equal(tf.sparse.to_dense(x), padded([d[:2] for d in dense]))
    assert int(count) == sum(int((d[:2] != 0).sum()) for d in dense)


def to_dense(x):
    """A sparse batch made dense, as each backend receives it.

    TensorFlow trains on the `tf.SparseTensor`; Keras hands JAX a BCOO array
    (or, building the model from the dataset's spec, a dense one).
    """
    if isinstance(x, tf.SparseTensor):
        return tf.sparse.to_dense(x)
    return x.todense() if hasattr(x, "todense") else x


class SparseModel(keras.Model):
    """Sums a sparse (batch, time, 3) input over time; records every batch."""

    def __init__(self):
        super().__init__()
        self.out = keras.layers.Dense(1)
        self.recorded = []

    def call(self, x):
        return self.out(keras.ops.sum(to_dense(x), axis=1))

    # The data is the last argument on every backend (JAX passes the state
    # first); run_eagerly makes it concrete.
    def train_step(self, *arguments):
        x, y = arguments[-1]
        self.recorded.append(
            (
                keras.ops.convert_to_numpy(to_dense(x)),
                keras.ops.convert_to_numpy(y).tolist(),
            )
        )
        return super().train_step(*arguments)


def test_sparse_windows_train_a_model_with_the_callbacks():
    elements, dense = sparse_elements([3, 1, 4, 2, 5, 2, 1, 3])
    builder = kerasbatch.WindowBuilder(2, 2, seed=4)
    dataset = builder.build(elements, y=np.arange(8, dtype=np.float32))
    model = SparseModel()
    model.compile("sgd", "mse", run_eagerly=True)
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
    for epoch, batches in enumerate(batches_per_epoch(model.recorded, 4)):
        plan = builder.plan(epoch)
        assert [y for _, y in batches] == [b.tolist() for b in plan.batches()]
        for x, ids in batches:
            np.testing.assert_array_equal(x, padded([dense[int(i)] for i in ids]))
        efficiency = history.history["padding_efficiency"][epoch]
        assert efficiency == builder.statistics(epoch).padding_efficiency
    assert (
        builder.plan(0).batches()[0].tolist() != builder.plan(1).batches()[0].tolist()
    )


# ------------------------------------------------- exactly once, determinism
def test_non_overlapping_windows_feed_every_element_exactly_once():
    x, _ = make_sequences(50)
    builder = kerasbatch.WindowBuilder(7, 7, drop_remainder=False, seed=5)
    dataset = builder.build(x, y=np.arange(50))
    for epoch in range(2):
        ids = [np.asarray(y) for _, y in dataset]
        assert sorted(np.concatenate(ids).tolist()) == list(range(50))
        assert all(np.array_equal(w, np.arange(w[0], w[0] + len(w))) for w in ids)
        assert builder.last_started_epoch == epoch
    statistics = builder.statistics()
    assert (statistics.num_batches, statistics.num_elements, statistics.dropped) == (
        8,
        50,
        0,
    )
    assert int(dataset.cardinality()) == 8


def test_strided_windows_without_overlap_count_the_skipped_elements():
    builder = kerasbatch.WindowBuilder(3, shift=6, stride=2, drop_remainder=False)
    builder.build(np.arange(20))
    fed = builder.plan(0).indices
    assert sorted(fed.tolist()) == [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]
    assert builder.statistics().dropped == 10


def test_overlapping_windows_feed_an_element_once_per_window():
    builder = kerasbatch.WindowBuilder(4, 1, drop_remainder=True)
    builder.build([np.ones(n) for n in range(1, 11)])  # lengths 1..10
    statistics = builder.statistics()
    assert (statistics.num_batches, statistics.num_elements) == (7, 28)
    assert statistics.dropped == 0
    # Window s holds the lengths s+1..s+4 and pads to s+4.
    real = sum(4 * s + 10 for s in range(7))
    padded_positions = sum(4 * (s + 4) for s in range(7))
    assert statistics.padding_efficiency == real / padded_positions


def test_adapt_plans_windows_from_lengths_and_element_batch_probes_one():
    builder = kerasbatch.WindowBuilder(2, 2, shuffle=False)
    builder.adapt(np.array([1, 3, 2, 2]))
    assert builder.statistics().padding_efficiency == 8 / 10
    builder.build([np.full(n, n) for n in (1, 3, 2, 2)])
    np.testing.assert_array_equal(builder.element_batch(1, 2), [[3, 3, 3]] * 2)


def test_statistics_match_the_tensors_fed():
    x, lengths = make_sequences(100, max_length=30)
    builder = kerasbatch.WindowBuilder(8, 5, seed=1)
    real = padded_positions = 0
    for batch, ids in builder.build(x, y=np.arange(100)):
        real += int(lengths[np.asarray(ids)].sum())
        padded_positions += batch.shape[0] * batch.shape[1]
    assert builder.statistics().padding_efficiency == real / padded_positions


def test_windows_are_deterministic_per_seed_and_epoch_and_reshuffled():
    x, _ = make_sequences(60)
    first = kerasbatch.WindowBuilder(4, 4, seed=9)
    second = kerasbatch.WindowBuilder(4, 4, seed=9)
    first_dataset = first.build(x, y=np.arange(60))
    second_dataset = second.build(x, y=np.arange(60))
    orders = []
    for _ in range(3):
        a = [np.asarray(y).tolist() for _, y in first_dataset]
        b = [np.asarray(y).tolist() for _, y in second_dataset]
        assert a == b
        orders.append(a)
    assert orders[0] != orders[1] != orders[2]
    # Window contents never change, only their order.
    assert sorted(orders[0]) == sorted(orders[1]) == sorted(orders[2])
    first.set_epoch(1)
    assert [np.asarray(y).tolist() for _, y in first_dataset] == orders[1]
    other = kerasbatch.WindowBuilder(4, 4, seed=10)
    other.build(x)
    assert [b.tolist() for b in other.plan(0).batches()] != orders[0]


@pytest.mark.backend
def test_windows_train_a_model_with_epoch_reshuffle_and_padding_efficiency():
    x, _ = make_sequences(40, max_length=12)
    builder = kerasbatch.WindowBuilder(5, 5, seed=2, reducers={"x": "padded"})
    dataset = builder.build(x, y=np.arange(40))
    model = recording_model()
    callback = kerasbatch.callbacks.PaddingEfficiency(builder, per_batch=True)
    history = model.fit(
        dataset,
        epochs=3,
        initial_epoch=1,
        verbose=0,
        shuffle=False,
        callbacks=[kerasbatch.callbacks.EpochReshuffle(builder), callback],
    )
    for epoch, batches in zip(
        (1, 2), batches_per_epoch(model.recorded, 8), strict=True
    ):
        assert batches == [b.tolist() for b in builder.plan(epoch).batches()]
        efficiency = history.history["padding_efficiency"][epoch - 1]
        assert efficiency == builder.statistics(epoch).padding_efficiency
    real, padded_positions = builder.running_positions(8)
    assert real / padded_positions == builder.statistics(2).padding_efficiency


# --------------------------------------------------------------------- config
@keras.saving.register_keras_serializable(package="test_window_builder")
def start_at_zero(_):
    return 0.0


@keras.saving.register_keras_serializable(package="test_window_builder")
def add(total, value):
    return total + value


@keras.saving.register_keras_serializable(package="test_window_builder")
def unchanged(total):
    return total


@pytest.mark.parametrize(
    "builder",
    [
        kerasbatch.WindowBuilder(3),
        kerasbatch.WindowBuilder(
            4,
            shift=2,
            stride=3,
            drop_remainder=False,
            reducers={"x": PaddedBatch(value=-1, length=9), "y": "count"},
            shuffle=False,
            seed=3,
            max_length=9,
            overflow="drop",
            prefetch=2,
        ),
        kerasbatch.WindowBuilder(
            2, reducers={"y": kerasbatch.Reducer(start_at_zero, add, unchanged)}
        ),
    ],
)
def test_config_round_trip(builder):
    config = json.loads(json.dumps(builder.get_config()))
    assert kerasbatch.WindowBuilder.from_config(config) == builder
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(builder)
    )
    assert restored == builder


def test_round_tripped_builder_yields_the_same_batches():
    x, _ = make_sequences(30)
    builder = kerasbatch.WindowBuilder(
        3, 2, reducers={"y": kerasbatch.Reducer(start_at_zero, add, unchanged)}
    )
    restored = kerasbatch.WindowBuilder.from_config(builder.get_config())
    labels = np.arange(30, dtype=np.float32)
    a = [(np.asarray(b), float(s)) for b, s in builder.build(x, labels)]
    b = [(np.asarray(b), float(s)) for b, s in restored.build(x, labels)]
    assert all(
        np.array_equal(p[0], q[0]) and p[1] == q[1] for p, q in zip(a, b, strict=True)
    )


def test_unregistered_user_reducers_have_no_config_but_a_repr():
    builder = kerasbatch.WindowBuilder(
        2, reducers={"y": kerasbatch.Reducer(lambda _: 0, add, unchanged)}
    )
    with pytest.raises(ValueError, match="Reducer init_fn .* is not registered"):
        builder.get_config()
    assert "reducers={'y': Reducer(init_fn=" in repr(builder)
    assert builder == builder


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("argument", ["size", "shift", "stride"])
@pytest.mark.parametrize("value", [0, -2, None, 1.5])
def test_window_arguments_must_be_positive_ints(argument, value):
    arguments = {"size": 3, "shift": 1, "stride": 1, argument: value}
    with pytest.raises(ValueError, match=f"{argument} must be a positive int"):
        kerasbatch.WindowBuilder(**arguments)


def test_reducers_must_name_existing_components():
    builder = kerasbatch.WindowBuilder(2, reducers={"z": "padded"})
    with pytest.raises(
        ValueError, match=r"reducers names \['z'\], but the components are \['x', 'y'\]"
    ):
        builder.build([np.ones(2)] * 4, y=np.zeros(4))


def test_unknown_reducers_are_rejected_at_construction():
    with pytest.raises(ValueError, match=r"reducers\['y'\]: Unknown reducer 'sum'"):
        kerasbatch.WindowBuilder(2, reducers={"y": "sum"})
    with pytest.raises(TypeError, match="reducers must be a dict"):
        kerasbatch.WindowBuilder(2, reducers=["padded"])


def test_a_reducer_that_changes_its_state_structure_names_the_component():
    pairs = kerasbatch.Reducer(lambda _: 0, lambda state, v: (state, state), unchanged)
    builder = kerasbatch.WindowBuilder(2, reducers={"y": pairs})
    with pytest.raises(
        ValueError,
        match=r"of component 'y' failed: reduce_fn returned a state of structure "
        r"\('int32', 'int32'\), but init_fn returned int32",
    ):
        builder.build([np.ones(2)] * 4, y=np.zeros(4))


def test_a_reducer_that_changes_its_state_dtype_names_the_component():
    floats = kerasbatch.Reducer(
        lambda _: 0, lambda state, v: tf.cast(v, tf.float32), unchanged
    )
    builder = kerasbatch.WindowBuilder(2, reducers={"y": floats})
    with pytest.raises(TypeError, match="of component 'y' failed: .*must match"):
        builder.build([np.ones(2)] * 4, y=np.zeros(4))


def test_dense_reducer_on_elements_of_different_lengths_names_them():
    builder = kerasbatch.WindowBuilder(2, 2, reducers={"x": "dense"})
    with pytest.raises(
        ValueError,
        match=r"Reducer 'dense' of component 'x' needs elements of one shape, but "
        r"window 1 holds element 2 of shape \(1,\) and element 3 of shape \(2,\)",
    ):
        builder.build([np.ones(1), np.ones(1), np.ones(1), np.ones(2)])


def test_elements_whose_components_disagree_are_rejected():
    builder = kerasbatch.WindowBuilder(2)
    with pytest.raises(ValueError, match="x has 4 elements but y has 3"):
        builder.build([np.ones(2)] * 4, y=np.zeros(3))
    sparse = [
        tf.sparse.from_dense(np.ones((2, 2))),
        tf.sparse.from_dense(np.ones((1, 2, 2))),
    ]
    with pytest.raises(
        ValueError, match="x element 1 has rank 3, but element 0 has rank 2"
    ):
        builder.build(sparse)
    mixed = [tf.sparse.from_dense(np.ones((2, 2))), np.ones((2, 2))]
    with pytest.raises(
        TypeError, match=r"x mixes tf.SparseTensor and dense elements \(element 1"
    ):
        builder.build(mixed)
    with pytest.raises(
        ValueError, match="y element 1 has length 2 but x element 1 has length 1"
    ):
        builder.build([np.ones(1)] * 2, y=[np.ones(1), np.ones(2)])


def test_sparse_padding_value_must_be_zero():
    elements, _ = sparse_elements([2, 3])
    builder = kerasbatch.WindowBuilder(2, reducers={"x": PaddedBatch(value=-1)})
    with pytest.raises(
        ValueError, match="component 'x' failed: .*PaddedBatch needs value=0"
    ):
        builder.build(elements)


def test_too_few_elements_for_a_window_and_too_long_elements():
    with pytest.raises(
        ValueError,
        match="No window: 4 elements cannot fill a window of size 5 with stride 1; keep",
    ):
        kerasbatch.WindowBuilder(5).build([np.ones(2)] * 4)
    builder = kerasbatch.WindowBuilder(2, reducers={"x": PaddedBatch(length=2)})
    with pytest.raises(
        ValueError, match="padded to the fixed length 2, but element 1 is 3 long"
    ):
        builder.build([np.ones(2), np.ones(3)])
    with pytest.raises(ValueError, match="The dataset is infinite"):
        builder.build_from_dataset(tf.data.Dataset.range(3).repeat())
    quadruples = tf.data.Dataset.range(3).map(lambda i: (i, i, i, i))
    with pytest.raises(ValueError, match="Dataset elements are tuples of 4"):
        builder.build_from_dataset(quadruples)
    dropping = kerasbatch.WindowBuilder(1, max_length=1, overflow="drop")
    with pytest.raises(ValueError, match="overflow='drop' drops every element"):
        dropping.build([np.ones(2)] * 3)
