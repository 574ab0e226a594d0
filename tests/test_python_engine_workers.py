"""The `python` engine with `workers`: threads make the batches ahead, and
the batches, their order and the epochs are those of one worker, bit for bit.

Every test runs under an alarm, so that a hang (a worker waited on forever)
fails instead of stalling the suite. They import no TensorFlow.
"""

import random
import signal
import threading
import time

import keras
import numpy as np
import pytest
from interruption import StopAt
from keras import ops

import kerasbatch
from kerasbatch.callbacks import EpochReshuffle
from kerasbatch.engines.python import PlannedPyDataset

LENGTHS = np.random.default_rng(3).integers(1, 25, 45)
BUILDERS = {
    "bucket": lambda: kerasbatch.BucketBuilder(
        num_buckets=3, batch_size=4, remainder="pad", output_lengths=True, seed=2
    ),
    "budget": lambda: kerasbatch.BucketBuilder(
        num_buckets=3, max_tokens=80, batch_size=None, seed=2
    ),
    "packed": lambda: kerasbatch.PackedBuilder(30, batch_size=3, seed=2),
    "chunk": lambda: kerasbatch.ChunkBuilder(5, context=(1, 2), batch_size=4, seed=2),
    "window": lambda: kerasbatch.WindowBuilder(3, 2, drop_remainder=False, seed=2),
}
THREADED = {"workers": 4, "max_queue_size": 3}
TIMEOUT_S = 120


@pytest.fixture(autouse=True)
def _alarm():
    """Fails the test after TIMEOUT_S seconds (a hang raises, not stalls)."""

    def expired(signum, frame):
        raise TimeoutError(f"the test ran past {TIMEOUT_S} s: a hang?")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(TIMEOUT_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def inputs(lengths=LENGTHS):
    """x (element i is `i + 1` repeated), per-example y and weights."""
    rng = np.random.default_rng(0)
    x = [np.full(n, i + 1, "int32") for i, n in enumerate(lengths)]
    return x, rng.normal(size=len(lengths)).astype("float32"), rng.random(len(lengths))


def arrays(batch):
    """Every array of a batch, in a fixed order (nested tuples and dicts)."""
    return [np.asarray(a) for a in keras.tree.flatten(batch)]


def assert_identical(expected, actual):
    assert len(expected) == len(actual)
    for k, (want, got) in enumerate(zip(expected, actual, strict=True)):
        want, got = arrays(want), arrays(got)
        assert len(want) == len(got), k
        for a, b in zip(want, got, strict=True):
            assert (a.dtype, a.shape) == (b.dtype, b.shape), k
            assert a.tobytes() == b.tobytes(), k  # bit for bit


def build(kind, **options):
    builder = BUILDERS[kind]()
    x, y, weights = inputs()
    if kind == "window":
        y = weights = None
    elif kind == "chunk":
        weights = None
    return builder, builder.build(x, y, weights, engine="python", **options)


class Recorder(keras.Model):
    """Records every array of every batch `fit` trains on (run eagerly)."""

    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(200, 3)
        self.pool = keras.layers.GlobalAveragePooling1D()
        self.out = keras.layers.Dense(1)
        self.batches = []

    def call(self, x):
        x = x["x"] if isinstance(x, dict) else x
        return self.out(self.pool(self.embed(x % 200)))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, **kw):
        return ops.mean(ops.square(y_pred))

    # The data is the last argument on every backend (JAX passes the state
    # first).
    def train_step(self, *arguments):
        self.batches.append(arrays(arguments[-1]))
        return super().train_step(*arguments)


def recorder():
    keras.utils.set_random_seed(0)
    model = Recorder()
    model(np.zeros((1, 1), "int32"))  # built, as BackupAndRestore needs
    model.compile(optimizer="sgd", run_eagerly=True)
    return model


def fit(dataset, builder, epochs=3, shuffle_seed=0, **fit_options):
    """`(recorded batches, final weights, data epoch of every fit epoch)`
    of a real `model.fit` on `dataset` (Keras' default `shuffle=True`, with
    Python's global random state at `shuffle_seed`)."""
    model = recorder()
    random.seed(shuffle_seed)  # after the weights: they draw from it
    started = []
    log = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: started.append(builder.last_started_epoch)
    )
    fit_options.setdefault("callbacks", [])
    fit_options["callbacks"] = [*fit_options["callbacks"], log]
    model.fit(dataset, epochs=epochs, verbose=0, **fit_options)
    return model.batches, model.get_weights(), started


@pytest.mark.backend
@pytest.mark.parametrize("kind", sorted(BUILDERS))
def test_a_loop_over_the_dataset_yields_the_one_worker_batches(kind):
    plain_builder, plain = build(kind)
    threaded_builder, threaded = build(kind, **THREADED)
    assert len(threaded) == len(plain) and threaded.batch_workers == 4
    for epoch in range(3):  # a whole pass moves on to the next epoch
        assert threaded_builder.epoch == plain_builder.epoch == epoch
        assert_identical(list(plain), list(threaded))
        assert plain_builder.last_started_epoch == epoch
        assert threaded_builder.last_started_epoch == epoch
    # By index, outside a Keras epoch: batch k of the running epoch.
    assert_identical(
        [plain[k] for k in reversed(range(len(plain)))],
        [threaded[k] for k in reversed(range(len(threaded)))],
    )


class Jittered(PlannedPyDataset):
    """Calls that start after a random pause, as threads scheduled in any
    order would: a batch chosen by the order of the calls, were Keras to
    make them from several threads, would come out of order."""

    _jitter = random.Random(0)

    def __getitem__(self, index):
        time.sleep(self._jitter.random() * 0.004)
        return super().__getitem__(index)


@pytest.mark.backend
@pytest.mark.parametrize("kind", ["bucket", "packed", "chunk"])
def test_fit_trains_on_the_one_worker_batches_in_their_order(kind):
    plain_builder, plain = build(kind)
    expected, weights, started = fit(plain, plain_builder)
    assert started == [0, 1, 2]
    assert len(expected) == 3 * len(plain)
    # Keras shuffles the indices it asks for: the threaded fit draws another
    # order of them than the one-worker fit (seed 1, not 0), so its batches
    # match whatever order Keras asks in, as well as whatever the threads do.
    threaded_builder, threaded = build(kind, **THREADED)
    made_in = []
    make = threaded._batches.batch

    def recorded(epoch, index):
        made_in.append(threading.current_thread().name)
        return make(epoch, index)

    threaded._batches.batch = recorded
    threaded.__class__ = Jittered
    actual, threaded_weights, threaded_started = fit(
        threaded, threaded_builder, shuffle_seed=1
    )
    assert threaded_started == started
    assert threaded_builder.epoch == 3
    assert len(actual) == len(expected)
    for k, (want, got) in enumerate(zip(expected, actual, strict=True)):
        for a, b in zip(want, got, strict=True):
            assert a.shape == b.shape and a.tobytes() == b.tobytes(), k
    for a, b in zip(weights, threaded_weights, strict=True):
        np.testing.assert_array_equal(a, b)
    # The worker threads made the batches ahead of Keras' loop.
    assert sum(name.startswith("kerasbatch-python-engine") for name in made_in) > 0


@pytest.mark.backend
def test_epoch_reshuffle_and_initial_epoch_with_workers():
    runs = []
    for options in ({}, THREADED):
        builder, dataset = build("bucket", **options)
        runs.append(
            fit(
                dataset,
                builder,
                epochs=4,
                initial_epoch=2,
                callbacks=[EpochReshuffle(builder)],
            )
        )
    (expected, weights, started), (actual, threaded_weights, threaded_started) = runs
    assert started == threaded_started == [2, 3]
    assert len(actual) == len(expected)
    for want, got in zip(expected, actual, strict=True):
        for a, b in zip(want, got, strict=True):
            assert a.tobytes() == b.tobytes()
    for a, b in zip(weights, threaded_weights, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.backend
def test_get_state_counts_the_batches_taken_not_those_made_ahead():
    builder, dataset = build("bucket", **THREADED)
    num_batches = len(dataset)
    dataset.on_epoch_begin()  # what Keras' adapter calls
    taken = [dataset[7], dataset[3]]  # Keras' shuffled indices
    assert dataset.get_state() == {"epoch": 0, "batch": 2}
    dataset.on_epoch_end()  # an epoch cut short: the batches ahead go
    assert not dataset._ahead

    # A fresh dataset resumed there takes the rest of epoch 0, then epoch 1.
    plain_builder, plain = build("bucket")
    every = [plain[k] for k in range(num_batches)]
    assert_identical(every[:2], taken)
    resumed_builder, resumed = build("bucket", **THREADED)
    resumed.set_state({"epoch": 0, "batch": 2})
    batches, _, started = fit(resumed, resumed_builder, epochs=2)
    assert started == [0, 1]
    assert len(batches) == 2 * num_batches - 2
    rest = every[2:] + [plain[k] for k in range(num_batches)]  # epoch 1
    for want, got in zip(rest, batches, strict=True):
        for a, b in zip(arrays(want), got, strict=True):
            assert a.tobytes() == b.tobytes()


@pytest.mark.backend
def test_keras_epochs_cut_short_then_whole_match_one_worker():
    """Keras' calls, as its adapter makes them (without fit, whose backends
    may ask for batches ahead of the steps they train)."""

    def keras_epochs(dataset, builder):
        made, started = [], []
        for taken in (3, len(dataset), 2, len(dataset)):
            dataset.on_epoch_begin()
            indices = list(range(len(dataset)))
            random.Random(taken).shuffle(indices)  # as fit(shuffle=True)
            made += [dataset[k] for k in indices[:taken]]
            dataset.on_epoch_end()
            started.append((builder.last_started_epoch, builder.epoch))
        return made, started

    expected, started = keras_epochs(*reversed(build("packed")))
    actual, threaded_started = keras_epochs(*reversed(build("packed", **THREADED)))
    assert started == threaded_started == [(0, 0), (0, 1), (1, 1), (1, 2)]
    assert_identical(expected, actual)


@pytest.mark.backend
def test_backup_and_restore_resumes_a_threaded_dataset(tmp_path):
    """A fit that fails mid-epoch resumes at the next batch, as with one
    worker (the weights end as the uninterrupted run's)."""
    builder, dataset = build("chunk", **THREADED)
    whole, weights, _ = fit(dataset, builder, epochs=2)

    builder, dataset = build("chunk", **THREADED)
    backup = kerasbatch.callbacks.BackupAndRestore(
        str(tmp_path), dataset=dataset, save_freq=2
    )
    model = recorder()
    with pytest.raises(RuntimeError, match="stopped"):
        model.fit(
            dataset, epochs=2, verbose=0, callbacks=[backup, StopAt(len(dataset) + 3)]
        )
    assert_identical(whole[: len(model.batches)], model.batches)
    builder, dataset = build("chunk", **THREADED)  # a restarted process
    backup = kerasbatch.callbacks.BackupAndRestore(
        str(tmp_path), dataset=dataset, save_freq=2
    )
    model = recorder()
    model.fit(dataset, epochs=2, verbose=0, callbacks=[backup])
    assert 0 < len(model.batches) < len(dataset)
    assert_identical(whole[-len(model.batches) :], model.batches)
    for a, b in zip(weights, model.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_workers_options_are_refused_where_they_do_not_apply():
    x, y, _ = inputs()
    builder = kerasbatch.BucketBuilder(num_buckets=2, batch_size=4)
    for engine in ("tf.data", "grain"):
        for option in (
            {"workers": 2},
            {"use_multiprocessing": False},
            {"max_queue_size": 4},
        ):
            with pytest.raises(ValueError, match=f"of engine='python'.*{engine!r}"):
                builder.build(x, y, engine=engine, **option)
    with pytest.raises(ValueError, match="threads.*workers=N"):
        builder.build(x, y, engine="python", workers=2, use_multiprocessing=True)
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="workers must be a positive int"):
            builder.build(x, y, engine="python", workers=bad)
        with pytest.raises(ValueError, match="max_queue_size must be a positive"):
            builder.build(x, y, engine="python", max_queue_size=bad)
    dataset = builder.build(x, y, engine="python", workers=np.int64(2))
    assert (dataset.batch_workers, dataset.workers) == (2, 1)
    assert dataset.use_multiprocessing is False
    with pytest.raises(AttributeError, match="pass workers= to build"):
        dataset.workers = 4
    with pytest.raises(AttributeError, match="threads of this process"):
        dataset.use_multiprocessing = True
