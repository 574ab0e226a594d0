"""`kerasbatch.restore_order`: `model.predict` outputs back in the order of
the built data, on every builder and engine, on TensorFlow and JAX."""

import keras
import numpy as np
import pytest
from keras import ops

import kerasbatch

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
    ("make", "data", "match"),
    [
        (
            lambda: kerasbatch.BucketBuilder(
                [8], batch_size=4, max_length=10, overflow="drop"
            ),
            X,
            r"left \d+ elements out \(the first is element \d+\)",
        ),
        (
            lambda: kerasbatch.PackedBuilder(32, batch_size=4),
            X,
            r"PackedBuilder's are not",
        ),
    ],
)
def test_what_cannot_be_restored_says_why(make, data, match):
    dataset = make().build(data, engine="python")
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
