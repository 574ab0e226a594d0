"""`builder.distribute(strategy)`: per-replica batches in bucket lock-step.

`MirroredStrategy` needs logical devices set before TensorFlow starts, so
the fits run in a process of their own (`mirrored_fit.py`), bounded in time.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from test_built_datasets import TRAIN_LENGTHS, expected_counts, reference, token_counts

IN_MEMORY = ["padded", "sorted", "bucket", "packed", "chunk", "window"]
HERE = os.path.dirname(__file__)


@pytest.fixture(scope="module")
def mirrored():
    """What `mirrored_fit.py` recorded under `MirroredStrategy` (2 CPUs)."""
    completed = subprocess.run(
        [sys.executable, "mirrored_fit.py", *IN_MEMORY, "plain-bucket"],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    (line,) = [x for x in completed.stdout.splitlines() if x.startswith("RESULT ")]
    return json.loads(line.removeprefix("RESULT "))


def global_batches(steps, num_steps, epoch):
    """Per step of `epoch`: (replica 0's tokens, replica 1's tokens)."""
    part = steps[2 * num_steps * epoch : 2 * num_steps * (epoch + 1)]
    pairs = []
    for step in range(num_steps):
        by_replica = dict(part[2 * step : 2 * step + 2])
        assert sorted(by_replica) == [0, 1], "both replicas train every step"
        pairs.append((np.array(by_replica[0]), np.array(by_replica[1])))
    return pairs


@pytest.mark.parametrize("kind", [*IN_MEMORY, "plain-bucket"])
def test_replicas_train_in_lock_step_on_the_global_plan(mirrored, kind):
    recorded = mirrored[kind]
    plan_kind = kind.removeprefix("plain-")
    for epoch in range(2):
        expected, statistics = reference(plan_kind, TRAIN_LENGTHS, 1, epoch)
        assert len(recorded["steps"]) == 2 * 2 * len(expected)  # 2 epochs
        pairs = global_batches(recorded["steps"], len(expected), epoch)
        for (first, second), batch in zip(pairs, expected, strict=True):
            # One shape per step: the global batch's padded length ...
            assert first.shape[1:] == second.shape[1:] == batch.shape[1:]
            # ... and the global batch cut in two, in order.
            half = -(-len(batch) // 2)
            np.testing.assert_array_equal(first, batch[:half])
            np.testing.assert_array_equal(
                second.reshape(-1, *batch.shape[1:]), batch[half:]
            )
        trained = [part for pair in pairs for part in pair]
        if plan_kind != "window":  # windows may overlap; checked by the plan
            assert token_counts(trained) == expected_counts(TRAIN_LENGTHS, 1)
        assert recorded["padding_efficiency"][epoch] == statistics.padding_efficiency
        assert recorded["statistics"][epoch] == statistics.padding_efficiency


def test_distribute_names_what_is_wrong(mirrored):
    errors = mirrored["errors"]
    assert "call build(x, ...) first" in errors["before_build"]
    assert "bucket_batch_sizes[1] (bucket 1)=5" in errors["indivisible"]
    assert "multiple of 2 (e.g. 4 or 6)" in errors["indivisible"]
