"""Run by `test_distribute.py`: one worker of a `MultiWorkerMirroredStrategy`
job on loopback.

    python multi_worker_fit.py DIR INDEX PORT0,PORT1 PHASE[,PHASE...]

Every PHASE is a `model.fit` of its own, one after the other in the same
process (and strategy): `full` (2 epochs), `interrupted` (every worker kills
itself with SIGKILL after step `KILL_STEP` of epoch 1, after the epoch-0
backup; one that the other's death reaches first, in that step's all-reduce,
kills itself then; so it is the last phase) or `resumed` (a restart:
`BackupAndRestore` restores the model and epoch 1, `EpochReshuffle` gives it
the same batches). Every replica batch trained is written to
`DIR/<phase>-<INDEX>.jsonl` as `[epoch, step, tokens]`.
"""

import json
import os
import signal
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402
from test_built_datasets import BUILDERS, TRAIN_LENGTHS, Recorder, build  # noqa: E402

from kerasbatch.callbacks import EpochReshuffle, PaddingEfficiency  # noqa: E402

KILL_STEP = 2
KIND = "sorted"


class StepRecorder(Recorder):
    """Writes every batch it trains on (from the graph, by `tf.py_function`)."""

    def train_step(self, data):
        tf.py_function(self.write, [tokens_of(data)], [])
        logs = super(Recorder, self).train_step(data)
        # Keras 3 reduces the logs of a MultiWorkerMirroredStrategy step with
        # a mean over axis 0, which fails on scalars (tensorflow#72388).
        return {name: tf.reshape(value, [1]) for name, value in logs.items()}

    def write(self, values):
        self.log.write(json.dumps([self.epoch, self.step, values.numpy().tolist()]))
        self.log.write("\n")
        self.log.flush()
        self.step += 1


def tokens_of(data):
    x = data[0] if isinstance(data, tuple) else data
    return x["x"] if isinstance(x, dict) else x


class Steps(keras.callbacks.Callback):
    """Numbers the steps of every epoch; kills the worker in `interrupted`."""

    def __init__(self, phase):
        super().__init__()
        self.phase = phase

    def on_epoch_begin(self, epoch, logs=None):
        self.model.epoch, self.model.step = epoch, 0

    def on_train_batch_end(self, batch, logs=None):
        if self.phase == "interrupted" and self.model.epoch == 1 and batch == KILL_STEP:
            os.kill(os.getpid(), signal.SIGKILL)

    def on_epoch_end(self, epoch, logs=None):
        self.model.log.write(json.dumps([epoch, "logs", logs]) + "\n")
        self.model.log.flush()


def main(directory, index, ports, phases):
    os.environ["TF_CONFIG"] = json.dumps(
        {
            "cluster": {"worker": [f"127.0.0.1:{p}" for p in ports.split(",")]},
            "task": {"type": "worker", "index": int(index)},
        }
    )
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    for phase in phases.split(","):
        run(strategy, directory, index, phase)


def run(strategy, directory, index, phase):
    # x alone: Keras 3.15's fit under this strategy cannot build a model
    # from (x, y) batches (its all-reduce of the first batch takes one
    # tensor); 5 batches of 8 that 2 replicas share evenly.
    builder = BUILDERS[KIND]()
    build(builder, TRAIN_LENGTHS, 1)  # for filler rows
    per_replica = builder.distribute(strategy)
    with strategy.scope():
        model = StepRecorder()
        model(tf.zeros([1, 1], tf.int32))
        model.compile(optimizer="sgd")
    # The full fit backs up on its own; the resumed fit finds the backup of
    # the interrupted one.
    backup = os.path.join(directory, f"{'full-' if phase == 'full' else ''}backup")
    with open(os.path.join(directory, f"{phase}-{index}.jsonl"), "a") as log:
        model.log = log
        try:
            fit(model, per_replica, f"{backup}-{index}", builder, phase)
        except PEER_LOST:
            if phase != "interrupted":
                raise
            # The other worker killed itself first, while this one still
            # pulled its part of the step's all-reduce: a job loses all its
            # workers when one is preempted, so this one is preempted too.
            os.kill(os.getpid(), signal.SIGKILL)
        statistics = [builder.statistics(e).padding_efficiency for e in range(2)]
        log.write(json.dumps(["statistics", statistics]) + "\n")


#: How a collective fails when the other worker's process is gone.
PEER_LOST = (
    tf.errors.UnavailableError,
    tf.errors.CancelledError,
    tf.errors.AbortedError,
)


def fit(model, per_replica, backup, builder, phase):
    model.fit(
        per_replica,
        epochs=2,
        verbose=0,
        callbacks=[
            keras.callbacks.BackupAndRestore(backup),
            EpochReshuffle(builder),
            PaddingEfficiency(builder),
            Steps(phase),
        ],
    )


if __name__ == "__main__":
    main(*sys.argv[1:5])
