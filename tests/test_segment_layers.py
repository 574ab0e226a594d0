"""Segment layers, and a packed Transformer that computes what it would alone."""

import keras
import numpy as np
import pytest

import kerasbatch
from kerasbatch.callbacks import EpochReshuffle, PaddingEfficiency
from kerasbatch.layers import SegmentAttentionMask, SegmentLossWeights, SegmentPooling

SEGMENT_IDS = np.array(
    [
        [1, 1, 1, 2, 2, 3, 0, 0],
        [1, 2, 2, 2, 2, 2, 2, 2],
        [0, 0, 0, 0, 0, 0, 0, 0],
    ]
)


# ------------------------------------------------------------------ mask
@pytest.mark.backend
def test_attention_mask_is_block_diagonal_over_real_segments():
    mask = np.asarray(SegmentAttentionMask()(SEGMENT_IDS))
    assert mask.dtype == bool and mask.shape == (3, 8, 8)
    for b, ids in enumerate(SEGMENT_IDS):
        for q in range(8):
            for k in range(8):
                # A padding query attends to itself alone.
                expected = ids[q] == ids[k] != 0 or (ids[q] == 0 and q == k)
                assert mask[b, q, k] == expected


def fused_kernel_attention(scores, mask):
    """Softmax attention weights as fused GPU kernels (cuDNN flash attention)
    compute them: masked scores are -inf, so a fully masked row is 0 / 0."""
    scores = np.where(mask, scores, -np.inf)
    with np.errstate(invalid="ignore"):
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        return weights / weights.sum(axis=-1, keepdims=True)


def packed_and_filled_segment_ids():
    """Segment ids of packed rows with a filler row (`batch_multiple`), and of
    a padded batch (`pad_to_multiple`, filler rows of `remainder="pad"`)."""
    rng = np.random.default_rng(0)
    x = [rng.integers(1, 9, n) for n in rng.integers(1, 20, 30)]
    packed = kerasbatch.PackedBuilder(32, batch_size=3, batch_multiple=4)
    padded = kerasbatch.BucketBuilder(
        num_buckets=2,
        batch_size=8,
        pad_to_bucket=True,
        pad_to_multiple=16,
        remainder="pad",
    )
    for inputs, _, weights in packed.build(x, x):
        yield np.asarray(inputs["packed_segment_ids"]), np.asarray(weights)
    for tokens, _, weights in padded.build(x, np.ones(len(x))):
        yield (np.asarray(tokens) != 0).astype("int32"), np.asarray(weights)


@pytest.mark.backend
def test_no_row_of_the_mask_is_all_false_for_padding_and_filler_rows():
    """Padding tokens, and filler rows, would be fully masked softmax rows:
    NaN under the fused kernels of a GPU (here in NumPy, as cuDNN does)."""
    rng = np.random.default_rng(1)
    fillers = 0
    for segment_ids, weights in [(SEGMENT_IDS, None), *packed_and_filled_segment_ids()]:
        mask = np.asarray(SegmentAttentionMask()(segment_ids))
        assert mask.any(axis=-1).all()
        attention = fused_kernel_attention(rng.normal(size=mask.shape), mask)
        assert np.isfinite(attention).all()
        if weights is not None:
            fillers += int((weights.reshape(len(weights), -1).max(axis=1) == 0).sum())
    assert fillers > 0  # filler rows were among them


@pytest.mark.backend
def test_real_tokens_attend_as_they_did_before():
    """Only the padding query rows changed: real tokens' outputs are those
    of the block-diagonal mask that leaves padding rows all False."""
    rng = np.random.default_rng(2)
    hidden = rng.normal(size=(3, 8, 16)).astype("float32")
    attention = keras.layers.MultiHeadAttention(num_heads=2, key_dim=8, seed=0)
    old_mask = (SEGMENT_IDS[:, :, None] == SEGMENT_IDS[:, None, :]) & (
        SEGMENT_IDS[:, :, None] != 0
    )
    new = np.asarray(
        attention(hidden, hidden, attention_mask=SegmentAttentionMask()(SEGMENT_IDS))
    )
    old = np.asarray(attention(hidden, hidden, attention_mask=old_mask))
    real = SEGMENT_IDS != 0
    np.testing.assert_allclose(new[real], old[real], atol=1e-6, rtol=0)
    assert np.isfinite(new).all()


@pytest.mark.backend
def test_attention_mask_in_a_functional_model():
    segment_ids = keras.Input((None,), dtype="int32")
    mask = SegmentAttentionMask()(segment_ids)
    assert mask.dtype == "bool" and tuple(mask.shape) == (None, None, None)
    model = keras.Model(segment_ids, mask)
    np.testing.assert_array_equal(
        model.predict(SEGMENT_IDS, verbose=0), SegmentAttentionMask()(SEGMENT_IDS)
    )


# --------------------------------------------------------------- pooling
@pytest.mark.backend
def test_pooling_averages_every_segment_into_its_slot():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(3, 8, 5)).astype("float32")
    pooled = np.asarray(SegmentPooling(4)(features, SEGMENT_IDS))
    assert pooled.shape == (3, 4, 5)
    for b, ids in enumerate(SEGMENT_IDS):
        for slot in range(4):
            members = ids == slot + 1
            expected = features[b, members].mean(0) if members.any() else np.zeros(5)
            np.testing.assert_allclose(pooled[b, slot], expected, rtol=1e-6)


@pytest.mark.backend
def test_pooling_selects_padding_away_so_nan_there_reaches_no_slot():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(3, 8, 5)).astype("float32")
    expected = np.asarray(SegmentPooling(2)(features, SEGMENT_IDS))
    # Padding, and segment 3 (beyond max_segments), hold NaN and inf.
    dirty = np.where((SEGMENT_IDS == 0) | (SEGMENT_IDS > 2), np.nan, 1.0)
    dirty = np.where(dirty[..., None] == 1.0, features, np.inf)
    dirty[SEGMENT_IDS == 0] = np.nan
    np.testing.assert_array_equal(SegmentPooling(2)(dirty, SEGMENT_IDS), expected)


@pytest.mark.backend
def test_pooling_leaves_out_segments_beyond_max_segments():
    features = np.arange(8, dtype="float32").reshape(1, 8, 1)
    pooled = np.asarray(SegmentPooling(2)(features, SEGMENT_IDS[:1]))
    np.testing.assert_allclose(pooled[0, :, 0], [1.0, 3.5])


@pytest.mark.backend
@pytest.mark.parametrize("bad", [0, -1, 2.0, None, True])
def test_pooling_needs_a_positive_int(bad):
    with pytest.raises(ValueError, match="max_segments must be a positive int"):
        SegmentPooling(bad)


# ----------------------------------------------------------- loss weights
@pytest.mark.backend
def test_loss_weights_mask_padding_and_optionally_normalise():
    weights = np.asarray(SegmentLossWeights()(SEGMENT_IDS))
    np.testing.assert_array_equal(weights, (SEGMENT_IDS > 0).astype("float32"))
    normalised = np.asarray(SegmentLossWeights(normalize=True)(SEGMENT_IDS))
    np.testing.assert_allclose(
        normalised[0], [1 / 3, 1 / 3, 1 / 3, 0.5, 0.5, 1, 0, 0], rtol=1e-6
    )
    for b, ids in enumerate(SEGMENT_IDS):  # every segment sums to 1
        sums = np.bincount(ids, normalised[b], minlength=4)[1:]
        present = np.bincount(ids, minlength=4)[1:] > 0
        np.testing.assert_allclose(sums[present], 1, rtol=1e-6)


@pytest.mark.backend
def test_loss_weights_match_the_builders_sample_weights():
    x = [np.arange(1, n + 1) for n in (5, 3, 9, 2, 7, 1)]
    for normalize in (False, True):
        builder = kerasbatch.PackedBuilder(
            12, batch_size=8, normalize_segments=normalize
        )
        inputs, _, weights = next(iter(builder.build(x, x)))
        np.testing.assert_allclose(
            SegmentLossWeights(normalize=normalize)(inputs["packed_segment_ids"]),
            weights,
            rtol=1e-6,
        )


@pytest.mark.backend
def test_loss_weights_normalize_must_be_a_bool():
    with pytest.raises(TypeError, match="normalize must be True or False"):
        SegmentLossWeights(normalize=1)


# ---------------------------------------------------------------- config
@pytest.mark.backend
@pytest.mark.parametrize(
    "layer",
    [SegmentAttentionMask(), SegmentPooling(7), SegmentLossWeights(normalize=True)],
    ids=lambda layer: type(layer).__name__,
)
def test_layers_round_trip_their_config_and_serialise(layer):
    rebuilt = type(layer).from_config(layer.get_config())
    assert rebuilt.get_config() == layer.get_config()
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(layer)
    )
    assert type(restored) is type(layer)
    assert restored.get_config() == layer.get_config()


# ----------------------------------------------------------- transformer
VOCAB, LENGTH, DIM = 50, 48, 16


def transformer_encoder(with_mask=True, seed=0):
    """Token + position embeddings, self-attention, FFN, layer norms."""
    keras.utils.set_random_seed(seed)
    tokens = keras.Input((None,), dtype="int32", name="x")
    segment_ids = keras.Input((None,), dtype="int32", name="packed_segment_ids")
    positions = keras.Input((None,), dtype="int32", name="positions")
    hidden = keras.layers.Embedding(VOCAB, DIM)(tokens)
    hidden = hidden + keras.layers.Embedding(LENGTH, DIM)(positions)
    mask = SegmentAttentionMask()(segment_ids) if with_mask else None
    attended = keras.layers.MultiHeadAttention(num_heads=2, key_dim=DIM // 2)(
        hidden, hidden, attention_mask=mask
    )
    hidden = keras.layers.LayerNormalization()(hidden + attended)
    forward = keras.layers.Dense(2 * DIM, activation="relu")(hidden)
    hidden = keras.layers.LayerNormalization()(
        hidden + keras.layers.Dense(DIM)(forward)
    )
    inputs = {"x": tokens, "packed_segment_ids": segment_ids, "positions": positions}
    return keras.Model(inputs, hidden)


def packed_and_alone_outputs(model):
    """Per packed sequence: its outputs in the packed batch and alone."""
    rng = np.random.default_rng(0)
    x = [rng.integers(1, VOCAB, n).astype("int32") for n in rng.integers(1, 30, 24)]
    builder = kerasbatch.PackedBuilder(LENGTH, batch_size=4, seed=1)
    pairs = []
    for inputs in builder.build(x):
        outputs = np.asarray(model(inputs))
        assert np.isfinite(outputs).all()  # padding rows too
        ids = np.asarray(inputs["packed_segment_ids"])
        tokens = np.asarray(inputs["x"])
        for row in range(len(ids)):
            for segment_id in range(1, ids[row].max() + 1):
                where = ids[row] == segment_id
                alone = {
                    "x": tokens[row, where][None],
                    "packed_segment_ids": np.ones((1, where.sum()), "int32"),
                    "positions": np.arange(where.sum(), dtype="int32")[None],
                }
                pairs.append((outputs[row, where], np.asarray(model(alone))[0]))
    assert len(pairs) == 24
    return pairs


def test_a_packed_sequence_gets_the_outputs_it_gets_alone():
    for packed, alone in packed_and_alone_outputs(transformer_encoder()):
        np.testing.assert_allclose(packed, alone, atol=1e-6, rtol=0)


def test_without_the_segment_mask_packed_sequences_leak_into_each_other():
    pairs = packed_and_alone_outputs(transformer_encoder(with_mask=False))
    assert max(np.abs(packed - alone).max() for packed, alone in pairs) > 1e-2


def test_packed_transformer_classifier_trains_saves_and_loads(tmp_path):
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 30, 120)
    x = [rng.integers(1, VOCAB, n).astype("int32") for n in lengths]
    labels = np.array([float(s.mean() > VOCAB / 2) for s in x])[:, None]
    builder = kerasbatch.PackedBuilder(LENGTH, batch_size=8, seed=0)
    dataset = builder.build(x, labels)
    encoder = transformer_encoder()
    pooled = SegmentPooling(builder.resolved_max_segments)(
        encoder.output, encoder.input["packed_segment_ids"]
    )
    probability = keras.layers.Dense(1, activation="sigmoid")(pooled)
    model = keras.Model(encoder.input, probability)
    loss = keras.losses.BinaryCrossentropy(reduction="mean_with_sample_weight")
    model.compile("adam", loss, weighted_metrics=["accuracy"])
    history = model.fit(
        dataset,
        epochs=3,
        verbose=0,
        shuffle=False,
        callbacks=[EpochReshuffle(builder), PaddingEfficiency(builder)],
    )
    assert history.history["padding_efficiency"] == [
        builder.statistics(k).padding_efficiency for k in range(3)
    ]
    assert history.history["loss"][-1] < history.history["loss"][0]
    model.save(tmp_path / "packed.keras")
    restored = keras.models.load_model(tmp_path / "packed.keras")
    inputs = next(iter(dataset))[0]
    np.testing.assert_allclose(restored(inputs), model(inputs), atol=1e-6)
