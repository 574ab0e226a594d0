"""StreamBucketBuilder: bucketing any `tf.data.Dataset` in bounded memory."""

import json
import resource

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import batches_per_epoch, make_sequences, recording_model
from hypothesis import example, given, settings
from hypothesis import strategies as st

import kerasbatch
from kerasbatch import Padding
from kerasbatch.callbacks import EpochReshuffle, PaddingEfficiency, Throughput


def stream(lengths, trailing=(), labelled=True):
    """A lazy dataset: element i is `i + 1` repeated `lengths[i]` times."""
    table = tf.constant(np.asarray(lengths), tf.int64)

    def element(i):
        x = tf.fill(tf.concat([[table[i]], tf.constant(trailing, tf.int64)], 0), i + 1)
        x = tf.cast(x, tf.int32)
        return (x, i) if labelled else x

    return tf.data.Dataset.range(len(lengths)).map(element)


def collect(dataset):
    return [tuple(np.asarray(t) for t in batch) for batch in dataset]


def ids_of(batches):
    return [ids.tolist() for _, ids in batches]


def bucket_of(lengths, boundaries):
    return np.searchsorted(boundaries, lengths, side="right")


def brute_force_statistics(batches, lengths, limit=None):
    """`(num_batches, num_elements, efficiency, distinct shapes)` of batches."""
    real = padded = elements = 0
    shapes = set()
    for x, ids in batches:
        kept = lengths[ids]
        if limit is not None:
            kept = np.minimum(kept, limit[ids] if np.ndim(limit) else limit)
        real += int(np.minimum(kept, x.shape[1]).sum())
        padded += x.shape[0] * x.shape[1]
        elements += len(ids)
        shapes.add(x.shape[:2])
    return len(batches), elements, real / padded if padded else 1.0, len(shapes)


def assert_statistics_match(builder, batches, lengths, limit=None):
    num_batches, elements, efficiency, shapes = brute_force_statistics(
        batches, lengths, limit
    )
    statistics = builder.statistics()
    assert statistics.num_batches == num_batches
    assert statistics.num_elements == elements
    assert statistics.padding_efficiency == pytest.approx(efficiency)
    assert statistics.distinct_shapes == shapes


# ------------------------------------------------------------- exactly once
stream_options = st.fixed_dictionaries(
    {
        "boundaries": st.sampled_from([[], [3], [2, 5, 9], "auto", "quantile"]),
        "num_buckets": st.integers(1, 5),
        "sizing": st.sampled_from(["batch", "per_bucket", "tokens", "quadratic"]),
        "batch_size": st.integers(1, 7),
        "pad": st.sampled_from(["batch", "bucket", "fixed"]),
        "buffer_size": st.sampled_from([1, 4, 1000]),
        "shuffle": st.booleans(),
        "seed": st.integers(0, 3),
        "with_lengths": st.booleans(),
        "max_length": st.sampled_from([None, 12, 20]),
    }
)


# Every example builds and runs a pipeline of its own (seconds each): a few
# drawn ones, and the corners drawing might miss.
@settings(max_examples=5, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 12), min_size=1, max_size=40),
    options=stream_options,
    epoch=st.integers(0, 3),
)
@example(  # a buffer of one element, budgets from the bound, bucket padding
    lengths=[0, 12, 5, 0, 7, 3, 9, 1],
    options={
        "boundaries": [2, 5, 9],
        "num_buckets": 1,
        "sizing": "quadratic",
        "batch_size": 1,
        "pad": "bucket",
        "buffer_size": 1,
        "shuffle": True,
        "seed": 3,
        "with_lengths": False,
        "max_length": None,
    },
    epoch=1,
)
@example(  # boundaries from the lengths, sizes per bucket, fixed padding
    lengths=[4, 12, 1, 8, 8, 2, 11, 6, 0, 3, 7, 10],
    options={
        "boundaries": "quantile",
        "num_buckets": 5,
        "sizing": "per_bucket",
        "batch_size": 2,
        "pad": "fixed",
        "buffer_size": 4,
        "shuffle": False,
        "seed": 0,
        "with_lengths": False,
        "max_length": 20,
    },
    epoch=0,
)
def test_every_element_appears_exactly_once_unchanged(lengths, options, epoch):
    lengths = np.array(lengths)
    with_lengths = options["with_lengths"] or isinstance(options["boundaries"], str)
    max_length = options["max_length"]
    if not with_lengths and options["sizing"] != "batch" or options["pad"] != "batch":
        max_length = max_length or 12  # budgets and bucket padding need a bound
    kwargs = {}
    if options["sizing"] == "batch":
        kwargs["batch_size"] = options["batch_size"]
    elif options["sizing"] == "per_bucket":
        if isinstance(options["boundaries"], str):
            kwargs["batch_size"] = options["batch_size"]
        else:
            sizes = [
                options["batch_size"] + i for i in range(len(options["boundaries"]) + 1)
            ]
            kwargs["bucket_batch_sizes"] = sizes
    else:
        kwargs["max_tokens"] = 100
        if options["sizing"] == "quadratic":
            kwargs["quadratic_length"] = 8
    padding = {"batch": None, "bucket": Padding(-1, "bucket"), "fixed": Padding(-1, 20)}
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=options["boundaries"],
        num_buckets=options["num_buckets"],
        buffer_size=options["buffer_size"],
        shuffle=options["shuffle"],
        seed=options["seed"],
        padding=padding[options["pad"]],
        max_length=max_length,
        **kwargs,
    )
    dataset = builder.build(
        stream(lengths, trailing=(2,)), lengths if with_lengths else None
    )
    builder.set_epoch(epoch)
    batches = collect(dataset)
    boundaries = builder.resolved_boundaries
    seen = []
    for x, ids in batches:
        assert (
            len(ids)
            <= builder.resolved_batch_sizes[bucket_of(lengths[ids[0]], boundaries)]
        )
        assert len(set(bucket_of(lengths[ids], boundaries))) == 1
        for row, i in zip(x, ids, strict=True):
            n = lengths[i]
            assert (row[:n] == i + 1).all()
            assert (row[n:] == (0 if options["pad"] == "batch" else -1)).all()
        if options["pad"] == "fixed":
            assert x.shape[1] == 20
        seen.extend(ids.tolist())
    assert sorted(seen) == list(range(len(lengths)))
    if with_lengths:
        assert int(dataset.cardinality()) == len(batches)
    statistics = builder.statistics(epoch)
    assert statistics.dropped == statistics.truncated == 0
    assert_statistics_match(builder, batches, lengths)


# A pipeline each example, as above.
@settings(max_examples=5, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 14), min_size=1, max_size=40),
    boundaries=st.sampled_from([[], [4], [3, 6, 9]]),
    batch_size=st.integers(1, 5),
    overflow=st.sampled_from(["truncate", "drop"]),
    truncate=st.booleans(),
    drop_remainder=st.booleans(),
    shuffle=st.booleans(),
)
def test_dropped_and_truncated_elements_are_counted(
    lengths, boundaries, batch_size, overflow, truncate, drop_remainder, shuffle
):
    lengths = np.array(lengths)
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=boundaries,
        batch_size=batch_size,
        truncate=truncate,
        buffer_size=8,
        shuffle=shuffle,
        drop_remainder=drop_remainder,
        max_length=10,
        overflow=overflow,
    )
    try:
        dataset = builder.build(stream(lengths), lengths)
    except ValueError as error:  # every batch dropped
        left = ("No batch left", "No element left", "drops every element")
        assert any(words in str(error) for words in left), error
        return
    batches = collect(dataset)
    cut = np.minimum(lengths, 10)
    buckets = bucket_of(cut, boundaries)
    limit = np.full(len(lengths), 10)
    if truncate:
        lower = np.array([0, *boundaries])[buckets]
        limit = np.where(lower > 0, np.minimum(lower, 10), 10)
    seen = []
    for x, ids in batches:
        if drop_remainder:
            assert len(ids) == batch_size
        for row, i in zip(x, ids, strict=True):
            n = min(lengths[i], limit[i])
            assert (row[:n] == i + 1).all()
            assert (row[n:] == 0).all()
        seen.extend(ids.tolist())
    kept = lengths <= 10 if overflow == "drop" else np.ones(len(lengths), bool)
    assert set(seen) <= set(np.flatnonzero(kept)) and len(set(seen)) == len(seen)
    if not drop_remainder:
        assert sorted(seen) == np.flatnonzero(kept).tolist()
    assert len(batches) == int(dataset.cardinality())
    statistics = builder.statistics()
    assert statistics.dropped == len(lengths) - len(seen)
    seen = np.array(seen, dtype=int)
    assert statistics.truncated == int((lengths[seen] > limit[seen]).sum())
    assert statistics.truncated_positions == int(
        np.maximum(lengths[seen] - limit[seen], 0).sum()
    )
    assert_statistics_match(builder, batches, lengths, limit)


def test_prefetch_options_give_the_same_batches():
    _, lengths = make_sequences(100, seed=18)
    batches = {}
    # No prefetch (0, as None runs) is the reference.
    for prefetch in (0, "auto", 3):
        builder = kerasbatch.StreamBucketBuilder(
            boundaries=[20], batch_size=8, prefetch=prefetch
        )
        batches[prefetch] = ids_of(collect(builder.build(stream(lengths))))
        assert batches[prefetch] == batches[0], prefetch


# ------------------------------------------------------------ batch sizes
def test_fixed_batch_size_leaves_at_most_one_smaller_batch_per_bucket():
    _, lengths = make_sequences(300, seed=1)
    builder = kerasbatch.StreamBucketBuilder(boundaries=[10, 20, 30], batch_size=8)
    batches = collect(builder.build(stream(lengths), lengths))
    buckets = bucket_of(lengths, [10, 20, 30])
    counts = np.bincount(buckets, minlength=4)
    for bucket in range(4):
        sizes = [len(ids) for _, ids in batches if buckets[ids[0]] == bucket]
        assert sorted(sizes, reverse=True) == [8] * (counts[bucket] // 8) + (
            [counts[bucket] % 8] if counts[bucket] % 8 else []
        )
    assert builder.bucket_counts == counts.tolist()


def test_bucket_batch_sizes_per_bucket():
    _, lengths = make_sequences(200, seed=2)
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[20], bucket_batch_sizes=[16, 4], buffer_size=50
    )
    batches = collect(builder.build(stream(lengths), lengths))
    for _, ids in batches:
        assert len(ids) <= (16 if lengths[ids].max() < 20 else 4)
    counts = np.bincount(bucket_of(lengths, [20]))
    assert len(batches) == -(-counts[0] // 16) + -(-counts[1] // 4)


# Each option on and off once: the budget and the bucket padding are
# resolved from the lengths apart, and compared with BucketBuilder's each.
@pytest.mark.parametrize("quadratic_length, pad_to_bucket", [(None, False), (16, True)])
def test_token_budget_with_lengths_sizes_batches_as_bucket_builder(
    quadratic_length, pad_to_bucket
):
    x, lengths = make_sequences(300, seed=4, max_length=60, min_length=1)
    options = {
        "num_buckets": 5,
        "max_tokens": 400,
        "quadratic_length": quadratic_length,
        "pad_to_bucket": pad_to_bucket,
    }
    streaming = kerasbatch.StreamBucketBuilder(**options)
    batches = collect(streaming.build(stream(lengths), lengths))
    in_memory = kerasbatch.BucketBuilder(**options)
    in_memory.build(x)
    assert streaming.resolved_boundaries == in_memory.resolved_boundaries
    assert streaming.resolved_batch_sizes == in_memory.resolved_batch_sizes
    assert streaming.bucket_lengths == in_memory.bucket_lengths

    def cost(length):
        return length if quadratic_length is None else length + length**2 / 16

    for bx, _ in batches:
        assert bx.shape[0] * cost(bx.shape[1]) <= 400


@pytest.mark.parametrize("quadratic_length", [None, 10])
def test_token_budget_without_lengths_uses_the_bucket_upper_bounds(quadratic_length):
    _, lengths = make_sequences(200, seed=5, max_length=50)
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[10, 25],
        max_tokens=400,
        quadratic_length=quadratic_length,
        max_length=50,
    )
    batches = collect(builder.build(stream(lengths)))
    q = quadratic_length or np.inf
    expected = [int(400 // (b + b * b / q)) for b in (9, 24, 50)]
    assert builder.resolved_batch_sizes == expected
    assert builder.bucket_lengths == [9, 24, 50]
    for bx, _ in batches:
        assert bx.shape[0] * (bx.shape[1] + bx.shape[1] ** 2 / q) <= 400


def test_token_budget_names_the_element_that_cannot_fit():
    lengths = np.array([3, 50, 4])
    builder = kerasbatch.StreamBucketBuilder(max_tokens=20)
    with pytest.raises(
        ValueError,
        match=r"Element 1 has length 50, whose cost 50 exceeds max_tokens=20",
    ):
        builder.build(stream(lengths), lengths)


# ---------------------------------------------------------------- padding
def test_padding_to_the_batch_maximum_the_bucket_bound_or_a_fixed_length():
    _, lengths = make_sequences(120, seed=6, max_length=45)
    by_batch = collect(
        kerasbatch.StreamBucketBuilder(boundaries=[10, 20, 30], batch_size=8).build(
            stream(lengths)
        )
    )
    for bx, ids in by_batch:
        assert bx.shape[1] == lengths[ids].max()
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[10, 20, 30], batch_size=8, pad_to_bucket=True, max_length=50
    )
    by_bucket = collect(builder.build(stream(lengths)))
    assert {bx.shape[1] for bx, _ in by_bucket} == {9, 19, 29, 50}
    for bx, ids in by_bucket:
        assert bx.shape[1] == [9, 19, 29, 50][bucket_of(lengths[ids[0]], [10, 20, 30])]
    assert builder.statistics().distinct_shapes <= 8
    with_lengths = kerasbatch.StreamBucketBuilder(
        boundaries=[10, 20, 30], batch_size=8, pad_to_bucket=True
    )
    batches = collect(with_lengths.build(stream(lengths), lengths))
    assert {bx.shape[1] for bx, _ in batches} == {9, 19, 29, lengths.max()}
    fixed = kerasbatch.StreamBucketBuilder(
        boundaries=[10, 20, 30], batch_size=8, padding=Padding(value=-1, length=48)
    )
    dataset = fixed.build(stream(lengths))
    assert dataset.element_spec[0].shape.as_list() == [None, 48]
    for bx, ids in collect(dataset):
        assert bx.shape[1] == 48
        assert (bx[0, lengths[ids[0]] :] == -1).all()


def test_fixed_padding_shorter_than_an_element_is_a_clear_error():
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[5], batch_size=2, padding=Padding(length=4), shuffle=False
    )
    dataset = builder.build(stream([2, 3, 7, 1]))
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"Component x is padded to the fixed length 4, but element 2 is 7 long",
    ):
        collect(dataset)


def test_dict_and_tuple_elements_with_per_component_padding():
    lengths = np.array([3, 5, 2, 6, 4, 1])
    table = tf.constant(lengths, tf.int64)

    def element(i):
        n = table[i]
        x = {
            "tokens": tf.fill([n], tf.cast(i + 1, tf.int32)),
            "frames": tf.ones([n // 2 + 1, 3], tf.float32),
            "speaker": i,
        }
        y = tf.fill([n], 1.0)
        weight = tf.fill([n], 2.0)
        return x, y, weight

    dataset = tf.data.Dataset.range(len(lengths)).map(element)
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[4],
        batch_size=2,
        shuffle=False,
        padding={"tokens": {"value": -1}, "frames": {"value": 9.0}, "y": {"length": 8}},
    )
    batches = list(builder.build(dataset))
    x, y, weight = batches[0]
    assert set(x) == {"tokens", "frames", "speaker"}
    np.testing.assert_array_equal(x["tokens"], [[1, 1, 1], [3, 3, -1]])
    assert x["frames"].shape == (2, 2, 3)
    assert x["speaker"].numpy().tolist() == [0, 2]
    assert y.shape == (2, 8) and (y.numpy()[:, 3:] == 0).all()
    np.testing.assert_array_equal(weight, [[2, 2, 2], [2, 2, 0]])
    statistics = builder.statistics()
    assert set(statistics.component_efficiency) == {
        "tokens",
        "frames",
        "y",
        "sample_weight",
    }
    assert statistics.component_efficiency["y"] == pytest.approx(
        lengths.sum() / (6 * 8)
    )


# ------------------------------------------------------ truncation, overflow
def test_truncation_buckets_cut_to_the_lower_bound():
    _, lengths = make_sequences(200, seed=7)
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[10, 20, 30], batch_size=8, truncate=True
    )
    batches = collect(builder.build(stream(lengths)))
    lower = np.array([0, 10, 20, 30])[bucket_of(lengths, [10, 20, 30])]
    for bx, ids in batches:
        if lower[ids[0]] > 0:
            assert bx.shape[1] == lower[ids[0]]
            assert (bx == (ids + 1)[:, None]).all()
        else:
            assert bx.shape[1] == lengths[ids].max()
    statistics = builder.statistics()
    cut = lower > 0
    assert statistics.truncated == int((lengths[cut] > lower[cut]).sum())
    assert statistics.truncated_positions == int((lengths[cut] - lower[cut]).sum())
    assert statistics.dropped == 0
    assert builder.bucket_lengths == [9, 10, 20, 30]  # known without lengths
    limit = np.where(cut, lower, lengths)
    assert_statistics_match(builder, batches, lengths, limit)


def test_overflow_error_names_the_element_and_its_length():
    lengths = np.array([3, 4, 57, 5])
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[10], batch_size=2, max_length=30
    )
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"Element 2 has length 57, longer than max_length=30",
    ):
        collect(builder.build(stream(lengths)))
    with pytest.raises(
        ValueError, match=r"Element 2 has length 57, longer than max_length=30"
    ):
        builder.build(stream(lengths), lengths)


def test_overflow_truncate_and_drop_are_counted():
    _, lengths = make_sequences(200, seed=8)
    long = lengths > 30
    truncating = kerasbatch.StreamBucketBuilder(
        boundaries=[10, 20], batch_size=8, max_length=30, overflow="truncate"
    )
    batches = collect(truncating.build(stream(lengths)))
    assert max(bx.shape[1] for bx, _ in batches) == 30
    for bx, ids in batches:
        assert (bx == (ids + 1)[:, None])[:, : min(lengths[ids].min(), 30)].all()
    assert truncating.statistics().truncated == long.sum()
    assert truncating.statistics().truncated_positions == (lengths[long] - 30).sum()
    assert_statistics_match(truncating, batches, lengths, 30)
    dropping = kerasbatch.StreamBucketBuilder(
        boundaries=[10, 20], batch_size=8, max_length=30, overflow="drop"
    )
    dataset = dropping.build(stream(lengths), lengths)
    batches = collect(dataset)
    seen = np.concatenate([ids for _, ids in batches])
    assert sorted(seen) == np.flatnonzero(~long).tolist()
    assert dropping.statistics().dropped == long.sum()
    assert int(dataset.cardinality()) == len(batches)


def test_drop_remainder_gives_full_batches_and_counts_the_rest():
    _, lengths = make_sequences(200, seed=9)
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[20], batch_size=16, drop_remainder=True
    )
    dataset = builder.build(stream(lengths), lengths)
    assert dataset.element_spec[0].shape.as_list() == [16, None]
    sizes = [len(ids) for _, ids in collect(dataset)]
    assert set(sizes) == {16}
    counts = np.bincount(bucket_of(lengths, [20]))
    assert len(sizes) == int(dataset.cardinality()) == sum(counts // 16)
    assert builder.statistics().dropped == 200 - sum(sizes)


def test_drop_remainder_leaves_dropped_batches_out_of_every_statistic():
    lengths = np.array([2, 12, 3, 15, 4, 11, 5, 6, 7, 1, 20])
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[10], batch_size=3, shuffle=False, drop_remainder=True
    )
    batches = collect(builder.build(stream(lengths)))
    # The remainders [9] (shape 1 x 1) and [10] (1 x 20) are dropped.
    assert ids_of(batches) == [[0, 2, 4], [1, 3, 5], [6, 7, 8]]
    statistics = builder.statistics()
    assert statistics.num_batches == 3
    assert statistics.num_elements == 9
    assert statistics.dropped == 2
    assert statistics.distinct_shapes == 3
    real, padded = 9 + 38 + 18, 3 * 4 + 3 * 15 + 3 * 7
    assert statistics.padding_efficiency == pytest.approx(real / padded)
    assert builder.running_positions(2) == (9 + 38, 3 * 4 + 3 * 15)
    assert builder.running_positions(3) == (real, padded)
    assert_statistics_match(builder, batches, lengths)


# ------------------------------------------- infinite data, lengths, memory
def test_infinite_input_streams_without_lengths():
    _, lengths = make_sequences(50, seed=10)
    builder = kerasbatch.StreamBucketBuilder(boundaries=[20], batch_size=8)
    dataset = builder.build(stream(lengths).repeat())
    assert dataset.cardinality() == tf.data.INFINITE_CARDINALITY
    batches = collect(dataset.take(40))
    assert len(batches) == 40
    assert builder.statistics().num_batches >= 40


def test_generator_backed_infinite_dataset_works_with_take():
    def generate():
        i = 0
        while True:
            yield np.full(i % 13 + 1, i % 1000, np.int32)
            i += 1

    dataset = tf.data.Dataset.from_generator(
        generate, output_signature=tf.TensorSpec([None], tf.int32)
    )
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[5, 10], batch_size=4, buffer_size=16, max_length=13
    )
    batches = list(builder.build(dataset).take(25))
    assert len(batches) == 25
    assert all(b.shape[0] == 4 for b in batches)


def test_lengths_give_exact_cardinality_and_auto_boundaries():
    _, lengths = make_sequences(300, seed=11, max_length=80)
    builder = kerasbatch.StreamBucketBuilder(num_buckets=6, batch_size=10)
    dataset = builder.build(stream(lengths), lengths)
    assert builder.resolved_boundaries == kerasbatch.planning.boundaries.optimal(
        lengths, 6
    )
    assert int(dataset.cardinality()) == len(collect(dataset))
    quantile = kerasbatch.StreamBucketBuilder(
        boundaries="quantile", num_buckets=4, batch_size=10
    )
    quantile.build(stream(lengths), lengths)
    assert quantile.resolved_boundaries == kerasbatch.planning.boundaries.quantile(
        lengths, 4
    )


def test_a_large_lazy_dataset_streams_in_bounded_memory():
    num_elements = 25_000

    def element(i):
        return tf.fill([i % 64 + 1, 128], tf.cast(i, tf.float32))

    # Materialised, these elements would take 25k x 32.5 x 128 x 4 B = 416 MB
    # (few wide elements: the cost of streaming is per element).
    dataset = tf.data.Dataset.range(num_elements).map(element)
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[16, 32, 48], batch_size=256, buffer_size=1000, prefetch=2
    )
    batches = builder.build(dataset)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    elements = sum(int(b.shape[0]) for b in batches)
    growth_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert elements == num_elements == builder.statistics().num_elements
    assert growth_mib < 150, growth_mib


# --------------------------------------------------------- statistics
def test_statistics_equal_a_brute_force_count_over_several_components():
    lengths = make_sequences(150, seed=12)[1]
    table = tf.constant(lengths, tf.int64)

    def element(i):
        n = table[i]
        return {
            "tokens": tf.fill([n], tf.cast(i + 1, tf.int32)),
            "frames": tf.ones([n // 2, 2]),
        }, i

    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[12, 25], batch_size=6, max_length=30, overflow="truncate", seed=3
    )
    batches = list(builder.build(tf.data.Dataset.range(150).map(element)))
    real = {"tokens": 0, "frames": 0}
    padded = dict(real)
    shapes = set()
    for x, ids in batches:
        ids = ids.numpy()
        real["tokens"] += int(np.minimum(lengths[ids], 30).sum())
        real["frames"] += int(np.minimum(lengths[ids] // 2, 30).sum())
        for name in real:
            padded[name] += x[name].shape[0] * x[name].shape[1]
        shapes.add((len(ids), x["frames"].shape[1], x["tokens"].shape[1]))
    statistics = builder.statistics()
    assert statistics.num_batches == len(batches)
    assert statistics.num_elements == 150
    for name in real:
        assert statistics.component_efficiency[name] == pytest.approx(
            real[name] / padded[name]
        )
    assert statistics.padding_efficiency == pytest.approx(
        sum(real.values()) / sum(padded.values())
    )
    assert statistics.distinct_shapes == len(shapes)
    long = lengths > 30
    assert statistics.truncated == long.sum()
    assert statistics.truncated_positions == (lengths[long] - 30).sum()
    # running_positions of all batches are the epoch's totals.
    total = builder.running_positions(len(batches))
    assert total == (sum(real.values()), sum(padded.values()))
    first = builder.running_positions(1)
    x, ids = batches[0]
    assert first[1] == sum(x[n].shape[0] * x[n].shape[1] for n in real)


def test_statistics_are_reset_when_an_epoch_starts_and_name_their_epoch():
    _, lengths = make_sequences(60, seed=13)
    builder = kerasbatch.StreamBucketBuilder(boundaries=[20], batch_size=8)
    dataset = builder.build(stream(lengths))
    with pytest.raises(RuntimeError, match=r"No epoch has started yet"):
        builder.statistics()
    assert builder.last_started_epoch is None
    figures = []
    for _ in range(3):
        collect(dataset)
        assert builder.statistics().num_elements == 60
        figures.append(builder.statistics())
    assert builder.last_started_epoch == 2
    assert builder.statistics(2) == figures[2]
    # The epoch before is kept too (a strategy's next iterator may start
    # before the callbacks read it); older ones are not.
    assert builder.statistics(1) == figures[1]
    with pytest.raises(ValueError, match=r"last started \(2\) and of the one before"):
        builder.statistics(0)


# ------------------------------------------------------------- determinism
def test_same_seed_and_epoch_give_the_same_batches():
    _, lengths = make_sequences(100, seed=14)
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[10, 20, 30], batch_size=8, buffer_size=64, seed=5
    )
    dataset = builder.build(stream(lengths))
    epochs = [ids_of(collect(dataset)) for _ in range(3)]
    assert epochs[0] != epochs[1] != epochs[2]
    assert builder.last_started_epoch == 2
    builder.set_epoch(1)
    assert ids_of(collect(dataset)) == epochs[1]
    builder.set_epoch(1)
    assert ids_of(collect(dataset)) == epochs[1]
    # A new builder of the same config, even under a global seed.
    tf.random.set_seed(123)
    try:
        other = kerasbatch.StreamBucketBuilder.from_config(builder.get_config())
        other_dataset = other.build(stream(lengths))
    finally:
        tf.random.set_seed(None)
    other.set_epoch(2)
    assert ids_of(collect(other_dataset)) == epochs[2]
    different = kerasbatch.StreamBucketBuilder(
        boundaries=[10, 20, 30], batch_size=8, buffer_size=64, seed=6
    )
    assert ids_of(collect(different.build(stream(lengths)))) != epochs[0]


def test_without_shuffle_buckets_fill_in_input_order():
    lengths = np.array([3, 12, 4, 15, 5, 30, 2])
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[10], batch_size=2, shuffle=False
    )
    assert ids_of(collect(builder.build(stream(lengths)))) == [
        [0, 2],
        [1, 3],
        [4, 6],
        [5],
    ]


# ----------------------------------------------------- callbacks in fit
def fit_and_record(
    builder, dataset, num_batches, epochs, initial_epoch=0, callbacks=()
):
    model = recording_model()
    history = model.fit(
        dataset,
        epochs=epochs,
        initial_epoch=initial_epoch,
        verbose=0,
        callbacks=[EpochReshuffle(builder), *callbacks],
    )
    return batches_per_epoch(model.recorded, num_batches), history


class BatchLogs(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.values = []

    def on_train_batch_end(self, batch, logs=None):
        self.values.append(logs["padding_efficiency"])


# Without lengths the number of batches is unknown until the first epoch ends.
@pytest.mark.filterwarnings("ignore:Your input ran out of data")
def test_callbacks_in_a_real_fit_are_exact_and_resume_exactly():
    _, lengths = make_sequences(80, seed=15)
    all_lengths = lengths

    def build(lengths=None):
        builder = kerasbatch.StreamBucketBuilder(
            boundaries=[10, 20, 30], batch_size=16, buffer_size=40, seed=11
        )
        return builder, builder.build(stream(all_lengths), lengths)

    num_batches = int(
        sum(-(-c // 16) for c in np.bincount(bucket_of(lengths, [10, 20, 30])))
    )
    builder, dataset = build()
    spy = BatchLogs()
    epochs, history = fit_and_record(
        builder,
        dataset,
        num_batches,
        epochs=3,
        callbacks=[
            PaddingEfficiency(builder, per_batch=True, per_component=True),
            Throughput(builder),
            spy,
        ],
    )
    assert len(epochs) == 3
    expected = []
    for batches in epochs:
        assert sorted(i for batch in batches for i in batch) == list(range(80))
        real = sum(lengths[ids].sum() for ids in batches)
        padded = sum(len(ids) * lengths[ids].max() for ids in batches)
        expected.append(real / padded)
    assert epochs[0] != epochs[1]
    assert history.history["padding_efficiency"] == pytest.approx(expected)
    assert history.history["x_padding_efficiency"] == pytest.approx(expected)
    assert all(t > 0 for t in history.history["throughput"])
    # The per-batch value is the running efficiency of the batches trained.
    real = padded = 0
    flat = [ids for batches in epochs for ids in batches]
    for index, (ids, value) in enumerate(zip(flat, spy.values, strict=True)):
        if index % num_batches == 0:
            real = padded = 0
        real += lengths[ids].sum()
        padded += len(ids) * lengths[ids].max()
        assert value == pytest.approx(real / padded)
    # Resuming at epoch 2 gives the batches of the uninterrupted run's last
    # epoch (here with lengths: exact cardinality, the same batches).
    builder, dataset = build(lengths)
    assert int(dataset.cardinality()) == num_batches
    resumed, history = fit_and_record(
        builder,
        dataset,
        num_batches,
        epochs=3,
        initial_epoch=2,
        callbacks=[PaddingEfficiency(builder)],
    )
    assert resumed == epochs[2:]
    assert history.history["padding_efficiency"] == pytest.approx(expected[2:])


@pytest.mark.backend
def test_fit_on_infinite_data_with_steps_per_epoch():
    _, lengths = make_sequences(60, seed=19)
    builder = kerasbatch.StreamBucketBuilder(boundaries=[20], batch_size=8)
    dataset = builder.build(stream(lengths).repeat())
    model = recording_model()
    history = model.fit(
        dataset,
        epochs=2,
        steps_per_epoch=5,
        verbose=0,
        callbacks=[
            EpochReshuffle(builder),
            PaddingEfficiency(builder),
            Throughput(builder),
        ],
    )
    assert len(model.recorded) == 10
    # Keras keeps one iterator over the infinite data: one long builder epoch.
    assert builder.last_started_epoch == 0
    assert all(0 < e <= 1 for e in history.history["padding_efficiency"])
    assert all(t > 0 for t in history.history["throughput"])


def test_in_memory_and_stream_builders_answer_the_callback_protocol():
    x, lengths = make_sequences(40, seed=16)
    in_memory = kerasbatch.SortedBuilder(8, shuffle=False)
    in_memory.build(x)
    plan = in_memory.plan()
    real = plan.real_positions.sum(axis=1)
    padded = plan.padded_positions().sum(axis=1)
    for n in (0, 1, 3, plan.num_batches, plan.num_batches + 5):
        assert in_memory.running_positions(n) == (real[:n].sum(), padded[:n].sum())
    streaming = kerasbatch.StreamBucketBuilder(
        boundaries=[], batch_size=8, shuffle=False
    )
    batches = collect(streaming.build(stream(lengths)))
    for n in (0, 1, 3, len(batches), len(batches) + 5):
        assert streaming.running_positions(n) == (
            sum(lengths[ids].sum() for _, ids in batches[:n]),
            sum(bx.size for bx, _ in batches[:n]),
        )


# ------------------------------------------------- comparison to in-memory
def test_padding_efficiency_is_close_to_bucket_builder():
    x, lengths = make_sequences(2000, seed=17, max_length=200, min_length=1)
    options = {"num_buckets": 8, "batch_size": 32}
    in_memory = kerasbatch.BucketBuilder(**options)
    in_memory.build(x)
    streaming = kerasbatch.StreamBucketBuilder(buffer_size=500, **options)
    collect(streaming.build(stream(lengths), lengths))
    # Efficiency: BucketBuilder 0.898, StreamBucketBuilder 0.898 (buffer 500;
    # 0.898 with 100, 0.899 with 2000); PaddedBuilder(32) gets 0.514.
    expected = in_memory.statistics().padding_efficiency
    assert streaming.statistics().padding_efficiency == pytest.approx(
        expected, abs=0.02
    )
    assert streaming.statistics().num_batches == in_memory.statistics().num_batches


# ------------------------------------------------ blocks of examples
def blocks_of(lengths, block_rows, trailing=()):
    """`stream(lengths)` in blocks of `block_rows` examples, as a batched
    parser gives them: ragged sequences, dense per-example labels."""
    return stream(lengths, trailing).ragged_batch(block_rows)


# Blocks of one row, of rows that divide no batch, of more rows than a
# buffer holds: all three with the defaults, one or two with each option.
@pytest.mark.parametrize(
    "options, blocks",
    [
        ({}, (1, 5, 64)),
        ({"buffer_size": 7}, (5, 64)),
        ({"max_length": 9, "overflow": "truncate", "pad_to_bucket": True}, (1,)),
        ({"max_length": 9, "overflow": "drop", "drop_remainder": True}, (5,)),
        ({"truncate": True, "bucket_batch_sizes": [3, 2, 4, 1]}, (64,)),
    ],
)
def test_unshuffled_blocks_of_examples_give_the_batches_of_single_elements(
    options, blocks
):
    _, lengths = make_sequences(90, seed=21, max_length=14)
    settings = {"boundaries": [3, 6, 10], "shuffle": False, **options}
    if "bucket_batch_sizes" not in settings:
        settings["batch_size"] = 4
    by_element = kerasbatch.StreamBucketBuilder(**settings)
    expected = collect(by_element.build(stream(lengths, (2,))))
    for block_rows in blocks:
        by_block = kerasbatch.StreamBucketBuilder(**settings)
        batches = collect(
            by_block.build(blocks_of(lengths, block_rows, (2,)), batched=True)
        )
        assert len(batches) == len(expected)
        for (x, ids), (x_expected, ids_expected) in zip(batches, expected, strict=True):
            np.testing.assert_array_equal(ids, ids_expected)
            np.testing.assert_array_equal(x, x_expected)
        assert by_block.statistics() == by_element.statistics()


# Blocks of rows that divide no batch, and of more rows than the buffer
# holds; blocks of one row are fed unshuffled above.
@pytest.mark.parametrize("block_rows", [5, 64])
def test_shuffled_blocks_feed_every_example_once_and_depend_on_seed_and_epoch(
    block_rows,
):
    _, lengths = make_sequences(90, seed=23, max_length=14)

    def built(seed):
        builder = kerasbatch.StreamBucketBuilder(
            boundaries=[3, 6, 10], batch_size=4, buffer_size=20, seed=seed
        )
        return builder, builder.build(blocks_of(lengths, block_rows), batched=True)

    def epoch_ids(built, epoch):
        builder, dataset = built
        builder.set_epoch(epoch)
        batches = collect(dataset)
        assert_statistics_match(builder, batches, lengths)
        return ids_of(batches)

    seed_1 = built(seed=1)
    first = epoch_ids(seed_1, epoch=0)
    assert sorted(i for ids in first for i in ids) == list(range(90))
    assert epoch_ids(seed_1, epoch=1) != first
    assert epoch_ids(built(seed=1), epoch=0) == first
    assert epoch_ids(built(seed=2), epoch=0) != first


def test_blocks_with_lengths_have_exact_cardinality_and_train():
    _, lengths = make_sequences(60, seed=22)
    builder = kerasbatch.StreamBucketBuilder(num_buckets=3, batch_size=8)
    dataset = builder.build(blocks_of(lengths, 16), lengths, batched=True)
    num_batches = int(dataset.cardinality())
    assert num_batches == len(collect(dataset))
    model = recording_model()
    model.fit(dataset, epochs=2, verbose=0, callbacks=[EpochReshuffle(builder)])
    epochs = batches_per_epoch(model.recorded, num_batches)
    assert len(epochs) == 2
    for batches in epochs:
        assert sorted(i for batch in batches for i in batch) == list(range(60))
    assert epochs[0] != epochs[1]  # reshuffled


# Single elements are gathered into blocks as blocks of examples are, so
# the checks are those of blocks either way: each mismatch is fed one way,
# the longer element both ways (it is found within a block).
@pytest.mark.parametrize(
    "actual, given, match, reordered, batched",
    [
        # an element longer than any of its bucket in the lengths given
        (
            [2, 6, 9, 3],
            [2, 6, 8, 3],
            r"Element 2 has length 9 .* do not match",
            True,
            False,
        ),
        (
            [2, 6, 9, 3],
            [2, 6, 8, 3],
            r"Element 2 has length 9 .* do not match",
            False,
            True,
        ),
        # one bucket gets more elements than the lengths put in it
        (
            [2, 2, 6, 6],
            [2, 6, 6, 6],
            r"do not match.*expected per bucket:.*\[1 3\]",
            False,
            True,
        ),
        # and fewer, found at the end (the same number of elements in all)
        ([2, 6, 6, 6], [2, 2, 6, 6], r"do not match.*seen:.*\[1 3\]", False, False),
        # one element missing: the same number of batches of 2 in each bucket
        ([2, 6, 6], [2, 2, 6, 6], r"do not match.*seen:.*\[1 2\]", True, True),
    ],
)
def test_lengths_that_do_not_match_the_data_are_an_error(
    actual, given, match, reordered, batched
):
    """Wrong lengths would give a wrong cardinality and wrong batch shapes:
    each is checked against the elements as they stream."""
    dataset = stream(actual).filter(lambda x, i: True)  # cardinality unknown
    if batched:
        dataset = dataset.ragged_batch(3)
    settings = {"boundaries": [4], "batch_size": 2, "pad_to_bucket": True}
    builder = kerasbatch.StreamBucketBuilder(**settings)
    batches = builder.build(dataset, given, batched=batched)
    with pytest.raises(tf.errors.InvalidArgumentError, match=match):
        collect(batches)
    if not reordered:  # a pipeline each: checked on a sample of the data sets
        return
    # the data's own lengths, in another order, describe the same batches
    builder = kerasbatch.StreamBucketBuilder(**settings)
    batches = collect(builder.build(dataset, actual[::-1], batched=batched))
    assert sorted(i for _, ids in batches for i in ids) == list(range(len(actual)))
    assert {x.shape for x, _ in batches} == {s["x"] for s in builder.batch_shapes()}


@pytest.mark.parametrize(
    "dataset, error, match",
    [
        (
            tf.data.Dataset.from_tensors(tf.ragged.constant([[[1], [2, 3]]])),
            ValueError,
            "ragged in 2 dimensions",
        ),
        (tf.data.Dataset.from_tensors(tf.constant(1)), TypeError, "example dimension"),
    ],
)
def test_bad_blocks_are_clear_errors(dataset, error, match):
    builder = kerasbatch.StreamBucketBuilder(boundaries=[4], batch_size=2)
    with pytest.raises(error, match=match):
        builder.build(dataset, batched=True)


# ------------------------------------------------- config and bad inputs
CONFIGURED = [
    kerasbatch.StreamBucketBuilder(),
    kerasbatch.StreamBucketBuilder(
        boundaries=[8, 16],
        bucket_batch_sizes=[32, 16, 8],
        truncate=True,
        buffer_size=100,
        shuffle=False,
        seed=3,
        drop_remainder=True,
        prefetch=2,
    ),
    kerasbatch.StreamBucketBuilder(
        boundaries="quantile",
        num_buckets=6,
        max_tokens=512,
        quadratic_length=128,
        pad_to_bucket=True,
        padding={"x": Padding(value=-1), "y": {"value": 0, "length": 64}},
        max_length=100,
        overflow="drop",
    ),
    kerasbatch.StreamBucketBuilder(seed=None),
    kerasbatch.StreamBucketBuilder(output_lengths=True, output_mask=True),
]


def frame_stream(lengths, weighted=False):
    """`(x, y[, w])`: x and per-frame targets y of `lengths[i]` frames."""
    table = tf.constant(np.asarray(lengths), tf.int64)

    def element(i):
        x = tf.fill([table[i], 2], tf.cast(i + 1, tf.float32))
        y = tf.fill([table[i]], tf.cast(i, tf.float32))
        if weighted:
            return x, y, tf.cast(i + 1, tf.float32)
        return x, y

    return tf.data.Dataset.range(len(lengths)).map(element)


@pytest.mark.parametrize("weighted", [False, True])
def test_output_lengths_and_mask_match_the_in_memory_builders(weighted):
    lengths = np.array([3, 9, 4, 12, 5, 7, 2, 11])
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[6],
        batch_size=3,
        max_length=10,
        overflow="truncate",
        output_lengths=True,
        output_mask=True,
        shuffle=False,
    )
    seen = 0
    for batch in builder.build(frame_stream(lengths, weighted)):
        x, y, weights = batch
        assert sorted(x) == ["x", "x_length"]
        ids = y[:, 0].numpy().astype(int)  # y holds the element index
        kept = np.minimum(lengths[ids], 10)
        np.testing.assert_array_equal(x["x_length"].numpy(), kept)
        assert x["x_length"].dtype == tf.int32
        expected = (np.arange(y.shape[1]) < kept[:, None]).astype("float32")
        if weighted:
            expected *= (ids + 1)[:, None]
        np.testing.assert_array_equal(weights.numpy(), expected)
        seen += len(ids)
    assert seen == len(lengths)


def test_output_mask_trains_a_masked_loss_and_needs_per_frame_targets():
    lengths = np.array([3, 9, 4, 12, 5, 7])
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[6], batch_size=2, output_mask=True, seed=1
    )
    inputs = keras.Input((None, 2))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs)[..., 0])
    model.compile("sgd", kerasbatch.losses.MaskedMeanSquaredError())
    history = model.fit(
        builder.build(frame_stream(lengths), lengths=lengths),
        epochs=1,
        verbose=0,
        shuffle=False,
    )
    assert np.isfinite(history.history["loss"][0])
    labels_only = tf.data.Dataset.range(3).map(
        lambda i: (tf.ones([i + 1]), tf.cast(i, tf.float32))
    )
    with pytest.raises(ValueError, match="output_mask=True needs per-frame targets"):
        kerasbatch.StreamBucketBuilder(boundaries=[2], output_mask=True).build(
            labels_only
        )


@pytest.mark.parametrize("builder", CONFIGURED)
def test_config_round_trip(builder):
    config = builder.get_config()
    rebuilt = kerasbatch.StreamBucketBuilder.from_config(json.loads(json.dumps(config)))
    assert rebuilt == builder
    assert rebuilt.get_config() == config
    assert repr(rebuilt) == repr(builder)
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(builder)
    )
    assert restored == builder
    assert builder != kerasbatch.BucketBuilder()


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (
            lambda: kerasbatch.StreamBucketBuilder(buffer_size=0),
            ValueError,
            r"buffer_size must be a positive int, got 0",
        ),
        (
            lambda: kerasbatch.StreamBucketBuilder(buffer_size=None),
            ValueError,
            r"buffer_size must be a positive int",
        ),
        (
            lambda: kerasbatch.StreamBucketBuilder(batch_size=0),
            ValueError,
            r"batch_size must be a positive int",
        ),
        (
            lambda: kerasbatch.StreamBucketBuilder(batch_size=8, max_tokens=100),
            ValueError,
            r"at most one of batch_size",
        ),
        (
            lambda: kerasbatch.StreamBucketBuilder(boundaries=[16, 8]),
            ValueError,
            r"strictly increasing",
        ),
        (
            lambda: kerasbatch.StreamBucketBuilder(boundaries="median"),
            ValueError,
            r"median",
        ),
        (
            lambda: kerasbatch.StreamBucketBuilder(
                boundaries=[8], bucket_batch_sizes=[4]
            ),
            ValueError,
            r"1 boundaries make 2 buckets",
        ),
        (
            lambda: kerasbatch.StreamBucketBuilder(quadratic_length=8),
            ValueError,
            r"quadratic_length only applies with max_tokens",
        ),
        (
            lambda: kerasbatch.StreamBucketBuilder(shuffle="yes"),
            TypeError,
            r"shuffle must be True or False",
        ),
        (
            lambda: kerasbatch.StreamBucketBuilder(overflow="clip"),
            ValueError,
            r"overflow must be one of",
        ),
        (
            lambda: kerasbatch.StreamBucketBuilder(prefetch="lots"),
            ValueError,
            r"prefetch must be",
        ),
        (
            lambda: kerasbatch.StreamBucketBuilder(seed=-1),
            ValueError,
            r"seed must be an int in \[0, 2\*\*63\)",
        ),
        (
            lambda: kerasbatch.StreamBucketBuilder(
                [8], 4, 16, None, None, None, False, False, 10, 5
            ),
            TypeError,
            r"positional argument",
        ),
    ],
)
def test_bad_arguments_are_clear_errors(make, error, match):
    with pytest.raises(error, match=match):
        make()


def mapped(dataset, function):
    return dataset.map(tf.autograph.experimental.do_not_convert(function))


@pytest.mark.parametrize(
    ("builder", "dataset", "lengths", "error", "match"),
    [
        (
            kerasbatch.StreamBucketBuilder(),
            lambda: stream([1, 2]),
            None,
            ValueError,
            r"boundaries='auto' is computed from the lengths of the data: pass "
            r"build\(dataset, lengths=\.\.\.\)",
        ),
        (
            kerasbatch.StreamBucketBuilder(boundaries="uniform"),
            lambda: stream([1, 2]),
            None,
            ValueError,
            r"boundaries='uniform' is computed from the lengths",
        ),
        (
            kerasbatch.StreamBucketBuilder(boundaries=[4], max_tokens=64),
            lambda: stream([1, 2]),
            None,
            ValueError,
            r"max_tokens needs every bucket's upper bound.*set max_length, or pass "
            r"lengths",
        ),
        (
            kerasbatch.StreamBucketBuilder(boundaries=[4], pad_to_bucket=True),
            lambda: stream([1, 2]),
            None,
            ValueError,
            r"needs the last bucket's upper bound: set max_length, or pass lengths",
        ),
        (
            kerasbatch.StreamBucketBuilder(boundaries=[4]),
            lambda: mapped(tf.data.Dataset.range(3), lambda i: (tf.fill([2], i), i)),
            None,
            ValueError,
            r"no sequence component .*: x \(2,\)",
        ),
        (
            kerasbatch.StreamBucketBuilder(boundaries=[4]),
            lambda: tf.data.Dataset.from_tensors(tf.ragged.constant([[1], [2, 3]])),
            None,
            TypeError,
            r"x is a ragged tensor",
        ),
        (
            kerasbatch.StreamBucketBuilder(boundaries=[4]),
            lambda: mapped(stream([2, 3]), lambda x, i: (x, tf.sparse.from_dense([i]))),
            None,
            TypeError,
            r"y is a sparse tensor",
        ),
        (
            kerasbatch.StreamBucketBuilder(boundaries=[4]),
            lambda: mapped(stream([2, 3]), lambda x, i: ({"a": x}, {"a": i})),
            None,
            ValueError,
            r"y\['a'\] and x\['a'\] share the name 'a'",
        ),
        (
            kerasbatch.StreamBucketBuilder(boundaries=[4]),
            lambda: mapped(stream([2, 3]), lambda x, i: (x, i, i, i)),
            None,
            TypeError,
            r"must be x, \(x, y\) or \(x, y, sample_weight\); got a tuple of 4",
        ),
        (
            kerasbatch.StreamBucketBuilder(boundaries=[4]),
            lambda: stream([2, 3]),
            [2, 3, 4],
            ValueError,
            r"lengths has 3 entries but the dataset has 2 elements",
        ),
        (
            kerasbatch.StreamBucketBuilder(boundaries=[4], padding={"z": {"value": 1}}),
            lambda: stream([2, 3]),
            None,
            ValueError,
            r"padding names \['z'\]",
        ),
        (
            kerasbatch.StreamBucketBuilder(boundaries=[4]),
            lambda: [np.ones(3)],
            None,
            TypeError,
            r"takes a tf.data.Dataset, got list; stream a Grain dataset or a Python iterable with engine=.grain. or .python.",
        ),
    ],
)
def test_bad_inputs_are_clear_errors(builder, dataset, lengths, error, match):
    dataset = dataset()
    with pytest.raises(error, match=match):
        builder.build(dataset, lengths)


def test_statistics_before_build_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"call build\(dataset\) first"):
        kerasbatch.StreamBucketBuilder().statistics()
