"""Run by `test_multi_host.py`: one of N JAX processes on loopback.

    python multi_host_fit.py PORT INDEX COUNT OUT_DIR TOKEN_FILE

Joins the coordinator at 127.0.0.1:PORT as process INDEX of COUNT, then,
for each configuration of `CONFIGS` in turn (the engine, and whether the
data is read by index from TOKEN_FILE), builds the same dataset as every
other process, trains a fresh `DataParallel` model on it for two epochs (a
real multi-process `model.fit`), and writes the tokens of every batch part
it fed (`OUT_DIR/<engine>-<memory|disk>-process<INDEX>.npz`). Read from
the token file, `.npz` also counts the sequences this process read. One
process runs every configuration: JAX's start and the coordinator's
handshake are paid once. Imports no TensorFlow.
"""

import os
import sys

#: (engine, data): every configuration a process trains, in this order.
CONFIGS = [("grain", "memory"), ("python", "memory"), ("grain", "disk")]


def output(directory, engine, data, index):
    return os.path.join(directory, f"{engine}-{data}-process{index}.npz")


def fit(engine, data, index, directory, token_file):
    import keras
    import numpy as np
    from test_fit_on_numpy_engines import LENGTHS, sequences, trained

    import kerasbatch
    import kerasbatch.io

    builder = kerasbatch.BucketBuilder(
        num_buckets=3, batch_size=8, batch_multiple=2, seed=5, remainder="pad"
    )
    if data == "disk":

        class CountedReads(kerasbatch.io.TokenFile):
            """A token file that counts the sequences read."""

            reads = 0

            def __getitems__(self, indices):
                CountedReads.reads += len(indices)
                return super().__getitems__(indices)

        x = CountedReads(token_file)
    else:
        x = sequences(LENGTHS)
    train = builder.build(x, np.zeros(len(LENGTHS), "float32"), engine=engine)
    if data == "disk":
        CountedReads.reads = 0  # after element 0, read for the structure
    parts = []
    keras.utils.set_random_seed(0)  # the same initial weights on every process
    model = keras.Sequential(
        [
            keras.layers.Embedding(100, 4),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dense(1),
        ]
    )
    model.compile("sgd", "mse")
    # What this process feeds: its parts of epochs 0 and 1, in order.
    for epoch in (0, 1):
        builder.set_epoch(epoch)
        if engine == "grain":
            parts.extend(trained(batch) for batch in train)
        else:
            parts.extend(trained(train[k]) for k in range(len(train)))
    loop_reads = CountedReads.reads if data == "disk" else -1
    builder.set_epoch(0)
    history = model.fit(
        train,
        epochs=2,
        verbose=0,
        callbacks=[
            kerasbatch.callbacks.EpochReshuffle(builder),
            kerasbatch.callbacks.PaddingEfficiency(builder),
        ],
    )
    np.savez(
        output(directory, engine, data, index),
        count=len(parts),
        reads=loop_reads,
        loss=np.array(history.history["loss"]),
        efficiency=np.array(history.history["padding_efficiency"]),
        **{f"part{k}": part for k, part in enumerate(parts)},
    )


if __name__ == "__main__":
    os.environ["KERAS_BACKEND"] = "jax"
    import jax

    port, index, count, directory, token_file = sys.argv[1:]
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}",
        num_processes=int(count),
        process_id=int(index),
        initialization_timeout=60,
    )

    import keras

    # kerasbatch feeds each process its part: Keras must not shard it again.
    keras.distribution.set_distribution(
        keras.distribution.DataParallel(auto_shard_dataset=False)
    )
    for engine, data in CONFIGS:
        fit(engine, data, int(index), directory, token_file)
    jax.distributed.shutdown()
