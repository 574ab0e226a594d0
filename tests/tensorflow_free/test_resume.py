"""A fit killed mid-epoch resumes with exactly the uninterrupted run's
batches and weights (`kerasbatch.callbacks.BackupAndRestore`), on the
`python` and `grain` engines (`resumed_fit.py`)."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from resumed_fit import KILL_AT, SAVE_EVERY

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory):
    """A JAX compilation cache the module's processes share: the fit runs
    eagerly, and every op of every batch shape it meets compiles; a later
    process reads what an earlier one compiled (the same programs: the same
    results, bit for bit) instead of compiling it again."""
    return {
        "JAX_COMPILATION_CACHE_DIR": str(tmp_path_factory.mktemp("jax_cache")),
        "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    }


def run(engine, directory, phase, data, cache):
    return subprocess.run(
        [sys.executable, "resumed_fit.py", engine, str(directory), phase, data],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": HERE, **cache},
    )


def trained(directory, phase):
    with open(os.path.join(directory, f"{phase}.jsonl")) as file:
        return [json.loads(line) for line in file]


@pytest.mark.parametrize(
    "engine, data",
    [("python", "memory"), ("grain", "memory"), ("grain", "disk")],
)
def test_a_killed_fit_resumes_with_the_uninterrupted_batches(
    engine, data, tmp_path, compile_cache
):
    # The uninterrupted fit, then the killed one, in one process (one start
    # of Python, JAX and Keras less); the resumed fit in a fresh one, as
    # after a restart.
    killed = run(engine, tmp_path, "full,interrupted", data, compile_cache)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert (tmp_path / "full.npz").exists(), killed.stderr[-3000:]  # fit ended
    resumed = run(engine, tmp_path, "resumed", data, compile_cache)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    uninterrupted = trained(tmp_path, "full")
    before = trained(tmp_path, "interrupted")
    after = trained(tmp_path, "resumed")
    steps = len(uninterrupted) // 3
    # The kill came after step KILL_AT of epoch 1, and the last backup (one
    # every SAVE_EVERY batches, counted across epochs) at most SAVE_EVERY
    # batches before: the resumed run trains from there on, mid-epoch.
    assert len(before) == steps + KILL_AT + 1
    assert before == uninterrupted[: len(before)]
    backed_up = len(uninterrupted) - len(after)
    assert len(before) - SAVE_EVERY <= backed_up < len(before)
    assert steps < backed_up  # mid-epoch 1: not at its start
    assert after == uninterrupted[backed_up:]
    # The weights end where the uninterrupted run's do.
    ended = np.load(tmp_path / "full.npz")
    again = np.load(tmp_path / "resumed.npz")
    for name in ended.files:
        if name.startswith("w"):
            np.testing.assert_array_equal(ended[name], again[name], err_msg=name)
    # One fit resumes epoch 1 mid-way and goes on to the last epoch, quietly:
    # its shorter epoch did not run out of data.
    assert int(again["epochs"]) == 2
    assert int(ended["ran_out"]) == int(again["ran_out"]) == 0
