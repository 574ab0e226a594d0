"""`StreamBucketBuilder` on the numpy engines: the `tf.data` engine's batches,
bit for bit, from a Grain dataset or a Python iterable, and clear errors
for bad sources and elements."""

import grain
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_engines import assert_identical, numpy_of

import kerasbatch


def elements_and_spec(draw, rng, num):
    """`(elements, output_signature, lengths, per_example)` of a drawn
    structure."""
    lengths = rng.integers(1, 40, num)
    dtype = draw(st.sampled_from(["int32", "float32", "float16", "int64"]))
    x = [(rng.normal(size=n) * 10).astype(dtype) for n in lengths]
    structure = draw(st.sampled_from(["x", "x,label", "dict,frames,weights"]))
    if structure == "x":
        return x, tf.TensorSpec([None], dtype), lengths, ()
    if structure == "x,label":
        labels = rng.integers(0, 3, (num, 2)).astype(np.int64)  # per-example vectors
        return (
            list(zip(x, labels, strict=True)),
            (tf.TensorSpec([None], dtype), tf.TensorSpec([2], tf.int64)),
            lengths,
            ("y",),
        )
    features = [rng.normal(size=(n, 3)).astype(np.float32) for n in lengths]
    frames = [rng.integers(0, 5, n).astype(np.int32) for n in lengths]
    weights = rng.uniform(size=num).astype(np.float32)
    elements = [
        ({"features": f, "tokens": t}, y, w)
        for f, t, y, w in zip(features, x, frames, weights, strict=True)
    ]
    signature = (
        {
            "features": tf.TensorSpec([None, 3], tf.float32),
            "tokens": tf.TensorSpec([None], dtype),
        },
        tf.TensorSpec([None], tf.int32),
        tf.TensorSpec([], tf.float32),
    )
    return elements, signature, lengths, ()


@st.composite
def stream_cases(draw):
    num = draw(st.integers(1, 300))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    elements, signature, lengths, per_example = elements_and_spec(draw, rng, num)
    per_frame_y = isinstance(signature, tuple) and len(signature) == 3
    settings_ = {
        "boundaries": draw(st.sampled_from([[8], [5, 15, 25], [30]])),
        "buffer_size": draw(st.sampled_from([1, 50, 200, 10_000])),
        "shuffle": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**20)),
        "truncate": draw(st.booleans()),
        "remainder": draw(st.sampled_from(["keep", "drop", "pad"])),
        "output_lengths": draw(st.booleans()),
        "output_mask": per_frame_y and draw(st.booleans()),
        "batch_multiple": draw(st.sampled_from([1, 4])),
        "pad_to_multiple": draw(st.sampled_from([1, 8])),
    }
    sizing = draw(st.sampled_from(["batch", "sizes", "budget"]))
    if sizing == "batch":
        settings_["batch_size"] = draw(st.integers(1, 20))
    elif sizing == "sizes":
        num_buckets = len(settings_["boundaries"]) + 1
        settings_["bucket_batch_sizes"] = draw(
            st.lists(st.integers(1, 20), min_size=num_buckets, max_size=num_buckets)
        )
    else:
        settings_["max_tokens"] = draw(st.integers(64, 400))
        settings_["max_length"] = 40
    if draw(st.booleans()):
        settings_["max_length"] = draw(st.integers(10, 40))
        settings_["overflow"] = draw(st.sampled_from(["truncate", "drop"]))
    if draw(st.booleans()):
        settings_["pad_to_bucket"] = True
        settings_.setdefault("max_length", 40)
    with_lengths = draw(st.booleans()) or "max_tokens" in settings_
    epoch = draw(st.integers(0, 3))
    return elements, signature, lengths, per_example, settings_, with_lengths, epoch


def built(settings_, source, lengths, engine, per_example=()):
    builder = kerasbatch.StreamBucketBuilder(**settings_)
    try:
        if engine == "tf.data":
            return builder, builder.build(source, lengths)
        return builder, builder.build(
            source, lengths, engine=engine, per_example=per_example
        )
    except ValueError as error:
        return builder, error


# Every example builds a stream pipeline (seconds each) and iterates it on
# two or three engines for two epochs.
@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=stream_cases())
def test_a_stream_on_every_engine_yields_the_tf_data_batches(case):
    elements, signature, lengths, per_example, settings_, with_lengths, epoch = case
    lengths = lengths if with_lengths else None
    dataset = tf.data.Dataset.from_generator(
        lambda: iter(elements), output_signature=signature
    )
    tf_builder, tf_batches = built(settings_, dataset, lengths, "tf.data")
    engines = ["grain"] + (["python"] if lengths is not None else [])
    source = grain.MapDataset.source(elements)
    tf_epochs = {}  # {epoch: (batches, statistics, last started epoch)}
    for engine in engines:
        builder, batches = built(settings_, source, lengths, engine, per_example)
        if isinstance(tf_batches, ValueError):  # refused alike
            assert str(batches) == str(tf_batches)
            continue
        for tried in (epoch, epoch + 1):
            if tried not in tf_epochs:
                tf_builder.set_epoch(tried)
                tf_epochs[tried] = (
                    [numpy_of(b) for b in tf_batches],
                    tf_builder.statistics(),
                    tf_builder.last_started_epoch,
                )
            expected, statistics, last_started_epoch = tf_epochs[tried]
            builder.set_epoch(tried)
            if engine == "grain":
                actual = list(batches)
            else:
                actual = [batches[k] for k in range(len(batches))]
            assert len(actual) == len(expected)
            for index, (e, a) in enumerate(zip(expected, actual, strict=True)):
                assert_identical(e, a, f"{engine} epoch {tried} batch {index}")
            assert builder.statistics() == statistics
            assert builder.last_started_epoch == last_started_epoch
            if lengths is not None:
                assert len(actual) == len(batches)


def test_the_numpy_engines_read_lists_grain_datasets_and_functions():
    elements = [np.arange(n, dtype=np.int32) for n in (3, 9, 4, 12, 5, 2)]
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[6], batch_size=2, shuffle=False
    )
    expected = [b.tolist() for b in builder.build(elements, engine="grain")]
    for source in (
        tuple(elements),
        grain.MapDataset.source(elements),
        grain.MapDataset.source(elements).to_iter_dataset(),
        lambda: (e for e in elements),
    ):
        batches = builder.build(source, engine="grain")
        assert [b.tolist() for b in batches] == expected
    assert expected[0] == [[0, 1, 2, 0], [0, 1, 2, 3]]


def test_each_pass_is_the_next_epoch_and_statistics_follow_it():
    rng = np.random.default_rng(1)
    elements = [np.ones(n, np.float32) for n in rng.integers(1, 30, 200)]
    builder = kerasbatch.StreamBucketBuilder(boundaries=[10], batch_size=8, seed=2)
    dataset = builder.build(elements, engine="grain")
    assert builder.last_started_epoch is None
    first, second = list(dataset), list(dataset)
    assert builder.last_started_epoch == 1
    assert any(a.shape != b.shape for a, b in zip(first, second, strict=False))
    stats = builder.statistics()
    assert stats.num_elements == 200 and stats.num_batches == len(second)
    assert builder.statistics(epoch=0).num_elements == 200
    # A pass given up after its first batch repeats its epoch.
    iterator = iter(dataset)
    next(iterator)
    assert builder.last_started_epoch == 2
    builder.set_epoch(0)
    assert [b.tolist() for b in dataset] == [b.tolist() for b in first]


def test_a_stream_fits_on_the_numpy_engines_with_the_callbacks():
    import keras

    rng = np.random.default_rng(3)
    lengths = rng.integers(1, 25, 120)
    elements = [
        (rng.integers(1, 20, n).astype(np.int32), np.int32(n % 2)) for n in lengths
    ]
    for engine in ("grain", "python"):
        builder = kerasbatch.StreamBucketBuilder(boundaries=[8, 16], batch_size=16)
        train = builder.build(elements, lengths, engine=engine)
        inputs = keras.Input((None,), dtype="int32")
        hidden = keras.layers.Embedding(20, 4, mask_zero=True)(inputs)
        outputs = keras.layers.Dense(2)(keras.layers.GlobalAveragePooling1D()(hidden))
        model = keras.Model(inputs, outputs)
        model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(True))
        efficiency = kerasbatch.callbacks.PaddingEfficiency(builder)
        history = model.fit(
            train,
            epochs=2,
            verbose=0,
            callbacks=[kerasbatch.callbacks.EpochReshuffle(builder), efficiency],
        )
        assert len(history.history["loss"]) == 2
        assert np.all(np.isfinite(history.history["loss"]))
        assert history.history["padding_efficiency"][-1] == pytest.approx(
            builder.statistics(epoch=1).padding_efficiency
        )
        assert builder.last_started_epoch == 1


def element_list(*lengths):
    return [np.ones(n, np.int32) for n in lengths]


@pytest.mark.parametrize(
    ("source", "kwargs", "error", "match"),
    [
        (
            element_list(3, 4) + [np.ones((2, 2), np.int32)],
            {},
            ValueError,
            r"Element 2 of the source has x of shape \(2, 2\), but the first "
            r"element's is \(None\)",
        ),
        (
            element_list(3, 4) + [np.ones(2, np.float32)],
            {},
            ValueError,
            r"Element 2 of the source has x of dtype float32, but the first "
            "element's is int32",
        ),
        (
            [(np.ones(3), 1), (np.ones(4), 0), np.ones(5)],
            {},
            ValueError,
            r"Element 2 of the source is a ndarray, but the first element is "
            r"a tuple of 2",
        ),
        (
            [{"a": np.ones(3)}, {"b": np.ones(3)}],
            {},
            ValueError,
            r"Element 1 of the source has x a dict with the keys \['b'\], but "
            r"the first element has a dict with the keys \['a'\]",
        ),
        (
            grain.MapDataset.source(element_list(3, 4, 60)),
            {"max_length": 50},
            ValueError,
            r"Element 2 has length 60, longer than max_length=50",
        ),
        ((n for n in range(3)), {}, TypeError, r"iterator .* one pass only"),
        ([], {}, ValueError, r"The source yields no element"),
        (3, {}, TypeError, r"takes a Grain dataset, a Python iterable .* got int"),
        (
            [np.array(["a", "b"])],
            {},
            ValueError,
            r"x hold strings, which a stream pads on the 'tf.data' engine only",
        ),
        (
            [(np.ones(3), np.ones(2))],
            {"per_example": ("label",)},
            ValueError,
            r"per_example names \['label'\], which are not components",
        ),
        (
            [np.int32(3)],
            {},
            ValueError,
            r"no sequence component",
        ),
        (
            tf.data.Dataset.range(3),
            {},
            TypeError,
            r"A tf.data.Dataset streams on the 'tf.data' engine",
        ),
    ],
)
def test_bad_sources_and_elements_are_clear_errors(source, kwargs, error, match):
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[4],
        batch_size=2,
        **{k: v for k, v in kwargs.items() if k != "per_example"},
    )
    per_example = kwargs.get("per_example", ())
    with pytest.raises(error, match=match):
        list(builder.build(source, engine="grain", per_example=per_example))


def test_the_python_engine_needs_lengths_and_checks_them():
    elements = element_list(3, 9, 4)
    builder = kerasbatch.StreamBucketBuilder(boundaries=[6], batch_size=2)
    with pytest.raises(ValueError, match=r"'python' engine .* needs its number"):
        builder.build(elements, engine="python")
    dataset = builder.build(elements, [3, 5, 4], engine="python")
    with pytest.raises(ValueError, match=r"Element 1 has length 9 .* longer than"):
        [dataset[k] for k in range(len(dataset))]
    with pytest.raises(ValueError, match=r"shardable and batched"):
        builder.build(elements, engine="grain", batched=True)
    with pytest.raises(ValueError, match=r"per_example is for the numpy engines"):
        builder.build(tf.data.Dataset.range(3), per_example=("y",))


def test_a_grain_stream_iterator_does_not_claim_a_state():
    builder = kerasbatch.StreamBucketBuilder(boundaries=[6], batch_size=2)
    iterator = iter(builder.build(element_list(3, 9, 4), engine="grain"))
    with pytest.raises(NotImplementedError, match="cannot resume mid-epoch"):
        iterator.get_state()


@pytest.mark.parametrize("engine", ["tf.data", "grain"])
def test_per_frame_targets_and_weights_must_follow_their_sequences(engine):
    lengths = [3, 5, 4]
    xs = [np.ones(n, np.int32) for n in lengths]
    ys = [np.ones(n, np.int32) for n in lengths]
    ys[2] = ys[2][:-1]  # one frame short
    elements = list(zip(xs, ys, strict=True))
    source = elements
    if engine == "tf.data":
        signature = (tf.TensorSpec([None], tf.int32),) * 2
        source = tf.data.Dataset.from_generator(
            lambda: iter(elements), output_signature=signature
        )
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[4], batch_size=2, output_mask=True
    )
    error = ValueError if engine == "grain" else tf.errors.InvalidArgumentError
    with pytest.raises(error, match=r"y of element 2 has length 3, not the length"):
        list(builder.build(source, engine=engine))
    weights = [np.ones(n, np.float32) for n in lengths]
    weights[1] = weights[1][:2]
    elements = [(x, x, w) for x, w in zip(xs, weights, strict=True)]
    with pytest.raises(ValueError, match=r"sample_weight of element 1 has length 2"):
        list(builder.build(elements, engine="grain"))
