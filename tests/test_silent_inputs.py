"""Inputs that were once accepted in silence or refused with an unclear
error: each is now a clear error that says what and where, on
every engine and builder family that takes it."""

import numpy as np
import pytest
import tensorflow as tf

import kerasbatch

X = [np.ones(n, np.int32) for n in (2, 3, 5, 6, 7)]
ENGINES = ["tf.data", "python"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("y", "sample_weight", "match"),
    [
        (
            {"a": np.zeros(5)},
            {"b": np.ones(5)},
            r"sample_weight has the keys \['b'\], which y does not have "
            r"\(y's keys: \['a'\]\)",
        ),
        (
            np.zeros(5),
            {"b": np.ones(5)},
            r"sample_weight is a dict \(keys \['b'\]\), but y is one array",
        ),
    ],
)
def test_sample_weights_must_name_targets_of_y(engine, y, sample_weight, match):
    builder = kerasbatch.PaddedBuilder(batch_size=2)
    with pytest.raises(ValueError, match=match):
        builder.build(X, y, sample_weight, engine=engine)


def test_a_subset_of_ys_keys_weighs_those_targets():
    builder = kerasbatch.PaddedBuilder(batch_size=5, shuffle=False)
    y = {"a": np.zeros(5), "b": np.ones(5)}
    (_, _, weights) = next(
        iter(builder.build(X, y, {"b": np.arange(5.0)}, engine="python"))
    )
    assert weights["b"].tolist() == [0, 1, 2, 3, 4]


def test_output_lengths_does_not_overwrite_a_component_of_x():
    x = {"x": X, "x_length": np.arange(5)}
    match = r"output_lengths=True adds the entry 'x_length' to x, but x already"
    with pytest.raises(ValueError, match=match):
        kerasbatch.PaddedBuilder(batch_size=2, output_lengths=True).build(x)
    elements = [{"x": a, "x_length": np.int64(len(a))} for a in X]
    stream = kerasbatch.StreamBucketBuilder(boundaries=[4], output_lengths=True)
    with pytest.raises(ValueError, match=match):
        stream.build(elements, engine="grain")
    # Without output_lengths, a user's own x_length is an input as any other.
    built = kerasbatch.PaddedBuilder(batch_size=5, shuffle=False).build(
        x, engine="python"
    )
    assert built[0]["x_length"].tolist() == [0, 1, 2, 3, 4]


def test_integers_that_the_common_dtype_cannot_hold_are_refused():
    big = np.array([2**53 + 1, 1], np.int64)
    with pytest.raises(
        ValueError,
        match=r"x element 1 holds the int64 value 9007199254740993, which "
        r"float64 .* cannot hold exactly: give every element one dtype",
    ):
        kerasbatch.PaddedBuilder(batch_size=2).build([np.ones(2, np.float32), big])
    # Integers float64 holds exactly mix as before.
    small = np.array([2**53, 1], np.int64)
    built = kerasbatch.PaddedBuilder(batch_size=2, shuffle=False).build(
        [np.ones(2, np.float32), small], engine="python"
    )
    assert built[0].dtype == np.float64 and built[0][1, 0] == 2**53


def test_sparse_input_is_named_with_what_to_pass_instead():
    sparse = tf.sparse.from_dense(np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"x element 0 is a sparse tensor; pass dense"):
        kerasbatch.PaddedBuilder(batch_size=2).build([sparse, sparse])
    with pytest.raises(TypeError, match=r"x is a sparse tensor; pass a list of dense"):
        kerasbatch.PaddedBuilder(batch_size=2).build(
            tf.sparse.from_dense(np.ones((2, 3)))
        )


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (
            lambda: kerasbatch.BucketBuilder([3, 10**20]),
            r"boundaries must be below 2\*\*62 .*boundaries\[1\]",
        ),
        (
            lambda: kerasbatch.StreamBucketBuilder(boundaries=[3], seed=2**70),
            r"seed must be an int in \[0, 2\*\*63\)",
        ),
        (
            lambda: kerasbatch.BucketBuilder([3], seed=2**63),
            r"seed must be an int in \[0, 2\*\*63\)",
        ),
        (
            lambda: kerasbatch.PaddedBuilder(batch_size=2**64),
            r"batch_size must be a positive int below 2\*\*62",
        ),
        (
            lambda: kerasbatch.BucketBuilder([3], max_length=2**63),
            r"max_length must be a positive int below 2\*\*62",
        ),
    ],
)
def test_settings_too_large_for_int64_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    "make",
    [
        lambda: kerasbatch.BucketBuilder([4], max_length=1, overflow="drop"),
        lambda: kerasbatch.BucketBuilder("auto", max_length=1, overflow="drop"),
        lambda: kerasbatch.PaddedBuilder(batch_size=2, max_length=1, overflow="drop"),
    ],
)
def test_dropping_every_element_names_max_length_and_the_count(make):
    with pytest.raises(
        ValueError,
        match=r"max_length=1 with overflow='drop' drops every element: all 5 are "
        r"longer \(the shortest is 2\)",
    ):
        make().build(X)


def test_a_stream_that_would_drop_every_element_says_so():
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[4], max_length=1, overflow="drop"
    )
    with pytest.raises(ValueError, match=r"drops every element: all 5"):
        builder.build(X, [len(a) for a in X], engine="grain")


@pytest.mark.parametrize("engine", ENGINES)
def test_a_chunk_builder_without_frames_says_no_chunk_can_be_cut(engine):
    builder = kerasbatch.ChunkBuilder(4, batch_size=2)
    with pytest.raises(
        ValueError, match=r"No chunk can be cut: every one of the 3 sequences has 0"
    ):
        builder.build([np.ones((0, 3)) for _ in range(3)], engine=engine)
    builder = kerasbatch.ChunkBuilder(4, batch_size=2, min_chunk_size=3)
    with pytest.raises(
        ValueError, match=r"every chunk is shorter than min_chunk_size=3 \(the longest"
    ):
        builder.build([np.ones((2, 3)) for _ in range(3)], engine=engine)
