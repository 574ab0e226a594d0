"""Run by `test_distribute.py` in a process of its own: 2 epochs of `model.fit`
on the JAX backend under `keras.distribution.DataParallel` over 2 CPU
devices, for the builder kinds named on the command line, each with
`batch_multiple=2`. Prints one JSON object: per kind, every training step's
labels and sample weights (the rows as trained on) and how many devices
their array was split across, the statistics of both epochs, and what
building without `batch_multiple` says."""

import json
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"
)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402
from test_built_datasets import (  # noqa: E402
    KINDS,
    TRAIN_LENGTHS,
    sequences,
    stream,
)

import kerasbatch  # noqa: E402
from kerasbatch.callbacks import EpochReshuffle, PaddingEfficiency  # noqa: E402

FIRST_ID = 1
#: Eager JAX compiles every operation once per batch shape, so fewer
#: elements (fewer batches, fewer shapes) make most of the saving; 24 still
#: give every kind several batches, and odd ones to fill.
LENGTHS = TRAIN_LENGTHS[:24]


class LabelRecorder(keras.Model):
    """Records the labels, sample weights and device count of every training
    batch."""

    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(2000, 4)
        self.pool = keras.layers.GlobalAveragePooling1D()
        self.out = keras.layers.Dense(1)
        self.steps = []

    def call(self, x):
        x = x["x"] if isinstance(x, dict) else x
        return self.out(self.pool(self.embed(x % 2000)))

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, **kw):
        """The weighted mean over rows of `y_pred ** 2` (packed rows weigh
        by their heaviest slot): filler rows weigh 0."""
        weights = ops.max(ops.reshape(sample_weight, [ops.shape(y_pred)[0], -1]), 1)
        total = ops.sum(weights * ops.square(y_pred[:, 0]))
        return total / ops.maximum(ops.sum(weights), 1.0)

    def train_step(self, state, data):
        x, y, weights = data
        rows = len(y)
        labels = np.asarray(y).reshape(rows, -1)
        weights = np.asarray(weights).reshape(rows, -1)
        tokens = np.asarray(x["x"] if isinstance(x, dict) else x)
        real = (weights > 0).any(axis=1)  # filler rows copy a real row
        self.steps.append(
            {
                "positions": int(tokens.size),
                "real_positions": int(np.count_nonzero(tokens[real])),
                "labels": labels[weights > 0].tolist(),
                "weights": sorted(set(weights.ravel().tolist())),
                "rows": rows,
                "real_rows": int((weights > 0).any(axis=1).sum()),
                "devices": len(y.sharding.device_set),
            }
        )
        return super().train_step(state, data)


def inputs(builder):
    """Element i: id `FIRST_ID + i` repeated, labelled with its id."""
    labels = np.arange(FIRST_ID, FIRST_ID + len(LENGTHS), dtype="int32")
    if isinstance(builder, kerasbatch.StreamBucketBuilder):
        x = stream(LENGTHS, FIRST_ID)
        dataset = tf.data.Dataset.zip(x, tf.data.Dataset.from_tensor_slices(labels))
        return builder.build(dataset, lengths=LENGTHS)
    return builder.build(sequences(LENGTHS, FIRST_ID), labels)


def expected_labels(builder, epoch):
    """The labels an epoch trains on, each as often as the plan holds it."""
    if isinstance(builder, kerasbatch.StreamBucketBuilder):
        indices = np.arange(len(LENGTHS))
    else:
        indices = builder.plan(epoch).indices
    if isinstance(builder, kerasbatch.ChunkBuilder):
        indices = builder.chunk_table.sequence[indices]
    return sorted((FIRST_ID + indices).tolist())


def fit(kind):
    builder = KINDS[kind]()
    filled = type(builder).from_config({**builder.get_config(), "batch_multiple": 2})
    train = inputs(filled)
    model = LabelRecorder()
    model.compile(optimizer="sgd", run_eagerly=True)
    efficiency = PaddingEfficiency(filled)
    history = model.fit(
        train,
        epochs=2,
        verbose=0,
        callbacks=[EpochReshuffle(filled), efficiency],
    )
    try:
        inputs(builder)
        refused = None
    except ValueError as error:
        refused = str(error)
    return {
        "steps": model.steps,
        "steps_per_epoch": len(train),
        "expected": [expected_labels(filled, e) for e in (0, 1)],
        "logged": [float(v) for v in history.history["padding_efficiency"]],
        "statistics": [
            {
                "efficiency": filled.statistics(epoch=e).padding_efficiency,
                "elements": filled.statistics(epoch=e).num_elements,
            }
            for e in (0, 1)
        ],
        "loss_finite": bool(np.isfinite(history.history["loss"]).all()),
        "refused": refused,
    }


def main():
    devices = keras.distribution.list_devices("cpu")
    assert len(devices) == 2, devices
    keras.distribution.set_distribution(
        keras.distribution.DataParallel(devices=devices)
    )
    print(json.dumps({kind: fit(kind) for kind in sys.argv[1:]}))


if __name__ == "__main__":
    main()
