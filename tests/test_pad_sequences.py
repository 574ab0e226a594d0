import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from kerasbatch.layers import PadSequences

PADDINGS = ("pre", "post")
ON_TF = keras.backend.backend() == "tensorflow"
# Keras has no ragged tensors in models on JAX: only TF pads in the model.
tf_backend_only = pytest.mark.skipif(
    not ON_TF, reason="ragged model inputs need the TensorFlow backend"
)
other_backend_only = pytest.mark.skipif(
    ON_TF, reason="the in-model error is for backends without ragged tensors"
)
IN_MODEL_ERROR = (
    r"cannot pad inside a model with the \w+ backend: .*no ragged tensors.*"
    r"`dataset\.map\(PadSequences\(\.\.\.\)\)`.*kerasbatch builder"
)
# Row lengths of the random batches: empty rows at both ends and inside.
LENGTHS = (0, 3, 1, 6, 0, 2, 5, 0)
LONGEST = max(LENGTHS)


def make_rows(lengths, trailing, kind, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "int":
        return [rng.integers(1, 100, size=(n, *trailing)) for n in lengths]
    return [rng.normal(size=(n, *trailing)).astype("float32") for n in lengths]


def to_ragged(rows, trailing=()):
    flat = np.concatenate([np.reshape(r, (-1, *trailing)) for r in rows])
    return tf.RaggedTensor.from_row_lengths(flat, [len(r) for r in rows])


def assert_same(got, expected):
    got = keras.ops.convert_to_numpy(got)
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize(
    "padding, truncating, maxlen, value_case, trailing",
    list(
        itertools.product(
            PADDINGS,
            PADDINGS,
            (None, 2, LONGEST, LONGEST + 3),
            ("int32-zero", "float32-neg"),
            ((), (2,)),
        )
    ),
)
def test_matches_keras_pad_sequences(padding, truncating, maxlen, value_case, trailing):
    if value_case == "int32-zero":
        kind, kwargs = "int", {}
    else:
        kind, kwargs = "float", {"value": -1.5, "dtype": "float32"}
    rows = make_rows(LENGTHS, trailing, kind)
    expected = keras.utils.pad_sequences(
        rows, maxlen=maxlen, padding=padding, truncating=truncating, **kwargs
    )
    layer = PadSequences(
        maxlen=maxlen, padding=padding, truncating=truncating, **kwargs
    )
    assert_same(layer(to_ragged(rows, trailing)), expected)


@pytest.mark.parametrize("maxlen", (None, 2, 4, 7))
@pytest.mark.parametrize(
    "padding, truncating", list(itertools.product(PADDINGS, PADDINGS))
)
@pytest.mark.parametrize("trailing", ((), (2,)))
def test_dense_input_matches_keras_pad_sequences(maxlen, padding, truncating, trailing):
    dense = np.arange(3 * 4 * int(np.prod(trailing))).reshape(3, 4, *trailing)
    expected = keras.utils.pad_sequences(
        list(dense), maxlen=maxlen, padding=padding, truncating=truncating
    )
    layer = PadSequences(maxlen=maxlen, padding=padding, truncating=truncating)
    assert_same(layer(tf.constant(dense)), expected)


@pytest.mark.backend
def test_values_and_padding_cast_like_numpy():
    rows = [np.array([1.7, -2.7]), np.array([], "float64"), np.array([3.2])]
    expected = keras.utils.pad_sequences(rows, maxlen=3, value=-1.5)
    assert_same(PadSequences(maxlen=3, value=-1.5)(to_ragged(rows)), expected)
    expected = keras.utils.pad_sequences(rows, value=0.1, dtype="float64")
    assert_same(PadSequences(value=0.1, dtype="float64")(to_ragged(rows)), expected)


@pytest.mark.backend
def test_all_rows_empty():
    rows = [np.zeros((0,), "int32")] * 3
    ragged = to_ragged(rows)
    assert_same(PadSequences()(ragged), keras.utils.pad_sequences(rows))
    assert_same(
        PadSequences(maxlen=2, value=7)(ragged),
        keras.utils.pad_sequences(rows, maxlen=2, value=7),
    )


@pytest.mark.backend
def test_empty_batch():
    ragged = tf.ragged.constant([], dtype=tf.int32, ragged_rank=1)
    assert PadSequences()(ragged).shape == (0, 0)
    assert PadSequences(maxlen=3)(ragged).shape == (0, 3)


@pytest.mark.backend
def test_int32_row_splits_and_string_values():
    ragged = tf.ragged.constant([["a"], ["b", "c", "d"]], row_splits_dtype=tf.int32)
    out = PadSequences(maxlen=2, padding="post", value="", dtype="string")(ragged)
    assert out.numpy().tolist() == [[b"a", b""], [b"c", b"d"]]


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(
        st.lists(st.integers(-1000, 1000), max_size=8), min_size=1, max_size=6
    ),
    maxlen=st.none() | st.integers(1, 10),
    padding=st.sampled_from(PADDINGS),
    truncating=st.sampled_from(PADDINGS),
    value=st.integers(-5, 5),
)
def test_property_matches_keras_pad_sequences(rows, maxlen, padding, truncating, value):
    expected = keras.utils.pad_sequences(
        rows, maxlen=maxlen, padding=padding, truncating=truncating, value=value
    )
    ragged = tf.RaggedTensor.from_row_lengths(
        np.array([x for row in rows for x in row], "int32"), [len(r) for r in rows]
    )
    layer = PadSequences(
        maxlen=maxlen, padding=padding, truncating=truncating, value=value
    )
    assert_same(layer(ragged), expected)


@pytest.mark.backend
@pytest.mark.parametrize("maxlen", (None, 3))
def test_in_tf_data_map(maxlen):
    rows = make_rows(LENGTHS, (2,), "float")
    ds = tf.data.Dataset.from_tensor_slices(to_ragged(rows, (2,))).ragged_batch(3)
    layer = PadSequences(maxlen=maxlen, padding="post", value=-1.5, dtype="float32")
    ds = ds.map(layer)
    assert ds.element_spec.shape.as_list() == [None, maxlen, 2]
    for i, batch in enumerate(ds):
        expected = keras.utils.pad_sequences(
            rows[3 * i : 3 * i + 3],
            maxlen=maxlen,
            padding="post",
            value=-1.5,
            dtype="float32",
        )
        assert_same(batch, expected)


@pytest.mark.backend
def test_in_tf_data_map_after_dense_to_ragged_batch():
    ds = tf.data.Dataset.from_generator(
        lambda: (list(range(1, n + 1)) for n in (2, 0, 4, 1)),
        output_signature=tf.TensorSpec([None], tf.int64),
    )
    ds = ds.apply(tf.data.experimental.dense_to_ragged_batch(2)).map(
        PadSequences(maxlen=3)
    )
    assert [b.numpy().tolist() for b in ds] == [
        [[0, 1, 2], [0, 0, 0]],
        [[2, 3, 4], [0, 0, 1]],
    ]


def test_compute_output_shape():
    assert PadSequences().compute_output_shape((None, None)) == (None, None)
    assert PadSequences(maxlen=5).compute_output_shape((8, None, 3)) == (8, 5, 3)
    assert PadSequences().compute_output_shape((8, 4, 3)) == (8, 4, 3)


@tf_backend_only
def test_symbolic_ragged_input():
    out = PadSequences(maxlen=5, dtype="float32")(
        keras.Input(shape=(None, 3), ragged=True)
    )
    assert out.shape == (None, 5, 3)
    assert out.dtype == "float32"
    assert not out.ragged


@pytest.mark.backend
@pytest.mark.parametrize("kind", ("int", "float"))
def test_tf_inputs_give_tf_tensors_on_every_backend(kind):
    rows = make_rows(LENGTHS, (), kind)
    kwargs = {} if kind == "int" else {"dtype": "float32", "value": -1.5}
    out = PadSequences(maxlen=4, **kwargs)(to_ragged(rows))
    assert isinstance(out, tf.Tensor)
    assert_same(out, keras.utils.pad_sequences(rows, maxlen=4, **kwargs))


@pytest.mark.backend
@pytest.mark.parametrize("padding, truncating", [("pre", "pre"), ("post", "post")])
def test_numpy_and_backend_arrays_give_backend_arrays(padding, truncating):
    dense = np.arange(12).reshape(3, 4)
    layer = PadSequences(maxlen=3, padding=padding, truncating=truncating)
    expected = keras.utils.pad_sequences(
        list(dense), maxlen=3, padding=padding, truncating=truncating
    )
    for inputs in (dense, keras.ops.convert_to_tensor(dense)):
        out = layer(inputs)
        assert keras.ops.is_tensor(out)
        assert_same(out, expected)
    layer = PadSequences(maxlen=5, padding=padding, value=-1.5, dtype="float32")
    expected = keras.utils.pad_sequences(
        list(dense), maxlen=5, padding=padding, value=-1.5, dtype="float32"
    )
    assert_same(layer(dense), expected)


@pytest.mark.backend
def test_tf_data_map_feeds_model_fit():
    """The main use on every backend: pad in the pipeline, fit any model."""
    rows = make_rows(LENGTHS, (), "int")
    y = np.arange(len(rows), dtype="float32")[:, None]
    ragged = to_ragged(rows)
    layer = PadSequences(maxlen=4, padding="post")
    ds = tf.data.Dataset.from_tensor_slices((ragged, y)).ragged_batch(3)
    ds = ds.map(lambda x, y: (layer(x), y))
    assert ds.element_spec[0].shape.as_list() == [None, 4]
    inputs = keras.Input(shape=(4,), dtype="int32")
    x = keras.layers.Embedding(100, 4)(inputs)
    x = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(inputs, keras.layers.Dense(1)(x))
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit(ds, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    padded = keras.utils.pad_sequences(rows, maxlen=4, padding="post")
    np.testing.assert_allclose(
        model.predict(ds.map(lambda x, y: x), verbose=0),
        model.predict(padded, verbose=0),
        rtol=1e-6,
    )


@pytest.mark.backend
@other_backend_only
def test_in_a_model_without_ragged_tensors_is_a_clear_error():
    # Keras itself refuses a ragged input on this backend.
    with pytest.raises(ValueError, match="`ragged=True` is not supported"):
        keras.Input(shape=(None,), ragged=True)
    # A dense model input would be rows Keras zero-padded at the end.
    with pytest.raises(ValueError, match=IN_MODEL_ERROR + r".*ragged=False"):
        PadSequences()(keras.Input(shape=(None,), dtype="int32"))

    class PaddingModel(keras.Model):
        def __init__(self):
            super().__init__()
            self.pad = PadSequences(maxlen=4)
            self.out = keras.layers.Dense(1)

        def call(self, x):
            return self.out(keras.ops.cast(self.pad(x), "float32"))

    model = PaddingModel()
    model.compile(optimizer="sgd", loss="mse")
    ragged = tf.ragged.constant([[1], [2, 3], [], [4, 5, 6, 7, 8]])
    with pytest.raises(ValueError, match=IN_MODEL_ERROR + r".*traced"):
        model.fit(ragged, np.ones((4, 1), "float32"), batch_size=2, verbose=0)


def ragged_model(**kwargs):
    inputs = keras.Input(shape=(None,), ragged=True, dtype="int32")
    return keras.Model(inputs, PadSequences(**kwargs)(inputs))


@tf_backend_only
def test_functional_model_with_ragged_input_predict():
    rows = [[1], [2, 3], [], [4, 5, 6, 7, 8], [9]]
    ragged = tf.ragged.constant(rows, dtype=tf.int32)
    model = ragged_model(maxlen=4)
    expected = keras.utils.pad_sequences(rows, maxlen=4)
    # "pre" padding proves that the model got the ragged rows, not rows that
    # Keras had already zero-padded at the end.
    assert_same(model(ragged), expected)
    assert_same(model.predict(ragged, batch_size=2, verbose=0), expected)


@tf_backend_only
def test_functional_model_fit_and_save_load(tmp_path):
    inputs = keras.Input(shape=(None,), ragged=True, dtype="int32")
    x = PadSequences(padding="post", truncating="post", maxlen=6)(inputs)
    x = keras.layers.Embedding(10, 4)(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(inputs, keras.layers.Dense(1)(x))
    model.compile(optimizer="sgd", loss="mse")
    ragged = tf.ragged.constant([[1], [2, 3], [], [4, 5, 6, 7, 8, 9, 1, 2]])
    y = np.ones((4, 1), "float32")
    model.fit(ragged, y, batch_size=2, epochs=1, verbose=0)
    ds = tf.data.Dataset.from_tensor_slices((ragged, y)).ragged_batch(3)
    model.fit(ds, epochs=1, verbose=0, shuffle=False)

    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    layer = loaded.layers[1]
    assert isinstance(layer, PadSequences)
    assert layer.get_config() == model.layers[1].get_config()
    np.testing.assert_allclose(
        loaded.predict(ragged, verbose=0), model.predict(ragged, verbose=0)
    )


def test_config_round_trip():
    layer = PadSequences(
        maxlen=7,
        padding="post",
        truncating="post",
        value=-1.5,
        dtype="float32",
        name="pad",
    )
    config = layer.get_config()
    assert config["maxlen"] == 7
    assert config["padding"] == "post"
    assert config["truncating"] == "post"
    assert config["value"] == -1.5
    assert config["dtype"] == "float32"
    assert config["name"] == "pad"
    restored = PadSequences.from_config(config)
    assert restored.get_config() == config

    serialized = keras.saving.serialize_keras_object(layer)
    assert serialized["registered_name"] == "kerasbatch>PadSequences"
    restored = keras.saving.deserialize_keras_object(serialized)
    assert isinstance(restored, PadSequences)
    assert restored.get_config() == config
    ragged = tf.ragged.constant([[1.0], [2.0, 3.0]])
    assert_same(restored(ragged), keras.ops.convert_to_numpy(layer(ragged)))


def test_defaults_match_keras_pad_sequences():
    config = PadSequences().get_config()
    assert config["maxlen"] is None
    assert config["padding"] == "pre"
    assert config["truncating"] == "pre"
    assert config["value"] == 0.0
    assert config["dtype"] == "int32"


@pytest.mark.parametrize("argument", ("padding", "truncating"))
@pytest.mark.parametrize("bad", ("middle", "PRE", None))
def test_bad_padding_or_truncating(argument, bad):
    with pytest.raises(ValueError, match=rf"`{argument}` must be one of .*{bad!r}"):
        PadSequences(**{argument: bad})


@pytest.mark.parametrize("bad", (0, -3, 2.5, True, "3"))
def test_bad_maxlen(bad):
    with pytest.raises(
        ValueError, match=rf"`maxlen` must be None or a positive.*{bad!r}"
    ):
        PadSequences(maxlen=bad)


def test_numpy_scalar_arguments_give_plain_config():
    config = PadSequences(maxlen=np.int64(3), value=np.float32(-1.5)).get_config()
    assert config["maxlen"] == 3 and type(config["maxlen"]) is int
    assert config["value"] == -1.5 and type(config["value"]) is float


def test_string_value_needs_string_dtype_with_keras_message():
    with pytest.raises(ValueError) as keras_error:
        keras.utils.pad_sequences([[1]], value="x", dtype="int32")
    with pytest.raises(ValueError) as error:
        PadSequences(value="x", dtype="int32")
    # Keras' message up to its advice (dtype=object has no tf.string twin).
    expected = str(keras_error.value).split("\n")[0]
    assert str(error.value).split("\n")[0] == expected
    assert "dtype='string'" in str(error.value)


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (float("nan"), ValueError, "value=nan is not a number: int32 cannot hold it"),
        (float("inf"), OverflowError, "value=inf is out of bounds for int32"),
        (1e20, OverflowError, "value=1e[+]20 is out of bounds for int32"),
    ],
)
def test_a_float_value_an_integer_dtype_cannot_hold_is_an_error(value, error, match):
    # keras.utils.pad_sequences would fill with whatever NumPy's cast gives.
    with pytest.raises(error, match=match):
        PadSequences(value=value, dtype="int32")


@pytest.mark.backend
def test_ragged_rank_2_rejected():
    ragged = tf.ragged.constant([[[1, 2]], [[3, 4], [5, 6]]])
    with pytest.raises(ValueError, match="ragged_rank=1"):
        PadSequences()(ragged)


@pytest.mark.parametrize(
    ("value", "dtype"), [(-1, "uint8"), (256, "uint8"), (2**40, "int32")]
)
def test_a_value_the_dtype_cannot_hold_is_an_error_as_in_keras(value, dtype):
    with pytest.raises(OverflowError) as keras_error:
        keras.utils.pad_sequences([[1, 2], [3]], value=value, dtype=dtype)
    with pytest.raises(OverflowError) as error:
        PadSequences(value=value, dtype=dtype)
    assert str(error.value) == str(keras_error.value)


def test_a_float_value_out_of_the_integer_range_is_an_error():
    with pytest.raises(OverflowError, match="value=300.5 is out of bounds for uint8"):
        PadSequences(value=300.5, dtype="uint8")


@pytest.mark.backend
@pytest.mark.parametrize(
    ("rows", "dtype", "received"),
    [([["a", "b"], ["c"]], "int32", "string"), ([[1, 2], [3]], "string", "int32")],
)
def test_strings_and_numbers_need_a_matching_dtype(rows, dtype, received):
    layer = PadSequences(dtype=dtype)
    with pytest.raises(ValueError, match=rf"dtype='{dtype}'.*cannot pad {received}"):
        layer(tf.ragged.constant(rows))
