"""No false "ran out of data" warning: a kerasbatch dataset in `fit` (with
`validation_data`), `evaluate` and `predict`, and a `fit` resumed mid-epoch
by `kerasbatch.callbacks.BackupAndRestore`, on every engine and backend.

Keras' epoch iterator warns "Your input ran out of data; interrupting
training" whenever a dataset ends before the number of steps it expects,
and (Keras 3.15) after every epoch of a dataset whose length it does not
know. kerasbatch datasets know theirs exactly: none of these runs ends
early. Each backend runs the script on its own Keras (`backend_process`).
"""

import pytest
from backend_process import run_on_backend

BACKENDS = ("jax", "tensorflow", "torch")

SCRIPT = """
import json
import tempfile
import warnings

import keras
import numpy as np

import kerasbatch

warnings.simplefilter("always")
# One length: one compiled shape (and Keras on TensorFlow, which reads a
# numpy engine's shapes from its first batches, takes every batch).
lengths = [5] * 22
x = [np.full(n, i + 1, "int32") for i, n in enumerate(lengths)]
y = np.arange(22, dtype="float32")


def model():
    model = keras.Sequential([
        keras.layers.Embedding(30, 2),
        keras.layers.GlobalAveragePooling1D(),
        keras.layers.Dense(1),
    ])
    model(np.zeros((1, 1), "int32"))  # built, as BackupAndRestore needs
    model.compile("sgd", "mse")
    return model


def datasets(engine):
    builder = kerasbatch.BucketBuilder(num_buckets=2, batch_size=4, seed=0)
    yield "built", builder, builder.build(x, y, engine=engine)
    if engine == "grain":
        built = builder.build(x, y, engine=engine)
        yield "mapped", builder, built.map(lambda batch: batch)
    stream = kerasbatch.StreamBucketBuilder([6], batch_size=4, seed=0)
    if engine == "tf.data":
        import tensorflow as tf

        source = tf.data.Dataset.from_tensor_slices(
            (tf.ragged.constant([row.tolist() for row in x]), y)
        )
        yield "stream", stream, stream.build(source, lengths)
    else:
        source = [(row, target) for row, target in zip(x, y)]
        yield "stream", stream, stream.build(source, lengths, engine=engine)


def ran_out(caught):
    return sum("ran out of data" in str(w.message) for w in caught)


class FailAt(keras.callbacks.Callback):
    # A preemption mid-epoch, after the backup of its batch.
    def __init__(self, step):
        super().__init__()
        self.step, self.seen = step, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.step:
            raise RuntimeError("preempted")


def resumed(engine):
    builder = kerasbatch.BucketBuilder(num_buckets=2, batch_size=4, seed=0)
    train = builder.build(x, y, engine=engine)
    net, directory = model(), tempfile.mkdtemp()
    try:
        net.fit(
            train,
            epochs=3,
            verbose=0,
            callbacks=[
                kerasbatch.callbacks.BackupAndRestore(directory, train, save_freq=1),
                FailAt(len(train) + 3),  # batch 3 of epoch 1 (1-based)
            ],
        )
    except RuntimeError:
        pass
    backup = kerasbatch.callbacks.BackupAndRestore(directory, train, save_freq=1)
    steps = []
    trained = keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: steps.append(batch)
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = net.fit(train, epochs=3, verbose=0, callbacks=[backup, trained])
    return {
        "ran_out": ran_out(caught),
        "epochs": history.epoch,
        "steps": len(steps),
        "per_epoch": len(train),
    }


results = {}
net = model()
for engine in ("tf.data", "grain", "python"):
    for name, builder, dataset in datasets(engine):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            net.fit(dataset, epochs=2, verbose=0, validation_data=dataset)
            net.evaluate(dataset, verbose=0)
            predicted = net.predict(dataset, verbose=0)
        results[f"{engine} {name}"] = {
            "ran_out": ran_out(caught),
            "predicted": len(predicted),
        }
    if engine != "tf.data":  # resumes at epoch boundaries only
        results[f"{engine} resumed"] = resumed(engine)
print(json.dumps(results))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_ran_out_of_data_warning_on_any_engine(backend):
    results = run_on_backend(SCRIPT, backend, needs=("tensorflow", "grain"))
    for run, got in results.items():
        assert got["ran_out"] == 0, (run, got)
        if "predicted" in got:
            assert got["predicted"] == 22, (run, got)
    for engine in ("grain", "python"):  # one fit goes on to the last epoch
        got = results[f"{engine} resumed"]
        assert got["epochs"] == [1, 2], (engine, got)
        assert got["steps"] == 2 * got["per_epoch"] - 3, (engine, got)
