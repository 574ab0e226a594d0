"""Builders: every option, exact statistics, config round trips, determinism."""

import functools
import json
import warnings

import numpy as np
import pytest
import tensorflow as tf
from conftest import make_sequences
from hypothesis import given, settings
from hypothesis import strategies as st

import kerasbatch
from kerasbatch import Padding


def element_ids(batch):
    """Element i is filled with i + 1, so a row's largest value names it."""
    return (np.asarray(batch).reshape(len(batch), -1).max(axis=1) - 1).tolist()


def collect(dataset):
    """Per batch: the tuple of (rows, labels) as numpy."""
    return [tuple(np.asarray(t) for t in element) for element in dataset]


def measured_efficiency(batches, lengths):
    """Padding efficiency recomputed from the tensors a dataset yields."""
    real = padded = 0
    for x, ids in batches:
        real += int(np.minimum(lengths[ids], x.shape[1]).sum())
        padded += x.shape[0] * x.shape[1]
    return real / padded


def build_labelled(builder, x):
    return builder.build(x, np.arange(len(x)))


def plan_only(builder, x):
    """Builds for the builder's plans and statistics alone: the python engine
    plans as tf.data does (the engines' batches are compared bit for bit
    elsewhere) without tracing a pipeline."""
    with warnings.catch_warnings():  # Keras never fits on these batches
        warnings.filterwarnings("ignore", "On the TensorFlow backend, Keras reads")
        return builder.build(x, engine="python")


# ---------------------------------------------------------------- each builder
def test_padded_builder_pads_each_random_batch_to_its_longest(sequences):
    x, lengths = sequences
    builder = kerasbatch.PaddedBuilder(batch_size=16, seed=3)
    batches = collect(build_labelled(builder, x))
    for bx, ids in batches:
        assert bx.shape[1] == lengths[ids].max()
    assert sorted(np.concatenate([ids for _, ids in batches])) == list(range(len(x)))
    order = np.concatenate([ids for _, ids in batches])
    assert not np.array_equal(order, np.arange(len(x)))  # shuffled
    assert measured_efficiency(batches, lengths) == pytest.approx(
        builder.statistics().padding_efficiency
    )


def test_padded_builder_without_shuffle_keeps_the_input_order(sequences):
    x, _ = sequences
    batches = collect(build_labelled(kerasbatch.PaddedBuilder(16, shuffle=False), x))
    np.testing.assert_array_equal(
        np.concatenate([i for _, i in batches]), np.arange(200)
    )


def test_sorted_builder_batches_neighbours_in_length_and_shuffles_batches(sequences):
    x, lengths = sequences
    builder = kerasbatch.SortedBuilder(batch_size=10, seed=1)
    batches = collect(build_labelled(builder, x))
    spans = [(lengths[ids].min(), lengths[ids].max()) for _, ids in batches]
    # Batches do not overlap in length (only at ties) ...
    ordered = sorted(spans)
    assert all(a[1] <= b[0] for a, b in zip(ordered, ordered[1:], strict=False))
    # ... and come in a shuffled order.
    assert spans != ordered
    # Equal lengths are reshuffled between epochs.
    other = builder.plan(epoch=1).batches()
    assert [sorted(b) for b in builder.plan(0).batches()] != [sorted(b) for b in other]


def test_sorted_builder_beats_padded_builder_on_efficiency(sequences):
    x, _ = sequences
    padded = kerasbatch.PaddedBuilder(16)
    ordered = kerasbatch.SortedBuilder(16)
    plan_only(padded, x)
    plan_only(ordered, x)
    assert (
        ordered.statistics().padding_efficiency > padded.statistics().padding_efficiency
    )


def test_bucket_builder_batches_stay_in_their_bucket(sequences):
    x, lengths = sequences
    builder = kerasbatch.BucketBuilder(boundaries=[10, 20, 30], batch_size=8, seed=2)
    batches = collect(build_labelled(builder, x))
    buckets = np.searchsorted([10, 20, 30], lengths, side="right")
    for _, ids in batches:
        assert len(set(buckets[ids])) == 1
    assert builder.resolved_boundaries == [10, 20, 30]
    assert builder.bucket_counts == np.bincount(buckets, minlength=4).tolist()
    assert measured_efficiency(batches, lengths) == pytest.approx(
        builder.statistics().padding_efficiency
    )


def test_bucket_batches_are_interleaved_not_in_runs(sequences):
    x, lengths = sequences
    builder = kerasbatch.BucketBuilder(boundaries=[10, 20, 30], batch_size=4, seed=0)
    plan_only(builder, x)
    buckets = np.searchsorted([10, 20, 30], lengths, side="right")
    sequence = [buckets[b[0]] for b in builder.plan(0).batches()]
    runs = 1 + sum(a != b for a, b in zip(sequence, sequence[1:], strict=False))
    # 4 buckets of ~12 batches: in bucket order there would be 4 runs.
    assert runs > len(sequence) / 2


@pytest.mark.parametrize(
    "strategy", ["auto", "uniform", "quantile", "equal_tokens", "optimal"]
)
def test_bucket_boundary_strategies(strategy, sequences):
    x, lengths = sequences
    builder = kerasbatch.BucketBuilder(boundaries=strategy, num_buckets=4, batch_size=8)
    plan_only(builder, x)
    name = "optimal" if strategy == "auto" else strategy
    assert builder.resolved_boundaries == kerasbatch.planning.boundaries.get(name)(
        lengths, 4
    )


def test_bucket_batch_sizes_per_bucket(sequences):
    x, lengths = sequences
    builder = kerasbatch.BucketBuilder(boundaries=[20], bucket_batch_sizes=[16, 4])
    for bx, ids in build_labelled(builder, x):
        expected = 16 if lengths[ids.numpy()].max() < 20 else 4
        assert bx.shape[0] <= expected
    sizes = builder.plan().batch_sizes
    counts = np.bincount(np.searchsorted([20], lengths, side="right"))
    assert len(sizes) == -(-counts[0] // 16) + -(-counts[1] // 4)


@pytest.mark.parametrize("quadratic_length", [None, 16])
@pytest.mark.parametrize("pad_to_bucket", [False, True])
def test_token_budget_holds_for_every_batch(quadratic_length, pad_to_bucket):
    x, lengths = make_sequences(300, seed=4, max_length=60, min_length=1)
    builder = kerasbatch.BucketBuilder(
        num_buckets=5,
        max_tokens=400,
        quadratic_length=quadratic_length,
        pad_to_bucket=pad_to_bucket,
    )
    batches = collect(build_labelled(builder, x))
    q = quadratic_length

    def cost(length):
        return length if q is None else length + length**2 / q

    for bx, _ in batches:
        assert bx.shape[0] * cost(bx.shape[1]) <= 400
    # The budget is used: the batch sizes are the largest that fit.
    sizes = builder.resolved_batch_sizes
    assert all(s >= 1 for s in sizes) and sizes == sorted(sizes, reverse=True)
    assert len({b for b, _ in [(x.shape[0], 0) for x, _ in batches]}) > 1


def test_token_budget_names_the_element_that_cannot_fit():
    x = [np.ones(n) for n in (3, 50, 4)]
    with pytest.raises(
        ValueError,
        match=r"Element 1 has length 50, whose cost 50 exceeds max_tokens=20",
    ):
        kerasbatch.BucketBuilder(max_tokens=20).build(x)
    with pytest.raises(
        ValueError, match=r"Element 1 has length 50, whose cost 100 exceeds"
    ):
        kerasbatch.BucketBuilder(max_tokens=60, quadratic_length=50).build(x)


def test_token_budget_names_a_bucket_whose_bound_cannot_fit():
    x = [np.ones(n) for n in (3, 10, 4)]
    builder = kerasbatch.BucketBuilder(
        boundaries=[5, 40], max_tokens=30, pad_to_bucket=True
    )
    with pytest.raises(ValueError, match=r"Bucket 1 pads to length 39"):
        builder.build(x)


def test_pad_to_bucket_bounds_the_shapes(sequences):
    x, lengths = sequences
    builder = kerasbatch.BucketBuilder(
        boundaries=[10, 20, 30], batch_size=8, pad_to_bucket=True
    )
    batches = collect(build_labelled(builder, x))
    assert {b.shape[1] for b, _ in batches} == {9, 19, 29, lengths.max()}
    # At most one shape per bucket and batch size.
    assert builder.statistics().distinct_shapes <= 4 * 2
    assert measured_efficiency(batches, lengths) == pytest.approx(
        builder.statistics().padding_efficiency
    )


def test_pad_to_bucket_uses_max_length_for_the_last_bucket(sequences):
    x, _ = sequences
    builder = kerasbatch.BucketBuilder(
        boundaries=[10, 20], batch_size=8, pad_to_bucket=True, max_length=50
    )
    assert {b.shape[1] for b in builder.build(x)} == {9, 19, 50}


def test_truncation_buckets_cut_to_the_lower_bound(sequences):
    x, lengths = sequences
    builder = kerasbatch.BucketBuilder(
        boundaries=[10, 20, 30], batch_size=8, truncate=True
    )
    batches = collect(build_labelled(builder, x))
    for bx, ids in batches:
        bucket_lengths = lengths[ids]
        if bucket_lengths.min() >= 10:
            lower = max(b for b in (10, 20, 30) if b <= bucket_lengths.min())
            assert bx.shape[1] == lower
            # The kept prefix is the element's own data, unchanged.
            assert (bx == (ids + 1)[:, None]).all()
        else:  # the first bucket is padded, never cut
            for row, index in zip(bx, ids, strict=True):
                assert (row[: lengths[index]] == index + 1).all()
                assert (row[lengths[index] :] == 0).all()
    statistics = builder.statistics()
    cut = lengths >= 10
    lower = np.array([0, 10, 20, 30])[
        np.searchsorted([10, 20, 30], lengths, side="right")
    ]
    assert statistics.truncated == int((lengths[cut] > lower[cut]).sum())
    assert statistics.truncated_positions == int((lengths[cut] - lower[cut]).sum())
    assert statistics.dropped == 0


@pytest.mark.parametrize("engine", ["tf.data", "grain", "python"])
def test_the_first_truncation_bucket_holds_every_element_whole(engine):
    x = [np.full(n, n, np.int32) for n in (3, 4, 2, 5, 3, 12, 15, 11)]
    builder = kerasbatch.BucketBuilder(
        boundaries=[8], batch_size=5, truncate=True, shuffle=False
    )
    batches = [np.asarray(b) for b in builder.build(x, engine=engine)]
    first = next(b for b in batches if b.shape[1] < 8)
    expected = [[n] * n + [0] * (5 - n) for n in (3, 4, 2, 5, 3)]
    assert first.tolist() == expected


def test_max_length_error_names_the_element(sequences):
    x, lengths = sequences
    first = int(np.flatnonzero(lengths > 30)[0])
    with pytest.raises(
        ValueError,
        match=rf"Element {first} has length {lengths[first]}, longer than max_length=30",
    ):
        kerasbatch.PaddedBuilder(8, max_length=30).build(x)


@pytest.mark.parametrize(
    "builder_class",
    [kerasbatch.PaddedBuilder, kerasbatch.SortedBuilder, kerasbatch.BucketBuilder],
)
def test_max_length_truncate_and_drop_are_counted(builder_class, sequences):
    x, lengths = sequences
    long = lengths > 30
    truncating = builder_class(batch_size=8, max_length=30, overflow="truncate")
    batches = collect(build_labelled(truncating, x))
    assert max(b.shape[1] for b, _ in batches) == 30
    assert truncating.statistics().truncated == long.sum()
    assert truncating.statistics().truncated_positions == (lengths[long] - 30).sum()
    dropping = builder_class(batch_size=8, max_length=30, overflow="drop")
    ids = np.concatenate([i for _, i in collect(build_labelled(dropping, x))])
    assert sorted(ids) == np.flatnonzero(~long).tolist()
    assert dropping.statistics().dropped == long.sum()


@pytest.mark.parametrize(
    "builder_class",
    [kerasbatch.PaddedBuilder, kerasbatch.SortedBuilder, kerasbatch.BucketBuilder],
)
def test_drop_remainder_gives_full_batches_and_counts_the_rest(
    builder_class, sequences
):
    x, _ = sequences
    builder = builder_class(batch_size=16, drop_remainder=True)
    dataset = builder.build(x)
    sizes = [b.shape[0] for b in dataset]
    assert set(sizes) == {16}
    assert builder.statistics().dropped == 200 - sum(sizes)
    assert len(sizes) == dataset.cardinality()


def test_drop_remainder_with_a_constant_batch_size_makes_a_static_batch_axis(sequences):
    x, _ = sequences
    dataset = kerasbatch.PaddedBuilder(16, drop_remainder=True).build(x)
    assert dataset.element_spec.shape.as_list() == [16, None]


def test_per_component_padding_value_and_lengths():
    x = {
        "tokens": [np.arange(1, n + 1) for n in (2, 4)],
        "frames": [np.ones((n, 2), np.float32) for n in (3, 1)],
    }
    builder = kerasbatch.PaddedBuilder(
        2,
        shuffle=False,
        padding={"tokens": Padding(value=-1, length=6), "frames": {"value": 9.0}},
    )
    batch = next(iter(builder.build(x)))
    np.testing.assert_array_equal(
        batch["tokens"], [[1, 2, -1, -1, -1, -1], [1, 2, 3, 4, -1, -1]]
    )
    assert batch["frames"].shape == (2, 3, 2)
    assert (batch["frames"][1, 1:] == 9.0).numpy().all()
    assert builder.statistics().component_efficiency["tokens"] == 6 / 12


def test_padding_length_minus_one_means_batch_maximum():
    x = [np.ones(n) for n in (2, 5)]
    batch = next(
        iter(kerasbatch.PaddedBuilder(2, padding={"value": 0, "length": -1}).build(x))
    )
    assert batch.shape == (2, 5)


def test_fixed_padding_gives_a_static_length_and_rejects_longer_elements():
    x = [np.ones(n) for n in (2, 5)]
    with pytest.raises(
        ValueError,
        match=r"Component 'x' is padded to the fixed length 4, but element 1 is 5 long",
    ):
        kerasbatch.PaddedBuilder(2, padding=Padding(length=4)).build(x)
    builder = kerasbatch.PaddedBuilder(
        2, padding=Padding(length=4), max_length=4, overflow="truncate"
    )
    assert next(iter(builder.build(x))).shape == (2, 4)


def test_bucket_padding_needs_a_bucket_builder():
    with pytest.raises(
        ValueError, match=r"'bucket' needs buckets; PaddedBuilder has none"
    ):
        kerasbatch.PaddedBuilder(2, padding={"length": "bucket"}).build([np.ones(2)])


def test_output_lengths_adds_cut_lengths_to_x():
    x = [np.ones(n, np.int32) for n in (2, 5, 3)]
    builder = kerasbatch.PaddedBuilder(
        3, shuffle=False, output_lengths=True, max_length=4, overflow="truncate"
    )
    batch = next(iter(builder.build(x)))
    assert set(batch) == {"x", "x_length"}
    np.testing.assert_array_equal(batch["x_length"], [2, 4, 3])
    assert batch["x_length"].dtype == tf.int32


def test_output_mask_becomes_the_sample_weight_of_per_frame_targets():
    x = [np.ones((n, 2), np.float32) for n in (2, 3)]
    y = [np.ones(n, np.float32) for n in (2, 3)]
    _, _, mask = next(
        iter(kerasbatch.PaddedBuilder(2, shuffle=False, output_mask=True).build(x, y))
    )
    np.testing.assert_array_equal(mask, [[1, 1, 0], [1, 1, 1]])
    weights = np.array([2.0, 0.5])
    _, _, weighted = next(
        iter(
            kerasbatch.PaddedBuilder(2, shuffle=False, output_mask=True).build(
                x, y, weights
            )
        )
    )
    np.testing.assert_array_equal(weighted, [[2, 2, 0], [0.5, 0.5, 0.5]])


def test_output_mask_needs_per_frame_targets():
    with pytest.raises(ValueError, match=r"output_mask=True needs per-frame targets"):
        kerasbatch.PaddedBuilder(2, output_mask=True).build([np.ones(2)], np.zeros(1))


@functools.cache
def unprefetched_batches():
    """The batches of `prefetch=0`, the reference of every prefetch option."""
    x, _ = make_sequences()
    return collect(
        build_labelled(kerasbatch.BucketBuilder(batch_size=8, prefetch=0), x)
    )


@pytest.mark.parametrize("prefetch", ["auto", None, 3])
def test_prefetch_options_give_the_same_batches(prefetch, sequences):
    x, _ = sequences
    reference = unprefetched_batches()
    batches = collect(
        build_labelled(kerasbatch.BucketBuilder(batch_size=8, prefetch=prefetch), x)
    )
    assert all(
        np.array_equal(a[1], b[1]) for a, b in zip(reference, batches, strict=True)
    )


def test_datasets_have_exact_cardinality(sequences):
    x, _ = sequences
    for builder in [
        kerasbatch.PaddedBuilder(7),
        kerasbatch.SortedBuilder(7),
        kerasbatch.BucketBuilder(max_tokens=100),
    ]:
        dataset = builder.build(x)
        assert dataset.cardinality() == builder.statistics().num_batches
        assert dataset.cardinality() == sum(1 for _ in dataset)


# ---------------------------------------------------------------- statistics
def test_statistics_match_a_hand_computed_example():
    x = [np.ones(n) for n in (1, 2, 3, 8)]
    builder = kerasbatch.BucketBuilder(boundaries=[3], batch_size=2, shuffle=False)
    builder.build(x)
    statistics = builder.statistics()
    # Buckets: [1, 2] padded to 2, [3, 8] padded to 8.
    assert statistics.num_batches == 2
    assert statistics.padding_efficiency == pytest.approx(
        (1 + 2 + 3 + 8) / (2 * 2 + 2 * 8)
    )
    assert statistics.distinct_shapes == 2
    assert "2 batches of 4 elements" in str(statistics)


def test_statistics_before_build_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"call build\(x, \.\.\.\) first"):
        kerasbatch.BucketBuilder().statistics()


# -------------------------------------------------------- config round trip
CONFIGURED = [
    kerasbatch.PaddedBuilder(
        batch_size=12,
        shuffle=False,
        seed=5,
        drop_remainder=True,
        max_length=30,
        overflow="drop",
    ),
    kerasbatch.SortedBuilder(
        batch_size=4,
        padding={"x": Padding(value=-1, length=64)},
        output_lengths=True,
        prefetch=2,
    ),
    kerasbatch.BucketBuilder(
        boundaries=[8, 16],
        bucket_batch_sizes=[32, 16, 8],
        truncate=True,
        output_mask=True,
    ),
    kerasbatch.BucketBuilder(
        boundaries="quantile",
        num_buckets=6,
        max_tokens=512,
        quadratic_length=128,
        pad_to_bucket=True,
    ),
    kerasbatch.BucketBuilder(seed=None),
]


@pytest.mark.parametrize("builder", CONFIGURED, ids=lambda b: type(b).__name__)
def test_config_round_trip(builder):
    config = builder.get_config()
    rebuilt = type(builder).from_config(json.loads(json.dumps(config)))
    assert rebuilt == builder
    assert rebuilt.get_config() == config
    assert repr(rebuilt) == repr(builder)


def test_builders_serialize_with_keras():
    import keras

    builder = CONFIGURED[2]
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(builder)
    )
    assert restored == builder


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (
            lambda: kerasbatch.PaddedBuilder(0),
            ValueError,
            r"batch_size must be a positive int, got 0",
        ),
        (
            lambda: kerasbatch.PaddedBuilder(None),
            ValueError,
            r"PaddedBuilder needs a batch_size",
        ),
        (
            lambda: kerasbatch.PaddedBuilder(8, shuffle="yes"),
            TypeError,
            r"shuffle must be True or False",
        ),
        (
            lambda: kerasbatch.PaddedBuilder(8, seed=-1),
            ValueError,
            r"seed must be an int in \[0, 2\*\*63\)",
        ),
        (
            lambda: kerasbatch.PaddedBuilder(8, overflow="clip"),
            ValueError,
            r"overflow must be one of",
        ),
        (
            lambda: kerasbatch.PaddedBuilder(8, max_length=2.5),
            ValueError,
            r"max_length must be a positive int",
        ),
        (
            lambda: kerasbatch.PaddedBuilder(8, prefetch="lots"),
            ValueError,
            r"prefetch must be",
        ),
        (
            lambda: kerasbatch.PaddedBuilder(8, padding={"length": 0}),
            ValueError,
            r"Padding length must be",
        ),
        (
            lambda: kerasbatch.PaddedBuilder(8, padding={"x": {"fill": 0}}),
            ValueError,
            r"padding\['x'\] has unknown keys \['fill'\]",
        ),
        (
            lambda: kerasbatch.PaddedBuilder(8, padding=[0]),
            TypeError,
            r"padding must be None, a Padding",
        ),
        (
            lambda: kerasbatch.PaddedBuilder(8, bucket_size=3),
            TypeError,
            r"PaddedBuilder got an unexpected keyword argument 'bucket_size'",
        ),
        (
            lambda: kerasbatch.PackedBuilder(16, output_lengths=True),
            TypeError,
            r"PackedBuilder got an unexpected keyword argument 'output_lengths'",
        ),
        (
            lambda: kerasbatch.StreamBucketBuilder(sequence_length=8),
            TypeError,
            r"StreamBucketBuilder got an unexpected keyword argument",
        ),
        (
            lambda: kerasbatch.BucketBuilder(boundaries=[16, 8]),
            ValueError,
            r"strictly increasing; boundaries\[1\] = 8",
        ),
        (
            lambda: kerasbatch.BucketBuilder(boundaries=[0, 8]),
            ValueError,
            r"positive; boundaries\[0\] = 0",
        ),
        (
            lambda: kerasbatch.BucketBuilder(boundaries=[4, 8.5]),
            TypeError,
            r"boundaries\[1\] = 8.5 is a float",
        ),
        (lambda: kerasbatch.BucketBuilder(boundaries="median"), ValueError, r"median"),
        (
            lambda: kerasbatch.BucketBuilder(batch_size=8, max_tokens=100),
            ValueError,
            r"at most one of batch_size",
        ),
        (
            lambda: kerasbatch.BucketBuilder(boundaries=[8], bucket_batch_sizes=[4]),
            ValueError,
            r"1 boundaries make 2 buckets",
        ),
        (
            lambda: kerasbatch.BucketBuilder(bucket_batch_sizes=[4, -1]),
            ValueError,
            r"bucket_batch_sizes\[1\] must be a positive int",
        ),
        (
            lambda: kerasbatch.BucketBuilder(quadratic_length=8),
            ValueError,
            r"quadratic_length only applies with max_tokens",
        ),
        (
            lambda: kerasbatch.BucketBuilder(truncate=1),
            TypeError,
            r"truncate must be True or False",
        ),
    ],
)
def test_bad_options_are_clear_errors(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_padding_for_an_unknown_component_is_an_error():
    with pytest.raises(
        ValueError,
        match=r"padding names \['tokens'\] but the sequence components are \['x'\]",
    ):
        kerasbatch.PaddedBuilder(2, padding={"tokens": Padding()}).build([np.ones(2)])


def test_auto_boundaries_with_the_wrong_number_of_batch_sizes():
    x = [np.ones(n) for n in range(1, 40)]
    builder = kerasbatch.BucketBuilder(num_buckets=4, bucket_batch_sizes=[8, 8])
    with pytest.raises(
        ValueError,
        match=r"bucket_batch_sizes has 2 entries but the boundaries .* make 4 buckets",
    ):
        builder.build(x)


def test_everything_dropped_is_an_error():
    with pytest.raises(ValueError, match=r"No batch left"):
        kerasbatch.PaddedBuilder(8, drop_remainder=True).build([np.ones(2)] * 3)


# ------------------------------------------------------------- determinism
def test_epoch_batches_are_a_pure_function_of_seed_and_epoch(sequences):
    x, _ = sequences
    first = kerasbatch.BucketBuilder(num_buckets=4, batch_size=8, seed=7)
    second = kerasbatch.BucketBuilder.from_config(first.get_config())
    plan_only(first, x)
    plan_only(second, x)
    for epoch in (0, 1, 5):
        a, b = first.plan(epoch), second.plan(epoch)
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a.batch_splits, b.batch_splits)
    assert not np.array_equal(first.plan(0).indices, first.plan(1).indices)
    other_seed = kerasbatch.BucketBuilder(num_buckets=4, batch_size=8, seed=8)
    plan_only(other_seed, x)
    assert not np.array_equal(first.plan(0).indices, other_seed.plan(0).indices)


def test_each_iteration_takes_the_next_epoch_and_set_epoch_pins_it(sequences):
    x, _ = sequences
    builder = kerasbatch.SortedBuilder(batch_size=8, seed=1)
    dataset = build_labelled(builder, x)
    epochs = [np.concatenate([i for _, i in collect(dataset)]) for _ in range(3)]
    for epoch, order in enumerate(epochs):
        np.testing.assert_array_equal(order, builder.plan(epoch).indices)
    builder.set_epoch(1)
    np.testing.assert_array_equal(
        np.concatenate([i for _, i in collect(dataset)]), epochs[1]
    )
    assert builder.last_started_epoch == 1


def test_number_of_batches_is_the_same_every_epoch(sequences):
    x, _ = sequences
    builder = kerasbatch.BucketBuilder(
        num_buckets=5, max_tokens=200, drop_remainder=True
    )
    plan_only(builder, x)
    assert len({builder.plan(e).num_batches for e in range(6)}) == 1


# ------------------------------------------------------------- exactly once
builder_options = st.one_of(
    st.builds(
        kerasbatch.PaddedBuilder,
        batch_size=st.integers(1, 9),
        shuffle=st.booleans(),
        seed=st.integers(0, 3),
    ),
    st.builds(
        kerasbatch.SortedBuilder,
        batch_size=st.integers(1, 9),
        shuffle=st.booleans(),
        seed=st.integers(0, 3),
    ),
    st.builds(
        kerasbatch.BucketBuilder,
        boundaries=st.sampled_from(
            ["auto", "uniform", "quantile", "equal_tokens", [3], [2, 5, 9]]
        ),
        num_buckets=st.integers(1, 6),
        batch_size=st.integers(1, 9),
        shuffle=st.booleans(),
        seed=st.integers(0, 3),
        pad_to_bucket=st.booleans(),
    ),
    st.builds(
        kerasbatch.BucketBuilder,
        num_buckets=st.integers(1, 6),
        max_tokens=st.integers(12, 40),
        seed=st.integers(0, 3),
    ),
)


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 12), min_size=1, max_size=40),
    builder=builder_options,
    epoch=st.integers(0, 3),
)
def test_every_element_appears_exactly_once_unchanged(lengths, builder, epoch):
    x = [np.full((n, 2), i + 1, dtype=np.int32) for i, n in enumerate(lengths)]
    dataset = build_labelled(builder, x)
    builder.set_epoch(epoch)
    seen = []
    for bx, ids in dataset:
        bx, ids = bx.numpy(), ids.numpy()
        for row, i in zip(bx, ids, strict=True):
            n = lengths[i]
            assert (row[:n] == i + 1).all()
            assert (row[n:] == 0).all()
        seen.extend(ids.tolist())
    assert sorted(seen) == list(range(len(lengths)))
    statistics = builder.statistics(epoch)
    assert statistics.dropped == statistics.truncated == 0


def test_plans_are_identical_across_processes(sequences):
    import os
    import subprocess
    import sys

    # The other process plans on Keras' numpy backend and the python engine
    # (no TensorFlow to start): a plan depends on neither.
    script = (
        "import numpy as np, kerasbatch\n"
        "from conftest import make_sequences\n"
        "x, _ = make_sequences()\n"
        "b = kerasbatch.BucketBuilder(num_buckets=4, batch_size=8, seed=5)\n"
        "b.build(x, engine='python')\n"
        "print(b.plan(3).indices.tolist())\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", script],
        cwd=os.path.dirname(__file__),
        env={**os.environ, "KERAS_BACKEND": "numpy"},
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    x, _ = sequences
    builder = kerasbatch.BucketBuilder(num_buckets=4, batch_size=8, seed=5)
    builder.build(x)
    assert output.strip() == str(builder.plan(3).indices.tolist())


def test_lengths_are_public_after_build(sequences):
    x, lengths = sequences
    builder = kerasbatch.SortedBuilder(8)
    with pytest.raises(RuntimeError, match="call build"):
        _ = builder.lengths
    plan_only(builder, x)
    np.testing.assert_array_equal(builder.lengths, lengths)


def test_a_built_dataset_does_not_change_when_the_inputs_do():
    x = [np.full(n, n, "int32") for n in (3, 1, 4, 1, 5)]
    y = np.arange(5, dtype="float32")
    builder = kerasbatch.SortedBuilder(batch_size=2, shuffle=False)
    dataset = builder.build(x, y)
    before = [(bx.numpy(), by.numpy()) for bx, by in dataset]
    for sequence in x:
        sequence[:] = -1
    y[:] = -1
    after = [(bx.numpy(), by.numpy()) for bx, by in dataset]
    for (bx, by), (ax, ay) in zip(before, after, strict=True):
        np.testing.assert_array_equal(ax, bx)
        np.testing.assert_array_equal(ay, by)
