"""Shared fixtures: small variable-length data and a model that records batches."""

import gc
import importlib.util
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
#: XLA (JAX's compiler; TensorFlow's only where a test asks for it) compiles
#: with less optimisation, here and in every process a test starts. No test
#: measures the speed of compiled code; they check batches, shapes, counts of
#: compiles and losses, to tolerances that the optimisation level does not
#: approach. The compiles of a JAX fit take about a third less CPU time.
os.environ["XLA_FLAGS"] = " ".join(
    [
        os.environ.get("XLA_FLAGS", ""),
        "--xla_backend_optimization_level=0",
        "--xla_llvm_disable_expensive_passes=true",
    ]
).strip()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402


def pytest_ignore_collect(collection_path, config):
    """`tests/tensorflow_free` is for an environment without TensorFlow:
    the README's test command runs it there (`tests/tensorflow_free/run.sh`),
    so the main suite, where TensorFlow is installed, leaves it out."""
    if collection_path.name == "tensorflow_free":
        return importlib.util.find_spec("tensorflow") is not None
    return None


def pytest_collection_finish(session):
    """Leaves the objects of the imports (TensorFlow, Keras, the test
    modules: about half a million) out of every later garbage collection.
    Keras' `clear_session`, keras-tuner's trials and pytest collect often,
    and each full collection walked them all: 0.4 s a time here."""
    gc.collect()
    gc.freeze()


def make_sequences(num_elements=200, seed=0, max_length=40, min_length=0, trailing=()):
    """Element i is `i + 1` repeated `length_i` times, so rows name themselves."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_length, max_length + 1, num_elements)
    x = [np.full((n, *trailing), i + 1, dtype=np.int32) for i, n in enumerate(lengths)]
    return x, lengths


@pytest.fixture
def sequences():
    return make_sequences()


class RecordingModel(keras.Model):
    """A tiny model whose `train_step` records every batch's element ids.

    Targets are per-example element ids; the model learns nothing useful but
    runs a real `model.fit` (forward, loss, gradients, optimizer).
    """

    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(1000, 4)
        self.pool = keras.layers.GlobalAveragePooling1D()
        self.out = keras.layers.Dense(1)
        self.recorded = []

    def call(self, x):
        return self.out(self.pool(self.embed(x % 1000)))

    # The data is the last argument on every backend (JAX passes the state
    # first); run_eagerly makes it concrete.
    def train_step(self, *arguments):
        self.recorded.append(np.asarray(arguments[-1][1]).astype(int).tolist())
        return super().train_step(*arguments)


def recording_model():
    model = RecordingModel()
    model(np.zeros((1, 1), "int32"))  # built, as BackupAndRestore requires
    model.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    return model


def batches_per_epoch(recorded, num_batches):
    return [recorded[i : i + num_batches] for i in range(0, len(recorded), num_batches)]
