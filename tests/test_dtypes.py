"""Every dtype tf.data batches: sequences and per-example
components of bfloat16, float16/32/64, uint8, int8/16/32/64 and bool through
every builder, padded with the right value in their own dtype; strings; the
padding value checked against each component's dtype."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbatch
from kerasbatch.data import padding as padding_lib
from kerasbatch.data import sources

DTYPES = [
    "bfloat16",
    "float16",
    "float32",
    "float64",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "bool",
]
#: A padding value of each dtype that the data below never holds.
PAD = {"bool": True, "uint8": 200, "int8": -7, "bfloat16": 0.5, "float16": 0.5}
LENGTHS = [1, 3, 2, 4, 1, 2, 5]
IDS = np.arange(len(LENGTHS))

BUILDERS = {
    "padded": lambda **k: kerasbatch.PaddedBuilder(batch_size=3, shuffle=False, **k),
    "sorted": lambda **k: kerasbatch.SortedBuilder(batch_size=3, shuffle=False, **k),
    "bucket": lambda **k: kerasbatch.BucketBuilder(
        boundaries=[3], batch_size=3, shuffle=False, **k
    ),
    "packed": lambda **k: kerasbatch.PackedBuilder(8, batch_size=2, shuffle=False, **k),
    "chunk": lambda **k: kerasbatch.ChunkBuilder(3, batch_size=3, shuffle=False, **k),
    "stream": lambda **k: kerasbatch.StreamBucketBuilder(
        boundaries=[3], batch_size=3, buffer_size=4, shuffle=False, **k
    ),
}


def np_dtype(name):
    return sources.as_numpy_dtype(name)


def sequences(dtype):
    """Element i: values 1, 2, 3, 1, ... (alternating True/False for bool)."""
    if dtype == "bool":
        return [np.arange(n) % 2 == 0 for n in LENGTHS]
    return [(np.arange(n) % 3 + 1).astype(np_dtype(dtype)) for n in LENGTHS]


def labels(dtype):
    if dtype == "bool":
        return IDS % 2 == 1
    return (IDS % 4 + 1).astype(np_dtype(dtype))


def pad_of(dtype):
    return PAD.get(dtype, 9)


def every_dtype(dtypes=DTYPES):
    """One dataset's `x` holding every dtype of `dtypes`: a sequence component
    `tokens_<dtype>` and a per-example one `label_<dtype>` each. Each dtype goes
    through the same batch function as it would alone; one build serves all."""
    x = {}
    for dtype in dtypes:
        x[f"tokens_{dtype}"] = sequences(dtype)
        x[f"label_{dtype}"] = labels(dtype)
    return x


def as_tensors(x):
    """`x` as tensors: each `tokens_*` ragged, each label dense."""
    return {
        name: tf.RaggedTensor.from_row_lengths(
            tf.constant(np.concatenate(values)), LENGTHS
        )
        if name.startswith("tokens")
        else tf.constant(values)
        for name, values in x.items()
    }


def stream(x, ids):
    """A dataset of `(x, id)` elements: each `tokens_*` a ragged sequence."""
    dataset = tf.data.Dataset.from_tensor_slices((as_tensors(x), ids))
    return dataset.map(lambda x, i: (dict(x), i))


def build(kind, x, ids, **kwargs):
    builder = BUILDERS[kind](**kwargs)
    if kind == "stream":
        return builder, builder.build(stream(x, ids), lengths=LENGTHS)
    return builder, builder.build(x, ids)


def pieces_of(kind, sequence):
    """What rows of the batches hold of one element: chunks, or all of it."""
    if kind == "chunk":
        return [sequence[k : k + 3] for k in range(0, len(sequence), 3)]
    return [sequence]


def check_batches(kind, dataset, x, pads, dtypes):
    """Every batch keeps each dtype of `dtypes` (`tokens_<dtype>` and
    `label_<dtype>` in `x`), holds every element (piece) exactly once, equal to
    the data, and its `pads[dtype]` everywhere else. Returns the positions
    a tokens component is padded to."""
    seen = {i: 0 for i in IDS}
    padded = 0
    for batch in dataset:
        inputs, ids = batch[0], batch[1].numpy()
        padded += inputs[f"tokens_{dtypes[0]}"].shape.num_elements()
        if kind == "packed":
            segments = inputs["packed_segment_ids"].numpy()
            # One id per segment slot: (rows, slots, 1).
            places = [
                (row, segment, ids[row, segment - 1, 0])
                for row in range(len(ids))
                for segment in range(1, segments[row].max() + 1)
            ]
        else:
            places = []  # (row, element, which piece of the element)
            for row, element in enumerate(ids):
                places.append((row, element, seen[element]))
                seen[element] += 1
        for dtype in dtypes:
            expected_dtype = tf.as_dtype(np_dtype(dtype))
            assert inputs[f"tokens_{dtype}"].dtype == expected_dtype
            assert inputs[f"label_{dtype}"].dtype == expected_dtype
            pad = np.asarray(pads[dtype]).astype(np_dtype(dtype))
            tokens = inputs[f"tokens_{dtype}"].numpy()
            label = inputs[f"label_{dtype}"].numpy()
            data, data_label = x[f"tokens_{dtype}"], x[f"label_{dtype}"]
            if kind == "packed":
                np.testing.assert_array_equal(tokens[segments == 0], pad, dtype)
                for row, segment, element in places:
                    np.testing.assert_array_equal(
                        tokens[row][segments[row] == segment], data[element], dtype
                    )
                    assert label[row, segment - 1] == data_label[element], dtype
                continue
            for row, element, piece in places:
                piece = pieces_of(kind, data[element])[piece]
                np.testing.assert_array_equal(tokens[row, : len(piece)], piece, dtype)
                np.testing.assert_array_equal(tokens[row, len(piece) :], pad, dtype)
                assert label[row] == data_label[element], dtype
        if kind == "packed":
            for _, _, element in places:
                seen[element] += 1
    some = x[f"tokens_{dtypes[0]}"]
    assert seen == {i: len(pieces_of(kind, s)) for i, s in zip(IDS, some, strict=True)}
    return padded


@pytest.mark.parametrize("kind", BUILDERS)
def test_every_builder_batches_every_dtype_exactly(kind):
    # Every dtype through each batch function, all as components of one
    # dataset: each keeps its dtype and its own padding value.
    x = every_dtype()
    pads = {dtype: pad_of(dtype) for dtype in DTYPES}
    # The tokens' padding values (the int targets keep theirs: a packed row
    # pads them too, and 0.5 would not fit them).
    padding = {f"tokens_{d}": {"value": pads[d]} for d in DTYPES}
    builder, dataset = build(kind, x, IDS, padding=padding)
    padded = check_batches(kind, dataset, x, pads, DTYPES)
    statistics = builder.statistics(epoch=0)
    pieces = sum(len(pieces_of(kind, s)) for s in x["tokens_int32"])  # chunks: rows
    assert statistics.num_elements == pieces
    assert statistics.padding_efficiency == pytest.approx(sum(LENGTHS) / padded)
    for dtype in DTYPES:
        assert statistics.component_efficiency[f"tokens_{dtype}"] == pytest.approx(
            sum(LENGTHS) / padded
        )


ZERO_DEFAULT = ["bfloat16", "float16", "uint8", "bool"]


def test_default_padding_is_zero_of_the_dtype():
    x = every_dtype(ZERO_DEFAULT)
    _, dataset = build("padded", x, IDS)
    check_batches("padded", dataset, x, dict.fromkeys(ZERO_DEFAULT, 0), ZERO_DEFAULT)


def test_ragged_and_dense_inputs():
    expected = every_dtype(ZERO_DEFAULT)
    x = as_tensors(expected)
    pads = {dtype: pad_of(dtype) for dtype in ZERO_DEFAULT}
    padding = {f"tokens_{d}": {"value": pads[d]} for d in ZERO_DEFAULT}
    _, dataset = build("bucket", x, IDS, padding=padding)
    check_batches("bucket", dataset, expected, pads, ZERO_DEFAULT)


def test_window_builder_keeps_the_dtype():
    dtypes = ["bfloat16", "uint8", "bool"]
    x = every_dtype(dtypes)
    builder = kerasbatch.WindowBuilder(2, 2, drop_remainder=False, shuffle=False)
    windows = list(builder.build(x, IDS))
    assert len(windows) == 4
    for window in windows:
        inputs, ids = window[0], window[1].numpy()
        for dtype in dtypes:
            tokens, label = inputs[f"tokens_{dtype}"], inputs[f"label_{dtype}"]
            assert tokens.dtype == tf.as_dtype(np_dtype(dtype))
            assert label.dtype == tf.as_dtype(np_dtype(dtype))
            tokens = tokens.numpy()
            for row, element in enumerate(ids):
                sequence = x[f"tokens_{dtype}"][element]
                np.testing.assert_array_equal(tokens[row, : len(sequence)], sequence)
                assert not tokens[row, len(sequence) :].any()
                assert label.numpy()[row] == x[f"label_{dtype}"][element]


def test_model_fit_on_bfloat16_and_float16_sequences():
    rng = np.random.default_rng(0)
    lengths = rng.integers(2, 12, 48)
    features = [rng.normal(size=(n, 3)).astype(sources.BFLOAT16) for n in lengths]
    gates = [rng.normal(size=(n, 1)).astype(np.float16) for n in lengths]
    targets = np.array([float(f.astype(np.float32).mean()) for f in features])
    builder = kerasbatch.BucketBuilder(num_buckets=3, batch_size=8, seed=1)
    dataset = builder.build({"features": features, "gates": gates}, targets)
    first = next(iter(dataset))[0]
    assert first["features"].dtype == tf.bfloat16
    assert first["gates"].dtype == tf.float16
    features_in = keras.Input((None, 3), dtype="bfloat16", name="features")
    gates_in = keras.Input((None, 1), dtype="float16", name="gates")
    merged = keras.layers.Concatenate()(
        [keras.ops.cast(features_in, "float32"), keras.ops.cast(gates_in, "float32")]
    )
    output = keras.layers.Dense(1)(keras.layers.GlobalAveragePooling1D()(merged))
    model = keras.Model({"features": features_in, "gates": gates_in}, output)
    model.compile("adam", "mse")
    history = model.fit(dataset, epochs=1, verbose=0)  # one epoch feeds every dtype
    assert np.isfinite(history.history["loss"]).all()


# ------------------------------------------------------------------ strings
STRING_TOKENS = [np.array(["a", "bc", "d", "e", "f"][:n]) for n in LENGTHS]


def string_rows(dataset):
    return [
        [b.decode() for b in row]
        for batch in dataset
        for row in batch[0]["tokens"].numpy().tolist()
    ]


#: Two string components of one dataset, each with its own padding value.
STRING_PADDING = {"tokens": "", "marked": "<pad>"}


@pytest.mark.parametrize("kind", ["padded", "sorted", "bucket", "chunk", "stream"])
def test_string_sequences_with_a_string_padding_value(kind):
    x = {name: STRING_TOKENS for name in STRING_PADDING}
    x["label"] = labels("int32")
    padding = {name: {"value": value} for name, value in STRING_PADDING.items()}
    if kind == "stream":
        builder = BUILDERS[kind](padding=padding)
        ragged = tf.ragged.constant([t.tolist() for t in STRING_TOKENS])
        elements = tf.data.Dataset.from_tensor_slices(
            ({"tokens": ragged, "marked": ragged, "label": labels("int32")}, IDS)
        ).map(lambda x, i: (dict(x), i))
        dataset = builder.build(elements, lengths=LENGTHS)
    else:
        _, dataset = build(kind, x, IDS, padding=padding)
    batches = list(dataset)
    seen = {i: 0 for i in IDS}
    for inputs, ids in batches:
        pieces = []
        for element in ids.numpy():
            pieces.append(pieces_of(kind, STRING_TOKENS[element])[seen[element]])
            seen[element] += 1
        for name, value in STRING_PADDING.items():
            assert inputs[name].dtype == tf.string
            for row, piece in zip(inputs[name].numpy(), pieces, strict=True):
                assert [b.decode() for b in row[: len(piece)]] == piece.tolist()
                assert [b.decode() for b in row[len(piece) :]] == [value] * (
                    len(row) - len(piece)
                )
    assert seen == {i: len(pieces_of(kind, t)) for i, t in enumerate(STRING_TOKENS)}


def test_string_stream_pads_with_the_empty_string_by_default():
    builder = BUILDERS["stream"]()
    ragged = tf.ragged.constant([t.tolist() for t in STRING_TOKENS])
    dataset = builder.build(
        tf.data.Dataset.from_tensor_slices(ragged).map(lambda t: t), lengths=LENGTHS
    )
    rows = [row for batch in dataset for row in batch.numpy().tolist()]
    kept = []
    for row in rows:
        length = sum(1 for b in row if b)
        assert row[length:] == [b""] * (len(row) - length)
        kept.append(tuple(b.decode() for b in row[:length]))
    assert sorted(kept) == sorted(tuple(t.tolist()) for t in STRING_TOKENS)


def test_packed_string_sequences():
    _, dataset = build(
        "packed",
        {"tokens": STRING_TOKENS, "label": labels("int32")},
        IDS,
        padding={"tokens": {"value": "<pad>"}},
    )
    for inputs, ids, *_ in dataset:
        tokens = inputs["tokens"].numpy().astype(str)
        segments = inputs["packed_segment_ids"].numpy()
        assert (tokens[segments == 0] == "<pad>").all()
        for row in range(len(tokens)):
            for segment in range(1, segments[row].max() + 1):
                element = ids.numpy()[row, segment - 1, 0]
                assert tokens[row][segments[row] == segment].tolist() == (
                    STRING_TOKENS[element].tolist()
                )


# ----------------------------------------------------------- padding values
@pytest.mark.parametrize(
    "value, dtype, error, match",
    [
        (0.5, "int32", ValueError, r"0\.5 for component 'x' .* not an integer"),
        (300, "uint8", ValueError, r"300 for component 'x' .* uint8 \(0 to 255\)"),
        (-1, "uint8", ValueError, r"-1 for component 'x' .* uint8 \(0 to 255\)"),
        (128, "int8", ValueError, r"int8 \(-128 to 127\)"),
        (2, "bool", ValueError, r"2 for component 'x' does not fit its dtype bool"),
        (1e6, "float16", ValueError, r"float16: it is beyond its largest value"),
        (1e39, "bfloat16", ValueError, r"bfloat16: it is beyond"),
        ("", "int32", TypeError, r"'' for component 'x': a str cannot pad .* int32"),
        (1j, "float32", TypeError, r"a complex number cannot pad dtype float32"),
        (1, "string", TypeError, r"holds strings, .* must be a str"),
    ],
)
def test_check_value_names_the_component_and_the_dtype(value, dtype, error, match):
    dtype = tf.string if dtype == "string" else dtype
    with pytest.raises(error, match=match):
        padding_lib.check_value(value, dtype, "x")


@pytest.mark.parametrize(
    "value, dtype",
    [
        (255, "uint8"),
        (-128, "int8"),
        (2.0, "int16"),
        (np.int64(-1), "int64"),
        (False, "bool"),
        (True, "int64"),
        (1, "bool"),
        (float("-inf"), "bfloat16"),
        (float("nan"), "float16"),
        (-65504.0, "float16"),
        (0.1, "float64"),
        ("<pad>", np.str_),
    ],
)
def test_check_value_accepts_values_the_dtype_holds(value, dtype):
    assert padding_lib.check_value(value, dtype, "x") is value


def test_padding_takes_numbers_bools_and_strings():
    assert kerasbatch.Padding(value=False).value is False
    assert kerasbatch.Padding(value="").get_config() == {"value": "", "length": "batch"}
    assert type(kerasbatch.Padding(value=np.float32(0.5)).value) is float
    with pytest.raises(TypeError, match=r"a number, a bool or a str, got b''"):
        kerasbatch.Padding(value=b"")
    with pytest.raises(TypeError, match=r"got None"):
        kerasbatch.Padding(value=None)


def test_stream_rejects_a_padding_value_its_dtype_cannot_hold():
    builder = BUILDERS["stream"](padding={"tokens": {"value": 300}})
    x = {"tokens": sequences("uint8"), "label": labels("uint8")}
    with pytest.raises(ValueError, match=r"300 for component 'tokens' .*uint8"):
        builder.build(stream(x, IDS), lengths=LENGTHS)


def test_stream_of_bfloat16_names_no_python_class():
    builder = BUILDERS["stream"]()
    values = tf.constant(np.arange(12).reshape(6, 2), tf.bfloat16)
    ragged = tf.RaggedTensor.from_row_lengths(values, [2, 3, 1])
    elements = tf.data.Dataset.from_tensor_slices(ragged).map(lambda t: t)
    dataset = builder.build(elements, lengths=[2, 3, 1])
    rows = [row for batch in dataset for row in batch.numpy().astype(float).tolist()]
    assert next(iter(dataset)).dtype == tf.bfloat16
    # Buckets {1, 2} (padded to 2) and {3}.
    assert sorted(rows) == [
        [[0, 1], [2, 3]],
        [[4, 5], [6, 7], [8, 9]],
        [[10, 11], [0, 0]],
    ]


@pytest.mark.parametrize("kind", ["padded", "bucket", "packed", "chunk"])
def test_in_memory_builders_reject_a_padding_value_the_dtype_cannot_hold(kind):
    x = {"tokens": sequences("int32"), "label": labels("int32")}
    with pytest.raises(ValueError, match=r"0\.5 for component 'tokens' .*int32"):
        build(kind, x, IDS, padding={"tokens": {"value": 0.5}})


def test_in_memory_string_sequences_pad_with_the_empty_string_by_default():
    _, dataset = build(
        "padded", {"tokens": STRING_TOKENS, "label": labels("int32")}, IDS
    )
    rows = string_rows(dataset)
    assert [row[: len(t)] for row, t in zip(rows, STRING_TOKENS, strict=True)] == [
        t.tolist() for t in STRING_TOKENS
    ]
