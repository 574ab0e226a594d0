"""Run by `test_preemption.py`: training that a kill interrupts mid-epoch.

    python preempted_fit.py DIR PHASE [DIR PHASE ...]

    full         2 epochs, uninterrupted
    interrupted  epoch 0, then epoch 1 up to step STOP; the process kills
                 itself (SIGKILL) after the last builder kind (so it must
                 be the last phase)
    resumed      restores model, optimizer and iterator, finishes epoch 1

One process may run several phases, each in a directory of its own, one
after the other (`full` and `interrupted` share one start of TensorFlow).

Every kind trains a tiny model step by step on one builder's dataset and
saves model, optimizer and the dataset's iterator every `SAVE_EVERY` steps
of epoch 1 (`tf.train.CheckpointManager`). Each trained batch is written to
`DIR/<phase>.jsonl` as it is trained (flushed, so a kill loses nothing).
"""

import hashlib
import json
import os
import signal
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from test_built_datasets import (  # noqa: E402
    BUILDERS,
    TRAIN_LENGTHS,
    Recorder,
    build,
    build_from_loader,
    records_loader,
    tokens,
)

#: One kind per pipeline whose iterator a checkpoint saves: padded and
#: sorted batch as bucket does (one pipeline, other plans), so bucket
#: stands for the three; the stream read from TFRecord files as "loader".
KINDS = ["bucket", "packed", "chunk", "window", "stream", "loader"]
SAVE_EVERY = 2
STOP = 3  # epoch 1 stops after this many steps; the last save was at step 2


def dataset_of(kind, directory):
    if kind != "loader":
        builder = BUILDERS[kind]()
        return builder, build(builder, TRAIN_LENGTHS, 1)
    loader = records_loader(os.path.join(directory, "records"), TRAIN_LENGTHS, 1, 2)
    builder = BUILDERS["stream"]()
    return builder, build_from_loader(builder, loader)


def digest(batch):
    values = tokens(batch)
    return f"{values.shape}:{hashlib.sha1(values.tobytes()).hexdigest()}"


def run(kind, directory, phase, log):
    tf.keras.utils.set_random_seed(0)
    builder, dataset = dataset_of(kind, directory)
    model = Recorder()
    model(tf.zeros([1, 1], tf.int32))
    model.compile(optimizer="sgd", run_eagerly=True)

    def train(iterator, epoch, first_step=0, stop=None):
        for step, batch in enumerate(iterator, start=first_step):
            model.train_on_batch(batch)
            log.write(json.dumps([kind, epoch, step, digest(batch)]) + "\n")
            log.flush()
            if step % SAVE_EVERY == SAVE_EVERY - 1:
                manager.save(checkpoint_number=step + 1)
            if stop is not None and step + 1 == stop:
                return

    checkpoint = tf.train.Checkpoint(model=model, optimizer=model.optimizer)
    manager = tf.train.CheckpointManager(
        checkpoint, os.path.join(directory, kind), max_to_keep=1
    )
    if phase == "resumed":
        builder.set_epoch(1)
        iterator = iter(dataset)
        checkpoint.iterator = iterator
        checkpoint.restore(manager.latest_checkpoint).assert_consumed()
        train(iterator, 1, first_step=int(manager.latest_checkpoint.split("-")[-1]))
    else:
        for epoch in range(2):
            builder.set_epoch(epoch)
            iterator = iter(dataset)
            checkpoint.iterator = iterator
            stop = STOP if phase == "interrupted" and epoch == 1 else None
            train(iterator, epoch, stop=stop)
    weights = np.concatenate([np.ravel(w) for w in model.get_weights()])
    log.write(json.dumps([kind, "weights", weights.tolist()]) + "\n")
    log.flush()


def main(directory, phase):
    with open(os.path.join(directory, f"{phase}.jsonl"), "a") as log:
        for kind in KINDS:
            run(kind, directory, phase, log)
    if phase == "interrupted":
        os.kill(os.getpid(), signal.SIGKILL)  # preempted: no clean shutdown


if __name__ == "__main__":
    for i in range(1, len(sys.argv), 2):
        main(sys.argv[i], sys.argv[i + 1])
