"""`kerasbatch.callbacks.BackupAndRestore` in one process: a `fit` stopped
by an exception (a stand-in for a kill) and a restarted one, on the `grain`
and `python` engines. The restarted `fit` is one call: it trains the rest
of the stopped epoch and every epoch after it, with exactly the batches and
final weights of an uninterrupted run, and Keras warns of no input that ran
out of data. (`tests/test_guide_resume.py` kills a real process.)"""

import functools
import warnings

import keras
import numpy as np
import pytest
from interruption import StopAt

import kerasbatch

EPOCHS = 3


class Recorder(keras.Model):
    """Records the element ids (targets) of every batch it trains on."""

    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(50, 2)
        self.pool = keras.layers.GlobalAveragePooling1D()
        self.out = keras.layers.Dense(1)
        self.trained = []

    def call(self, x):
        return self.out(self.pool(self.embed(x)))

    def train_step(self, *arguments):  # JAX passes the state first
        ids = keras.ops.convert_to_numpy(arguments[-1][1])
        self.trained.append(ids.astype(int).tolist())
        return super().train_step(*arguments)


def build(engine):
    # One length: Keras on TensorFlow takes every batch of a numpy engine.
    x = [np.full(6, i + 1, "int32") for i in range(26)]
    y = np.arange(1, 27, dtype="float32")  # element ids
    builder = kerasbatch.BucketBuilder(num_buckets=2, batch_size=4, seed=5)
    return builder.build(x, y, engine=engine)


def recorder():
    keras.utils.set_random_seed(0)  # the same first weights in every run
    model = Recorder()
    model(np.zeros((1, 1), "int32"))  # built, as BackupAndRestore needs
    model.compile("sgd", "mse", run_eagerly=True)
    return model


@functools.cache
def uninterrupted(engine):
    """The model of an uninterrupted fit on `engine`: one per engine, which
    the tests compare their stopped and restarted fits with (and only read)."""
    whole = recorder()
    whole.fit(build(engine), epochs=EPOCHS, verbose=0)
    return whole


def stopped_and_restarted(engine, backup_dir, save_freq, stop_at):
    """`(batches and weights of an uninterrupted fit, of the fit stopped
    after batch `stop_at`, of the restarted fit, and the restarted fit's
    epochs and "ran out of data" warnings)`."""
    whole = uninterrupted(engine)

    dataset = build(engine)
    stopped = recorder()
    backup = kerasbatch.callbacks.BackupAndRestore(backup_dir, dataset, save_freq)
    with pytest.raises(RuntimeError, match="stopped"):
        stopped.fit(
            dataset, epochs=EPOCHS, verbose=0, callbacks=[backup, StopAt(stop_at)]
        )

    dataset = build(engine)  # as a restarted process builds it
    restarted = recorder()
    backup = kerasbatch.callbacks.BackupAndRestore(backup_dir, dataset, save_freq)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = restarted.fit(dataset, epochs=EPOCHS, verbose=0, callbacks=[backup])
    ran_out = [w for w in caught if "ran out of data" in str(w.message)]
    return whole, stopped, restarted, history.epoch, ran_out


def assert_same_weights(a, b):
    for first, second in zip(a.get_weights(), b.get_weights(), strict=True):
        np.testing.assert_array_equal(first, second)


@pytest.mark.backend
@pytest.mark.parametrize("engine", ["grain", "python"])
def test_one_fit_resumes_mid_epoch_and_trains_to_the_last_epoch(engine, tmp_path):
    steps = len(build(engine))
    # Stopped after batch 4 of epoch 1 (1-based), the latest backup (one
    # every 2 batches, counted over epochs) at most 2 batches before.
    whole, stopped, restarted, epochs, ran_out = stopped_and_restarted(
        engine, str(tmp_path), save_freq=2, stop_at=steps + 4
    )
    assert stopped.trained == whole.trained[: steps + 4]
    backed_up = len(whole.trained) - len(restarted.trained)
    assert steps + 2 <= backed_up < steps + 4  # mid-epoch 1
    assert restarted.trained == whole.trained[backed_up:]
    assert epochs == [1, 2]
    assert not ran_out
    assert_same_weights(whole, restarted)


@pytest.mark.backend
@pytest.mark.parametrize("engine", ["grain", "python"])
def test_a_backup_of_an_epochs_last_batch_resumes_at_the_next_epoch(engine, tmp_path):
    steps = len(build(engine))
    # The backup (one every `steps` batches) is of epoch 1's last batch, and
    # the fit stopped before Keras ended the epoch: epoch 2 alone is left.
    whole, stopped, restarted, epochs, ran_out = stopped_and_restarted(
        engine, str(tmp_path), save_freq=steps, stop_at=2 * steps
    )
    assert stopped.trained == whole.trained[: 2 * steps]
    assert restarted.trained == whole.trained[2 * steps :]
    assert epochs == [2]
    assert not ran_out
    assert_same_weights(whole, restarted)


@pytest.mark.backend
def test_a_python_dataset_fits_again_after_a_fit_stopped_at_an_epochs_last_batch():
    # The stopped fit took every batch of its epoch and never ended it; on
    # TensorFlow, the next fit's first look at a batch is no part of it.
    dataset = build("python")
    model = recorder()
    with pytest.raises(RuntimeError, match="stopped"):
        model.fit(dataset, epochs=2, verbose=0, callbacks=[StopAt(len(dataset))])
    served = kerasbatch.builders.builder_of(dataset)
    assert served.epoch == 1
    model.trained = []
    model.fit(dataset, epochs=1, verbose=0)
    plan = served.plan(1)
    planned = np.split(plan.indices + 1, plan.batch_splits[1:-1])
    assert model.trained == [batch.tolist() for batch in planned]
