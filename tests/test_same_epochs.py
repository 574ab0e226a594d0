"""The same epochs on every backend: the first epoch of a `fit` is epoch 0.

Keras on JAX and torch takes the first batch of a fresh iterator to build
the model, then starts again; that look must not take an epoch. Each
backend runs the script on its own Keras (`backend_process`: this test
process's backend here, another in a process of that backend), on the
tf.data engine, without `EpochReshuffle`.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from backend_process import run_on_backend

import kerasbatch

BACKENDS = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}

SCRIPT = """
import json
import keras
import numpy as np
import kerasbatch
from kerasbatch.builders import builder_of

x = [np.full((n, 1), 1.0, "float32") for n in range(1, 14)]
y = np.arange(len(x), dtype="float32")  # element ids


class Recording(keras.Model):
    # Records the element ids of every batch trained on.
    def __init__(self):
        super().__init__()
        self.pool = keras.layers.GlobalAveragePooling1D()
        self.out = keras.layers.Dense(1)
        self.recorded = []

    def call(self, x):
        return self.out(self.pool(x))

    def train_step(self, *arguments):  # JAX passes the state first
        ids = keras.ops.convert_to_numpy(arguments[-1][1])
        self.recorded.append(ids.astype(int).tolist())
        return super().train_step(*arguments)


def run(first):
    builder = kerasbatch.BucketBuilder([4, 8], batch_size=4, seed=0)
    dataset = builder.build(x, y)
    served = builder_of(dataset)
    model = Recording()  # not built: Keras looks at a first batch
    model.compile("sgd", "mse", run_eagerly=True)
    before = None
    if first:
        getattr(model, first)(dataset, verbose=0)
        before = served.last_started_epoch
    model.recorded = []
    started = []
    record = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: started.append(served.last_started_epoch)
    )
    model.fit(dataset, epochs=3, verbose=0, callbacks=[record])
    planned = []
    for epoch in started:
        plan = served.plan(epoch)
        planned += [b.tolist() for b in np.split(plan.indices, plan.batch_splits[1:-1])]
    return {
        "before": before,
        "started": started,
        "next": served.epoch,
        "trained_as_planned": model.recorded == planned,
    }


def run_stream(known):
    import tensorflow as tf

    ragged = tf.ragged.constant([row.tolist() for row in x], ragged_rank=1)
    source = tf.data.Dataset.from_tensor_slices((ragged, y))
    if not known:  # a cardinality tf.data does not know
        source = source.filter(lambda *_: True)
    builder = kerasbatch.StreamBucketBuilder([4, 8], batch_size=4, seed=0)
    dataset = builder.build(source)
    served = builder_of(dataset)
    model = Recording()
    model.compile("sgd", "mse", run_eagerly=True)
    started = []
    record = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: started.append(served.last_started_epoch)
    )
    model.fit(dataset, epochs=3, verbose=0, callbacks=[record])
    return {"started": started, "next": served.epoch}


runs = {first or "fit": run(first) for first in (None, "predict", "evaluate")}
runs["stream"] = run_stream(known=True)
runs["stream of unknown length"] = run_stream(known=False)
print(json.dumps(runs))
"""


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_the_first_epoch_of_a_fit_is_0_on_every_backend(backend):
    runs = run_on_backend(SCRIPT, backend)
    expected = {"before": None, "started": [0, 1, 2], "next": 3}
    assert runs["fit"] == {**expected, "trained_as_planned": True}
    for stream in ("stream", "stream of unknown length"):
        assert runs[stream] == {"started": [0, 1, 2], "next": 3}, stream
    # A whole predict or evaluate pass is epoch 0, whatever Keras looked at.
    for first in ("predict", "evaluate"):
        expected = {"before": 0, "started": [1, 2, 3], "next": 4}
        assert runs[first] == {**expected, "trained_as_planned": True}, first


@pytest.mark.backend
def test_an_iterator_given_up_part_way_repeats_its_epoch_where_keras_looks():
    # On JAX and torch, where Keras looks at a first batch, an iterator
    # given up part-way repeats its epoch; on TensorFlow, which never looks,
    # every iteration is the next epoch (no cost per batch).
    exact = keras.backend.backend() != "tensorflow"
    x = [np.ones(n, "float32") for n in range(1, 13)]
    dataset = kerasbatch.BucketBuilder([4, 8], batch_size=4, seed=0).build(x)
    served = kerasbatch.builders.builder_of(dataset)
    peeked = next(iter(dataset))
    assert (served.last_started_epoch, served.epoch) == (0, 0 if exact else 1)
    batches = list(dataset)
    if exact:
        np.testing.assert_array_equal(batches[0], peeked)
        assert (served.last_started_epoch, served.epoch) == (0, 1)
    else:
        assert (served.last_started_epoch, served.epoch) == (1, 2)
    for stream_builder in (kerasbatch.StreamBucketBuilder([4, 8], batch_size=4),):
        stream = stream_builder.build(
            tf.data.Dataset.from_tensor_slices(tf.ragged.constant(x)), None
        )
        served = kerasbatch.builders.builder_of(stream)
        next(iter(stream))
        assert served.epoch == (0 if exact else 1)
