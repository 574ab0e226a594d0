"""Every engine yields the same batches, bit for bit.

For the same builder settings, data, seed and epoch, the `tf.data`,
`grain` and `python` engines must feed the model identical arrays: values,
dtypes and shapes, padding values, filler rows, `sample_weight`, lengths,
`segment_ids` and positions. Checked by property over builders, options,
seeds and epochs.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import kerasbatch
from kerasbatch.builders import builder_of


def flat(batch, where="batch"):
    """`{path: array}` of a batch (nested tuples and dicts)."""
    if isinstance(batch, dict):
        return {
            path: value
            for key in sorted(batch)
            for path, value in flat(batch[key], f"{where}[{key!r}]").items()
        }
    if isinstance(batch, tuple | list):
        return {
            path: value
            for index, part in enumerate(batch)
            for path, value in flat(part, f"{where}[{index}]").items()
        }
    return {where: np.asarray(batch)}


def assert_identical(expected, actual, where):
    expected, actual = flat(expected, where), flat(actual, where)
    assert list(expected) == list(actual)
    for path, value in expected.items():
        other = actual[path]
        assert value.dtype == other.dtype, (path, value.dtype, other.dtype)
        assert value.shape == other.shape, (path, value.shape, other.shape)
        # Bit for bit, NaN included.
        assert value.tobytes() == other.tobytes(), path


def tf_epoch(builder, dataset, epoch):
    builder.set_epoch(epoch)
    return [tuple(b) if isinstance(b, tuple) else b for b in dataset]


def python_epoch(builder, dataset, epoch):
    builder.set_epoch(epoch)
    return [dataset[k] for k in range(len(dataset))]


def grain_epoch(builder, dataset, epoch):
    builder.set_epoch(epoch)
    return list(dataset)


def numpy_of(batch):
    if isinstance(batch, dict):
        return {k: numpy_of(v) for k, v in batch.items()}
    if isinstance(batch, tuple):
        return tuple(numpy_of(v) for v in batch)
    return np.asarray(batch)


KINDS = ["padded", "sorted", "bucket", "budget", "packed", "chunk", "window"]


@st.composite
def cases(draw, kind):
    """A builder of `kind`, inputs and an epoch."""
    num = draw(st.integers(3, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    lengths = rng.integers(1, 30, num)
    dtype = draw(st.sampled_from(["int32", "int64", "float32", "float16"]))
    x = [rng.normal(size=n).astype(dtype) * 10 for n in lengths]
    targets = draw(st.sampled_from(["none", "example", "frame"]))
    if kind == "packed" and targets == "none":
        targets = "example"
    y = weights = None
    if targets == "example":
        y = rng.integers(0, 3, num).astype("int32")
    elif targets == "frame":
        y = [rng.integers(0, 3, n).astype("int32") for n in lengths]
    if targets != "none" and draw(st.booleans()):
        if targets == "frame" and kind != "chunk" and draw(st.booleans()):
            weights = [rng.random(n).astype("float32") for n in lengths]
        else:
            weights = rng.random(num).astype("float64")
    if draw(st.booleans()):
        x = {"tokens": x, "extra": rng.normal(size=(num, 2)).astype("float32")}
    seed = draw(st.integers(0, 2**31 - 1))
    shuffle = draw(st.booleans())
    fills = targets != "none"
    common = {"seed": seed, "shuffle": shuffle}
    if kind == "packed":
        builder = kerasbatch.PackedBuilder(
            sequence_length=int(lengths.max()) + draw(st.integers(0, 20)),
            batch_size=draw(st.integers(1, 6)),
            normalize_segments=draw(st.booleans()),
            batch_multiple=draw(st.sampled_from([1, 4])),
            **common,
        )
    elif kind == "window":
        size = draw(st.integers(1, 6))
        remainder = draw(
            st.sampled_from(["keep", "drop", "pad"] if fills else ["keep"])
        )
        reducers = {}
        if isinstance(x, dict):
            reducers["extra"] = draw(st.sampled_from(["dense", "padded"]))
            if not fills and draw(st.booleans()):
                reducers["tokens"] = "count"
        if targets == "frame" and draw(st.booleans()):
            reducers["y"] = {"class_name": "PaddedBatch", "config": {"value": -1}}
        builder = kerasbatch.WindowBuilder(
            size,
            shift=draw(st.sampled_from([1, size, size + 1])),
            stride=draw(st.sampled_from([1, 2])),
            remainder=remainder,
            reducers={
                name: kerasbatch.data.reducers.PaddedBatch(value=-1)
                if isinstance(r, dict)
                else r
                for name, r in reducers.items()
            }
            or None,
            pad_to_multiple=draw(st.sampled_from([1, 8])),
            batch_multiple=draw(st.sampled_from([1, 3])) if fills else 1,
            **common,
        )
        if weights is not None and not isinstance(weights, np.ndarray):
            weights = None
    elif kind == "chunk":
        builder = kerasbatch.ChunkBuilder(
            chunk_size=(chunk_size := draw(st.integers(3, 12))),
            chunk_step=draw(st.sampled_from([None, chunk_size - 1])),
            context=draw(st.sampled_from([0, 2, (1, 3)])),
            batch_size=draw(st.integers(1, 8)),
            output_lengths=draw(st.booleans()),
            remainder=draw(
                st.sampled_from(["keep", "drop", "pad"] if fills else ["keep"])
            ),
            **common,
        )
        if isinstance(x, dict):
            x = x["tokens"]
        if weights is not None and not isinstance(weights, np.ndarray):
            weights = None
    else:
        options = {
            "output_lengths": draw(st.booleans()),
            "output_mask": targets == "frame" and draw(st.booleans()),
            "pad_to_multiple": draw(st.sampled_from([1, 8])),
            "batch_multiple": draw(st.sampled_from([1, 3])) if fills else 1,
            "remainder": draw(
                st.sampled_from(
                    ["keep", "drop", "pad", "even"] if fills else ["keep", "drop"]
                )
            ),
            "padding": draw(st.sampled_from([None, {"value": 7}])),
            **common,
        }
        if draw(st.booleans()):
            options.update(max_length=int(np.median(lengths)), overflow="truncate")
        batch_size = draw(st.integers(1, 9))
        if kind == "padded":
            builder = kerasbatch.PaddedBuilder(batch_size=batch_size, **options)
        elif kind == "sorted":
            builder = kerasbatch.SortedBuilder(batch_size=batch_size, **options)
        elif kind == "bucket":
            builder = kerasbatch.BucketBuilder(
                num_buckets=draw(st.integers(1, 4)),
                batch_size=batch_size,
                pad_to_bucket=draw(st.booleans()),
                **options,
            )
        else:
            builder = kerasbatch.BucketBuilder(
                num_buckets=draw(st.integers(1, 4)),
                max_tokens=int(lengths.max()) * draw(st.integers(1, 5)),
                batch_size=None,
                **options,
            )
    return builder, (x, y, weights), draw(st.integers(0, 5))


# Every example builds a pipeline of each engine (a packed one: seconds):
# a few per kind; the fixed cases of every builder and option set are
# compared across engines by test_batches_unchanged's recorded digests.
@pytest.mark.parametrize("kind", KINDS)
@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_every_engine_yields_the_tf_data_batches(kind, data):
    builder, (x, y, weights), epoch = data.draw(cases(kind))
    try:
        reference = builder.build(x, y, weights)
    except ValueError as error:  # settings that the data cannot take
        event(f"{type(builder).__name__} refused")
        for engine in ("python", "grain"):
            with pytest.raises(ValueError, match=str(error)[:30].replace("(", r"\(")):
                builder.build(x, y, weights, engine=engine)
        return
    event(f"{type(builder).__name__} compared")
    expected = [numpy_of(b) for b in tf_epoch(builder, reference, epoch)]
    for engine, epoch_of in (("python", python_epoch), ("grain", grain_epoch)):
        dataset = builder.build(x, y, weights, engine=engine)
        assert len(dataset) == len(expected)
        actual = epoch_of(builder, dataset, epoch)
        assert len(actual) == len(expected)
        for k, (want, got) in enumerate(zip(expected, actual, strict=True)):
            assert_identical(want, got, f"{engine} epoch {epoch} batch {k}")
        assert builder_of(dataset).statistics(epoch) == builder_of(
            reference
        ).statistics(epoch)


def test_builders_that_built_tf_data_pipelines_pickle_as_their_settings():
    import copy
    import pickle

    import tensorflow as tf

    x = [np.ones(n, "int32") for n in (1, 2, 3, 4)]
    builders = [
        kerasbatch.BucketBuilder(num_buckets=2, batch_size=2),
        kerasbatch.WindowBuilder(2, 2, reducers={"x": "dense"}),
        kerasbatch.StreamBucketBuilder(boundaries=[3], batch_size=2),
    ]
    for builder in builders:
        if isinstance(builder, kerasbatch.StreamBucketBuilder):
            builder.build(tf.data.Dataset.from_tensor_slices(tf.ragged.constant(x)))
        elif isinstance(builder, kerasbatch.WindowBuilder):
            builder.build(np.arange(8))
        else:
            builder.build(x)
        for copied in (copy.deepcopy(builder), pickle.loads(pickle.dumps(builder))):
            assert copied == builder
            assert copied.built_datasets() == []
