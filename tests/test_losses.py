import contextlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from kerasbatch import losses as kb_losses
from kerasbatch.losses import MaskedMeanSquaredError, NegativeSNR
from kerasbatch.losses.masking import get_keras_mask

EPS32 = float(np.finfo(np.float32).eps)
LENGTHS = [5, 0, 3, 7, 1]
MAX_LEN = 7
FEATURES = 3


def value_and_gradients(loss_fn, values):
    """`loss_fn(*values)` and its gradients with respect to `values` (NumPy).

    TensorFlow differentiates with a tape (`values` may be its variables); JAX
    differentiates the function itself, at the values of `values`.
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        variables = [
            v if isinstance(v, keras.Variable) else tf.Variable(v) for v in values
        ]
        with tf.GradientTape() as tape:
            loss = loss_fn(*variables)
        grads = tape.gradient(loss, variables)
    elif backend == "jax":
        import jax

        values = [keras.ops.convert_to_numpy(v) for v in values]
        loss, grads = jax.value_and_grad(lambda values: loss_fn(*values))(values)
    else:
        pytest.skip(f"no gradients written for the {backend} backend")
    return keras.ops.convert_to_numpy(loss), [
        keras.ops.convert_to_numpy(g) for g in grads
    ]


def float64_enabled():
    """A context where float64 exists (JAX keeps it off unless asked)."""
    if keras.backend.backend() == "jax":
        import jax

        return jax.enable_x64(True)
    return contextlib.nullcontext()


# NumPy reference implementations of the seed formulas (float64).


def _expand(weights, y):
    weights = np.asarray(weights, dtype=np.float64)
    return weights.reshape(weights.shape + (1,) * (y.ndim - weights.ndim))


def ref_masked_mse(y_true, y_pred, mask, example_weights=None):
    y_true = np.asarray(y_true, np.float64)
    y_pred = np.asarray(y_pred, np.float64)
    w = _expand(mask, y_true)
    sq = np.where(w != 0, (y_pred - y_true) ** 2, 0.0)
    total = (w * sq).sum(axis=1)
    length = np.broadcast_to(w.sum(axis=1), total.shape)
    per_feature = np.zeros_like(total)
    np.divide(total, length, out=per_feature, where=length != 0)
    per_example = per_feature.reshape(len(per_feature), -1).mean(axis=1)
    return _reduce(per_example, example_weights)


def ref_negative_snr(y_true, y_pred, mask, example_weights=None, eps=EPS32):
    y_true = np.asarray(y_true, np.float64)
    y_pred = np.asarray(y_pred, np.float64)
    w = _expand(mask, y_true)
    signal = (w * np.where(w != 0, y_true, 0.0) ** 2).sum(axis=1)
    noise = (w * np.where(w != 0, y_true - y_pred, 0.0) ** 2).sum(axis=1)
    snr = 10 * np.log10(signal / (noise + eps) + eps)
    per_example = -snr.reshape(len(snr), -1).mean(axis=1)
    return _reduce(per_example, example_weights)


def _reduce(per_example, example_weights):
    if example_weights is None:
        return per_example.mean()
    example_weights = np.asarray(example_weights, np.float64)
    return (example_weights * per_example).sum() / example_weights.sum()


CASES = [
    pytest.param(MaskedMeanSquaredError, ref_masked_mse, id="mse"),
    pytest.param(NegativeSNR, ref_negative_snr, id="snr"),
]


def padded_data(feature_shape=(FEATURES,), lengths=LENGTHS, seed=0, pad=0.0):
    """Random `(y_true, y_pred, mask)` with `pad` in the padded positions."""
    rng = np.random.default_rng(seed)
    shape = (len(lengths), MAX_LEN) + tuple(feature_shape)
    y_true = rng.normal(size=shape).astype("float32")
    y_pred = (y_true + 0.5 * rng.normal(size=shape)).astype("float32")
    mask = (np.arange(MAX_LEN)[None, :] < np.array(lengths)[:, None]).astype("float32")
    padded = _expand(mask, y_true) == 0
    padded = np.broadcast_to(padded, shape)
    y_true[padded] = pad
    y_pred[padded] = pad
    return y_true, y_pred, mask


def assert_close(actual, expected, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(float(actual), float(expected), rtol=rtol, atol=atol)


@pytest.mark.parametrize("loss_cls, ref", CASES)
@pytest.mark.parametrize("feature_shape", [(), (FEATURES,), (2, 2)], ids=repr)
def test_matches_numpy_reference_with_mask_as_sample_weight(
    loss_cls, ref, feature_shape
):
    y_true, y_pred, mask = padded_data(feature_shape)
    loss = loss_cls()(y_true, y_pred, sample_weight=mask)
    assert tuple(loss.shape) == ()
    assert_close(loss, ref(y_true, y_pred, mask))


def test_masked_mse_seed_formula_by_hand():
    # Per example: squared error summed over valid steps / length, then mean.
    y_true, y_pred, mask = padded_data(())
    expected = []
    for i, length in enumerate(LENGTHS):
        err = (y_pred[i, :length].astype(np.float64) - y_true[i, :length]) ** 2
        expected.append(err.sum() / length if length else 0.0)
    loss = MaskedMeanSquaredError()(y_true, y_pred, sample_weight=mask)
    assert_close(loss, np.mean(expected))


@pytest.mark.parametrize("loss_cls, ref", CASES)
def test_all_empty_batch_is_finite(loss_cls, ref):
    y_true, y_pred, mask = padded_data(lengths=[0, 0])
    loss = loss_cls()(y_true, y_pred, sample_weight=mask)
    assert np.isfinite(float(loss))
    assert_close(loss, ref(y_true, y_pred, mask))


@pytest.mark.parametrize("loss_cls, ref", CASES)
@pytest.mark.parametrize("feature_shape", [(), (FEATURES,)], ids=repr)
def test_padding_values_do_not_change_the_loss(loss_cls, ref, feature_shape):
    clean = padded_data(feature_shape, pad=0.0)
    garbage = padded_data(feature_shape, pad=1e4)
    loss = loss_cls()
    expected = float(loss(*clean[:2], sample_weight=clean[2]))
    assert float(loss(*garbage[:2], sample_weight=garbage[2])) == expected

    # Random garbage, different in y_true and y_pred, and non-finite values.
    y_true, y_pred, mask = clean
    padded = np.broadcast_to(_expand(mask, y_true) == 0, y_true.shape)
    rng = np.random.default_rng(1)
    for fill_true, fill_pred in [
        (rng.normal(size=y_true.shape) * 1e3, rng.normal(size=y_true.shape) * 1e3),
        (np.full(y_true.shape, np.nan), np.full(y_true.shape, np.inf)),
    ]:
        dirty_true = np.where(padded, fill_true, y_true).astype("float32")
        dirty_pred = np.where(padded, fill_pred, y_pred).astype("float32")
        assert float(loss(dirty_true, dirty_pred, sample_weight=mask)) == expected


@pytest.mark.backend
@pytest.mark.parametrize("loss_cls, ref", CASES)
def test_a_filler_row_of_zero_weight_leaves_no_nan_in_the_loss(loss_cls, ref):
    """A row of example weight 0 (a filler row) whose predictions are NaN or
    inf gives the loss of the batch without it: selected, not multiplied."""
    y_true, y_pred, _ = padded_data(pad=3.0)
    weights = np.array([1.0, 0.0, 2.0, 0.5, 3.0], dtype="float32")
    loss = loss_cls()
    kept = weights > 0
    expected = float(loss(y_true[kept], y_pred[kept], sample_weight=weights[kept]))
    for poison in (np.nan, np.inf, -np.inf):
        dirty = y_pred.copy()
        dirty[~kept] = poison
        assert float(loss(y_true, dirty, sample_weight=weights)) == pytest.approx(
            expected, rel=1e-6
        )


@pytest.mark.parametrize("loss_cls, ref", CASES)
def test_non_binary_per_frame_weights(loss_cls, ref):
    y_true, y_pred, mask = padded_data()
    weights = mask * np.random.default_rng(2).uniform(0.1, 2.0, mask.shape)
    weights = weights.astype("float32")
    loss = loss_cls()(y_true, y_pred, sample_weight=weights)
    assert_close(loss, ref(y_true, y_pred, weights))
    # Per-frame weights of shape (batch, time, 1) are the same thing.
    loss_3d = loss_cls()(y_true, y_pred, sample_weight=weights[..., None])
    assert_close(loss_3d, loss)


@pytest.mark.parametrize("loss_cls, ref", CASES)
def test_no_mask_means_every_position_is_valid(loss_cls, ref):
    y_true, y_pred, _ = padded_data(pad=3.0)
    ones = np.ones(y_true.shape[:2])
    loss = loss_cls()(y_true, y_pred)
    assert_close(loss, ref(y_true, y_pred, ones))
    # `call` uses every position too and returns per-example values.
    per_example = loss_cls().call(y_true, y_pred)
    assert tuple(per_example.shape) == (len(LENGTHS),)
    assert_close(np.mean(keras.ops.convert_to_numpy(per_example)), loss)


@pytest.mark.parametrize("loss_cls, ref", CASES)
def test_rank1_sample_weight_weights_examples(loss_cls, ref):
    y_true, y_pred, _ = padded_data(pad=3.0)
    example_weights = np.array([1.0, 0.0, 2.0, 0.5, 3.0], dtype="float32")
    ones = np.ones(y_true.shape[:2])
    loss = loss_cls()(y_true, y_pred, sample_weight=example_weights)
    assert_close(loss, ref(y_true, y_pred, ones, example_weights))


@pytest.mark.parametrize("loss_cls, ref", CASES)
def test_trailing_unit_axis_is_squeezed(loss_cls, ref):
    y_true, y_pred, mask = padded_data(())
    loss = loss_cls()(y_true, y_pred[..., None], sample_weight=mask)
    assert_close(loss, ref(y_true, y_pred, mask))


def test_rank1_targets_are_rejected():
    with pytest.raises(ValueError, match="time"):
        MaskedMeanSquaredError()(np.zeros(4), np.zeros(4))


def test_dtype_argument():
    y_true, y_pred, mask = padded_data()
    loss = MaskedMeanSquaredError(dtype="float64")
    with float64_enabled():
        value = loss(y_true, y_pred, sample_weight=mask)
        assert keras.backend.standardize_dtype(value.dtype) == "float64"
        assert_close(value, ref_masked_mse(y_true, y_pred, mask), rtol=1e-12)


def test_snr_epsilon_argument():
    y_true, y_pred, mask = padded_data()
    loss = NegativeSNR(epsilon=1e-3)
    assert_close(
        loss(y_true, y_pred, sample_weight=mask),
        ref_negative_snr(y_true, y_pred, mask, eps=1e-3),
    )


# Keras masks propagated through a model.


def masking_model(feature_shape=(FEATURES,)):
    inputs = keras.Input((None, 2))
    hidden = keras.layers.Masking(mask_value=0.0)(inputs)
    # For 2-D targets the (batch, time, 1) output is squeezed by the loss.
    units = feature_shape[-1] if feature_shape else 1
    outputs = keras.layers.TimeDistributed(keras.layers.Dense(units))(hidden)
    return keras.Model(inputs, outputs)


def to_numpy_like(y_pred, y_true):
    return keras.ops.convert_to_numpy(y_pred).reshape(y_true.shape)


def masked_inputs(lengths=LENGTHS):
    rng = np.random.default_rng(3)
    x = rng.uniform(0.5, 1.5, size=(len(lengths), MAX_LEN, 2)).astype("float32")
    mask = (np.arange(MAX_LEN)[None, :] < np.array(lengths)[:, None]).astype("float32")
    return x * mask[..., None], mask


@pytest.mark.parametrize("loss_cls, ref", CASES)
@pytest.mark.parametrize("feature_shape", [(), (FEATURES,)], ids=repr)
def test_keras_mask_from_masking_layer(loss_cls, ref, feature_shape):
    keras.utils.set_random_seed(0)
    model = masking_model(feature_shape)
    x, mask = masked_inputs()
    y_true = padded_data(feature_shape, pad=5.0)[0]
    y_pred = model(x)
    keras_mask = keras.ops.convert_to_numpy(get_keras_mask(y_pred))
    np.testing.assert_array_equal(keras_mask, mask.astype(bool))
    loss = loss_cls()(y_true, y_pred)
    assert_close(loss, ref(y_true, to_numpy_like(y_pred, y_true), mask))

    # With a Keras mask, a rank-1 sample_weight weights the examples.
    example_weights = np.array([2.0, 1.0, 0.5, 1.0, 0.0], dtype="float32")
    weighted = loss_cls()(y_true, y_pred, sample_weight=example_weights)
    assert_close(
        weighted,
        ref(y_true, to_numpy_like(y_pred, y_true), mask, example_weights),
    )


@pytest.mark.parametrize("loss_cls, ref", CASES)
def test_keras_mask_from_embedding_mask_zero(loss_cls, ref):
    keras.utils.set_random_seed(0)
    tokens = keras.Input((None,), dtype="int32")
    hidden = keras.layers.Embedding(10, 4, mask_zero=True)(tokens)
    outputs = keras.layers.Dense(FEATURES)(hidden)
    model = keras.Model(tokens, outputs)

    _, mask = masked_inputs()
    ids = (np.random.default_rng(4).integers(1, 10, mask.shape) * mask).astype("int32")
    y_true = padded_data(pad=-7.0)[0]
    y_pred = model(ids)
    loss = loss_cls()(y_true, y_pred)
    assert_close(loss, ref(y_true, keras.ops.convert_to_numpy(y_pred), mask))


def test_sample_weight_mask_takes_precedence_over_keras_mask():
    keras.utils.set_random_seed(0)
    model = masking_model()
    x, _ = masked_inputs()
    y_true = padded_data()[0]
    y_pred = model(x)
    other_mask = padded_data(lengths=[1, 2, 3, 4, 5])[2]
    loss = MaskedMeanSquaredError()(y_true, y_pred, sample_weight=other_mask)
    expected = ref_masked_mse(y_true, keras.ops.convert_to_numpy(y_pred), other_mask)
    assert_close(loss, expected)


@pytest.mark.parametrize("loss_cls, ref", CASES)
def test_gradients_are_finite_and_zero_on_padding(loss_cls, ref):
    y_true, y_pred, mask = padded_data()
    padded = np.broadcast_to(_expand(mask, y_true) == 0, y_true.shape)
    y_true = np.where(padded, np.nan, y_true).astype("float32")
    y_pred = np.where(padded, 1e6, y_pred).astype("float32")
    loss, (grad,) = value_and_gradients(
        lambda y_pred: loss_cls()(y_true, y_pred, sample_weight=mask), [y_pred]
    )
    assert np.isfinite(float(loss))
    assert np.all(np.isfinite(grad))
    assert np.all(grad[padded] == 0)
    assert np.any(grad[~padded] != 0)


@pytest.mark.parametrize("loss_cls, ref", CASES)
def test_gradients_finite_with_keras_mask(loss_cls, ref):
    keras.utils.set_random_seed(0)
    model = masking_model()
    x, _ = masked_inputs()
    y_true = padded_data()[0]
    weights = model.trainable_weights

    def loss_fn(*values):
        if keras.backend.backend() == "tensorflow":  # the tape watches weights
            return loss_cls()(y_true, model(x))
        y_pred, _ = model.stateless_call(values, model.non_trainable_weights, x)
        return loss_cls()(y_true, y_pred)

    loss, grads = value_and_gradients(loss_fn, weights)
    # The loss differentiated is the masked one that model(x) gives.
    assert_close(loss, loss_cls()(y_true, model(x)))
    assert len(grads) == len(weights)
    assert all(np.all(np.isfinite(g)) for g in grads)


# Serialization and training.


@pytest.mark.parametrize(
    "loss",
    [
        MaskedMeanSquaredError(),
        MaskedMeanSquaredError(name="mmse", dtype="float64"),
        NegativeSNR(),
        NegativeSNR(epsilon=1e-4, name="snr"),
    ],
    ids=lambda loss: f"{type(loss).__name__}-{loss.name}",
)
def test_serialization_round_trip(loss):
    config = keras.saving.serialize_keras_object(loss)
    assert config["registered_name"].startswith("kerasbatch>")
    restored = keras.saving.deserialize_keras_object(config)
    assert type(restored) is type(loss)
    assert restored.get_config() == loss.get_config()
    assert type(loss).from_config(loss.get_config()).get_config() == (loss.get_config())
    y_true, y_pred, mask = padded_data()
    assert float(restored(y_true, y_pred, sample_weight=mask)) == float(
        loss(y_true, y_pred, sample_weight=mask)
    )


def test_default_epsilon_is_float32_machine_epsilon():
    assert NegativeSNR().epsilon == EPS32
    assert NegativeSNR().get_config()["epsilon"] == EPS32


def test_from_config_accepts_a_base_loss_config():
    config = keras.losses.Loss.get_config(MaskedMeanSquaredError(name="x"))
    assert MaskedMeanSquaredError.from_config(config).name == "x"


def sequence_model():
    inputs = keras.Input((None, 2))
    hidden = keras.layers.Dense(8, activation="tanh")(inputs)
    outputs = keras.layers.Dense(FEATURES)(hidden)
    return keras.Model(inputs, outputs)


@pytest.mark.parametrize("loss_cls, ref", CASES)
def test_fit_and_evaluate_with_mask_as_sample_weight(loss_cls, ref, tmp_path):
    keras.utils.set_random_seed(0)
    y_true, _, mask = padded_data(pad=0.0)
    x = np.random.default_rng(5).normal(size=y_true.shape[:2] + (2,))
    x = x.astype("float32")
    model = sequence_model()
    model.compile(optimizer="adam", loss=loss_cls())
    history = model.fit(
        x, y_true, sample_weight=mask, batch_size=2, epochs=2, verbose=0
    )
    assert np.all(np.isfinite(history.history["loss"]))

    reported = model.evaluate(
        x, y_true, sample_weight=mask, batch_size=len(x), verbose=0
    )
    y_pred = model.predict(x, batch_size=len(x), verbose=0)
    assert_close(reported, ref(y_true, y_pred, mask), rtol=1e-5, atol=0)

    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded.loss) is loss_cls
    assert loaded.loss.get_config() == model.loss.get_config()
    assert_close(
        loaded.evaluate(x, y_true, sample_weight=mask, batch_size=len(x), verbose=0),
        reported,
        rtol=1e-6,
        atol=0,
    )


def test_fit_with_keras_mask_matches_reference():
    keras.utils.set_random_seed(0)
    model = masking_model()
    x, mask = masked_inputs()
    y_true = padded_data(pad=9.0)[0]
    model.compile(optimizer="adam", loss=MaskedMeanSquaredError())
    model.fit(x, y_true, batch_size=2, epochs=1, verbose=0)
    reported = model.evaluate(x, y_true, batch_size=len(x), verbose=0)
    y_pred = model.predict(x, batch_size=len(x), verbose=0)
    assert_close(reported, ref_masked_mse(y_true, y_pred, mask), atol=0)


def test_public_api():
    assert kb_losses.__all__ == ["MaskedMeanSquaredError", "NegativeSNR"]
    for cls in (MaskedMeanSquaredError, NegativeSNR):
        assert issubclass(cls, keras.losses.Loss)
        assert keras.saving.get_registered_name(cls) == f"kerasbatch>{cls.__name__}"


def test_fit_from_dataset_with_unknown_time_dimension():
    # Batches as the builders deliver them: time is None in the static shape.
    y_true, _, mask = padded_data(pad=0.0)
    x = np.random.default_rng(6).normal(size=y_true.shape[:2] + (2,))
    x = x.astype("float32")

    def examples():
        for i, length in enumerate(LENGTHS):
            yield x[i, :length], y_true[i, :length], mask[i, :length]

    signature = (
        tf.TensorSpec((None, 2), tf.float32),
        tf.TensorSpec((None, FEATURES), tf.float32),
        tf.TensorSpec((None,), tf.float32),
    )
    dataset = tf.data.Dataset.from_generator(examples, output_signature=signature)
    dataset = dataset.padded_batch(len(LENGTHS))
    dataset = dataset.apply(tf.data.experimental.assert_cardinality(1))
    keras.utils.set_random_seed(0)
    model = sequence_model()
    model.compile(optimizer="adam", loss=MaskedMeanSquaredError())
    model.fit(dataset, epochs=1, shuffle=False, verbose=0)
    reported = model.evaluate(dataset, verbose=0)
    y_pred = model.predict(x, batch_size=len(x), verbose=0)
    assert_close(reported, ref_masked_mse(y_true, y_pred, mask), atol=0)


def test_per_example_factor_inside_frame_weights_cancels_in_mse():
    # Documented behaviour: the MSE divides by sum_t w, so a per-example factor
    # folded into per-frame weights cancels (a zero factor still drops the
    # example). Per-example weights must be rank-1 to weight the batch mean.
    y_true, y_pred, mask = padded_data()
    factors = np.array([3.0, 1.0, 0.5, 2.0, 1.0], dtype="float32")
    loss = MaskedMeanSquaredError()
    assert_close(
        loss(y_true, y_pred, sample_weight=mask * factors[:, None]),
        loss(y_true, y_pred, sample_weight=mask),
    )


# ---------------------------------------------------- mis-shaped arguments
@pytest.mark.parametrize("loss", [MaskedMeanSquaredError(), NegativeSNR()])
@pytest.mark.parametrize(
    ("y_true", "y_pred", "sample_weight", "match"),
    [
        ((2, 5), (2, 4), None, r"`y_true` and `y_pred` must have the same shape"),
        ((3, 5), (2, 5), None, r"y_true.shape=\(3, 5\), y_pred.shape=\(2, 5\)"),
        ((2, 5), (2, 5), (2, 4), r"per-frame `sample_weight`.*shape=\(2, 4\)"),
        ((2, 5, 3), (2, 5, 3), (2, 5, 2), r"per-frame `sample_weight`"),
        ((2, 5), (2, 5), (3,), r"per-example `sample_weight` must have shape"),
    ],
)
def test_mis_shaped_arguments_are_named(loss, y_true, y_pred, sample_weight, match):
    weights = None if sample_weight is None else np.ones(sample_weight)
    with pytest.raises(ValueError, match=match):
        loss(np.zeros(y_true), np.zeros(y_pred), sample_weight=weights)


@pytest.mark.parametrize("loss", [MaskedMeanSquaredError(), NegativeSNR()])
def test_weights_that_broadcast_over_features_are_accepted(loss):
    y = np.random.default_rng(0).normal(size=(2, 5, 3))
    value = loss(y, y + 1.0, sample_weight=np.ones((2, 5, 1)))
    assert np.isfinite(float(value))
