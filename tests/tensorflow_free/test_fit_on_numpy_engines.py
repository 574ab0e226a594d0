"""Every builder in a real `model.fit` on the `grain` and `python` engines.

These tests import no TensorFlow: CI runs them in an environment without it
(`KERAS_BACKEND=jax`), as well as in the main suite.
"""

import keras
import numpy as np
import pytest
from keras import ops

import kerasbatch
from kerasbatch.builders import builder_of
from kerasbatch.callbacks import EpochReshuffle, PaddingEfficiency, Throughput

ENGINES = ["grain", "python"]
LENGTHS = np.random.default_rng(0).integers(1, 21, 37)
BUILDERS = {
    "padded": lambda: kerasbatch.PaddedBuilder(batch_size=8, seed=1),
    "sorted": lambda: kerasbatch.SortedBuilder(batch_size=8, seed=1),
    "bucket": lambda: kerasbatch.BucketBuilder(
        num_buckets=3, batch_size=8, pad_to_bucket=True, remainder="pad", seed=1
    ),
    "budget": lambda: kerasbatch.BucketBuilder(
        num_buckets=3, max_tokens=90, batch_size=None, seed=1
    ),
    "packed": lambda: kerasbatch.PackedBuilder(24, batch_size=4, seed=1),
    "chunk": lambda: kerasbatch.ChunkBuilder(6, batch_size=8, seed=1),
    "window": lambda: kerasbatch.WindowBuilder(4, 4, drop_remainder=False, seed=1),
}


def sequences(lengths, first_id=1):
    """Element i is the id `first_id + i`, repeated `lengths[i]` times."""
    return [np.full(n, first_id + i, "int32") for i, n in enumerate(lengths)]


def token_counts(arrays):
    values, counts = np.unique(
        np.concatenate([a.ravel() for a in arrays]), return_counts=True
    )
    return {int(v): int(c) for v, c in zip(values, counts, strict=True) if v}


def trained(data):
    """The token ids a batch trains on: rows of zero weight are padding."""
    x, _, weights = data if len(data) == 3 else (*data, None)
    tokens = np.asarray(x["x"] if isinstance(x, dict) else x)
    if weights is None:
        return tokens
    weights = np.asarray(weights).reshape(len(tokens), -1)
    if weights.shape[1] == tokens.shape[1]:
        return np.where(weights > 0, tokens, 0)
    return np.where(weights.max(axis=1) > 0, tokens.T, 0).T


class Recorder(keras.Model):
    """Records the tokens every training step gets (run eagerly)."""

    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(100, 4)
        self.pool = keras.layers.GlobalAveragePooling1D()
        self.out = keras.layers.Dense(1)
        self.trained = []

    def call(self, x):
        x = x["x"] if isinstance(x, dict) else x
        return self.out(self.pool(self.embed(x % 100)))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, **kw):
        return ops.mean(ops.square(y_pred))

    # The data is the last argument on every backend (JAX passes the state
    # first).
    def train_step(self, *arguments):
        self.trained.append(trained(arguments[-1]))
        return super().train_step(*arguments)


class EpochLog(keras.callbacks.Callback):
    """The data epoch every fit epoch trained on."""

    def __init__(self, builder):
        super().__init__()
        self.builder = builder
        self.epochs = []

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append(self.builder.last_started_epoch)


def recorder():
    model = Recorder()
    model.compile(optimizer="sgd", run_eagerly=True)
    return model


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_fit_trains_every_element_once_per_planned_epoch(kind, engine):
    builder = BUILDERS[kind]()
    targets = np.zeros(len(LENGTHS), "float32")
    dataset = builder.build(sequences(LENGTHS), targets, engine=engine)
    served = builder_of(dataset)
    model, log = recorder(), EpochLog(builder)
    history = model.fit(
        dataset,
        epochs=2,
        verbose=0,
        callbacks=[log, PaddingEfficiency(builder), Throughput(builder)],
    )
    assert log.epochs == [0, 1]  # the first epoch of a fit is epoch 0
    steps = len(dataset)
    assert len(model.trained) == 2 * steps
    expected = {1 + i: int(n) for i, n in enumerate(LENGTHS)}
    for epoch in (0, 1):
        epoch_batches = model.trained[epoch * steps : (epoch + 1) * steps]
        assert token_counts(epoch_batches) == expected
        assert history.history["padding_efficiency"][epoch] == pytest.approx(
            served.statistics(epoch).padding_efficiency
        )
    assert all(value > 0 for value in history.history["throughput"])


@pytest.mark.parametrize("engine", ENGINES)
def test_epoch_reshuffle_resumes_at_the_initial_epoch(engine):
    builder = BUILDERS["bucket"]()
    targets = np.zeros(len(LENGTHS), "float32")
    dataset = builder.build(sequences(LENGTHS), targets, engine=engine)
    model, log = recorder(), EpochLog(builder)
    model.fit(
        dataset,
        epochs=4,
        initial_epoch=2,
        verbose=0,
        callbacks=[EpochReshuffle(builder), log],
    )
    assert log.epochs == [2, 3]
    steps = len(dataset)
    batches = kerasbatch.engines.numpy.planned.PlannedBatches(builder_of(dataset))
    for index, tokens in enumerate(model.trained):
        epoch, step = 2 + index // steps, index % steps
        np.testing.assert_array_equal(tokens, trained(batches.batch(epoch, step)))


@pytest.mark.parametrize("engine", ENGINES)
def test_validation_data_and_its_statistics(engine):
    builder = BUILDERS["sorted"]()
    train = builder.build(sequences(LENGTHS), np.zeros(len(LENGTHS)), engine=engine)
    val_lengths = LENGTHS[:9] + 3
    val = builder.build(sequences(val_lengths, 100), np.zeros(9), engine=engine)
    model = recorder()
    history = model.fit(
        train,
        validation_data=val,
        epochs=2,
        verbose=0,
        callbacks=[PaddingEfficiency(builder, dataset=train, validation_data=val)],
    )
    assert (
        history.history["val_padding_efficiency"]
        == [builder_of(val).statistics(0).padding_efficiency] * 2
    )


@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_builders_pickle_and_deepcopy_as_their_settings(kind):
    import copy
    import pickle

    builder = BUILDERS[kind]()
    dataset = builder.build(sequences(LENGTHS), np.zeros(len(LENGTHS)), engine="python")
    for copied in (copy.deepcopy(builder), pickle.loads(pickle.dumps(builder))):
        assert copied == builder and copied is not builder
        assert copied.get_config() == builder.get_config()
        assert copied.built_datasets() == []  # the data stays with the dataset
        again = copied.build(
            sequences(LENGTHS), np.zeros(len(LENGTHS)), engine="python"
        )
        builder.set_epoch(0)  # a pass moves a dataset on to the next epoch
        for k in range(len(dataset)):
            assert np.array_equal(trained(again[k]), trained(dataset[k]))
    assert builder.built_datasets() == [dataset]


@pytest.mark.parametrize("engine", ENGINES)
def test_warm_up_compiles_every_shape_and_changes_nothing(engine):
    from kerasbatch.callbacks import WarmUp

    def fit(with_warm_up):
        keras.utils.set_random_seed(0)
        builder = BUILDERS["bucket"]()
        dataset = builder.build(
            sequences(LENGTHS), np.zeros(len(LENGTHS), "float32"), engine=engine
        )
        model = keras.Sequential(
            [
                keras.layers.Embedding(100, 4),
                keras.layers.GlobalAveragePooling1D(),
                keras.layers.Dense(1),
            ]
        )
        model.compile("adam", "mse", jit_compile=True)
        warm_up = WarmUp(builder)
        callbacks = [warm_up] if with_warm_up else []
        model.fit(dataset, epochs=2, verbose=0, callbacks=callbacks)
        return model.get_weights(), warm_up, builder

    if keras.backend.backend() != "jax":
        with pytest.raises(ValueError, match="on JAX; on TensorFlow, build with"):
            fit(with_warm_up=True)
        return
    plain, _, _ = fit(with_warm_up=False)
    warmed, warm_up, builder = fit(with_warm_up=True)
    assert warm_up.shapes == builder.batch_shapes(0)
    for expected, actual in zip(plain, warmed, strict=True):
        np.testing.assert_array_equal(expected, actual)


@pytest.mark.parametrize("engine", ENGINES)
def test_what_only_tf_data_batches_is_refused_by_name(engine):
    count = kerasbatch.Reducer(
        lambda size: 0, lambda state, element: state + 1, lambda state: state
    )
    builder = kerasbatch.WindowBuilder(2, 2, reducers={"x": count})
    with pytest.raises(ValueError, match="only the 'tf.data' engine batches"):
        builder.build(sequences(LENGTHS), engine=engine)
    with pytest.raises(ValueError, match="engine must be one of"):
        builder.build(sequences(LENGTHS), engine="torch")


def test_the_demo_runs_without_tensorflow():
    from kerasbatch.tools.demo import run_demo

    # Every distinct batch shape compiles the demo's GRU model on JAX: two
    # sequences (of lengths 30 and 36) are one padded batch and two bucketed
    # ones, three compiles (200 sequences were twenty), and bucketing still
    # pads less.
    results = run_demo(num_sequences=2, epochs=1, verbose=0, engine="python")
    assert (
        results["bucketed"]["padding_efficiency"]
        > results["padded"]["padding_efficiency"]
    )


@pytest.mark.parametrize("engine", ENGINES)
def test_a_stream_fits_every_element_once_per_epoch_with_the_callbacks(engine):
    import grain

    data = sequences(LENGTHS)
    source = grain.MapDataset.source(list(zip(data, np.zeros(len(data)), strict=True)))
    builder = kerasbatch.StreamBucketBuilder(
        boundaries=[6, 12], batch_size=4, buffer_size=16, seed=5
    )
    train = builder.build(source, LENGTHS, engine=engine)
    model = recorder()
    log = EpochLog(builder)
    efficiency = kerasbatch.callbacks.PaddingEfficiency(builder)
    history = model.fit(train, epochs=2, verbose=0, callbacks=[log, efficiency])
    assert log.epochs == [0, 1]
    per_epoch = len(model.trained) // 2
    for epoch in range(2):
        steps = model.trained[epoch * per_epoch : (epoch + 1) * per_epoch]
        assert token_counts(steps) == token_counts(data)
    assert history.history["padding_efficiency"] == [
        builder.statistics(epoch=0).padding_efficiency,
        builder.statistics(epoch=1).padding_efficiency,
    ]
