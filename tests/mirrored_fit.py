"""Run by `test_distribute.py` in a process of its own: 2 epochs of `model.fit`
under `MirroredStrategy` on 2 logical CPU devices, for the builder kinds named
on the command line, on the first N of `TRAIN_LENGTHS`.

    python mirrored_fit.py N KIND [KIND ...]

Prints one JSON object: per kind, the tokens every replica trained on at
every step, the logged padding efficiency and the statistics of both epochs,
and the errors of bad requests."""

import json
import os
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

_cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    _cpu, [tf.config.LogicalDeviceConfiguration()] * 2
)

import keras  # noqa: E402
import numpy as np  # noqa: E402
from test_built_datasets import (  # noqa: E402
    KINDS,
    TRAIN_LENGTHS,
    Recorder,
    build,
    trained_tokens,
)

import kerasbatch  # noqa: E402
from kerasbatch.callbacks import EpochReshuffle, PaddingEfficiency  # noqa: E402


class ReplicaRecorder(Recorder):
    """Records `(step, replica, tokens)` for every replica's batch."""

    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()
        self.steps = []

    def train_step(self, data):
        context = tf.distribute.get_replica_context()
        replica = int(context.replica_id_in_sync_group)
        with self.lock:
            values = trained_tokens(data)
            self.steps.append((replica, values.shape, values.ravel().tolist()))
        return super().train_step(data)


def fit(kind, strategy, lengths):
    """`kind` names a builder; `plain-<kind>` fits its built dataset as is."""
    builder = KINDS[kind.removeprefix("plain-")]()
    if not kind.startswith("plain-"):
        # Batches the 2 replicas can share evenly: filler rows of zero
        # weight (the model ignores the targets they need).
        config = {**builder.get_config(), "batch_multiple": 2}
        builder = type(builder).from_config(config)
    train = build(builder, lengths, 1, with_targets=True)
    per_replica = train if kind.startswith("plain-") else builder.distribute(strategy)
    with strategy.scope():
        model = ReplicaRecorder()
        model(tf.zeros([1, 1], tf.int32))
        model.compile(optimizer="sgd", run_eagerly=True)
    history = model.fit(
        per_replica,
        epochs=2,
        verbose=0,
        callbacks=[EpochReshuffle(builder), PaddingEfficiency(builder)],
    )
    return {
        "steps": model.steps,
        "padding_efficiency": history.history["padding_efficiency"],
        "statistics": [
            builder.statistics(epoch).padding_efficiency for epoch in range(2)
        ],
    }


def fit_weighed(builder, strategy, recorder):
    """2 epochs of a `recorder` model on the builder's batches, distributed:
    `(model, history)`."""
    with strategy.scope():
        model = recorder()
        model.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    history = model.fit(
        builder.distribute(strategy),
        epochs=2,
        verbose=0,
        callbacks=[EpochReshuffle(builder), PaddingEfficiency(builder)],
    )
    return model, history


def uneven_first_batch(strategy):
    """2 epochs of one global batch of 3 rows (lengths 1, 2, 3): what each
    replica trained on."""
    builder = kerasbatch.PaddedBuilder(batch_size=4, shuffle=False, batch_multiple=2)
    builder.build([np.arange(1, n + 1) for n in (1, 2, 3)], np.zeros(3, "float32"))
    model, history = fit_weighed(builder, strategy, WeightRecorder)
    by_replica = sorted(model.steps)
    return {
        "shapes": [shape for _, shape, _ in by_replica],
        "weights": [weights for _, _, weights in by_replica],
        "padding_efficiency": history.history["padding_efficiency"],
    }


def padded_remainders(strategy):
    """2 epochs of `pad_to_bucket` buckets with `remainder="pad"` and
    `"even"` under the strategy: per setting, each replica's x shape and
    sample weights at every step, the logged padding efficiency and the
    statistics."""
    found = {}
    for remainder in ("pad", "even"):
        builder = kerasbatch.BucketBuilder(
            boundaries=[10, 20, 30],
            batch_size=6,
            pad_to_bucket=True,
            max_length=40,
            remainder=remainder,
            batch_multiple=2,
        )
        builder.build([np.arange(1, n + 1) for n in range(1, 41)], np.zeros(40))
        model, history = fit_weighed(builder, strategy, PooledWeightRecorder)
        found[remainder] = {
            "steps": [
                [replica, shape, weights] for replica, shape, weights in model.steps
            ],
            "padding_efficiency": history.history["padding_efficiency"],
            "statistics": [
                builder.statistics(epoch).padding_efficiency for epoch in range(2)
            ],
            "distinct_shapes": builder.statistics().distinct_shapes,
        }
    return found


class WeightRecorder(keras.Model):
    """Records `(replica, x shape, sample weights)` of every replica's batch."""

    def __init__(self):
        super().__init__()
        self.dense = keras.layers.Dense(1)
        self.lock = threading.Lock()
        self.steps = []

    def call(self, x):
        return self.dense(keras.ops.cast(x, "float32"))[:, 0]

    def train_step(self, data):
        x, _, weights = data
        replica = int(tf.distribute.get_replica_context().replica_id_in_sync_group)
        with self.lock:
            self.steps.append((replica, list(x.shape), np.asarray(weights).tolist()))
        return super().train_step(data)


class PooledWeightRecorder(WeightRecorder):
    """A `WeightRecorder` for batches of any padded length."""

    def call(self, x):
        x = keras.ops.cast(x, "float32")
        return self.dense(keras.ops.mean(x, axis=1, keepdims=True))[:, 0]


def errors(strategy):
    """The messages of bad requests."""
    found = {}
    try:
        kerasbatch.BucketBuilder(num_buckets=2).distribute(strategy)
    except RuntimeError as error:
        found["before_build"] = str(error)
    builder = kerasbatch.BucketBuilder(boundaries=[5], bucket_batch_sizes=[8, 5])
    builder.build([np.ones(n) for n in range(1, 12)])
    try:
        builder.distribute(strategy)
    except ValueError as error:
        found["indivisible"] = str(error)
    builder = kerasbatch.PaddedBuilder(batch_size=4)
    builder.build([np.ones(n) for n in range(1, 4)])  # one batch of 3
    try:
        builder.distribute(strategy)
    except ValueError as error:
        found["uneven"] = str(error)
    return found


def main(num_elements, *kinds):
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    lengths = TRAIN_LENGTHS[: int(num_elements)]
    results = {kind: fit(kind, strategy, lengths) for kind in kinds}
    results["errors"] = errors(strategy)
    results["uneven_first_batch"] = uneven_first_batch(strategy)
    results["padded_remainders"] = padded_remainders(strategy)
    print("RESULT " + json.dumps(results))


if __name__ == "__main__":
    main(*sys.argv[1:])
