"""The Engines guide's first example (`docs/guides/engines.md`), run as a
script on JAX and Grain, killed mid-epoch and run again: its one `fit` resumes at the batch after the last
backup and trains to the last epoch, with exactly the batches and final
weights of an uninterrupted run, and no warning.

The example runs unchanged, through `runpy`, in a subprocess whose
`keras.Model.fit` adds a callback that logs each trained batch (and kills
the process at a given batch) and saves the final weights; `train_step`
hands each batch's values to it from inside JAX's compiled step
(`jax.debug.callback`). The uninterrupted run and the killed one share a
process (one start of JAX and Keras, not two): the uninterrupted run first,
as in a fresh process, then the killed one after `clear_session` (the layer
names of a fresh process, which its backup records); the restart is a new
process, as after a preemption.
"""

import importlib.util
import json
import os
import pathlib
import re
import signal
import subprocess
import sys

import numpy as np
import pytest

GUIDE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "guides" / "engines.md"
KILL_AT = (3, 5)  # (epoch, batch), a few batches after a backup

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(name) is None for name in ("jax", "grain")),
    reason="the example runs on JAX and Grain",
)

RUNNER = """
import json
import os
import runpy
import signal
import sys
import warnings

import jax
import keras
import numpy as np

example, runs = sys.argv[1], json.loads(sys.argv[2])  # [[folder, log, kill_at]]
warnings.simplefilter("always")  # every warning Keras gives, on stderr
trained = []  # the token ids of every batch train_step takes


class Log(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        jax.effects_barrier()  # the step's callback has run
        with open(log_path, "a") as file:
            record = {"epoch": self.epoch, "batch": batch, "x": trained[-1]}
            file.write(json.dumps(record) + "\\n")
        if kill_at == [self.epoch, batch]:
            os.kill(os.getpid(), signal.SIGKILL)


keras_train_step = keras.Model.train_step
keras_fit = keras.Model.fit


def record(x):
    trained.append(np.asarray(x).tolist())


def train_step(self, state, data):
    jax.debug.callback(record, data[0], ordered=True)
    return keras_train_step(self, state, data)


def fit(self, *arguments, callbacks=(), **options):
    history = keras_fit(self, *arguments, callbacks=[*callbacks, Log()], **options)
    weights = {f"w{i}": w for i, w in enumerate(self.get_weights())}
    np.savez(log_path + ".npz", epochs=history.epoch, **weights)
    return history


keras.Model.train_step = train_step
keras.Model.fit = fit
for folder, log_path, kill_at in runs:  # the last may kill the process
    os.chdir(folder)  # the example's "backup" folder
    keras.utils.clear_session()  # layer names as in a fresh process
    keras.utils.set_random_seed(0)  # the same first weights in every run
    trained.clear()
    runpy.run_path(example, run_name="__main__")
"""


def guide_example():
    """The first Python code block of the Engines guide."""
    text = GUIDE.read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.DOTALL).group(1)
    assert "BackupAndRestore" in code and "model.fit(" in code
    return code


def run(directory, *phases):
    """One process running the example once per `(phase, kill_at)`, in the
    phase's folder (the killed run's restart: the folder of the killed)."""
    runs = [
        [str(directory / phase.split("-")[0]), str(directory / f"{phase}.jsonl"), at]
        for phase, at in phases
    ]
    return subprocess.run(
        [
            sys.executable,
            str(directory / "runner.py"),
            str(directory / "example.py"),
            json.dumps(runs),
        ],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"},
    )


def logged(directory, phase):
    lines = (directory / f"{phase}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_the_engines_guide_example_resumes_a_killed_fit_to_its_last_epoch(tmp_path):
    (tmp_path / "example.py").write_text(guide_example())
    (tmp_path / "runner.py").write_text(RUNNER)
    for folder in ("full", "killed"):
        (tmp_path / folder).mkdir()

    full = run(tmp_path, ("full", None), ("killed", KILL_AT))
    assert full.returncode == -signal.SIGKILL, full.stderr[-3000:]
    assert (tmp_path / "full.jsonl.npz").is_file()  # the full run ended
    assert (tmp_path / "killed" / "backup").is_dir()  # what the restart finds
    resumed = run(tmp_path, ("killed-resumed", None))
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    uninterrupted = logged(tmp_path, "full")
    before = logged(tmp_path, "killed")
    after = logged(tmp_path, "killed-resumed")
    assert before == uninterrupted[: len(before)]
    assert (before[-1]["epoch"], before[-1]["batch"]) == KILL_AT
    # The restart trains on from the batch after the last backup (one every
    # 5 batches), in the middle of the killed epoch...
    first = after[0]
    assert (first["epoch"], first["batch"]) == (KILL_AT[0], 0)
    backed_up = len(uninterrupted) - len(after)
    assert len(before) - 5 <= backed_up < len(before)
    assert uninterrupted[backed_up]["epoch"] == KILL_AT[0]
    assert uninterrupted[backed_up - 1]["epoch"] == KILL_AT[0]  # not at its start
    # ... with the uninterrupted run's batches, to the last of epoch 9 ...
    assert [step["x"] for step in after] == [
        step["x"] for step in uninterrupted[backed_up:]
    ]
    assert after[-1]["epoch"] == uninterrupted[-1]["epoch"] == 9
    # ... in the one fit of the script, which ends with the same weights.
    ended = np.load(tmp_path / "full.jsonl.npz")
    again = np.load(tmp_path / "killed-resumed.jsonl.npz")
    assert ended["epochs"].tolist() == list(range(10))
    assert again["epochs"].tolist() == list(range(KILL_AT[0], 10))
    for name in ended.files:
        if name.startswith("w"):
            np.testing.assert_array_equal(ended[name], again[name], err_msg=name)
    # Quietly: no "ran out of data" (the resumed epoch did not run out), no
    # other warning for the user (numpy's deprecations inside Keras aside).
    for run_ in (full, resumed):
        assert "ran out of data" not in run_.stderr, run_.stderr[-3000:]
        assert "UserWarning" not in run_.stderr, run_.stderr[-3000:]
