"""Callbacks in a real `model.fit`: reshuffling, exact resumption, efficiency logs."""

import copy
import glob

import keras
import keras_tuner
import numpy as np
import pytest
import tensorflow as tf
from conftest import batches_per_epoch, make_sequences, recording_model

import kerasbatch
from kerasbatch.callbacks import EpochReshuffle, PaddingEfficiency


def bucket_builder():
    return kerasbatch.BucketBuilder(num_buckets=4, batch_size=16, seed=11)


def fit_and_record(builder, x, epochs, initial_epoch=0, callbacks=()):
    dataset = builder.build(x, np.arange(len(x)))
    model = recording_model()
    model.fit(
        dataset,
        epochs=epochs,
        initial_epoch=initial_epoch,
        verbose=0,
        callbacks=[EpochReshuffle(builder), *callbacks],
    )
    num_batches = int(dataset.cardinality())
    return batches_per_epoch(model.recorded, num_batches)


@pytest.mark.backend
def test_three_epochs_of_fit_see_every_element_exactly_once_per_epoch():
    # 48 elements are 5 batches of 4 buckets an epoch (120 were 9): on JAX,
    # where the recording model runs eagerly, each new shape compiles its ops.
    x, _ = make_sequences(48)
    builder = bucket_builder()
    epochs = fit_and_record(builder, x, epochs=3)
    assert len(epochs) == 3
    for k, batches in enumerate(epochs):
        assert sorted(i for batch in batches for i in batch) == list(range(48))
        # The batches are exactly the plan of epoch k ...
        assert batches == [b.tolist() for b in builder.plan(k).batches()]
    # ... and the epochs are reshuffled.
    assert epochs[0] != epochs[1] != epochs[2]


def test_resuming_with_initial_epoch_gives_the_uninterrupted_batches():
    x, _ = make_sequences(100)
    uninterrupted = fit_and_record(bucket_builder(), x, epochs=4)
    resumed = fit_and_record(bucket_builder(), x, epochs=4, initial_epoch=2)
    assert resumed == uninterrupted[2:]


class StopAtEpoch(keras.callbacks.Callback):
    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            raise RuntimeError("simulated crash")


def test_backup_and_restore_resumes_with_the_uninterrupted_batches(tmp_path):
    x, _ = make_sequences(100)
    uninterrupted = fit_and_record(bucket_builder(), x, epochs=4)
    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))
    with pytest.raises(RuntimeError, match="simulated crash"):
        fit_and_record(
            bucket_builder(), x, epochs=4, callbacks=[backup, StopAtEpoch(2)]
        )
    backup = keras.callbacks.BackupAndRestore(str(tmp_path / "backup"))
    resumed = fit_and_record(bucket_builder(), x, epochs=4, callbacks=[backup])
    assert resumed == uninterrupted[2:]


def test_epoch_reshuffle_survives_deep_copy():
    x, _ = make_sequences(50)
    builder = bucket_builder()
    dataset = builder.build(x, np.arange(50))
    callback = copy.deepcopy(EpochReshuffle(builder))
    assert callback.builder is builder
    model = recording_model()
    model.fit(dataset, epochs=3, initial_epoch=1, verbose=0, callbacks=[callback])
    assert builder.last_started_epoch == 2


def test_epoch_reshuffle_under_keras_tuner(tmp_path):
    x, _ = make_sequences(60)
    builder = bucket_builder()
    dataset = builder.build(x, np.arange(60).astype("float32"))
    seen_epochs = []

    class Spy(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen_epochs.append((epoch, builder.last_started_epoch))

    def build_model(hp):
        model = keras.Sequential(
            [
                keras.layers.Embedding(100, hp.Choice("units", [2, 4])),
                keras.layers.GlobalAveragePooling1D(),
                keras.layers.Dense(1),
            ]
        )
        model.compile("sgd", "mse")
        return model

    tuner = keras_tuner.RandomSearch(
        build_model,
        objective="loss",
        max_trials=2,
        directory=str(tmp_path),
        project_name="t",
    )
    efficiency = PaddingEfficiency(builder)
    tuner.search(
        dataset,
        epochs=2,
        verbose=0,
        callbacks=[EpochReshuffle(builder), efficiency, Spy()],
    )
    # Each trial's copied callback drove the original builder: epochs 0 and 1.
    assert seen_epochs == [(0, 0), (1, 1)] * 2
    trial = tuner.oracle.get_best_trials(1)[0]
    assert trial.metrics.exists("padding_efficiency")


def test_padding_efficiency_goes_into_history_exactly():
    x, _ = make_sequences(90)
    builder = bucket_builder()
    dataset = builder.build(x, np.arange(90))
    model = recording_model()
    history = model.fit(
        dataset,
        epochs=3,
        verbose=0,
        callbacks=[
            EpochReshuffle(builder),
            PaddingEfficiency(builder, per_component=True),
        ],
    )
    expected = [builder.statistics(k).padding_efficiency for k in range(3)]
    assert history.history["padding_efficiency"] == expected
    assert history.history["x_padding_efficiency"] == expected
    assert 0 < min(expected) <= max(expected) <= 1


class BatchLogs(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.values = []

    def on_train_batch_end(self, batch, logs=None):
        self.values.append(logs["padding_efficiency"])


def test_per_batch_padding_efficiency_is_the_running_value():
    x, lengths = make_sequences(80)
    builder = kerasbatch.PaddedBuilder(16, seed=2)
    dataset = builder.build(x, np.arange(80))
    spy = BatchLogs()
    model = recording_model()
    model.fit(
        dataset,
        epochs=1,
        verbose=0,
        callbacks=[PaddingEfficiency(builder, per_batch=True), spy],
    )
    real = padded = 0
    for ids, value in zip(model.recorded, spy.values, strict=True):
        real += lengths[ids].sum()
        padded += len(ids) * lengths[ids].max()
        assert value == pytest.approx(real / padded)


def test_padding_efficiency_keeps_keras_asynchronous_dispatch(monkeypatch):
    # Keras dispatches batch callbacks asynchronously on thread-safe backends
    # (JAX, torch) unless a callback reads tensors; ours reads only numpy.
    from keras.src import backend

    monkeypatch.setattr(backend, "IS_THREAD_SAFE", True)
    builder = kerasbatch.PaddedBuilder(4)
    callbacks = keras.callbacks.CallbackList(
        [PaddingEfficiency(builder, per_batch=True)]
    )
    assert callbacks._async_train


def test_padding_efficiency_reaches_tensorboard(tmp_path):
    x, _ = make_sequences(40)
    builder = bucket_builder()
    dataset = builder.build(x, np.arange(40))
    model = recording_model()
    model.fit(
        dataset,
        epochs=2,
        verbose=0,
        callbacks=[
            PaddingEfficiency(builder),
            keras.callbacks.TensorBoard(str(tmp_path)),
        ],
    )
    tags = set()
    for path in glob.glob(str(tmp_path / "train" / "events*")):
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            tags.update(value.tag for value in event.summary.value)
    assert "epoch_padding_efficiency" in tags


def test_padding_efficiency_shows_in_the_progress_bar(capsys):
    x, _ = make_sequences(40)
    builder = kerasbatch.SortedBuilder(8)
    dataset = builder.build(x, np.arange(40))
    recording_model().fit(
        dataset, epochs=1, verbose=2, callbacks=[PaddingEfficiency(builder)]
    )
    assert (
        f"padding_efficiency: {builder.statistics().padding_efficiency:.4f}"
        in capsys.readouterr().out
    )
