"""Bounded shapes for XLA and JAX: `remainder="pad"` (or `"even"`) feeds every
batch of a bucket (of a builder) with one number of rows, filler rows of zero
weight."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from backend_process import run_on_backend

import kerasbatch

LENGTHS = np.random.default_rng(3).integers(1, 41, 53)


def sequences(lengths=LENGTHS):
    """Element i is the id i + 1 repeated (so 0 is padding only)."""
    return [np.full(n, i + 1, "int32") for i, n in enumerate(lengths)]


def targets(lengths=LENGTHS):
    return np.arange(1, len(lengths) + 1, dtype="float32")


PADDED = {
    "padded": lambda: kerasbatch.PaddedBuilder(batch_size=8, remainder="pad"),
    "sorted": lambda: kerasbatch.SortedBuilder(batch_size=8, remainder="pad"),
    "bucket": lambda: kerasbatch.BucketBuilder(
        num_buckets=4, batch_size=8, pad_to_bucket=True, remainder="pad"
    ),
    "budget": lambda: kerasbatch.BucketBuilder(
        num_buckets=4, max_tokens=200, pad_to_bucket=True, remainder="pad"
    ),
    "chunk": lambda: kerasbatch.ChunkBuilder(16, batch_size=8, remainder="pad"),
    "window": lambda: kerasbatch.WindowBuilder(8, 8, remainder="pad"),
    "packed": lambda: kerasbatch.PackedBuilder(48, batch_size=4, remainder="pad"),
    "stream": lambda: kerasbatch.StreamBucketBuilder(
        boundaries=[10, 20, 30],
        batch_size=8,
        pad_to_bucket=True,
        max_length=40,
        remainder="pad",
        buffer_size=16,
    ),
}


#: Builders that take remainder="even" (a stream's and a window's cannot).
EVEN = [kind for kind in PADDED if kind not in ("stream", "window")]


def with_remainder(builder, remainder):
    return type(builder).from_config({**builder.get_config(), "remainder": remainder})


def build(builder):
    if isinstance(builder, kerasbatch.StreamBucketBuilder):
        ragged = tf.ragged.constant(sequences())
        dataset = tf.data.Dataset.from_tensor_slices((ragged, targets()))
        return builder.build(dataset.map(lambda x, y: (x, y)), lengths=LENGTHS)
    return builder.build(sequences(), targets())


def full_rows(builder, batch):
    """The rows every batch of `batch`'s bucket (of the builder) is fed."""
    if isinstance(builder, kerasbatch.WindowBuilder):
        return builder.size
    sizes = getattr(builder, "resolved_batch_sizes", None)
    if sizes is None or len(set(sizes)) == 1:
        return builder.batch_size if sizes is None else sizes[0]
    return None  # a budget: per bucket, checked through the shapes


def x_of(batch):
    x = batch[0]
    return np.asarray(x["x"] if isinstance(x, dict) else x)


@pytest.mark.parametrize(
    "kind, remainder",
    [(kind, "pad") for kind in PADDED] + [(kind, "even") for kind in EVEN],
)
def test_padded_remainders_keep_every_element_once_with_zero_weight_fillers(
    kind, remainder
):
    """Each epoch feeds every element once (fillers weigh 0), in the shapes
    `batch_shapes` says it feeds."""
    builder = with_remainder(PADDED[kind](), remainder)
    dataset = build(builder)
    for epoch in range(2):
        builder.set_epoch(epoch)
        batches = list(dataset)
        fed = {tuple(x_of(b).shape) for b in batches}
        assert {shape["x"] for shape in builder.batch_shapes(epoch)} == fed
        rows = {len(x_of(b)) for b in batches}
        expected = full_rows(builder, batches[0])
        if expected is not None and remainder == "pad":
            assert rows == {expected}  # no smaller remainder batch
        real, padded = 0, 0
        seen = []
        for batch in batches:
            x, weights = x_of(batch), np.asarray(batch[2])
            weights = weights.reshape(len(x), -1).max(axis=1)
            # Filler rows (copies of the first row) weigh 0, real rows weigh.
            used = weights > 0
            assert used[0] and (x[~used] == x[:1]).all()
            seen.extend(np.unique(x[used][x[used] != 0]).tolist())
            real += int((x[used] != 0).sum())
            padded += x.size
        if kind == "chunk":  # a sequence's chunks may share a batch
            seen = sorted(set(seen))
        assert sorted(seen) == list(range(1, len(LENGTHS) + 1))
        statistics = builder.statistics()
        if kind != "chunk":  # chunks hold a sequence's tokens in pieces
            assert statistics.padding_efficiency == real / padded


@pytest.mark.parametrize("kind", ["bucket", "budget", "stream"])
def test_pad_to_bucket_with_padded_remainders_feeds_one_shape_per_bucket(kind):
    builder = PADDED[kind]()
    dataset = build(builder)
    shapes = []
    for epoch in range(3):
        builder.set_epoch(epoch)
        shapes.append({tuple(x_of(b).shape) for b in dataset})
    nonempty = sum(1 for count in builder.bucket_counts if count)
    assert len(shapes[0]) == nonempty  # one per bucket
    assert shapes[1] == shapes[2] == shapes[0]  # later epochs add none
    assert builder.statistics().distinct_shapes == nonempty


@pytest.mark.parametrize("kind", ["bucket", "budget"])
def test_even_remainders_feed_one_shape_per_bucket_with_less_filler_than_pad(kind):
    keep, pad, even = (
        with_remainder(PADDED[kind](), remainder)
        for remainder in ("keep", "pad", "even")
    )
    datasets = [build(builder) for builder in (keep, pad, even)]
    # As many batches as "keep": every bucket is cut into as many batches.
    assert len(datasets[2]) == len(datasets[0]) == len(datasets[1])
    nonempty = sum(1 for count in even.bucket_counts if count)
    assert even.statistics().distinct_shapes == nonempty
    for epoch in range(2):
        even.set_epoch(epoch)
        by_length = {}
        for batch in datasets[2]:
            rows = np.asarray(batch[2]).reshape(len(batch[2]), -1).max(axis=1)
            by_length.setdefault(x_of(batch).shape[1], []).append(rows)
        assert len(by_length) == nonempty
        for bucket in by_length.values():
            assert len({len(rows) for rows in bucket}) == 1  # one size per bucket
            filler = sum(int((rows == 0).sum()) for rows in bucket)
            assert filler < len(bucket)  # under one filler row per batch
    real = keep.statistics().padding_efficiency
    assert pad.statistics().padding_efficiency < even.statistics().padding_efficiency
    assert even.statistics().padding_efficiency <= real


def test_even_batches_of_one_group_are_equal_and_at_most_the_batch_size():
    for count in range(1, 60):
        for size in range(1, 12):
            sizes, capacities = kerasbatch.planning.remainders.group_batches(
                count, size, "even"
            )
            assert len(sizes) == kerasbatch.planning.remainders.num_batches(
                count, size, "even"
            )
            assert sum(sizes) == count
            assert len(sizes) == -(-count // size)  # as many batches as "keep"
            assert len(set(capacities)) == 1 and capacities[0] <= size
            assert all(0 <= c - s <= 1 for s, c in zip(sizes, capacities, strict=True))


@pytest.mark.parametrize(
    "make",
    [
        lambda: kerasbatch.StreamBucketBuilder(
            boundaries=[4], batch_size=2, remainder="even"
        ),
        lambda: kerasbatch.WindowBuilder(4, 4, remainder="even"),
    ],
    ids=["stream", "window"],
)
def test_builders_that_cannot_cut_evenly_say_what_to_use(make):
    with pytest.raises(ValueError, match=r"not 'even'.*use 'pad'"):
        make()


def test_keep_feeds_a_shape_per_remainder_and_pad_does_not():
    keep = kerasbatch.BucketBuilder(num_buckets=4, batch_size=8, pad_to_bucket=True)
    pad = PADDED["bucket"]()
    build(keep), build(pad)
    assert keep.statistics().distinct_shapes > pad.statistics().distinct_shapes


class ShapeRecorder(keras.Model):
    """A tiny model that records the shape of every batch it trains on."""

    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(64, 4)
        self.pool = keras.layers.GlobalAveragePooling1D()
        self.out = keras.layers.Dense(1)
        self.shapes = []

    def call(self, x):
        return self.out(self.pool(self.embed(x % 64)))[:, 0]

    def train_step(self, *arguments):
        self.shapes.append(tuple(arguments[-1][0].shape))
        return super().train_step(*arguments)


@pytest.mark.parametrize("remainder", ["pad", "even"])
def test_model_fit_sees_one_shape_per_bucket_and_none_new_in_later_epochs(remainder):
    builder = with_remainder(PADDED["bucket"](), remainder)
    dataset = build(builder)
    model = ShapeRecorder()
    model.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    model.fit(
        dataset,
        epochs=2,
        verbose=0,
        callbacks=[kerasbatch.callbacks.EpochReshuffle(builder)],
    )
    steps = len(dataset)
    first, second = set(model.shapes[:steps]), set(model.shapes[steps:])
    assert len(first) == builder.statistics().distinct_shapes <= 4
    assert second <= first


@pytest.mark.parametrize(
    "arguments, match",
    [
        ({"remainder": "fill"}, "remainder must be one of"),
        ({"remainder": "pad", "drop_remainder": True}, "contradict"),
        ({"remainder": "keep", "drop_remainder": True}, "contradict"),
    ],
)
def test_bad_remainder_settings_are_named(arguments, match):
    with pytest.raises(ValueError, match=match):
        kerasbatch.BucketBuilder(batch_size=8, **arguments)


@pytest.mark.parametrize("remainder", ["pad", "even"])
def test_padded_remainders_need_targets_to_weigh(remainder):
    builder = kerasbatch.PaddedBuilder(batch_size=8, remainder=remainder)
    with pytest.raises(ValueError, match=f"remainder='{remainder}' fills smaller"):
        builder.build(sequences())


def test_remainder_round_trips_through_the_config():
    for make in PADDED.values():
        builder = make()
        config = builder.get_config()
        assert config["remainder"] == "pad" and not config["drop_remainder"]
        assert type(builder).from_config(config) == builder
    dropping = kerasbatch.SortedBuilder(drop_remainder=True)
    assert dropping.remainder == "drop"
    assert kerasbatch.SortedBuilder(remainder="drop").drop_remainder


MULTIPLE = {
    "padded": lambda: kerasbatch.PaddedBuilder(batch_size=8, pad_to_multiple=8),
    "sorted": lambda: kerasbatch.SortedBuilder(batch_size=8, pad_to_multiple=8),
    "bucket": lambda: kerasbatch.BucketBuilder(
        num_buckets=4, batch_size=8, pad_to_bucket=True, pad_to_multiple=8
    ),
    "budget": lambda: kerasbatch.BucketBuilder(
        num_buckets=4, max_tokens=200, pad_to_multiple=8
    ),
    "chunk": lambda: kerasbatch.ChunkBuilder(None, batch_size=8, pad_to_multiple=8),
    "window": lambda: kerasbatch.WindowBuilder(8, 8, pad_to_multiple=8),
    "stream": lambda: kerasbatch.StreamBucketBuilder(
        boundaries=[10, 20, 30], batch_size=8, buffer_size=16, pad_to_multiple=8
    ),
    "stream-bucket": lambda: kerasbatch.StreamBucketBuilder(
        boundaries=[10, 20, 30],
        batch_size=8,
        pad_to_bucket=True,
        max_length=40,
        buffer_size=16,
        pad_to_multiple=8,
    ),
}


@pytest.mark.parametrize("kind", MULTIPLE)
def test_pad_to_multiple_rounds_every_padded_length_up(kind):
    builder = MULTIPLE[kind]()
    dataset = build(builder)
    batches = [x_of(b) for b in dataset]
    lengths = [x.shape[1] for x in batches]
    assert all(length % 8 == 0 for length in lengths), lengths
    # No more than needed: the longest element of the batch, rounded up.
    for x in batches:
        longest = int((x != 0).sum(axis=1).max())
        if kind not in ("bucket", "stream-bucket"):
            assert x.shape[1] == -(-longest // 8) * 8
    real = sum(int((x != 0).sum()) for x in batches)
    padded = sum(x.size for x in batches)
    assert builder.statistics().padding_efficiency == real / padded


def test_pad_to_multiple_bounds_the_shapes_of_sorted_batches():
    plain = kerasbatch.SortedBuilder(batch_size=8, remainder="pad")
    rounded = kerasbatch.SortedBuilder(batch_size=8, remainder="pad", pad_to_multiple=8)
    plain.adapt(LENGTHS), rounded.adapt(LENGTHS)
    assert rounded.statistics().distinct_shapes <= 40 // 8
    assert rounded.statistics().distinct_shapes < plain.statistics().distinct_shapes


def test_a_token_budget_counts_the_rounded_length():
    builder = MULTIPLE["budget"]()
    builder.adapt(LENGTHS)
    for size, length in zip(
        builder.resolved_batch_sizes, builder.bucket_lengths, strict=True
    ):
        assert length % 8 == 0 and size * length <= 200


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: kerasbatch.SortedBuilder(pad_to_multiple=0), "positive int"),
        (lambda: kerasbatch.SortedBuilder(pad_to_multiple=2.5), "positive int"),
        (
            lambda: kerasbatch.PackedBuilder(50, pad_to_multiple=8),
            "sequence_length=50 long, which is not a multiple",
        ),
    ],
)
def test_bad_pad_to_multiple_settings_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_a_fixed_length_that_is_not_a_multiple_is_named():
    builder = kerasbatch.SortedBuilder(
        padding=kerasbatch.Padding(length=44), pad_to_multiple=8
    )
    with pytest.raises(ValueError, match="'x' is padded to the fixed length 44"):
        builder.build(sequences())
    chunks = kerasbatch.ChunkBuilder(16, context=(2, 1), pad_to_multiple=8)
    with pytest.raises(ValueError, match="fixed length 19"):
        chunks.build(sequences())


def test_batch_shapes_name_every_sequence_component_with_its_trailing_axes():
    builder = kerasbatch.SortedBuilder(batch_size=2, shuffle=False)
    builder.build([np.ones((n, 3)) for n in (1, 2, 5)], [np.ones(n) for n in (1, 2, 5)])
    assert builder.batch_shapes() == [
        {"x": (1, 5, 3), "y": (1, 5)},
        {"x": (2, 2, 3), "y": (2, 2)},
    ]


def test_a_stream_says_when_its_shapes_cannot_be_known_ahead():
    builder = MULTIPLE["stream"]()  # batch-length padding
    build(builder)
    with pytest.raises(ValueError, match="pad_to_bucket=True"):
        builder.batch_shapes()
    kept = kerasbatch.StreamBucketBuilder(
        boundaries=[10, 20, 30], batch_size=8, pad_to_bucket=True, max_length=40
    )
    dataset = build(kept)
    fed = {tuple(x_of(b).shape) for b in dataset}
    assert {shape["x"] for shape in kept.batch_shapes()} == fed


def tiny_model(jit_compile):
    model = keras.Sequential(
        [
            keras.layers.Embedding(64, 4),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer="sgd", loss="mse", jit_compile=jit_compile)
    return model


def train_begin(callback, model, epochs=1):
    """What model.fit calls before the first batch (the compile warning
    comes at the first epoch's start, when the fit's epochs are known)."""
    callback.set_model(model)
    callback.set_params({"epochs": epochs, "verbose": 0, "steps": None})
    callback.on_train_begin()
    callback.on_epoch_begin(0)


MANY = {  # builders whose epoch feeds more than 16 shapes here
    "padded": lambda: kerasbatch.PaddedBuilder(batch_size=2),
    "bucket": lambda: kerasbatch.BucketBuilder(num_buckets=4, batch_size=2),
    "stream": lambda: kerasbatch.StreamBucketBuilder(
        boundaries=[10, 20, 30], batch_size=2, buffer_size=16
    ),
}


@pytest.mark.parametrize("kind", MANY)
@pytest.mark.parametrize(
    "make_callback",
    [
        kerasbatch.callbacks.EpochReshuffle,
        kerasbatch.callbacks.PaddingEfficiency,
    ],
)
def test_a_jit_compiled_model_meeting_many_shapes_gets_the_fix(kind, make_callback):
    builder = MANY[kind]()
    dataset = build(builder)  # in use, as during model.fit
    with pytest.warns(UserWarning, match="compiles once per batch shape") as caught:
        train_begin(make_callback(builder), tiny_model(jit_compile=True))
    fix = {  # a stream cannot cut its buckets evenly: it pads them
        "padded": "pad_to_multiple (e.g. 16) and remainder='even'",
        "bucket": "pad_to_bucket=True, remainder='even'",
        "stream": "pad_to_bucket=True, remainder='pad'",
    }[kind]
    message = str(caught[0].message)
    assert fix in message
    # The measured trade-off, and where to weigh it for one's own data.
    assert "s per shape" in message and "PackedBuilder" in message
    assert "kerasbatch.analyze" in message
    del dataset


def test_bounded_shapes_or_no_xla_give_no_warning(recwarn):
    bounded = PADDED["bucket"]()
    datasets = [build(bounded)]
    train_begin(kerasbatch.callbacks.EpochReshuffle(bounded), tiny_model(True))
    many = MANY["padded"]()
    datasets.append(build(many))
    train_begin(kerasbatch.callbacks.EpochReshuffle(many), tiny_model(False))
    assert not [w for w in recwarn if "compiles once" in str(w.message)]
    assert all(len(d) for d in datasets)


def masked_mean_classifier():
    """What Keras users write: a padding mask from `mask_zero=True`, averaged
    over by `GlobalAveragePooling1D`, whose mean over an all-padding row is
    0 / 0."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [
            keras.layers.Embedding(len(LENGTHS) + 1, 4, mask_zero=True),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dense(1),
        ]
    )
    # Eager on TensorFlow: one epoch of a few steps costs less than its trace
    # (on JAX, eager steps cost more than the per-shape compiles).
    model.compile("adam", "mse", run_eagerly=keras.backend.backend() == "tensorflow")
    return model


@pytest.mark.backend
@pytest.mark.parametrize("kind", PADDED)
def test_filler_rows_put_no_nan_into_a_keras_loss(kind):
    """Filler rows copy a real row (weight 0), so a model gives them finite
    outputs however it normalises over the mask, and the loss is finite."""
    builder = PADDED[kind]()
    dataset = build(builder)
    if kind == "packed":
        dataset = dataset.map(lambda x, y, w: (x["x"], y[:, :1], w[:, :1]))
    fillers = 0
    for x, _, weights in dataset:
        rows = np.asarray(weights).reshape(len(weights), -1).max(axis=1)
        fillers += int((rows == 0).sum())
        assert (np.asarray(x) != 0).any(axis=-1).all()  # no all-padding row
    assert fillers > 0
    history = masked_mean_classifier().fit(dataset, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()


COMPILE_WARNING_SCRIPT = """
import json
import warnings

import keras
import numpy as np

import kerasbatch

x = [np.ones(n, "int32") for n in range(1, 60)]
builder = kerasbatch.PaddedBuilder(batch_size=2)
dataset = builder.build(x, np.zeros(len(x)), engine="python")
model = keras.Sequential(
    [keras.layers.Embedding(4, 2), keras.layers.GlobalAveragePooling1D()]
)
model.compile("sgd", "mse", jit_compile=True)
callback = kerasbatch.callbacks.EpochReshuffle(builder)
callback.set_model(model)
callback.set_params({"epochs": 1, "verbose": 0, "steps": None})
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    callback.on_train_begin()
    callback.on_epoch_begin(0)
print(json.dumps([str(w.message) for w in caught if "per batch shape" in str(w.message)]))
"""


@pytest.mark.parametrize("backend", ["torch", "jax"])
def test_only_backends_that_compile_per_shape_warn(backend):
    # torch.compile (jit_compile=True on torch) makes a changing dimension
    # dynamic after its second shape: it does not compile once per shape.
    warned = run_on_backend(COMPILE_WARNING_SCRIPT, backend)
    if backend == "torch":
        assert warned == []
    else:
        assert len(warned) == 1
        assert warned[0].startswith("The JAX backend compiles the model with XLA")
        assert "with JAX on an NVIDIA H200 GPU" in warned[0]
