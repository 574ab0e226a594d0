"""A small model trains on every builder's output, with every kind of input."""

import keras
import numpy as np
import pytest

import kerasbatch
from kerasbatch.callbacks import EpochReshuffle, PaddingEfficiency


def classifier():
    """Max pooling over the embedded tokens (padding included: it learns to
    embed 0 low) finds whether token 1 occurs within a few steps, and traces
    far faster than a recurrent layer."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.Input((None,), dtype="int32"),
            keras.layers.Embedding(64, 8),
            keras.layers.GlobalMaxPooling1D(),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile(
        keras.optimizers.Adam(0.02), "binary_crossentropy", metrics=["accuracy"]
    )
    return model


@pytest.fixture(scope="module")
def shared_classifier():
    """One `classifier()` for every builder, and its untrained state: its
    training function is traced once (on TensorFlow, once more for another
    batch shape, then for any shape), not once per builder."""
    model = classifier()
    model.optimizer.build(model.trainable_variables)
    weights = model.get_weights()
    slots = [keras.ops.convert_to_numpy(v) for v in model.optimizer.variables]
    return model, weights, slots


def untrained(shared):
    """The shared classifier as `classifier()` makes it: its weights and its
    optimizer's state (step count and moments) restored."""
    model, weights, slots = shared
    model.set_weights(weights)
    for variable, value in zip(model.optimizer.variables, slots, strict=True):
        variable.assign(value)
    return model


def learnable_data(num_elements=256, seed=0):
    """Label 1 when token 1 occurs in the sequence."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 30, num_elements)
    labels = rng.integers(0, 2, num_elements)
    x = []
    for n, label in zip(lengths, labels, strict=True):
        tokens = rng.integers(2, 64, n)
        if label:
            tokens[rng.integers(0, n)] = 1
        x.append(tokens.astype(np.int32))
    return x, labels.astype(np.float32)


BUILDERS = {
    "padded": lambda: kerasbatch.PaddedBuilder(32),
    "sorted": lambda: kerasbatch.SortedBuilder(32),
    "bucket": lambda: kerasbatch.BucketBuilder(num_buckets=4, batch_size=32),
    "bucket_budget": lambda: kerasbatch.BucketBuilder(
        num_buckets=4, max_tokens=600, quadratic_length=64
    ),
    "bucket_pad_to_bucket": lambda: kerasbatch.BucketBuilder(
        boundaries=[8, 16], batch_size=32, pad_to_bucket=True
    ),
    "bucket_truncate": lambda: kerasbatch.BucketBuilder(
        boundaries=[4, 8, 16], batch_size=32, truncate=True
    ),
    "bucket_batch_sizes": lambda: kerasbatch.BucketBuilder(
        boundaries=[8, 16], bucket_batch_sizes=[64, 32, 16]
    ),
    "bucket_uniform": lambda: kerasbatch.BucketBuilder(
        boundaries="uniform", num_buckets=4, batch_size=32
    ),
    "bucket_quantile": lambda: kerasbatch.BucketBuilder(
        boundaries="quantile", num_buckets=4, batch_size=32
    ),
    "bucket_equal_tokens": lambda: kerasbatch.BucketBuilder(
        boundaries="equal_tokens", num_buckets=4, batch_size=32
    ),
    "padded_overflow_truncate": lambda: kerasbatch.PaddedBuilder(
        32, max_length=16, overflow="truncate"
    ),
    "sorted_fixed_length_in_order": lambda: kerasbatch.SortedBuilder(
        32, padding={"length": 32}, shuffle=False, prefetch=0
    ),
    "bucket_max_length": lambda: kerasbatch.BucketBuilder(
        num_buckets=2,
        batch_size=32,
        max_length=20,
        overflow="drop",
        drop_remainder=True,
    ),
}


# Padded and sorted also run under JAX (bucket batches train there in
# test_masked_losses_ignore_padding_whatever_the_batching).
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.backend) if name == "padded" else name
        for name in BUILDERS
    ],
)
def test_a_small_model_learns_from_each_builder(name, shared_classifier):
    x, y = learnable_data()
    builder = BUILDERS[name]()
    dataset = builder.build(x, y)
    model = untrained(shared_classifier)
    history = model.fit(
        dataset,
        epochs=3,
        verbose=0,
        callbacks=[EpochReshuffle(builder), PaddingEfficiency(builder)],
    )
    losses = history.history["loss"]
    assert np.isfinite(losses).all()
    assert losses[-1] < losses[0]
    assert len(history.history["padding_efficiency"]) == 3


def test_multi_input_model_with_lengths_and_per_example_features():
    rng = np.random.default_rng(1)
    x = {
        "tokens": [rng.integers(1, 50, n) for n in rng.integers(1, 20, 64)],
        "frames": [
            rng.normal(size=(n, 3)).astype("float32") for n in rng.integers(1, 12, 64)
        ],
        "speaker": rng.normal(size=(64, 2)).astype("float32"),
    }
    y = rng.integers(0, 2, 64).astype("float32")
    builder = kerasbatch.BucketBuilder(
        num_buckets=3, batch_size=16, output_lengths=True
    )
    dataset = builder.build(x, y)
    tokens = keras.Input((None,), name="tokens", dtype="int32")
    frames = keras.Input((None, 3), name="frames")
    speaker = keras.Input((2,), name="speaker")
    token_length = keras.Input((), name="tokens_length", dtype="int32")
    frame_length = keras.Input((), name="frames_length", dtype="int32")
    features = keras.layers.Concatenate()(
        [
            keras.layers.GlobalAveragePooling1D()(
                keras.layers.Embedding(50, 4)(tokens)
            ),
            keras.layers.GlobalAveragePooling1D()(frames),
            speaker,
            keras.ops.expand_dims(
                keras.ops.cast(token_length + frame_length, "float32"), -1
            ),
        ]
    )
    model = keras.Model(
        [tokens, frames, speaker, token_length, frame_length],
        keras.layers.Dense(1, activation="sigmoid")(features),
    )
    model.compile("adam", "binary_crossentropy")
    history = model.fit(dataset, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    batch = next(iter(dataset))[0]
    assert set(batch) == {
        "tokens",
        "frames",
        "speaker",
        "tokens_length",
        "frames_length",
    }


def per_frame_data(num_elements=48):
    rng = np.random.default_rng(2)
    lengths = rng.integers(1, 25, num_elements)
    x = [rng.normal(size=(n, 2)).astype("float32") for n in lengths]
    y = [frames.sum(axis=1) for frames in x]  # a per-frame target
    return x, y, lengths


def frame_model(loss):
    model = keras.Sequential(
        [keras.Input((None, 2)), keras.layers.Dense(1), keras.layers.Reshape((-1,))]
    )
    model.compile("adam", loss)
    return model


@pytest.mark.backend
@pytest.mark.parametrize(
    "loss_class",
    [kerasbatch.losses.MaskedMeanSquaredError, kerasbatch.losses.NegativeSNR],
)
def test_masked_losses_ignore_padding_whatever_the_batching(loss_class):
    x, y, _ = per_frame_data()
    model = frame_model(loss_class())
    padded = kerasbatch.PaddedBuilder(16, shuffle=False, output_mask=True).build(x, y)
    bucketed = kerasbatch.BucketBuilder(
        num_buckets=4, batch_size=16, output_mask=True
    ).build(x, y)
    sorted_ = kerasbatch.SortedBuilder(
        16, output_mask=True, padding={"value": 1e3}
    ).build(x, y)
    # Per-example losses averaged over the epoch do not depend on which
    # elements share a batch or how much (or with what) they are padded.
    results = [model.evaluate(d, verbose=0) for d in (padded, bucketed, sorted_)]
    assert results[1] == pytest.approx(results[0], rel=1e-5)
    assert results[2] == pytest.approx(results[0], rel=1e-5)
    history = model.fit(bucketed, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]


def test_masked_mse_matches_the_seed_formula_on_builder_batches():
    x, y, lengths = per_frame_data()
    model = frame_model(kerasbatch.losses.MaskedMeanSquaredError())
    dataset = kerasbatch.BucketBuilder(
        num_buckets=3, batch_size=8, output_mask=True
    ).build(x, y)
    # Called eagerly, one element at a time: `predict` would trace its
    # function again for every length.
    predictions = [
        keras.ops.convert_to_numpy(model(frames[None], training=False))[0]
        for frames in x
    ]
    per_example = [np.mean((p - t) ** 2) for p, t in zip(predictions, y, strict=True)]
    assert model.evaluate(dataset, verbose=0) == pytest.approx(
        np.mean(per_example), rel=1e-5
    )
