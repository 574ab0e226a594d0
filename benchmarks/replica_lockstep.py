"""MirroredStrategy on 2 logical CPU devices: bucket lock-step vs not.

`builder.distribute(strategy)` cuts every global batch of the plan into one
part per replica, all of the same padded length (lock-step). Without it,
each replica trains on batches of its own (here: the plan's batches dealt
out in turn, `shard(2, replica)`, each of the per-replica batch size), so at
a step one replica may get a batch of short sequences and the other one of
long sequences; both are padded to the longer (Keras 3 under
`MirroredStrategy` fails when the replicas of a step differ in shape: "Inputs
to operation AddN ... must have the same size and shape"). Both feed 32 elements per
replica and step from `BucketBuilder(num_buckets=16)` on the `lognormal`
workload; a GRU trains for `--epochs` epochs after a warm-up epoch, and the
figure is steps/s and elements/s of the timed epochs, measured in one
process, alternately.

Usage:

    .venv/bin/python benchmarks/replica_lockstep.py --elements 4000 --epochs 2
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

_cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    _cpu, [tf.config.LogicalDeviceConfiguration()] * 2
)

import keras  # noqa: E402
import numpy as np  # noqa: E402

import kerasbatch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads  # noqa: E402

PER_REPLICA = 32


def gru():
    model = keras.Sequential(
        [
            keras.layers.Embedding(1000, 32, mask_zero=True),
            keras.layers.GRU(64),
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer="adam", loss="mse")
    return model


def lock_step(strategy, x, y):
    builder = kerasbatch.BucketBuilder(
        num_buckets=16, batch_size=2 * PER_REPLICA, batch_multiple=2
    )
    builder.build(x, y)
    return builder, builder.distribute(strategy)


def independent(strategy, x, y):
    """Each replica its own batches (the plan's, dealt out in turn), so the
    two replicas of a step come from different buckets; both padded to the
    longer one, as replicas of one step must share a shape."""
    # Every batch 32 rows (a remainder filled with zero-weight rows): the
    # replicas of a step must match in rows too.
    builder = kerasbatch.BucketBuilder(
        num_buckets=16, batch_size=PER_REPLICA, batch_multiple=PER_REPLICA
    )
    train = builder.build(x, y)
    steps = len(train) // 2

    def to_length(batch, length):
        x_batch, *targets = batch
        extra = length - tf.shape(x_batch)[1]
        return tf.pad(x_batch, [[0, 0], [0, extra]]), *targets

    def one_step(first, second):
        length = tf.maximum(tf.shape(first[0])[1], tf.shape(second[0])[1])
        return tf.data.Dataset.from_tensors(to_length(first, length)).concatenate(
            tf.data.Dataset.from_tensors(to_length(second, length))
        )

    def per_pipeline(context):
        replicas = (train.shard(2, 0).take(steps), train.shard(2, 1).take(steps))
        return tf.data.Dataset.zip(replicas).flat_map(one_step)

    distributed = strategy.distribute_datasets_from_function(per_pipeline)
    return builder, distributed, steps


def timed_fit(strategy, dataset, builder, epochs, steps=None):
    with strategy.scope():
        model = gru()
    arguments = {"steps_per_epoch": steps} if steps else {}
    callbacks = [kerasbatch.callbacks.EpochReshuffle(builder)]
    model.fit(dataset, epochs=1, verbose=0, callbacks=callbacks, **arguments)
    before = int(model.optimizer.iterations.numpy())
    start = time.perf_counter()
    model.fit(dataset, epochs=epochs, verbose=0, callbacks=callbacks, **arguments)
    seconds = time.perf_counter() - start
    return (int(model.optimizer.iterations.numpy()) - before) / seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--elements", type=int, default=4000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    arguments = parser.parse_args()
    rng = np.random.default_rng(0)
    x = workloads.draw_lognormal_sequences(rng, arguments.elements)
    y = rng.normal(size=arguments.elements).astype("float32")
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    rates = {"lock-step (distribute)": [], "independent buckets": []}
    for _ in range(arguments.rounds):
        builder, dataset = lock_step(strategy, x, y)
        rates["lock-step (distribute)"].append(
            timed_fit(strategy, dataset, builder, arguments.epochs)
        )
        builder, dataset, steps = independent(strategy, x, y)
        rates["independent buckets"].append(
            timed_fit(strategy, dataset, builder, arguments.epochs, steps)
        )
    print(f"{'feeding':26} {'steps/s':>9} {'elements/s':>11}")
    for name, values in rates.items():
        rate = float(np.median(values))
        print(f"{name:26} {rate:9.2f} {rate * 2 * PER_REPLICA:11.0f}")
    ratio = np.median(rates["lock-step (distribute)"]) / np.median(
        rates["independent buckets"]
    )
    print(f"lock-step / independent: {ratio:.2f}x steps/s")


if __name__ == "__main__":
    main()
