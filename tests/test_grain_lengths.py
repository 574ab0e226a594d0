"""Keras' Grain adapter takes a kerasbatch dataset's length, and only that
(`kerasbatch.engines.grain_lengths`): other Grain datasets keep Keras' own
answer, and Keras' look at the first batches moves no epoch on."""

import importlib.util

import keras
import numpy as np
import pytest

import kerasbatch

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("grain") is None, reason="needs Grain"
)


def adapter(dataset):
    from keras.src.trainers.data_adapters import grain_dataset_adapter

    return grain_dataset_adapter.GrainDatasetAdapter(dataset)


def sequences(count):
    return [np.full(3, i + 1, "int32") for i in range(count)]


def test_keras_reads_the_length_of_kerasbatch_datasets_only():
    import grain

    builder = kerasbatch.BucketBuilder(num_buckets=2, batch_size=4, seed=0)
    built = builder.build(sequences(24), engine="grain")
    assert adapter(built).num_batches == len(built) == 6
    assert adapter(built.map(lambda batch: batch * 2)).num_batches == 6
    assert adapter(built.batch(2)).num_batches is None  # other batches
    foreign = grain.MapDataset.range(8).batch(2).to_iter_dataset()
    assert adapter(foreign).num_batches is None  # Keras' own answer

    stream = kerasbatch.StreamBucketBuilder([2], batch_size=4, seed=0)
    lengths = [3] * 10
    assert (
        adapter(stream.build(sequences(10), lengths, engine="grain")).num_batches == 3
    )
    assert adapter(stream.build(sequences(10), engine="grain")).num_batches is None


def test_install_is_idempotent_and_keeps_keras_own_answer():
    from keras.src.trainers.data_adapters import grain_dataset_adapter

    from kerasbatch.engines import grain_lengths

    keras_adapter = grain_dataset_adapter.GrainDatasetAdapter
    assert grain_lengths.install()
    installed = keras_adapter.__dict__["num_batches"]
    assert grain_lengths.install()
    assert keras_adapter.__dict__["num_batches"] is installed

    class Knows:  # an adapter that knows a length itself (a later Keras)
        def __init__(self, dataset):
            self._dataset = dataset

        @property
        def num_batches(self):
            return 99

        def _get_dataset_info(self, dataset):
            return None

    class Other:  # an adapter unlike Keras 3.15's
        num_batches = None

    built = kerasbatch.SortedBuilder(batch_size=2).build(sequences(6), engine="grain")
    assert grain_lengths.install(Knows)
    assert Knows(built).num_batches == 99
    assert not grain_lengths.install(Other)
    assert Other.num_batches is None


@pytest.mark.backend
@pytest.mark.parametrize("num_batches", [1, 2, 3])
def test_keras_look_at_the_first_batches_moves_no_epoch_on(num_batches):
    x = sequences(4 * num_batches)
    y = np.zeros(len(x), "float32")
    dataset = kerasbatch.SortedBuilder(batch_size=4).build(x, y, engine="grain")
    served = kerasbatch.builders.builder_of(dataset)
    adapter(dataset)  # looks at 2 batches: all of an epoch of 1 or 2
    assert served.epoch == 0
    assert len(list(dataset)) == num_batches  # a whole pass is an epoch
    assert served.epoch == 1

    model = keras.Sequential([keras.layers.Embedding(30, 2), keras.layers.Dense(1)])
    model(np.zeros((1, 1), "int32"))
    model.compile("sgd", "mse")
    started = []
    record = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: started.append(served.last_started_epoch)
    )
    model.fit(dataset, epochs=3, verbose=0, callbacks=[record])
    # On JAX and torch, Keras also takes the first batch of a fit's first
    # iteration to build its metrics: of a 1-batch dataset, a whole epoch.
    looked = num_batches == 1 and keras.backend.backend() != "tensorflow"
    first = 2 if looked else 1
    assert started == [first, first + 1, first + 2]
