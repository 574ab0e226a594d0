"""Run by `test_resume.py`: a `model.fit` that a kill interrupts mid-epoch.

    python resumed_fit.py ENGINE:DATA:PHASE:DIR ...

runs each fit in turn, in this one process. DATA is `memory` or `disk`;
PHASE is one of

    full         3 epochs, uninterrupted
    interrupted  kills this process (SIGKILL) after step KILL_AT of epoch 1
    resumed      the same fit again: it restores the backup and trains to
                 the last epoch

With `disk`, the data is read by index from a token file in DIR (written
by the first run). Every run trains a tiny model with `kerasbatch.callbacks.BackupAndRestore`
(a backup every `SAVE_EVERY` batches) and appends the tokens of every batch
it trains to `DIR/<phase>.jsonl`, flushed as it goes; at the end it writes
the weights, the epochs the fit ran and the number of "ran out of data"
warnings Keras gave to `DIR/<phase>.npz`. Imports no TensorFlow.
"""

import json
import os
import signal
import sys
import warnings

import keras
import numpy as np
from test_fit_on_numpy_engines import LENGTHS, Recorder, sequences

import kerasbatch
import kerasbatch.io

SAVE_EVERY = 2
KILL_AT = 2  # steps of epoch 1 (0-based); the last backup was after step 1
EPOCHS = 3


class Log(keras.callbacks.Callback):
    def __init__(self, path, kill_at=None):
        super().__init__()
        self.file = open(path, "a")  # noqa: SIM115 (closed at train end)
        self.kill_at = kill_at
        self.epoch = None

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        tokens = self.model.trained[-1]
        self.file.write(json.dumps({"epoch": self.epoch, "tokens": tokens.tolist()}))
        self.file.write("\n")
        self.file.flush()
        if self.kill_at == (self.epoch, batch):
            os.kill(os.getpid(), signal.SIGKILL)

    def on_train_end(self, logs=None):
        self.file.close()


def main(engine, directory, phase, data="memory"):
    keras.utils.set_random_seed(0)
    # 6 batches an epoch (every step runs eagerly, and costs): a backup after
    # every other global step falls after step 1 of epoch 1, one before the kill.
    builder = kerasbatch.BucketBuilder(num_buckets=3, batch_size=8, seed=3)
    x = sequences(LENGTHS)
    if data == "disk":
        path = os.path.join(directory, "corpus")
        if not os.path.exists(f"{path}.idx"):
            kerasbatch.io.write_token_file(path, x, dtype="int32")
        x = kerasbatch.io.TokenFile(path)
    train = builder.build(x, np.zeros(len(LENGTHS), "float32"), engine=engine)
    model = Recorder()
    model(np.zeros((1, 1), "int32"))  # built, as BackupAndRestore requires
    model.compile(optimizer=keras.optimizers.Adam(0.01), run_eagerly=True)
    backup = kerasbatch.callbacks.BackupAndRestore(
        os.path.join(directory, "backup"), dataset=train, save_freq=SAVE_EVERY
    )
    kill_at = (1, KILL_AT) if phase == "interrupted" else None
    log = Log(os.path.join(directory, f"{phase}.jsonl"), kill_at)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(train, epochs=EPOCHS, callbacks=[backup, log], verbose=0)
    ran_out = [str(w.message) for w in caught if "ran out of data" in str(w.message)]
    weights = {f"w{i}": w for i, w in enumerate(model.get_weights())}
    np.savez(
        os.path.join(directory, f"{phase}.npz"),
        epochs=len(history.epoch),
        ran_out=len(ran_out),
        **weights,
    )


if __name__ == "__main__":
    for run in sys.argv[1:]:  # several fits, one start of Python, JAX and Keras
        engine, data, phase, directory = run.split(":", 3)
        main(engine, directory, phase, data)
