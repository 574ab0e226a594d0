"""Run by `test_multi_host.py`: one of N JAX processes on loopback.

    python multi_host_fit.py ENGINE PORT INDEX COUNT OUT

Joins the coordinator at 127.0.0.1:PORT as process INDEX of COUNT, builds
the same dataset as every other process, trains a `DataParallel` model on
it for two epochs (a real multi-process `model.fit`), and writes the
tokens of every batch part it fed (`OUT.npz`). Imports no TensorFlow.
"""

import os
import sys

os.environ["KERAS_BACKEND"] = "jax"

import jax  # noqa: E402

engine, port, index, count, out = sys.argv[1:]
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(
    coordinator_address=f"127.0.0.1:{port}",
    num_processes=int(count),
    process_id=int(index),
    initialization_timeout=60,
)

import keras  # noqa: E402
import numpy as np  # noqa: E402
from test_fit_on_numpy_engines import LENGTHS, sequences, trained  # noqa: E402

import kerasbatch  # noqa: E402

# kerasbatch feeds each process its part: Keras must not shard it again.
keras.distribution.set_distribution(
    keras.distribution.DataParallel(auto_shard_dataset=False)
)
builder = kerasbatch.BucketBuilder(
    num_buckets=3, batch_size=8, batch_multiple=2, seed=5, remainder="pad"
)
train = builder.build(
    sequences(LENGTHS), np.zeros(len(LENGTHS), "float32"), engine=engine
)
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
    out,
    count=len(parts),
    loss=np.array(history.history["loss"]),
    efficiency=np.array(history.history["padding_efficiency"]),
    **{f"part{k}": part for k, part in enumerate(parts)},
)
jax.distributed.shutdown()
