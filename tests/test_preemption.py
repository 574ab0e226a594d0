"""A process killed mid-epoch and restarted from its checkpoint of model,
optimizer and dataset iterator trains on exactly the batches, and ends with
exactly the weights, of an uninterrupted run (`preempted_fit.py`)."""

import collections
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from preempted_fit import KINDS, SAVE_EVERY, STOP

HERE = os.path.dirname(__file__)


def start_phases(*directories_and_phases):
    return subprocess.Popen(
        [sys.executable, "preempted_fit.py", *map(str, directories_and_phases)],
        cwd=HERE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process, expected_returncode):
    try:
        _, errors = process.communicate(timeout=600)  # ~10x a quiet run
    finally:
        process.kill()  # a hang fails the test and leaves nothing running
    assert process.returncode == expected_returncode, errors[-3000:]


def logged(directory, phase):
    steps = collections.defaultdict(list)
    weights = {}
    with open(directory / f"{phase}.jsonl") as log:
        for line in log:
            kind, epoch, *rest = json.loads(line)
            if epoch == "weights":
                weights[kind] = np.array(rest[0])
            else:
                steps[kind].append((epoch, *rest))
    return steps, weights


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The uninterrupted run, then the interrupted one, in one process
    (directories of their own: each writes its checkpoints; the kill ends
    the process); then the resumed one in a new process."""
    full_directory = tmp_path_factory.mktemp("full")
    directory = tmp_path_factory.mktemp("preempted")
    first = start_phases(full_directory, "full", directory, "interrupted")
    finish(first, -signal.SIGKILL)
    finish(start_phases(directory, "resumed"), 0)
    return {
        "full": logged(full_directory, "full"),
        "interrupted": logged(directory, "interrupted"),
        "resumed": logged(directory, "resumed"),
    }


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_killed_mid_epoch_resumes_with_the_same_batches(runs, kind):
    full, full_weights = runs["full"]
    interrupted, _ = runs["interrupted"]
    resumed, resumed_weights = runs["resumed"]
    epoch_1 = [step for step in full[kind] if step[0] == 1]
    assert len(epoch_1) > STOP  # the kill fell inside epoch 1
    assert interrupted[kind] == full[kind][: len(full[kind]) - len(epoch_1) + STOP]
    last_save = STOP - STOP % SAVE_EVERY
    assert resumed[kind] == epoch_1[last_save:]
    np.testing.assert_allclose(resumed_weights[kind], full_weights[kind], rtol=1e-6)
