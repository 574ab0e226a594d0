"""PackedBuilder: exactly-once packing, exact statistics, weights, policies, fit."""

import json
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbatch
from kerasbatch import Padding
from kerasbatch.callbacks import EpochReshuffle, PaddingEfficiency
from kerasbatch.layers import SegmentPooling

STRIDE = 100  # token = 1 + element * STRIDE + position: tokens name themselves


def numbered_sequences(num_elements=200, seed=0, max_length=40, min_length=0):
    """Element i holds `1 + i * STRIDE + (0, 1, ..., n - 1)`."""
    lengths = np.random.default_rng(seed).integers(
        min_length, max_length + 1, num_elements
    )
    x = [1 + i * STRIDE + np.arange(n, dtype=np.int64) for i, n in enumerate(lengths)]
    return x, lengths


def rows_of(dataset):
    """Per row of every batch: `[(label, tokens, positions), ...]` by segment.

    Checks the row layout on the way: segment ids 1, 2, ... in row order,
    each one contiguous block, padding (id 0) only after them and holding 0.
    """
    rows = []
    for x, labels, weights in dataset:
        tokens, ids, positions = (
            np.asarray(x[k]) for k in ("x", "packed_segment_ids", "positions")
        )
        labels, weights = np.asarray(labels)[..., 0], np.asarray(weights)
        for r in range(len(tokens)):
            count = int(weights[r].sum())
            np.testing.assert_array_equal(
                weights[r], np.arange(len(weights[r])) < count
            )
            real = ids[r] > 0
            assert not real[real.argmin() :].any() or real.all()  # padding last
            assert (tokens[r][~real] == 0).all() and (positions[r][~real] == 0).all()
            assert ids[r].max() <= count
            assert (np.diff(ids[r][real]) >= 0).all()  # one block per segment
            row = []
            for k in range(count):
                where = ids[r] == k + 1
                row.append((int(labels[r, k]), tokens[r][where], positions[r][where]))
            rows.append(row)
    return rows


def check_exactly_once(rows, x, lengths):
    """Every element once, its tokens in order at positions 0..n-1."""
    seen = []
    for row in rows:
        for label, tokens, positions in row:
            np.testing.assert_array_equal(tokens, x[label])
            np.testing.assert_array_equal(positions, np.arange(lengths[label]))
            seen.append(label)
    assert sorted(seen) == list(range(len(x)))


def build(builder, x):
    return builder.build(x, np.arange(len(x)))


def plan_only(builder, x):
    """Builds for `builder.plan()` alone: the python engine plans as tf.data
    does (the engines' batches are compared bit for bit elsewhere) without
    tracing a pipeline, a second or more per packed build."""
    with warnings.catch_warnings():  # Keras never fits on these batches
        warnings.filterwarnings("ignore", "On the TensorFlow backend, Keras reads")
        return builder.build(x, np.arange(len(x)), engine="python")


# ------------------------------------------------------------- exactly once
def test_every_token_appears_exactly_once_in_order_every_epoch():
    x, lengths = numbered_sequences()
    builder = kerasbatch.PackedBuilder(64, batch_size=4, seed=3)
    dataset = build(builder, x)
    epochs = []
    for epoch in range(3):
        rows = rows_of(dataset)
        check_exactly_once(rows, x, lengths)
        planned = [row.tolist() for row in builder.plan(epoch).rows()]
        assert [[label for label, _, _ in row] for row in rows] == planned
        assert builder.last_started_epoch == epoch
        epochs.append(planned)
    assert epochs[0] != epochs[1] != epochs[2]


def test_rows_are_full_and_the_batches_rectangular():
    x, lengths = numbered_sequences()
    builder = kerasbatch.PackedBuilder(64, batch_size=4, seed=0)
    dataset = build(builder, x)
    spec = dataset.element_spec
    assert spec[0]["x"].shape.as_list() == [None, 64]
    assert spec[0]["packed_segment_ids"].dtype == tf.int32
    assert spec[0]["positions"].dtype == tf.int32
    S = builder.resolved_max_segments
    assert spec[1].shape.as_list() == [None, S, 1]  # a scalar label per slot
    # Best fit leaves at most one row's worth of room over the epoch here.
    assert builder.plan().num_rows <= -(-lengths.sum() // 64) + 1


def test_statistics_are_the_measured_ones():
    x, lengths = numbered_sequences(min_length=1)
    builder = kerasbatch.PackedBuilder(48, batch_size=5, seed=1)
    dataset = build(builder, x)
    real = padded = 0
    shapes = set()
    running = []
    for inputs, _, _ in dataset:
        ids = np.asarray(inputs["packed_segment_ids"])
        real += int((ids > 0).sum())
        padded += ids.size
        shapes.add(ids.shape)
        running.append((real, padded))
    statistics = builder.statistics()
    assert statistics.padding_efficiency == real / padded
    assert statistics.component_efficiency == {"x": real / padded}
    assert real == lengths.sum()
    assert statistics.num_batches == int(dataset.cardinality()) == len(running)
    assert statistics.num_elements == len(x)
    assert statistics.distinct_shapes == len(shapes)
    assert (statistics.dropped, statistics.truncated) == (0, 0)
    assert [builder.running_positions(b + 1) for b in range(len(running))] == running
    assert builder.running_positions(0) == (0, 0)


def test_the_number_of_rows_is_the_same_every_epoch():
    x, _ = numbered_sequences(300, seed=4)
    builder = kerasbatch.PackedBuilder(50, batch_size=3, seed=2)
    plan_only(builder, x)
    plans = [builder.plan(epoch) for epoch in range(4)]
    assert len({plan.num_rows for plan in plans}) == 1
    assert len({plan.num_batches for plan in plans}) == 1
    assert len({plan.segments_per_row.max() for plan in plans}) == 1


# ----------------------------------------------------------- determinism
def test_epochs_depend_only_on_seed_and_epoch():
    x, _ = numbered_sequences()
    first = kerasbatch.PackedBuilder(64, batch_size=4, seed=7)
    second = kerasbatch.PackedBuilder(64, batch_size=4, seed=7)
    other = kerasbatch.PackedBuilder(64, batch_size=4, seed=8)
    for builder in (first, second, other):
        plan_only(builder, x)
    second.set_epoch(1)
    rows = rows_of(build(second, x))
    labels = [[label for label, _, _ in row] for row in rows]
    assert labels == [row.tolist() for row in first.plan(1).rows()]
    for epoch in range(3):
        np.testing.assert_array_equal(
            first.plan(epoch).indices, second.plan(epoch).indices
        )
    assert not np.array_equal(first.plan(0).indices, other.plan(0).indices)


def test_rows_and_the_sequences_in_them_are_reshuffled_every_epoch():
    x, lengths = numbered_sequences(400, min_length=1, max_length=8)
    builder = kerasbatch.PackedBuilder(32, batch_size=4, seed=0)
    plan_only(builder, x)
    epochs = [builder.plan(epoch).rows() for epoch in (0, 1)]
    # Elements of equal length trade rows ...
    sets = [{frozenset(row.tolist()) for row in rows} for rows in epochs]
    assert sets[0] != sets[1]
    # ... the rows come in another order ...
    templates = [[sorted(lengths[row]) for row in rows] for rows in epochs]
    assert templates[0] != templates[1]
    assert sorted(templates[0]) == sorted(templates[1])
    # ... and a row's sequences are not kept longest first.
    assert any(
        row.tolist() != sorted(row, key=lambda i: (-lengths[i], i)) for row in epochs[0]
    )


def test_without_shuffle_rows_come_in_creation_order_longest_first():
    x, lengths = numbered_sequences(50, min_length=1)
    builder = kerasbatch.PackedBuilder(64, batch_size=4, shuffle=False)
    plan_only(builder, x)
    plan = builder.plan(0)
    np.testing.assert_array_equal(plan.indices, builder.plan(3).indices)
    for row in plan.rows():
        assert (np.diff(lengths[row]) <= 0).all()
    expected = kerasbatch.planning.packing.pack(
        lengths, 64, builder.resolved_max_segments
    )
    np.testing.assert_array_equal(plan.indices, expected.order)


# ------------------------------------------------------------ max segments
def test_max_segments_defaults_to_the_most_the_packing_puts_in_a_row():
    x, _ = numbered_sequences(min_length=1)
    builder = kerasbatch.PackedBuilder(64, batch_size=4)
    plan_only(builder, x)
    assert builder.max_segments_per_row is None
    assert builder.resolved_max_segments == builder.plan(0).segments_per_row.max()


def test_max_segments_per_row_bounds_rows_and_sizes_the_segment_axis():
    x, lengths = numbered_sequences(min_length=1, max_length=10)
    builder = kerasbatch.PackedBuilder(64, batch_size=4, max_segments_per_row=3)
    dataset = build(builder, x)
    assert builder.resolved_max_segments == 3
    assert dataset.element_spec[1].shape.as_list() == [None, 3, 1]
    for epoch in range(2):
        assert builder.plan(epoch).segments_per_row.max() <= 3
    check_exactly_once(rows_of(dataset), x, lengths)


# ----------------------------------------------------------------- weights
def test_per_token_targets_are_packed_with_padding_masks():
    x, lengths = numbered_sequences(min_length=1)
    y = [2 * s for s in x]
    builder = kerasbatch.PackedBuilder(
        64, batch_size=4, padding={"y": Padding(value=-1)}
    )
    inputs, targets, weights = next(iter(builder.build(x, y)))
    real = np.asarray(inputs["packed_segment_ids"]) > 0
    tokens, targets = np.asarray(inputs["x"]), np.asarray(targets)
    np.testing.assert_array_equal(targets[real], 2 * tokens[real])
    assert (targets[~real] == -1).all()
    np.testing.assert_array_equal(np.asarray(weights), real.astype("float32"))


def test_normalize_segments_weighs_every_sequence_the_same():
    x, lengths = numbered_sequences(min_length=1)
    builder = kerasbatch.PackedBuilder(64, batch_size=4, normalize_segments=True)
    inputs, _, weights = next(iter(builder.build(x, x)))
    ids, weights = np.asarray(inputs["packed_segment_ids"]), np.asarray(weights)
    element = (np.asarray(inputs["x"]) - 1) // STRIDE
    real = ids > 0
    np.testing.assert_allclose(weights[real], 1 / lengths[element[real]], rtol=1e-6)
    assert (weights[~real] == 0).all()
    for r in range(len(ids)):  # each segment sums to 1
        sums = np.bincount(ids[r], weights[r])[1:]
        np.testing.assert_allclose(sums, 1, rtol=1e-5)


def test_given_weights_multiply_the_masks():
    x, lengths = numbered_sequences(min_length=1)
    per_example = np.arange(len(x), dtype="float32") + 0.5
    per_token = [np.full(n, i + 0.25, "float32") for i, n in enumerate(lengths)]
    builder = kerasbatch.PackedBuilder(64, batch_size=4, shuffle=False)
    # A per-example weight of a per-token target goes on all its tokens.
    inputs, _, weights = next(iter(builder.build(x, x, per_example)))
    element = (np.asarray(inputs["x"]) - 1) // STRIDE
    real = np.asarray(inputs["packed_segment_ids"]) > 0
    np.testing.assert_array_equal(
        np.asarray(weights), np.where(real, per_example[element], 0)
    )
    # Per-token weights are packed like the tokens.
    inputs, _, weights = next(iter(builder.build(x, x, per_token)))
    np.testing.assert_array_equal(
        np.asarray(weights), np.where(real, element + 0.25, 0)
    )
    # Per-example weights of per-example targets go to the segment slots.
    labels = np.arange(len(x))
    _, slots, weights = next(iter(builder.build(x, labels, per_example)))
    slots, weights = np.asarray(slots)[..., 0], np.asarray(weights)
    filled = weights > 0
    np.testing.assert_array_equal(weights[filled], per_example[slots[filled]])


def test_dict_inputs_with_features_and_per_example_components():
    x, lengths = numbered_sequences(60, min_length=1)
    features = [np.stack([s, -s, s * 0], axis=1).astype("float32") for s in x]
    meta = np.stack([np.arange(60), np.arange(60) * 2], axis=1)
    builder = kerasbatch.PackedBuilder(64, batch_size=2, seed=5)
    dataset = builder.build(
        {"tokens": x, "frames": features, "meta": meta},
        {"tags": x, "label": np.arange(60)},
    )
    S = builder.resolved_max_segments
    spec = dataset.element_spec
    assert set(spec[0]) == {
        "tokens",
        "frames",
        "meta",
        "packed_segment_ids",
        "positions",
    }
    assert spec[0]["frames"].shape.as_list() == [2, 64, 3]
    assert spec[0]["meta"].shape.as_list() == [2, S, 2]
    assert spec[1]["tags"].shape.as_list() == [2, 64]
    assert spec[1]["label"].shape.as_list() == [2, S, 1]
    assert spec[2]["tags"].shape.as_list() == [2, 64]
    assert spec[2]["label"].shape.as_list() == [2, S]
    for inputs, targets, weights in dataset.take(3):
        tokens = np.asarray(inputs["tokens"])
        np.testing.assert_array_equal(np.asarray(inputs["frames"])[..., 0], tokens)
        np.testing.assert_array_equal(np.asarray(targets["tags"]), tokens)
        labels = np.asarray(targets["label"])[..., 0]
        np.testing.assert_array_equal(np.asarray(inputs["meta"])[..., 1], 2 * labels)
        ids = np.asarray(inputs["packed_segment_ids"])
        for r in range(len(ids)):
            for k in range(int(np.asarray(weights["label"])[r].sum())):
                segment = tokens[r][ids[r] == k + 1]
                assert ((segment - 1) // STRIDE == labels[r, k]).all()
    assert builder.statistics().component_efficiency.keys() == {
        "tokens",
        "frames",
        "tags",
    }


def test_ragged_tensor_input():
    x, lengths = numbered_sequences(40, min_length=1)
    builder = kerasbatch.PackedBuilder(64, batch_size=8, shuffle=False)
    from_ragged = builder.build(tf.ragged.constant(x), np.arange(40))
    check_exactly_once(rows_of(from_ragged), x, lengths)


# ------------------------------------------------------------- overflow
def test_an_element_longer_than_a_row_is_an_error_naming_it():
    x, _ = numbered_sequences(20, max_length=10)
    x[7] = np.arange(1, 30)
    x[12] = np.arange(1, 40)
    builder = kerasbatch.PackedBuilder(16, batch_size=2)
    with pytest.raises(
        ValueError, match=r"Element 7 has length 29, longer than a packed row.*2 elem"
    ):
        builder.build(x)
    with pytest.raises(RuntimeError, match="no data yet"):
        builder.statistics()


def test_truncate_cuts_to_the_row_and_counts():
    x, lengths = numbered_sequences(30, max_length=30)
    builder = kerasbatch.PackedBuilder(20, batch_size=4, overflow="truncate")
    rows = rows_of(build(builder, x))
    cut = np.minimum(lengths, 20)
    check_exactly_once(rows, [s[:20] for s in x], cut)
    statistics = builder.statistics()
    assert statistics.truncated == int((lengths > 20).sum()) > 0
    assert statistics.truncated_positions == int((lengths - cut).sum())


def test_max_length_cuts_shorter_than_the_row():
    x, lengths = numbered_sequences(30, max_length=30)
    builder = kerasbatch.PackedBuilder(
        64, batch_size=4, max_length=10, overflow="truncate"
    )
    rows = rows_of(build(builder, x))
    check_exactly_once(rows, [s[:10] for s in x], np.minimum(lengths, 10))


def test_drop_leaves_long_elements_out_and_counts():
    x, lengths = numbered_sequences(30, max_length=30)
    builder = kerasbatch.PackedBuilder(20, batch_size=4, overflow="drop")
    rows = rows_of(build(builder, x))
    kept = sorted(label for row in rows for label, _, _ in row)
    assert kept == np.flatnonzero(lengths <= 20).tolist()
    assert builder.statistics().dropped == int((lengths > 20).sum()) > 0
    with pytest.raises(ValueError, match="drops every element: all 1 are longer"):
        kerasbatch.PackedBuilder(4, overflow="drop").build([np.ones(5)])


def test_drop_remainder_gives_a_static_batch_size_and_counts_the_rest():
    x, _ = numbered_sequences(min_length=1)
    builder = kerasbatch.PackedBuilder(64, batch_size=8, drop_remainder=True)
    dataset = build(builder, x)
    assert dataset.element_spec[0]["x"].shape.as_list() == [8, 64]
    plan = builder.plan(0)
    assert plan.num_rows == 8 * plan.num_batches
    rows = rows_of(dataset)
    assert builder.statistics().dropped == len(x) - sum(len(r) for r in rows) > 0
    assert builder.statistics().distinct_shapes == 1
    with pytest.raises(ValueError, match="No batch left.*batch_size=500"):
        kerasbatch.PackedBuilder(64, batch_size=500, drop_remainder=True).build(x)


# ------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"sequence_length": 0}, ValueError, "sequence_length must be a positive int"),
        ({"sequence_length": -4}, ValueError, "sequence_length must be a positive"),
        ({"sequence_length": None}, ValueError, "sequence_length must be a positive"),
        ({"sequence_length": 2.5}, ValueError, "sequence_length must be a positive"),
        ({"sequence_length": 8, "batch_size": 0}, ValueError, "batch_size must be"),
        ({"sequence_length": 8, "batch_size": None}, ValueError, "batch_size must"),
        (
            {"sequence_length": 8, "max_segments_per_row": 0},
            ValueError,
            "max_segments_per_row must be a positive int",
        ),
        (
            {"sequence_length": 8, "max_length": 9},
            ValueError,
            r"max_length=9 is longer than the packed rows \(sequence_length=8\)",
        ),
        ({"sequence_length": 8, "overflow": "wrap"}, ValueError, "overflow must be"),
        (
            {"sequence_length": 8, "normalize_segments": "yes"},
            TypeError,
            "normalize_segments must be True or False",
        ),
    ],
)
def test_bad_arguments(arguments, error, message):
    with pytest.raises(error, match=message):
        kerasbatch.PackedBuilder(**arguments)


def test_sequence_components_of_an_element_must_be_equally_long():
    x, _ = numbered_sequences(10, min_length=2)
    frames = [np.zeros((len(s), 2)) for s in x]
    frames[4] = np.zeros((len(x[4]) - 1, 2))
    with pytest.raises(
        ValueError, match=r"x\['frames'\] element 4 has length .* but x\['tokens'\]"
    ):
        kerasbatch.PackedBuilder(64).build({"tokens": x, "frames": frames})


def test_per_token_weights_need_per_token_targets():
    x, lengths = numbered_sequences(10, min_length=1)
    weights = [np.ones(n) for n in lengths]
    with pytest.raises(ValueError, match="sample_weight is per-token but its target y"):
        kerasbatch.PackedBuilder(64).build(x, np.arange(10), weights)


def test_x_keys_may_not_shadow_the_added_inputs():
    x, _ = numbered_sequences(10)
    with pytest.raises(ValueError, match="x has a component named 'positions'"):
        kerasbatch.PackedBuilder(64).build({"tokens": x, "positions": x})


def test_padding_gives_values_not_lengths():
    x, _ = numbered_sequences(10)
    with pytest.raises(ValueError, match=r"padding\['x'\] has length 32, but packed"):
        kerasbatch.PackedBuilder(64, padding=Padding(length=32)).build(x)
    with pytest.raises(ValueError, match="'bucket', but packed"):
        kerasbatch.PackedBuilder(64, padding={"length": "bucket"}).build(x)
    dataset = kerasbatch.PackedBuilder(64, padding=Padding(-7, 64)).build(x)
    inputs = next(iter(dataset))
    padding = np.asarray(inputs["packed_segment_ids"]) == 0
    assert (np.asarray(inputs["x"])[padding] == -7).all() and padding.any()


# ------------------------------------------------------------ config
def test_config_round_trip_and_keras_serialisation():
    builder = kerasbatch.PackedBuilder(
        128,
        batch_size=16,
        max_segments_per_row=12,
        normalize_segments=True,
        seed=4,
        drop_remainder=True,
        padding={"y": {"value": -1, "length": -1}},
        max_length=100,
        overflow="truncate",
        prefetch=2,
    )
    config = builder.get_config()
    rebuilt = kerasbatch.PackedBuilder.from_config(json.loads(json.dumps(config)))
    assert rebuilt == builder
    assert rebuilt.get_config() == config
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(builder)
    )
    assert restored == builder
    assert "PackedBuilder(sequence_length=128, batch_size=16" in repr(builder)


def test_adapt_plans_as_build_does():
    x, lengths = numbered_sequences(min_length=1)
    built = kerasbatch.PackedBuilder(64, batch_size=4, seed=9)
    built.build(x)
    adapted = kerasbatch.PackedBuilder(64, batch_size=4, seed=9)
    adapted.adapt(lengths)
    assert adapted.statistics(0) == built.statistics(0)
    assert adapted.resolved_max_segments == built.resolved_max_segments
    np.testing.assert_array_equal(adapted.lengths, lengths)


# ------------------------------------------------------------- model.fit
class RecordingPooledModel(keras.Model):
    """Pools token embeddings per segment; records each batch's labels."""

    def __init__(self, max_segments):
        super().__init__()
        self.embed = keras.layers.Embedding(STRIDE * 200 + 64, 4)
        self.pool = SegmentPooling(max_segments)
        self.out = keras.layers.Dense(1)
        self.recorded = []

    def call(self, inputs):
        features = self.embed(inputs["x"])
        pooled = self.pool(features, inputs["packed_segment_ids"])
        return self.out(pooled)

    # The data is the last argument on every backend (JAX passes the state
    # first); run_eagerly makes it concrete.
    def train_step(self, *arguments):
        data = arguments[-1]
        labels, weights = np.asarray(data[1])[..., 0], np.asarray(data[2])
        self.recorded.append([int(v) for v in labels[weights > 0]])
        return super().train_step(*arguments)


def fit_and_record(x, epochs, initial_epoch=0):
    builder = kerasbatch.PackedBuilder(64, batch_size=8, seed=11)
    dataset = builder.build(x, np.arange(len(x), dtype="float32"))
    model = RecordingPooledModel(builder.resolved_max_segments)
    model.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    efficiency = PaddingEfficiency(builder, per_batch=True)
    history = model.fit(
        dataset,
        epochs=epochs,
        initial_epoch=initial_epoch,
        verbose=0,
        shuffle=False,
        callbacks=[EpochReshuffle(builder), efficiency],
    )
    per_epoch = int(dataset.cardinality())
    batches = [
        model.recorded[i : i + per_epoch]
        for i in range(0, len(model.recorded), per_epoch)
    ]
    return builder, history, batches


@pytest.mark.backend
def test_fit_with_epoch_reshuffle_and_padding_efficiency():
    # 48 elements are 2 batches an epoch (120 were 5): on JAX, where the
    # recording model runs eagerly, every step dispatches op by op.
    x, _ = numbered_sequences(48, min_length=1)
    builder, history, epochs = fit_and_record(x, epochs=3)
    for k, batches in enumerate(epochs):
        plan = builder.plan(k)
        assert batches == [
            [int(i) for row in batch for i in row] for batch in plan.batches()
        ]
        assert sorted(i for batch in batches for i in batch) == list(range(48))
    logged = history.history["padding_efficiency"]
    assert logged == [builder.statistics(k).padding_efficiency for k in range(3)]
    assert np.isfinite(history.history["loss"]).all()
    _, _, resumed = fit_and_record(x, epochs=3, initial_epoch=1)
    assert resumed == epochs[1:]
