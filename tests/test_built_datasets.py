"""One builder, several datasets: every built dataset keeps its own data and plan.

The common Keras pattern `model.fit(builder.build(x, y),
validation_data=builder.build(x_val, y_val))` for every builder, the
TFRecord loader and the tuner: each dataset yields its own elements exactly
once per epoch, whatever was built after it, and the callbacks report each.
"""

import gc
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

import kerasbatch
from kerasbatch.builders import builder_of
from kerasbatch.callbacks import EpochReshuffle, PaddingEfficiency, Throughput
from kerasbatch.io import TFRecordLoader, write_dataset

TRAIN_LENGTHS = np.random.default_rng(0).integers(1, 21, 40)
VAL_LENGTHS = np.random.default_rng(1).integers(1, 9, 13)
OTHER_LENGTHS = np.random.default_rng(2).integers(1, 21, 7)


def sequences(lengths, first_id):
    """Element i is the id `first_id + i` repeated `lengths[i]` times."""
    return [np.full(n, first_id + i, "int32") for i, n in enumerate(lengths)]


def expected_counts(lengths, first_id):
    return {first_id + i: int(n) for i, n in enumerate(lengths)}


def token_counts(batches):
    """How often every id occurs over all positions of `batches` (0 = padding)."""
    values, counts = np.unique(
        np.concatenate([b.ravel() for b in batches]), return_counts=True
    )
    return {int(v): int(c) for v, c in zip(values, counts, strict=True) if v}


def tokens(data):
    x = data[0] if isinstance(data, tuple) else data
    return np.asarray(x["x"] if isinstance(x, dict) else x)


def trained_tokens(data):
    """`tokens(data)` with the rows of zero `sample_weight` as padding: filler
    rows copy a real row, and are trained on as nothing."""
    values = tokens(data)
    if not isinstance(data, tuple) or len(data) < 3:
        return values
    weights = np.asarray(data[2]).reshape(len(values), -1)
    return np.where(weights.max(axis=1) > 0, values.T, 0).T


class Recorder(keras.Model):
    """A tiny model that records the tokens of every training and validation
    batch; its loss needs no targets, so every builder's x alone trains it."""

    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(2000, 4)
        self.pool = keras.layers.GlobalAveragePooling1D()
        self.out = keras.layers.Dense(1)
        self.trained, self.validated = [], []

    def call(self, x):
        x = x["x"] if isinstance(x, dict) else x
        return self.out(self.pool(self.embed(x % 2000)))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, **kw):
        return ops.mean(ops.square(y_pred))

    # The data is the last argument on every backend (JAX passes the state
    # first); run_eagerly makes it concrete.
    def train_step(self, *arguments):
        self.trained.append(tokens(arguments[-1]))
        return super().train_step(*arguments)

    def test_step(self, *arguments):
        self.validated.append(tokens(arguments[-1]))
        return super().test_step(*arguments)


def recorder():
    model = Recorder()
    model.compile(optimizer="sgd", run_eagerly=True)
    return model


def stream(lengths, first_id, targets=None):
    ragged = tf.ragged.constant(sequences(lengths, first_id))
    if targets is None:
        return tf.data.Dataset.from_tensor_slices(ragged).map(lambda r: r)
    return tf.data.Dataset.from_tensor_slices((ragged, targets)).map(
        lambda r, t: (r, t)
    )


BUILDERS = {
    "padded": lambda: kerasbatch.PaddedBuilder(batch_size=8, seed=1),
    "sorted": lambda: kerasbatch.SortedBuilder(batch_size=8, seed=1),
    "bucket": lambda: kerasbatch.BucketBuilder(num_buckets=3, batch_size=8, seed=1),
    "packed": lambda: kerasbatch.PackedBuilder(24, batch_size=4, seed=1),
    "chunk": lambda: kerasbatch.ChunkBuilder(6, batch_size=8, seed=1),
    "window": lambda: kerasbatch.WindowBuilder(4, 4, drop_remainder=False, seed=1),
    "stream": lambda: kerasbatch.StreamBucketBuilder(
        boundaries="auto", num_buckets=3, batch_size=8, buffer_size=16, seed=1
    ),
}


#: The builders above and a token budget (batches of odd sizes, which
#: replicas share unevenly): what `test_distribute.py` distributes.
KINDS = {
    **BUILDERS,
    "budget": lambda: kerasbatch.BucketBuilder(num_buckets=3, max_tokens=90, seed=1),
}


def build(builder, lengths, first_id, with_targets=False):
    """`builder`'s dataset of `sequences(lengths, first_id)` as x (and
    targets y of zeros `with_targets`)."""
    targets = np.zeros(len(lengths), "float32") if with_targets else None
    if isinstance(builder, kerasbatch.StreamBucketBuilder):
        return builder.build(stream(lengths, first_id, targets), lengths=lengths)
    if targets is None:
        return builder.build(sequences(lengths, first_id))
    return builder.build(sequences(lengths, first_id), targets)


def records_loader(directory, lengths, first_id, num_shards=4):
    """A TFRecord loader of `sequences(lengths, first_id)` as `"x"` (the
    records are written into `directory` unless it exists)."""
    if not os.path.exists(directory):
        records = [{"tokens": s} for s in sequences(lengths, first_id)]
        write_dataset(directory, records, num_shards=num_shards)
    return TFRecordLoader(
        type="independent",
        dataset={"type": "dir", "args": {"data_dir": str(directory)}},
        target_batch_size=4,
        drop_remainder=False,
        epochs=1,
        num_read_buffer_bytes=0,
        num_prefetch=1,
        padding=False,
        primary_features=[{"from_name": "tokens", "to_name": "x"}],
    )


def build_from_loader(builder, loader):
    """`loader`'s dataset, batched by the stream `builder` (with lengths)."""
    names = {"inputs": ["x"], "outputs": []}
    lengths = loader.lengths(**names, verbose=0)
    return loader.build(**names, builder=builder, lengths=lengths)


def reference(kind, lengths, first_id, epochs=2):
    """The batches and statistics of each of `epochs` from a builder used
    only for this data."""
    builder = BUILDERS[kind]()
    dataset = build(builder, lengths, first_id)
    per_epoch = []
    for epoch in range(epochs):
        builder.set_epoch(epoch)
        per_epoch.append(([tokens(batch) for batch in dataset], builder.statistics()))
    return per_epoch


def assert_same_batches(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_array_equal(a, e)


def fit_two_epochs(builder, train, val, extra_callbacks=()):
    """Two epochs of `model.fit(train, validation_data=val)`; returns the
    history and, per epoch, the tokens of the training and validation batches."""
    model = recorder()
    history = model.fit(
        train,
        validation_data=val,
        epochs=2,
        verbose=0,
        callbacks=[
            EpochReshuffle(builder),
            PaddingEfficiency(builder, validation_data=val),
            *extra_callbacks,
        ],
    )
    train_batches, val_batches = int(train.cardinality()), int(val.cardinality())
    assert len(model.trained) == 2 * train_batches
    assert len(model.validated) == 2 * val_batches
    epochs = [
        (
            model.trained[epoch * train_batches : (epoch + 1) * train_batches],
            model.validated[epoch * val_batches : (epoch + 1) * val_batches],
        )
        for epoch in range(2)
    ]
    return history, epochs


@pytest.mark.parametrize("kind", BUILDERS)
def test_one_builder_serves_training_and_validation_in_one_fit(kind):
    builder = BUILDERS[kind]()
    train = build(builder, TRAIN_LENGTHS, 1)
    val = build(builder, VAL_LENGTHS, 1001)  # built after train, before fit
    history, epochs = fit_two_epochs(
        builder, train, val, extra_callbacks=[Throughput(builder, dataset=train)]
    )
    train_references = reference(kind, TRAIN_LENGTHS, 1)
    val_references = reference(kind, VAL_LENGTHS, 1001)
    for epoch, (trained, validated) in enumerate(epochs):
        # Every element of each dataset exactly once, unchanged ...
        assert token_counts(trained) == expected_counts(TRAIN_LENGTHS, 1)
        assert token_counts(validated) == expected_counts(VAL_LENGTHS, 1001)
        # ... in the batches a builder used for that data alone gives ...
        expected_train, train_statistics = train_references[epoch]
        expected_val, val_statistics = val_references[epoch]
        assert_same_batches(trained, expected_train)
        assert_same_batches(validated, expected_val)
        # ... and each reported with its own exact padding efficiency.
        logged = history.history
        assert logged["padding_efficiency"][epoch] == (
            train_statistics.padding_efficiency
        )
        assert logged["val_padding_efficiency"][epoch] == (
            val_statistics.padding_efficiency
        )
    assert all(value > 0 for value in history.history["throughput"])
    check_building_again_never_changes_an_earlier_dataset(
        builder, train, train_references[0], val
    )


def check_building_again_never_changes_an_earlier_dataset(
    builder, train, train_reference, later
):
    """`train`, built by `builder` before `later` (which was iterated since),
    keeps its batches (those of `train_reference`, epoch 0 of a builder that
    never built anything else), its length and its statistics, even once
    the builder plans other lengths again (`adapt`).

    The fit above shares its builder and datasets: `later` is its
    validation data, built after `train` and iterated between its epochs.
    """
    first, statistics = train_reference
    cardinality = len(first)
    if isinstance(builder, kerasbatch.builders.PlannedBuilder):
        assert builder.statistics(dataset=train, epoch=0) == statistics
        builder.adapt(OTHER_LENGTHS)
        assert builder.statistics().num_elements != statistics.num_elements
        assert builder.statistics(dataset=train, epoch=0) == statistics
    assert builder.statistics(dataset=later).num_elements != statistics.num_elements
    assert int(train.cardinality()) == cardinality
    builder.set_epoch(0)
    assert_same_batches([tokens(batch) for batch in train], first)
    assert builder.statistics(dataset=train) == statistics


def test_a_from_config_copy_and_its_datasets_are_independent():
    builder = kerasbatch.BucketBuilder(num_buckets=2, batch_size=4, shuffle=False)
    train = builder.build([np.ones(n, "int32") for n in (2, 9, 4, 6)], np.arange(4))
    copy = kerasbatch.BucketBuilder.from_config(builder.get_config())
    val = copy.build([np.ones(n, "int32") for n in (1, 1)], np.array([10, 11]))
    assert sorted(int(i) for _, y in train for i in y) == [0, 1, 2, 3]
    assert [int(i) for _, y in val for i in y] == [10, 11]


def test_the_issue_example_yields_each_build_its_own_data():
    b = kerasbatch.BucketBuilder(num_buckets=2, batch_size=4, shuffle=False)
    train = b.build([np.ones(n, "int32") for n in (2, 9, 4, 6)], np.array([0, 1, 2, 3]))
    val = b.build([np.ones(n, "int32") for n in (1, 1)], np.array([10, 11]))
    assert sorted(int(i) for _, y in train for i in y) == [0, 1, 2, 3]
    assert [int(i) for _, y in val for i in y] == [10, 11]
    assert kerasbatch.builders.builder_of(train).statistics().num_elements == 4


# ------------------------------------------------------ which dataset is which
def small_builder():
    return kerasbatch.SortedBuilder(batch_size=4, seed=3)


def train_and_val():
    """A small builder and the training and validation datasets it built."""
    builder = small_builder()
    train = builder.build(sequences(TRAIN_LENGTHS, 1))
    return builder, train, builder.build(sequences(VAL_LENGTHS, 1001))


@pytest.mark.parametrize("callback", [PaddingEfficiency, Throughput])
def test_a_callback_cannot_guess_between_datasets_in_use(callback):
    builder, train, val = train_and_val()
    with pytest.raises(ValueError, match=r"cannot tell which dataset.*dataset=train"):
        recorder().fit(
            train, validation_data=val, verbose=0, callbacks=[callback(builder)]
        )


def test_the_training_dataset_is_the_one_left_once_validation_data_is_named():
    builder, train, val = train_and_val()
    history = recorder().fit(
        train,
        validation_data=val,
        verbose=0,
        callbacks=[PaddingEfficiency(builder, validation_data=val)],
    )
    assert history.history["padding_efficiency"] == [
        builder.statistics(dataset=train).padding_efficiency
    ]
    assert history.history["val_padding_efficiency"] == [
        builder.statistics(dataset=val).padding_efficiency
    ]


def test_validation_data_of_another_builder_is_reported_too():
    builder = small_builder()
    train = builder.build(sequences(TRAIN_LENGTHS, 1))
    other = kerasbatch.PaddedBuilder(batch_size=3, shuffle=False)
    val = other.build(sequences(VAL_LENGTHS, 1001))
    history = recorder().fit(
        train,
        validation_data=val,
        epochs=2,
        verbose=0,
        callbacks=[PaddingEfficiency(builder, per_component=True, validation_data=val)],
    )
    assert history.history["val_padding_efficiency"] == [
        other.statistics(epoch=0).padding_efficiency,
        other.statistics(epoch=1).padding_efficiency,
    ]
    assert "val_x_padding_efficiency" in history.history


def test_no_validation_figure_in_epochs_without_validation():
    builder, train, val = train_and_val()
    history = recorder().fit(
        train,
        validation_data=val,
        validation_freq=2,
        epochs=2,
        verbose=0,
        callbacks=[PaddingEfficiency(builder, dataset=train, validation_data=val)],
    )
    assert len(history.history["padding_efficiency"]) == 2
    assert len(history.history["val_padding_efficiency"]) == 1


def test_a_dataset_no_longer_in_use_is_not_ambiguous():
    builder = small_builder()
    builder.build(sequences(VAL_LENGTHS, 1001))  # dropped at once
    train = builder.build(sequences(TRAIN_LENGTHS, 1))
    gc.collect()
    assert builder.built_datasets() == [train]
    history = recorder().fit(train, verbose=0, callbacks=[PaddingEfficiency(builder)])
    assert history.history["padding_efficiency"] == [
        builder.statistics(dataset=train, epoch=0).padding_efficiency
    ]


def test_a_dataset_kept_only_by_a_reference_cycle_is_not_ambiguous():
    builder = small_builder()
    cycle = [builder.build(sequences(VAL_LENGTHS, 1001))]
    cycle.append(cycle)  # freed by the next garbage collection, not before
    del cycle
    train = builder.build(sequences(TRAIN_LENGTHS, 1))
    history = recorder().fit(train, verbose=0, callbacks=[PaddingEfficiency(builder)])
    assert history.history["padding_efficiency"] == [
        builder.statistics(dataset=train, epoch=0).padding_efficiency
    ]


def test_callbacks_that_know_their_datasets_collect_no_garbage(monkeypatch):
    # A collection takes tenths of a second with TensorFlow loaded: it is
    # made only where a callback would otherwise see several datasets in use.
    builder = small_builder()
    train = builder.build(sequences(TRAIN_LENGTHS, 1))
    val = builder.build(sequences(VAL_LENGTHS, 1001))
    collections = []
    monkeypatch.setattr(gc, "collect", lambda *_: collections.append(1) or 0)
    callbacks = [
        EpochReshuffle(builder),
        PaddingEfficiency(builder, dataset=train, validation_data=val),
        Throughput(builder, dataset=train),
    ]
    recorder().fit(train, validation_data=val, verbose=0, callbacks=callbacks)
    assert collections == []


@pytest.mark.parametrize(
    ("dataset", "match"),
    [
        (
            lambda train, other: train.repeat(),
            r"PaddingEfficiency: .*made by repeat\(\)",
        ),
        (lambda train, other: other, "not built by SortedBuilder"),
        (lambda train, other: other.map(lambda x: x), "not built by SortedBuilder"),
    ],
)
def test_a_dataset_the_builder_did_not_build_is_a_clear_error(dataset, match):
    builder = small_builder()
    train = builder.build(sequences(TRAIN_LENGTHS, 1))
    other = kerasbatch.PaddedBuilder(batch_size=2).build(sequences(VAL_LENGTHS, 1))
    callback = PaddingEfficiency(builder, dataset=dataset(train, other))
    with pytest.raises(ValueError, match=match):
        recorder().fit(train, verbose=0, callbacks=[callback])


def test_statistics_of_a_dataset_from_elsewhere_name_the_problem():
    builder = small_builder()
    train = builder.build(sequences(TRAIN_LENGTHS, 1))
    other = kerasbatch.PaddedBuilder(batch_size=2).build(sequences(VAL_LENGTHS, 1))
    with pytest.raises(ValueError, match="built by another builder"):
        builder.statistics(dataset=other)
    # Per-batch transformations (map, prefetch) keep the built batches.
    mapped = train.map(lambda x: x + 1).prefetch(1)
    assert builder.statistics(dataset=mapped) == builder.statistics(dataset=train)
    with pytest.raises(ValueError, match=r"made by batch\(\)"):
        builder.statistics(dataset=train.unbatch().batch(2))
    with pytest.raises(ValueError, match="not returned by a kerasbatch builder"):
        kerasbatch.builders.builder_of(tf.data.Dataset.range(3))


def test_set_epoch_reaches_every_dataset_of_the_builder():
    builder, train, val = train_and_val()
    builder.set_epoch(5)
    list(train)
    list(val)
    assert builder.plan(dataset=train).epoch == builder.plan(dataset=val).epoch == 5
    assert builder.last_started_epoch == 5


# ------------------------------------------------------------ loader and tuner
def test_one_stream_builder_serves_a_training_and_a_validation_loader(tmp_path):
    def loader(name, first_id, lengths):
        records = [
            {"tokens": np.full(n, first_id + i), "label": np.int64(first_id + i)}
            for i, n in enumerate(lengths)
        ]
        write_dataset(tmp_path / name, records, num_shards=2)
        return TFRecordLoader(
            type="independent",
            dataset={"type": "dir", "args": {"data_dir": str(tmp_path / name)}},
            target_batch_size=4,
            drop_remainder=False,
            epochs=1,
            num_read_buffer_bytes=0,
            num_prefetch=1,
            padding=False,
            primary_features=[
                {"from_name": "tokens", "to_name": "x"},
                {"from_name": "label", "to_name": "y"},
            ],
        )

    train_loader = loader("train", 1, TRAIN_LENGTHS)
    val_loader = loader("val", 1001, VAL_LENGTHS)
    builder = kerasbatch.StreamBucketBuilder(
        boundaries="auto", num_buckets=3, batch_size=8, seed=2
    )
    names = {"inputs": ["x"], "outputs": ["y"]}
    train = train_loader.build(
        **names, builder=builder, lengths=train_loader.lengths(**names, verbose=0)
    )
    val = val_loader.build(
        **names, builder=builder, lengths=val_loader.lengths(**names, verbose=0)
    )
    history, epochs = fit_two_epochs(builder, train, val)
    for trained, validated in epochs:
        assert token_counts(trained) == expected_counts(TRAIN_LENGTHS, 1)
        assert token_counts(validated) == expected_counts(VAL_LENGTHS, 1001)
    assert history.history["val_padding_efficiency"][-1] == (
        builder.statistics(dataset=val).padding_efficiency
    )


def test_finding_batch_sizes_on_a_builder_leaves_its_datasets_alone():
    builder = kerasbatch.BucketBuilder(boundaries=[8, 14], batch_size=4, seed=0)
    x = sequences(TRAIN_LENGTHS, 1)
    train = builder.build(x)
    first = [tokens(batch) for batch in train]

    def build_model():
        model = keras.Sequential(
            [keras.layers.Embedding(100, 2), keras.layers.GlobalAveragePooling1D()]
        )
        model.compile("sgd", "mse")
        return model

    kerasbatch.tuner.find_bucket_batch_sizes(
        build_model,
        builder,
        [np.ones(n, "int32") for n in OTHER_LENGTHS],
        np.zeros((len(OTHER_LENGTHS), 2)),
        memory_limit=kerasbatch.tuner.PositionBudget(64),
        max_batch_size=8,
        verbose=0,
    )
    builder.set_epoch(0)
    assert_same_batches([tokens(batch) for batch in train], first)


def test_tuner_trials_report_the_validation_padding_efficiency(tmp_path):
    def build_model(hp):
        model = keras.Sequential(
            [
                keras.layers.Embedding(2000, 2),
                keras.layers.GlobalAveragePooling1D(),
                keras.layers.Dense(1),
            ]
        )
        model.compile("sgd", "mse", run_eagerly=True)  # a few steps: no trace
        return model

    tuner = kerasbatch.tuner.BucketTuner(
        build_model,
        objective="val_loss",
        max_trials=1,  # one trial reports it as any other would
        directory=str(tmp_path),
        project_name="val",
    )
    x, y = sequences(TRAIN_LENGTHS, 1), np.arange(len(TRAIN_LENGTHS), dtype="float32")
    x_val = sequences(VAL_LENGTHS, 1001)
    y_val = np.zeros(len(VAL_LENGTHS), "float32")
    tuner.search(x, y, validation_data=(x_val, y_val), epochs=1, verbose=0)
    trial = tuner.oracle.get_best_trials(1)[0]
    assert 0 < trial.metrics.get_last_value("val_padding_efficiency") <= 1
    builder = tuner.get_best_builder()
    train, val = builder.build(x, y), builder.build(x_val, y_val)
    model = build_model(None)
    history = model.fit(
        train,
        validation_data=val,
        verbose=0,
        callbacks=[PaddingEfficiency(builder, validation_data=val)],
    )
    assert history.history["val_padding_efficiency"] == [
        builder.statistics(dataset=val).padding_efficiency
    ]


@pytest.mark.parametrize("engine", ["tf.data", "grain", "python"])
def test_a_builder_keeps_only_its_settings_after_build(engine):
    builder = kerasbatch.BucketBuilder(boundaries=[8, 14], batch_size=4, seed=0)
    train = builder.build(sequences(TRAIN_LENGTHS, 1), engine=engine)
    fresh = kerasbatch.BucketBuilder(boundaries=[8, 14], batch_size=4, seed=0)
    assert builder._prepared is None and builder._order is None
    assert set(vars(builder)) - set(vars(fresh)) <= {
        "resolved_boundaries",
        "resolved_batch_sizes",
        "bucket_counts",
        "bucket_lengths",
    }
    # Everything about the build is read from its frozen built value.
    assert builder.statistics().num_elements == len(TRAIN_LENGTHS)
    assert builder.lengths.tolist() == list(TRAIN_LENGTHS)
    assert builder.longest_element(0) is not None
    assert builder_of(train).built is builder.built
    assert builder.built.prepared.lengths.tolist() == list(TRAIN_LENGTHS)
    stream = kerasbatch.StreamBucketBuilder(boundaries=[8], batch_size=4)
    fresh_stream = kerasbatch.StreamBucketBuilder(boundaries=[8], batch_size=4)
    streamed = stream.build(sequences(TRAIN_LENGTHS, 1), engine="grain")
    assert set(vars(stream)) == set(vars(fresh_stream))
    # The source is the built value's, not the builder's.
    assert builder_of(streamed).built.source is not None
