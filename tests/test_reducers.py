"""Reducers: the tf.data RFC's examples, built-ins, sparse padding, config, bad input."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbatch
from kerasbatch.data import reducers
from kerasbatch.data.reducers import Count, DenseBatch, PaddedBatch
from kerasbatch.engines.tf_data.reducers import Window, reduce


def sparse_window(dense_elements):
    """A `Window` of sparse elements, as `WindowBuilder` makes it."""
    elements = [tf.sparse.from_dense(np.asarray(e, np.float32)) for e in dense_elements]
    shapes = np.stack([e.dense_shape.numpy() for e in elements])
    batch = tf.sparse.SparseTensor(
        indices=np.concatenate(
            [
                np.column_stack([np.full(len(e.indices), i), e.indices.numpy()])
                for i, e in enumerate(elements)
            ]
        ),
        values=np.concatenate([e.values.numpy() for e in elements]),
        dense_shape=[len(elements), *shapes.max(axis=0)],
    )
    return Window(batch, tf.constant(shapes))


def padded(dense_elements, shape):
    out = np.zeros(shape, np.float32)
    for i, element in enumerate(dense_elements):
        element = np.asarray(element, np.float32)
        out[(i, *(slice(0, n) for n in element.shape))] = element
    return out


# -------------------------------------------------------- the RFC's examples
def test_seed_example_0_count_elements():
    def init_fn(_):
        return 0

    def reduce_fn(state, value):
        return state + 1

    def finalize_fn(state):
        return state

    count_reducer = kerasbatch.Reducer(init_fn, reduce_fn, finalize_fn)
    window = Window(tf.range(10, dtype=tf.int64))
    assert int(reduce(count_reducer, window)) == 10
    assert int(reduce(Count(), window)) == 10


def test_seed_example_1_batch_of_dense_tensors():
    """The RFC's concat-growing reducer (tf.data relaxes the state's shape)."""
    window = Window(tf.range(5, dtype=tf.int64))

    def batch_init_fn(_):
        return tf.zeros([0], tf.int64)

    def batch_reduce_fn(state, value):
        return tf.concat([state, [value]], 0)

    def batch_finalize_fn(state):
        return state

    batch_reducer = kerasbatch.Reducer(
        batch_init_fn, batch_reduce_fn, batch_finalize_fn
    )
    assert reduce(batch_reducer, window).numpy().tolist() == [0, 1, 2, 3, 4]
    assert reduce(DenseBatch(), window).numpy().tolist() == [0, 1, 2, 3, 4]


def test_seed_example_2_padded_batch_of_dense_tensors():
    window = Window(tf.ragged.constant([[1], [2]]))
    padded_shape = tf.constant([2])

    def init_fn(_):
        return 0, padded_shape

    def reduce_fn(state, value):
        count, shape = state
        return count + 1, tf.maximum(shape, tf.shape(value))

    def finalize_fn(state):
        return state

    count, shape = reduce(kerasbatch.Reducer(init_fn, reduce_fn, finalize_fn), window)
    assert (int(count), shape.numpy().tolist()) == (2, [2])
    batch = reduce(PaddedBatch(length=2), window)
    assert batch.numpy().tolist() == [[1, 0], [2, 0]]


# ------------------------------------------------------------------ built-ins
def test_padded_batch_pads_to_the_longest_element_with_the_value():
    window = Window(tf.ragged.constant([[[1, 1]], [[2, 2], [3, 3]]], ragged_rank=1))
    batch = reduce(PaddedBatch(value=-1), window)
    assert batch.numpy().tolist() == [[[1, 1], [-1, -1]], [[2, 2], [3, 3]]]


def test_built_ins_stack_per_example_values_unchanged():
    labels = Window(tf.constant([[1.0, 2.0], [3.0, 4.0]]))
    for reducer in (DenseBatch(), PaddedBatch(value=-1)):
        assert reduce(reducer, labels).numpy().tolist() == [[1, 2], [3, 4]]
    assert int(reduce(Count(), labels)) == 2


def test_dense_batch_stacks_equal_length_sequences():
    window = Window(tf.ragged.constant([[1, 2], [3, 4]]))
    assert reduce(DenseBatch(), window).numpy().tolist() == [[1, 2], [3, 4]]


def test_padded_batch_of_sparse_tensors_grows_every_dimension_to_the_max():
    elements = [[[1, 0, 2]], [[0, 3], [4, 0]]]  # shapes (1, 3) and (2, 2)
    window = sparse_window(elements)
    batch = reduce(PaddedBatch(), window)
    assert isinstance(batch, tf.SparseTensor)
    assert batch.dense_shape.numpy().tolist() == [2, 2, 3]
    np.testing.assert_array_equal(
        tf.sparse.to_dense(batch).numpy(), padded(elements, (2, 2, 3))
    )
    fixed = reduce(PaddedBatch(length=4), window)
    assert fixed.dense_shape.numpy().tolist() == [2, 4, 3]
    np.testing.assert_array_equal(
        tf.sparse.to_dense(fixed).numpy(), padded(elements, (2, 4, 3))
    )


def test_sparse_window_elements_keep_their_own_shapes():
    elements = [[[1, 0, 2]], [[0, 3], [4, 0]]]
    got = list(sparse_window(elements).elements())
    assert [e.dense_shape.numpy().tolist() for e in got] == [[1, 3], [2, 2]]
    for element, expected in zip(got, elements, strict=True):
        np.testing.assert_array_equal(tf.sparse.to_dense(element).numpy(), expected)
    nonzeros = kerasbatch.Reducer(
        lambda _: 0, lambda state, e: state + tf.size(e.values), lambda s: s
    )
    assert int(reduce(nonzeros, sparse_window(elements))) == 4


def test_built_ins_gather_once_instead_of_reducing_element_by_element():
    """No per-element loop (ReduceDataset) in a built-in's graph; a Reducer has one."""
    spec = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)

    def op_types(reducer):
        function = tf.function(lambda values: reduce(reducer, Window(values)))
        graph = function.get_concrete_function(spec).graph
        return {op.type for op in graph.get_operations()}

    for built_in in (Count(), DenseBatch(), PaddedBatch(), PaddedBatch(length=8)):
        assert not {"ReduceDataset", "While", "ConcatV2"} & op_types(built_in)
    user = kerasbatch.Reducer(lambda _: 0, lambda s, v: s + 1, lambda s: s)
    assert "ReduceDataset" in op_types(user)


# --------------------------------------------------------------------- config
def test_get_resolves_names_aliases_configs_and_instances():
    assert reducers.get("count") == Count()
    assert reducers.get("dense") == reducers.get("batch") == DenseBatch()
    assert reducers.get("padded") == PaddedBatch()
    reducer = PaddedBatch(value=-1, length=16)
    assert reducers.get(reducer) is reducer
    assert PaddedBatch(length=16) != reducer


@pytest.mark.parametrize(
    "reducer", [Count(), DenseBatch(), PaddedBatch(), PaddedBatch(value=-1, length=7)]
)
def test_built_in_config_round_trip_through_json(reducer):
    config = json.loads(json.dumps(reducers.serialize(reducer)))
    assert reducers.get(config) == reducer
    assert type(reducer).from_config(reducer.get_config()) == reducer


@keras.saving.register_keras_serializable(package="test_reducers")
def zero(_):
    return 0


@keras.saving.register_keras_serializable(package="test_reducers")
def add_one(state, value):
    return state + 1


@keras.saving.register_keras_serializable(package="test_reducers")
def identity(state):
    return state


def test_reducer_of_registered_functions_round_trips():
    reducer = kerasbatch.Reducer(zero, add_one, identity)
    assert reducer.get_config() == {
        "init_fn": "test_reducers>zero",
        "reduce_fn": "test_reducers>add_one",
        "finalize_fn": "test_reducers>identity",
    }
    restored = reducers.get(json.loads(json.dumps(reducers.serialize(reducer))))
    assert restored == reducer
    assert int(reduce(restored, Window(tf.range(3)))) == 3
    assert (
        repr(reducer)
        == "Reducer(init_fn=zero, reduce_fn=add_one, finalize_fn=identity)"
    )


def test_reducer_of_unregistered_functions_has_no_config():
    reducer = kerasbatch.Reducer(zero, lambda state, value: state + 1, identity)
    with pytest.raises(
        ValueError, match="Reducer reduce_fn .*lambda.* is not registered"
    ):
        reducer.get_config()
    with pytest.raises(
        ValueError, match="Reducer init_fn 'nowhere>zero' is not registered"
    ):
        kerasbatch.Reducer.from_config(
            {"init_fn": "nowhere>zero", "reduce_fn": "x", "finalize_fn": "y"}
        )


# ------------------------------------------------------------------ bad input
def test_unknown_reducer_names_and_types_are_rejected():
    with pytest.raises(ValueError, match=r"Unknown reducer 'sum'; the built-ins are"):
        reducers.get("sum")
    with pytest.raises(TypeError, match="A reducer must be a built-in name"):
        reducers.get(3)
    with pytest.raises(TypeError, match="Reducer reduce_fn must be callable"):
        kerasbatch.Reducer(zero, "add", identity)


def test_padded_batch_rejects_bad_lengths_and_sparse_padding_values():
    with pytest.raises(ValueError, match="windows have no buckets"):
        PaddedBatch(length="bucket")
    with pytest.raises(ValueError, match="Padding length must be"):
        PaddedBatch(length=0)
    with pytest.raises(ValueError, match="PaddedBatch needs value=0, got -1"):
        reduce(PaddedBatch(value=-1), sparse_window([[[1.0]]]))


def test_a_state_that_changes_structure_is_an_error():
    reducer = kerasbatch.Reducer(
        lambda _: 0, lambda state, value: (state, value), lambda state: state
    )
    with pytest.raises(
        ValueError,
        match=r"reduce_fn returned a state of structure \('int32', 'int32'\), "
        "but init_fn returned int32",
    ):
        reduce(reducer, Window(tf.range(3)))


def test_a_reducer_may_branch_on_its_elements_as_tf_data_allows():
    """A Python `if` on a tensor works in a `Reducer`'s functions, which are
    converted with AutoGraph as tf.data converts a user's (the engine's own
    run as written)."""

    def count_long(state, element):
        if tf.size(element) > 2:  # a tensor: AutoGraph makes it a tf.cond
            state += 1
        return state

    long_ones = kerasbatch.Reducer(lambda _: 0, count_long, lambda state: state)
    builder = kerasbatch.WindowBuilder(
        3, 3, shuffle=False, reducers={"x": "padded", "y": long_ones}
    )
    lengths = [1, 3, 4, 2, 5, 1]
    x = [np.arange(1, n + 1, dtype="int32") for n in lengths]
    y = [np.ones(n, "int32") for n in lengths]
    windows = list(builder.build(x, y, engine="tf.data"))
    assert [int(counted) for _, counted in windows] == [2, 1]
