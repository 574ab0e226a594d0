"""`batch_multiple`: every batch fed with a multiple of n rows, the rows
beyond its elements filler (copies of the first row, `sample_weight` 0), counted as
padding by `statistics()`, never as data."""

import functools

import numpy as np
import pytest
import tensorflow as tf

import kerasbatch

LENGTHS = np.random.default_rng(3).integers(1, 12, 23)
LABELS = np.arange(1, len(LENGTHS) + 1, dtype="int32")


def sequences():
    """Element i is its label `i + 1` repeated `LENGTHS[i]` times."""
    return [
        np.full(n, label, "int32") for n, label in zip(LENGTHS, LABELS, strict=True)
    ]


def stream():
    ragged = tf.ragged.constant(sequences())
    x = tf.data.Dataset.from_tensor_slices(ragged).map(lambda r: r)
    return tf.data.Dataset.zip(x, tf.data.Dataset.from_tensor_slices(LABELS))


BUILDERS = {
    "padded": lambda **kw: kerasbatch.PaddedBuilder(batch_size=5, **kw),
    "sorted": lambda **kw: kerasbatch.SortedBuilder(batch_size=5, **kw),
    "bucket": lambda **kw: kerasbatch.BucketBuilder(num_buckets=3, batch_size=5, **kw),
    "budget": lambda **kw: kerasbatch.BucketBuilder(num_buckets=3, max_tokens=30, **kw),
    "packed": lambda **kw: kerasbatch.PackedBuilder(12, batch_size=3, **kw),
    "chunk": lambda **kw: kerasbatch.ChunkBuilder(4, batch_size=5, **kw),
    "window": lambda **kw: kerasbatch.WindowBuilder(5, 5, drop_remainder=False, **kw),
    "stream": lambda **kw: kerasbatch.StreamBucketBuilder(
        boundaries=[4, 8], batch_size=5, buffer_size=8, **kw
    ),
}


def build(builder, **inputs):
    if isinstance(builder, kerasbatch.StreamBucketBuilder):
        return builder.build(stream(), lengths=LENGTHS)
    return builder.build(sequences(), LABELS, **inputs)


def rows_of(batch):
    x, y, weights = batch
    x = x["x"] if isinstance(x, dict) else x
    weights = weights.numpy().reshape(len(y), -1)
    return x.numpy(), y.numpy().reshape(len(y), -1), weights


@functools.cache
def epochs_of(kind, multiple=None):
    """A builder of `kind` (seed 1, with `batch_multiple=multiple` if given),
    its dataset, and per epoch 0 and 1 its batches and statistics. Built once
    per process: the plain builders are the references of both multiples,
    and the filled ones serve the tests of the filler's statistics too."""
    extra = {} if multiple is None else {"batch_multiple": multiple}
    builder = BUILDERS[kind](seed=1, **extra)
    dataset = build(builder)
    epochs = []
    for epoch in range(2):
        builder.set_epoch(epoch)
        batches = list(dataset)
        epochs.append((batches, builder.statistics(epoch=epoch)))
    return builder, dataset, epochs


@pytest.mark.parametrize("kind", BUILDERS)
@pytest.mark.parametrize("multiple", [2, 4])
def test_every_batch_is_a_multiple_with_weightless_filler(kind, multiple):
    builder, dataset, epochs = epochs_of(kind, multiple)
    _, _, plain_epochs = epochs_of(kind)
    for epoch, (batches, statistics) in enumerate(epochs):
        plain_batches, plain_statistics = plain_epochs[epoch]
        unfilled = [tf.nest.flatten(b)[0].shape[0] for b in plain_batches]
        real = padded = 0
        labels = []
        assert len(batches) == len(dataset) == len(unfilled)
        for batch, size in zip(batches, unfilled, strict=True):
            x, y, weights = rows_of(batch)
            assert len(x) == len(y) == len(weights) == -(-size // multiple) * multiple
            filler = weights.max(axis=1) == 0
            assert not filler[:size].any() and filler[size:].all()
            assert (x[size:] == x[:1]).all()  # filler rows copy the first
            labels += y[weights > 0].tolist()
            real, padded = real + np.count_nonzero(x[:size]), padded + x.size
        assert statistics.padding_efficiency == pytest.approx(real / padded, 1e-12)
        assert statistics.num_elements == plain_statistics.num_elements
        expected = LABELS  # every chunk of a sequence carries its label:
        if kind == "chunk":
            expected = LABELS[builder.chunk_table.sequence]
        assert sorted(labels) == sorted(expected.tolist())


@pytest.mark.parametrize("kind", ["padded", "bucket", "packed", "stream"])
def test_the_filler_is_counted_as_padding(kind):
    # Epoch 0 of the datasets above, each iterated once.
    filled, unfilled = epochs_of(kind, 4)[2][0][1], epochs_of(kind)[2][0][1]
    assert filled.num_batches == unfilled.num_batches
    assert filled.num_elements == unfilled.num_elements
    assert filled.padding_efficiency < unfilled.padding_efficiency


def test_given_and_mask_weights_are_kept_for_real_rows():
    weights = np.linspace(0.5, 2.0, len(LENGTHS)).astype("float32")
    frames = [np.ones(n, "float32") for n in LENGTHS]
    builder = kerasbatch.SortedBuilder(
        batch_size=5, shuffle=False, batch_multiple=4, output_mask=True
    )
    dataset = builder.build(sequences(), frames, weights)
    plan = builder.plan()
    order = plan.indices
    seen = 0
    for (x, _, mask), size in zip(dataset, plan.batch_sizes, strict=True):
        assert len(x) == -(-size // 4) * 4
        elements = order[seen : seen + size]
        seen += size
        expected = np.zeros(mask.shape, "float32")
        for row, element in enumerate(elements):
            expected[row, : LENGTHS[element]] = weights[element]
        np.testing.assert_allclose(mask.numpy(), expected)
    assert seen == len(LENGTHS)


def test_without_filler_the_structure_still_has_weights():
    builder = kerasbatch.PaddedBuilder(batch_size=4, batch_multiple=2, shuffle=False)
    dataset = builder.build([np.ones(n, "int32") for n in (1, 2, 3, 4)], np.arange(4))
    ((x, y, weights),) = list(dataset)
    assert weights.numpy().tolist() == [1.0] * 4


def test_config_round_trips_and_equality_sees_it():
    for make in BUILDERS.values():
        builder = make(batch_multiple=8)
        config = builder.get_config()
        assert config["batch_multiple"] == 8
        assert type(builder).from_config(config) == builder
        assert make() != builder


@pytest.mark.parametrize("kind", ["sorted", "budget", "packed"])
def test_replicas_share_a_filled_batch_evenly(kind):
    """Under `distribute`, each global batch is filled first, then cut: with
    `batch_multiple` a multiple of the replicas, every part has one size."""
    from kerasbatch.engines.served import served_by
    from kerasbatch.engines.tf_data.distribute import ReplicaSlice
    from kerasbatch.engines.tf_data.pipeline import Pipeline

    builder = BUILDERS[kind](batch_multiple=4, seed=2)
    train = build(builder)
    builder.set_epoch(1)
    batches = list(train)
    builder.set_epoch(1)
    replicas = ReplicaSlice(num_replicas=2, first=0, count=2)
    parts = list(Pipeline(served_by(train)).dataset(replicas))
    assert len(parts) == 2 * len(batches)
    for (first, second), batch in zip(
        zip(parts[::2], parts[1::2], strict=True), batches, strict=True
    ):
        x, y, weights = rows_of(batch)
        halves = [rows_of(first), rows_of(second)]
        assert len(halves[0][0]) == len(halves[1][0]) == len(x) // 2
        got_x, got_y, got_weights = (
            np.concatenate(p) for p in zip(*halves, strict=True)
        )
        np.testing.assert_array_equal(got_weights, weights)
        real = weights.max(axis=1) > 0  # filler rows copy their part's first
        np.testing.assert_array_equal(got_x[real], x[real])
        np.testing.assert_array_equal(got_y[real], y[real])


@pytest.mark.parametrize("value", [0, -2, 1.5, "2", None, True])
def test_bad_batch_multiple_is_named(value):
    with pytest.raises(ValueError, match="batch_multiple must be a positive int"):
        kerasbatch.SortedBuilder(batch_size=4, batch_multiple=value)


@pytest.mark.parametrize("kind", BUILDERS)
def test_filler_without_targets_is_refused(kind):
    builder = BUILDERS[kind](batch_multiple=2)
    with pytest.raises(ValueError, match="no targets y to weigh"):
        if isinstance(builder, kerasbatch.StreamBucketBuilder):
            builder.build(stream().map(lambda x, y: x), lengths=LENGTHS)
        else:
            builder.build(sequences())


def test_window_filler_needs_batched_reducers():
    builder = kerasbatch.WindowBuilder(
        5, 5, reducers={"y": "count"}, drop_remainder=False, batch_multiple=2
    )
    with pytest.raises(ValueError, match="component 'y' is reduced by"):
        builder.build(sequences(), LABELS)
