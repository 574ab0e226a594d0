"""`kerasbatch.ModelInputs`: renamed inputs, a computed padding mask,
constants and next-token targets, on every builder and engine."""

import functools

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbatch
from kerasbatch import ModelInputs

ENGINES = ("tf.data", "python", "grain")
# The numpy engines' batches are read here, not by Keras on TensorFlow.
pytestmark = pytest.mark.filterwarnings("ignore:On the TensorFlow backend")
KERAS_HUB = ModelInputs(
    names={"x": "token_ids"},
    padding_mask="padding_mask",
    constants={"segment_ids": 0, "scale": 0.5},
)
CAUSAL = ModelInputs(
    names={"x": "token_ids"}, padding_mask="padding_mask", shift_targets=True
)


def _tokens(num=23, seed=0, low=2):
    """Element i: tokens `1000 * (i + 1) + position`, so a row names its
    element and every token its position."""
    lengths = np.random.default_rng(seed).integers(low, 30, num)
    return [1000 * (i + 1) + np.arange(n) for i, n in enumerate(lengths)], lengths


def _numpy(batch):
    return tf.nest.map_structure(np.asarray, batch)


def _batches(builder, x, y=None, engine="tf.data"):
    if isinstance(builder, kerasbatch.StreamBucketBuilder):
        if engine == "tf.data":
            source = tf.data.Dataset.from_generator(
                lambda: iter(x), output_signature=tf.TensorSpec([None], tf.int64)
            )
            return [_numpy(b) for b in builder.build(source)]
        lengths = [len(e) for e in x]
        return [_numpy(b) for b in builder.build(x, lengths, engine=engine)]
    return [_numpy(b) for b in builder.build(x, y, engine=engine)]


def _element_of(row):
    return int(row[0] // 1000) - 1


BUILDERS = {
    "padded": lambda **kw: kerasbatch.PaddedBuilder(batch_size=4, **kw),
    "bucket": lambda **kw: kerasbatch.BucketBuilder([8, 16], batch_size=4, **kw),
    "sorted": lambda **kw: kerasbatch.SortedBuilder(batch_size=4, **kw),
    "stream": lambda **kw: kerasbatch.StreamBucketBuilder([8, 16], batch_size=4, **kw),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_padding_mask_and_constants_are_exact(kind, engine):
    x, lengths = _tokens()
    # Filler rows need targets to weigh them out: the stream has none.
    remainder = "keep" if kind == "stream" else "pad"
    builder = BUILDERS[kind](model_inputs=KERAS_HUB, remainder=remainder)
    labels = np.arange(len(x))
    batches = _batches(builder, x, None if kind == "stream" else labels, engine)
    seen = []
    for batch in batches:
        inputs = batch if isinstance(batch, dict) else batch[0]
        assert sorted(inputs) == ["padding_mask", "scale", "segment_ids", "token_ids"]
        tokens = inputs["token_ids"]
        assert inputs["padding_mask"].dtype == bool
        assert inputs["segment_ids"].dtype == np.int32
        assert inputs["scale"].dtype == np.float32
        assert (inputs["segment_ids"] == 0).all() and (inputs["scale"] == 0.5).all()
        assert inputs["segment_ids"].shape == tokens.shape
        real_rows = len(tokens)
        if not isinstance(batch, dict):
            real_rows = int(batch[2].sum())  # filler rows weigh 0
        for row, mask in zip(tokens[:real_rows], inputs["padding_mask"], strict=False):
            element = _element_of(row)
            n = lengths[element]
            np.testing.assert_array_equal(row[:n], x[element])
            np.testing.assert_array_equal(mask, np.arange(len(row)) < n)
            seen.append(element)
    assert sorted(seen) == list(range(len(x)))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_shifted_targets_are_the_next_tokens(kind, engine):
    x, lengths = _tokens()
    builder = BUILDERS[kind](model_inputs=CAUSAL, batch_multiple=3)
    seen = []
    for inputs, targets, weights in _batches(builder, x, engine=engine):
        tokens = inputs["token_ids"]
        assert targets.shape == tokens.shape and targets.dtype == tokens.dtype
        assert weights.dtype == np.float32
        for row, target, weight, mask in zip(
            tokens, targets, weights, inputs["padding_mask"], strict=True
        ):
            if not weight.any():  # a filler row
                continue
            element = _element_of(row)
            n = lengths[element]
            np.testing.assert_array_equal(row[:n], x[element])
            np.testing.assert_array_equal(target[: n - 1], x[element][1:])
            np.testing.assert_array_equal(weight, np.arange(len(row)) < n - 1)
            np.testing.assert_array_equal(mask, np.arange(len(row)) < n)
            seen.append(element)
    assert sorted(seen) == list(range(len(x)))


@pytest.mark.parametrize("engine", ENGINES)
def test_packed_targets_shift_within_each_sequence(engine):
    x, lengths = _tokens()
    builder = kerasbatch.PackedBuilder(
        32, batch_size=3, batch_multiple=2, model_inputs=CAUSAL, seed=3
    )
    seen = []
    for inputs, targets, weights in _batches(builder, x, engine=engine):
        ids = inputs["packed_segment_ids"]
        assert sorted(inputs) == [
            "packed_segment_ids",
            "padding_mask",
            "positions",
            "token_ids",
        ]
        for row in range(len(ids)):
            if not weights[row].any():
                continue  # a filler row
            for segment in range(1, ids[row].max() + 1):
                where = np.flatnonzero(ids[row] == segment)
                element = _element_of(inputs["token_ids"][row, where])
                np.testing.assert_array_equal(targets[row, where[:-1]], x[element][1:])
                expected = np.ones(len(where))
                expected[-1] = 0  # its last token has no next one in its sequence
                np.testing.assert_array_equal(weights[row, where], expected)
                seen.append(element)
            np.testing.assert_array_equal(inputs["padding_mask"][row], ids[row] > 0)
            assert not weights[row, ids[row] == 0].any()
    assert sorted(seen) == list(range(len(x)))


def test_engines_give_the_same_batches_bit_for_bit():
    x, _ = _tokens()
    for inputs in (KERAS_HUB, CAUSAL):
        made = {
            engine: _batches(
                kerasbatch.BucketBuilder([8], batch_size=4, model_inputs=inputs),
                x,
                engine=engine,
            )
            for engine in ENGINES
        }
        for engine in ENGINES[1:]:
            tf.nest.map_structure(
                np.testing.assert_array_equal, made[engine], made["tf.data"]
            )


def test_statistics_count_the_stored_tokens_alone():
    x, _ = _tokens()
    plain = kerasbatch.BucketBuilder([8, 16], batch_size=4)
    plain.build(x, engine="python")
    for inputs in (KERAS_HUB, CAUSAL):
        builder = kerasbatch.BucketBuilder([8, 16], batch_size=4, model_inputs=inputs)
        builder.build(x, engine="python")
        assert builder.statistics() == plain.statistics()


def test_output_lengths_and_renamed_dict_components():
    x, lengths = _tokens(num=6)
    inputs = ModelInputs(names={"ids": "token_ids"}, padding_mask="mask")
    builder = kerasbatch.PaddedBuilder(
        batch_size=6, shuffle=False, output_lengths=True, model_inputs=inputs
    )
    (batch,) = _batches(builder, {"ids": x, "label_of": np.arange(6.0)})
    assert sorted(batch) == ["ids_length", "label_of", "mask", "token_ids"]
    np.testing.assert_array_equal(batch["ids_length"], lengths)


def test_config_round_trips():
    builder = kerasbatch.PackedBuilder(
        16, segment_ids_name="sequence_of", model_inputs=CAUSAL
    )
    config = builder.get_config()
    assert config["model_inputs"] == CAUSAL.get_config()
    assert kerasbatch.PackedBuilder.from_config(config) == builder
    assert ModelInputs.from_config(KERAS_HUB.get_config()) == KERAS_HUB
    stream = kerasbatch.StreamBucketBuilder([4], batch_size=2, model_inputs=KERAS_HUB)
    assert kerasbatch.StreamBucketBuilder.from_config(stream.get_config()) == stream


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: ModelInputs(names={"x": ""}), "non-empty strs"),
        (lambda: ModelInputs(padding_mask=3), "padding_mask must be"),
        (lambda: ModelInputs(constants={"a": "0"}), "'a' must be an int or a float"),
        (lambda: ModelInputs(constants={"a": 2**40}), "int32; 1099511627776"),
        (
            lambda: ModelInputs(names={"x": "m"}, padding_mask="m"),
            "names the input 'm' twice",
        ),
        (lambda: kerasbatch.PaddedBuilder(model_inputs="bert"), "model_inputs must"),
        (
            lambda: kerasbatch.ChunkBuilder(4, model_inputs=CAUSAL),
            "ChunkBuilder cannot shift targets",
        ),
        (
            lambda: kerasbatch.PackedBuilder(8, segment_ids_name="positions"),
            "different names",
        ),
    ],
)
def test_bad_settings_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def _build(inputs, x, y=None, builder=None):
    builder = builder or kerasbatch.PaddedBuilder(batch_size=2, model_inputs=inputs)
    return builder.build(x, y, engine="python")


@pytest.mark.parametrize(
    "inputs, data, message",
    [
        (ModelInputs(names={"tokens": "token_ids"}), {}, r"renames 'tokens'.*\['x'\]"),
        (CAUSAL, {"y": [np.ones(3)] * 3}, "y was given too"),
        (
            ModelInputs(padding_mask="mask"),
            {"x": {"a": [np.ones(3)] * 3, "b": [np.ones(2)] * 3}},
            "x has 2.*give mask_of",
        ),
        (
            ModelInputs(padding_mask="mask", mask_of="c"),
            {"x": {"a": [np.ones(3)] * 3}},
            "mask_of='c'.*x's are",
        ),
        (
            ModelInputs(constants={"a": 0}),
            {"x": {"a": [np.ones(3)] * 3}},
            "two inputs named 'a'",
        ),
        (
            CAUSAL,
            {"x": [np.ones(3), np.ones(1), np.ones(4)]},
            "Element 1 of x has 1 positions.*at least 2",
        ),
        (
            ModelInputs(padding_mask="mask"),
            {"x": [np.ones(3), np.ones(2), np.ones(0)]},
            "Element 2 of x has 0 positions.*NaN",
        ),
    ],
)
def test_bad_data_is_refused_naming_it(inputs, data, message):
    x = data.get("x", [np.ones(3)] * 3)
    with pytest.raises(ValueError, match=message):
        _build(inputs, x, data.get("y"))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_stream_names_an_element_too_short(engine):
    x = [np.arange(1, 5), np.arange(1, 4), np.array([7]), np.arange(1, 6)]
    builder = kerasbatch.StreamBucketBuilder([4], batch_size=2, model_inputs=CAUSAL)
    with pytest.raises(Exception, match="Element 2 of x has 1 positions"):
        _batches(builder, x, engine=engine)


def test_packed_names_that_clash_are_refused():
    x = [np.ones(3)] * 4
    with pytest.raises(ValueError, match="x has a component named 'packed_segment"):
        kerasbatch.PackedBuilder(8).build({"packed_segment_ids": x})
    bert_like = ModelInputs(names={"x": "token_ids"}, constants={"segment_ids": 0})
    builder = kerasbatch.PackedBuilder(
        8, segment_ids_name="segment_ids", model_inputs=bert_like
    )
    with pytest.raises(
        ValueError, match="model_inputs makes an input.*are token types"
    ):
        builder.build(x)


# ------------------------------------------------------------------ keras-hub
keras_hub = pytest.importorskip("keras_hub")


#: A tiny keras-hub model: one layer of width 8 over 64 token ids.
TINY = dict(vocabulary_size=64, num_layers=1, hidden_dim=8, intermediate_dim=16)
#: What BERT and GPT-2 take beside it.
HEADS = dict(num_heads=2, max_sequence_length=64)


def _bert():
    backbone = keras_hub.models.BertBackbone(**TINY, **HEADS)
    return keras_hub.models.BertTextClassifier(backbone, 3, preprocessor=None)


def _causal_lm(name):
    if name == "gpt2":
        backbone = keras_hub.models.GPT2Backbone(**TINY, **HEADS)
        return keras_hub.models.GPT2CausalLM(backbone, preprocessor=None)
    backbone = keras_hub.models.LlamaBackbone(
        **TINY, num_query_heads=2, num_key_value_heads=1
    )
    return keras_hub.models.LlamaCausalLM(backbone, preprocessor=None)


@functools.cache
def _predicting_causal_lm(name):
    """One untrained `_causal_lm(name)` for the predictions on every engine:
    predicting changes no weight, and a model traces (on JAX compiles) its
    predict function once per batch shape, not once per engine."""
    return _causal_lm(name)


def _token_data(seed=0):
    """Texts of two lengths, 8 of each, in the first and the last bucket of
    `[8, 16, 32]`: batches of 8 feed one shape per bucket, a short text
    padded far and a long one little. On JAX every shape compiles (a fit's
    and a predict's, of a transformer), and every length run alone."""
    rng = np.random.default_rng(seed)
    return [rng.integers(1, 64, n) for n in rng.permutation(np.repeat([3, 30], 8))]


def test_keras_hub_reads_the_inputs_of_the_model():
    assert ModelInputs.keras_hub(_bert()) == ModelInputs(
        names={"x": "token_ids"},
        padding_mask="padding_mask",
        mask_of="x",
        constants={"segment_ids": 0},
    )
    assert ModelInputs.keras_hub(_causal_lm("gpt2"), token_ids="ids") == ModelInputs(
        names={"ids": "token_ids"},
        padding_mask="padding_mask",
        mask_of="ids",
        shift_targets=True,
    )
    images = keras.Input((4, 4, 3), name="images")
    other = keras.Model({"images": images}, keras.layers.Flatten()(images))
    with pytest.raises(ValueError, match="takes the input 'images'"):
        ModelInputs.keras_hub(other)


@pytest.mark.backend
def test_bert_classifier_on_buckets_predicts_as_each_text_alone():
    model = _bert()
    x = _token_data()
    builder = kerasbatch.BucketBuilder(  # one shape per bucket: few compiles
        [8, 16, 32],
        batch_size=8,
        pad_to_bucket=True,
        model_inputs=ModelInputs.keras_hub(model),
    )
    model.compile(loss="sparse_categorical_crossentropy", optimizer="adam")
    # keras-hub's fit takes tf.data or Grain datasets; Keras on TensorFlow
    # fixes a Grain dataset's shapes from its first batches.
    engine = "tf.data" if keras.backend.backend() == "tensorflow" else "grain"
    train = builder.build(x, np.arange(len(x)) % 3, engine=engine)
    history = model.fit(train, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    dataset = builder.build(x)
    predicted = kerasbatch.restore_order(model.predict(dataset, verbose=0), dataset)
    one_per_length = {len(tokens): i for i, tokens in enumerate(x)}.values()
    for tokens, logits in zip(
        [x[i] for i in one_per_length], predicted[list(one_per_length)], strict=True
    ):
        alone = called_alone(
            model,
            {
                "token_ids": tokens[None],
                "padding_mask": np.ones((1, len(tokens)), bool),
                "segment_ids": np.zeros((1, len(tokens)), "int32"),
            },
        )
        np.testing.assert_allclose(logits, alone[0], atol=1e-5)


def called_alone(model, inputs):
    """The model's outputs for one text, called eagerly in inference mode, as
    `predict` runs it: `predict_on_batch` would trace (on JAX compile) its
    predict function once more for every length."""
    return keras.ops.convert_to_numpy(model(inputs, training=False))


def test_keras_hub_fit_on_the_python_engine_says_which_engines_to_use():
    # keras-hub's task models take only tf.data or Grain datasets as such,
    # and convert anything else to arrays.
    model = _bert()
    model.compile(loss="sparse_categorical_crossentropy", optimizer="adam")
    builder = kerasbatch.PaddedBuilder(
        batch_size=8, model_inputs=ModelInputs.keras_hub(model)
    )
    x = _token_data()
    dataset = builder.build(x, np.zeros(len(x), int), engine="python")
    with pytest.raises(TypeError, match="engine='grain' or engine='tf.data'"):
        model.fit(dataset, epochs=1, verbose=0)
    assert len(dataset[0][0]["token_ids"]) == 8  # the dataset itself works


@pytest.mark.backend
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_causal_lm_trains_on_shifted_targets(name):
    model = _causal_lm(name)
    x = _token_data()
    builder = kerasbatch.BucketBuilder(
        [8, 16, 32],
        batch_size=8,
        shuffle=False,
        model_inputs=ModelInputs.keras_hub(model),
    )
    model.compile(
        loss=keras_loss(),
        optimizer="adam",
        weighted_metrics=["sparse_categorical_accuracy"],
    )
    history = model.fit(
        builder.build(x),
        epochs=1,
        verbose=0,
        callbacks=[kerasbatch.callbacks.PaddingEfficiency(builder)],
    )
    assert np.isfinite(history.history["loss"]).all()
    assert "padding_efficiency" in history.history


@pytest.mark.backend
@pytest.mark.parametrize("engine", ["tf.data", "grain"])
@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_causal_lm_predicts_every_position_as_each_text_alone(name, engine):
    # The logits after the last token are those a generation continues
    # from: the padding mask must let the model see that token.
    model = _predicting_causal_lm(name)
    x = _token_data()
    builder = kerasbatch.BucketBuilder(
        [8, 16, 32], batch_size=8, model_inputs=ModelInputs.keras_hub(model)
    )
    dataset = builder.build(x, engine=engine)
    predicted = kerasbatch.predict(model, dataset, per_frame=True, verbose=0)
    one_per_length = {len(tokens): i for i, tokens in enumerate(x)}.values()
    for i in one_per_length:
        n = len(x[i])
        alone = called_alone(
            model, {"token_ids": x[i][None], "padding_mask": np.ones((1, n), bool)}
        )
        assert predicted[i].shape == (n, 64)
        np.testing.assert_allclose(predicted[i], alone[0], atol=1e-5)


def keras_loss():
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)
