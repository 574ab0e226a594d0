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


#: (engine, data): each configuration's fit is killed and resumed.
CONFIGS = [("python", "memory"), ("grain", "memory"), ("grain", "disk")]


def run(fits, cache):
    """One process running `fits` (`ENGINE:DATA:PHASE:DIR` each) in turn."""
    return subprocess.run(
        [sys.executable, "resumed_fit.py", *fits],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": HERE, **cache},
    )


@pytest.fixture(scope="module")
def fits(tmp_path_factory, compile_cache):
    """Every configuration's uninterrupted, killed and resumed fit in 4
    processes, not 6 (the start of Python, JAX and Keras is most of a
    process's time): the first runs the uninterrupted fits, then the first
    configuration's killed one; each later process starts fresh, as after a
    restart, resumes the fit killed before it, then runs the next killed one.
    `{config: (directory, killed process, resuming process)}`."""
    directories = {
        config: tmp_path_factory.mktemp("-".join(config)) for config in CONFIGS
    }

    def fit(config, phase):
        engine, data = config
        return f"{engine}:{data}:{phase}:{directories[config]}"

    chains = [[*(fit(config, "full") for config in CONFIGS)]]
    for config in CONFIGS:
        chains[-1].append(fit(config, "interrupted"))
        chains.append([fit(config, "resumed")])
    ended = [run(chain, compile_cache) for chain in chains]
    return {
        config: (directories[config], ended[index], ended[index + 1])
        for index, config in enumerate(CONFIGS)
    }


def trained(directory, phase):
    with open(os.path.join(directory, f"{phase}.jsonl")) as file:
        return [json.loads(line) for line in file]


# One worker runs the three (`run.sh` gives each module to one worker), so
# the module's fixture starts its processes once.
@pytest.mark.parametrize("config", CONFIGS, ids="-".join)
def test_a_killed_fit_resumes_with_the_uninterrupted_batches(config, fits):
    directory, killed, resumed = fits[config]
    # Its killed fit was the last of its process, and ran to the kill.
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert (directory / "full.npz").exists(), killed.stderr[-3000:]  # fit ended
    assert not (directory / "interrupted.npz").exists()
    # Its resumed fit was the first of a fresh process, and ended.
    assert (directory / "resumed.npz").exists(), resumed.stderr[-3000:]

    uninterrupted = trained(directory, "full")
    before = trained(directory, "interrupted")
    after = trained(directory, "resumed")
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
    ended = np.load(directory / "full.npz")
    again = np.load(directory / "resumed.npz")
    for name in ended.files:
        if name.startswith("w"):
            np.testing.assert_array_equal(ended[name], again[name], err_msg=name)
    # One fit resumes epoch 1 mid-way and goes on to the last epoch, quietly:
    # its shorter epoch did not run out of data.
    assert int(again["epochs"]) == 2
    assert int(ended["ran_out"]) == int(again["ran_out"]) == 0
