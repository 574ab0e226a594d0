"""`kerasbatch.restore_order`: `model.predict` outputs back in the order of
the built data, on every builder and engine, on TensorFlow and JAX."""

import keras
import numpy as np
import pytest
from keras import ops

import kerasbatch
from kerasbatch.builders.packed_builder import POSITIONS, SEGMENT_IDS

LENGTHS = np.random.default_rng(4).integers(1, 30, 45)
# Element i holds the value i + 1 at every frame: its outputs name it.
X = [np.full(n, i + 1, "float32") for i, n in enumerate(LENGTHS)]
BUILDERS = {
    "padded": lambda: kerasbatch.PaddedBuilder(batch_size=8),
    "sorted": lambda: kerasbatch.SortedBuilder(batch_size=8, seed=3),
    "bucket": lambda: kerasbatch.BucketBuilder([8, 16], batch_size=8, shuffle=False),
    "bucket shuffled, padded remainders": lambda: kerasbatch.BucketBuilder(
        [8, 16], batch_size=6, remainder="pad", batch_multiple=4, seed=1
    ),
    "budget, truncated": lambda: kerasbatch.BucketBuilder(
        [8, 16], max_tokens=96, max_length=20, overflow="truncate"
    ),
}


def model(per_frame):
    inputs = keras.Input((None,))
    if per_frame:
        outputs = keras.layers.Lambda(lambda x: ops.expand_dims(x * 2, -1))(inputs)
    else:
        outputs = keras.layers.Lambda(lambda x: ops.max(x, axis=1))(inputs)
    return keras.Model(inputs, outputs)


@pytest.mark.backend
@pytest.mark.parametrize("engine", ["tf.data", "grain", "python"])
@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_per_element_predictions_come_back_in_input_order(kind, engine):
    if engine == "tf.data" and keras.backend.backend() != "tensorflow":
        pytest.importorskip("tensorflow")
    builder = BUILDERS[kind]()
    if engine != "tf.data" and keras.backend.backend() == "tensorflow":
        # Keras on TensorFlow takes numpy engines' batches of one length only.
        with pytest.warns(UserWarning, match=r"Keras reads the batch shapes"):
            builder.build(X, np.zeros(len(X)), engine=engine)
        config = builder.get_config()
        config["padding"] = kerasbatch.Padding(length=32).get_config()
        builder = type(builder).from_config(config)
    dataset = builder.build(X, np.zeros(len(X)), engine=engine)
    predicted = model(per_frame=False).predict(dataset, verbose=0)
    restored = kerasbatch.restore_order(predicted, dataset)
    np.testing.assert_array_equal(restored, np.arange(1, len(X) + 1))
    # A second predict is the next epoch (another order): restored alike.
    predicted = model(per_frame=False).predict(dataset, verbose=0)
    np.testing.assert_array_equal(
        kerasbatch.restore_order(predicted, dataset), np.arange(1, len(X) + 1)
    )


@pytest.mark.backend
@pytest.mark.parametrize("engine", ["grain", "python"])
def test_per_frame_predictions_are_cut_to_each_element(engine):
    builder = kerasbatch.PaddedBuilder(
        batch_size=8, padding=kerasbatch.Padding(length=32), seed=2
    )
    dataset = builder.build(X, engine=engine)
    predicted = model(per_frame=True).predict(dataset, verbose=0)
    restored = kerasbatch.restore_order(predicted, dataset, per_frame=True)
    for element, output in zip(X, restored, strict=True):
        np.testing.assert_array_equal(output, 2 * element[:, None])


def test_per_frame_predictions_of_buckets_from_a_ragged_tensor():
    # TensorFlow joins batches of different lengths into a RaggedTensor.
    builder = kerasbatch.BucketBuilder(
        [8, 16], batch_size=8, max_length=20, overflow="truncate", seed=5
    )
    dataset = builder.build(X)
    predicted = model(per_frame=True).predict(dataset, verbose=0)
    outputs = {"frames": predicted, "same": [predicted]}
    restored = kerasbatch.restore_order(outputs, dataset, per_frame=True)
    for element, output in zip(X, restored["frames"], strict=True):
        np.testing.assert_array_equal(output, 2 * element[:20, None])
    assert len(restored["same"][0]) == len(X)


def test_chunk_outputs_are_reassembled():
    frames = [np.full((n, 1), i + 1, "float32") for i, n in enumerate(LENGTHS)]
    builder = kerasbatch.ChunkBuilder(4, batch_size=8, seed=0)
    dataset = builder.build(frames, engine="python")
    inputs = keras.Input((4, 1))
    chunk_model = keras.Model(inputs, keras.layers.Lambda(lambda x: x * 2)(inputs))
    predicted = chunk_model.predict(dataset, verbose=0)
    restored = kerasbatch.restore_order(predicted, dataset)
    for element, output in zip(frames, restored, strict=True):
        np.testing.assert_array_equal(output, 2 * element)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (
            lambda: kerasbatch.BucketBuilder(
                [8], batch_size=4, max_length=10, overflow="drop"
            ).build(X, engine="python"),
            r"left \d+ elements out \(the first is element \d+\)",
        ),
        (
            lambda: kerasbatch.StreamBucketBuilder([8], batch_size=4).build(
                X, LENGTHS, engine="python"
            ),
            r"StreamBucketBuilder's stream is planned as it runs",
        ),
    ],
)
def test_what_cannot_be_restored_says_why(make, match):
    dataset = make()
    for _ in dataset:
        pass
    with pytest.raises(ValueError, match=match):
        kerasbatch.restore_order(np.zeros((1000, 1)), dataset)


def test_outputs_of_another_dataset_or_none_yet_are_named():
    dataset = kerasbatch.PaddedBuilder(batch_size=8).build(X, engine="python")
    with pytest.raises(ValueError, match=r"has not been iterated yet"):
        kerasbatch.restore_order(np.zeros(len(X)), dataset)
    list(dataset)
    with pytest.raises(ValueError, match=r"The outputs have 3 rows, but epoch 0"):
        kerasbatch.restore_order(np.zeros(3), dataset)


# Packed rows: element i holds 100 (i + 1) + t at frame t; one is empty.
PACKED_LENGTHS = np.append(np.random.default_rng(7).integers(1, 20, 40), 0)
PACKED_X = [
    100.0 * (i + 1) + np.arange(n, dtype="float32")
    for i, n in enumerate(PACKED_LENGTHS)
]
ROW, SLOTS = 24, 6


def packed_builder(**overrides):
    settings = dict(batch_size=4, max_segments_per_row=SLOTS, seed=1)
    return kerasbatch.PackedBuilder(ROW, **(settings | overrides))


def packed_model():
    """Per frame: the running sum of the frame's own segment and its
    position; per segment slot: the segment's sum and length. Both are what
    each element gives alone, exactly (small integers in float32)."""
    x = keras.Input((ROW,), name="x")
    segment_ids = keras.Input((ROW,), name=SEGMENT_IDS, dtype="int32")
    positions = keras.Input((ROW,), name=POSITIONS, dtype="int32")

    def frames(inputs):
        x, segment_ids, positions = inputs
        same = ops.expand_dims(segment_ids, 2) == ops.expand_dims(segment_ids, 1)
        before = ops.tril(ops.ones((ROW, ROW), "bool"))
        mask = ops.cast(ops.logical_and(same, before), x.dtype)
        running = ops.sum(mask * ops.expand_dims(x, 1), axis=2)
        return ops.stack([running, ops.cast(positions, x.dtype)], axis=-1)

    def slots(inputs):
        x, segment_ids = inputs
        one_hot = ops.one_hot(segment_ids, SLOTS + 1, dtype=x.dtype)[..., 1:]
        sums = ops.einsum("bl,bls->bs", x, one_hot)
        return ops.stack([sums, ops.sum(one_hot, axis=1)], axis=-1)

    return keras.Model(
        {"x": x, SEGMENT_IDS: segment_ids, POSITIONS: positions},
        {
            "frames": keras.layers.Lambda(frames)([x, segment_ids, positions]),
            "slots": keras.layers.Lambda(slots)([x, segment_ids]),
        },
    )


@pytest.mark.backend
@pytest.mark.parametrize("engine", ["tf.data", "grain", "python"])
def test_packed_outputs_go_back_to_their_sequences(engine):
    if engine == "tf.data" and keras.backend.backend() != "tensorflow":
        pytest.importorskip("tensorflow")
    builder = packed_builder(remainder="pad", batch_multiple=3)
    dataset = builder.build(PACKED_X, np.zeros(len(PACKED_X)), engine=engine)
    model = packed_model()
    for _ in range(2):  # the second predict is the next epoch, another packing
        predicted = model.predict(dataset, verbose=0)
        frames = kerasbatch.restore_order(predicted["frames"], dataset, per_frame=True)
        slots = kerasbatch.restore_order(predicted["slots"], dataset, per_segment=True)
        for element, output in zip(PACKED_X, frames, strict=True):
            expected = np.stack([np.cumsum(element), np.arange(len(element))], -1)
            np.testing.assert_array_equal(output, expected.reshape(-1, 2))
        expected = [[element.sum(), len(element)] for element in PACKED_X]
        np.testing.assert_array_equal(slots, expected)
    # Both outputs at once, per segment too (a dict of outputs).
    both = kerasbatch.restore_order(
        {"slots": [predicted["slots"]]}, dataset, per_segment=True
    )
    np.testing.assert_array_equal(both["slots"][0], slots)


@pytest.mark.backend
@pytest.mark.parametrize("engine", ["tf.data", "python"])
def test_packed_attention_outputs_equal_each_sequence_alone(engine):
    if engine == "tf.data" and keras.backend.backend() != "tensorflow":
        pytest.importorskip("tensorflow")
    keras.utils.set_random_seed(0)
    x = keras.Input((ROW,), name="x")
    segment_ids = keras.Input((ROW,), name=SEGMENT_IDS, dtype="int32")
    positions = keras.Input((ROW,), name=POSITIONS, dtype="int32")
    features = keras.layers.Dense(8)(keras.layers.Reshape((ROW, 1))(x / 1000))
    features += keras.layers.Embedding(ROW, 8)(positions)
    mask = kerasbatch.layers.SegmentAttentionMask()(segment_ids)
    attended = keras.layers.MultiHeadAttention(2, 4)(
        features, features, attention_mask=mask
    )
    model = keras.Model(
        {"x": x, SEGMENT_IDS: segment_ids, POSITIONS: positions},
        [attended, kerasbatch.layers.SegmentPooling(SLOTS)(attended, segment_ids)],
    )
    dataset = packed_builder().build(PACKED_X, engine=engine)
    frames, slots = model.predict(dataset, verbose=0)
    frames = kerasbatch.restore_order(frames, dataset, per_frame=True)
    slots = kerasbatch.restore_order(slots, dataset, per_segment=True)
    # Each element alone in a row, padding after it: one row per element, in
    # one call (the rows do not meet: every layer works row by row).
    lengths = [len(element) for element in PACKED_X]
    alone = {
        "x": np.stack([np.pad(e, (0, ROW - len(e))) for e in PACKED_X]),
        SEGMENT_IDS: (np.arange(ROW) < np.c_[lengths]).astype("int32"),
        POSITIONS: np.stack(
            [np.pad(np.arange(n), (0, ROW - n)) for n in lengths]
        ).astype("int32"),
    }
    want_frames, want_slots = map(ops.convert_to_numpy, model(alone))
    for k, (got_frames, got_slot) in enumerate(zip(frames, slots, strict=True)):
        n = lengths[k]
        np.testing.assert_allclose(got_frames, want_frames[k, :n], atol=1e-5)
        np.testing.assert_allclose(got_slot, want_slots[k, 0], atol=1e-5)


@pytest.mark.parametrize(
    ("arguments", "outputs", "match"),
    [
        ({}, (45, ROW, 2), r"pass per_frame=True .* or per_segment=True"),
        (
            {"per_frame": True, "per_segment": True},
            (45, ROW, 2),
            r"per_segment=True .*not both",
        ),
        ({"per_frame": True}, (3, ROW), r"The outputs have 3 rows, but epoch 0"),
        ({"per_frame": True}, "rows", r"sequence_length=24, \.\.\.\), one per"),
        ({"per_segment": True}, "rows", r"packs up to \d elements in a row"),
        ({"per_segment": True}, "one slot", r"packs up to \d elements in a row"),
    ],
)
def test_bad_packed_outputs_say_what_is_wrong(arguments, outputs, match):
    dataset = packed_builder().build(PACKED_X, engine="python")
    rows = sum(len(batch["x"]) for batch in dataset)
    shapes = {"rows": (rows,), "one slot": (rows, 1, 2)}
    outputs = np.zeros(shapes.get(outputs, outputs))
    with pytest.raises(ValueError, match=match):
        kerasbatch.restore_order(outputs, dataset, **arguments)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (
            lambda: packed_builder(max_length=10, overflow="truncate"),
            r"packed \d+ elements cut short \(the first is element \d+; overflow=",
        ),
        (
            lambda: packed_builder(max_length=10, overflow="drop"),
            r"left \d+ elements out .*overflow='error', remainder",
        ),
        (
            lambda: packed_builder(drop_remainder=True),
            r"left \d+ elements out \(the first is element \d+\)",
        ),
    ],
)
def test_packed_elements_cut_or_left_out_have_no_outputs(make, match):
    dataset = make().build(PACKED_X, engine="python")
    rows = sum(len(batch["x"]) for batch in dataset)
    for arguments in ({"per_frame": True}, {"per_segment": True}):
        with pytest.raises(ValueError, match=match):
            kerasbatch.restore_order(np.zeros((rows, ROW)), dataset, **arguments)


def test_per_segment_is_only_for_packed_rows():
    dataset = kerasbatch.PaddedBuilder(batch_size=8).build(X, engine="python")
    list(dataset)
    with pytest.raises(ValueError, match=r"per_segment=True is for PackedBuilder"):
        kerasbatch.restore_order(np.zeros(len(X)), dataset, per_segment=True)
