"""`builder.distribute(strategy)`: per-replica batches in bucket lock-step.

`MirroredStrategy` needs logical devices set before TensorFlow starts, so
the fits run in a process of their own (`mirrored_fit.py`), bounded in time.
"""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from loopback import free_ports
from multi_worker_fit import KILL_STEP, KIND
from test_built_datasets import (
    KINDS,
    TRAIN_LENGTHS,
    build,
    expected_counts,
    token_counts,
    trained_tokens,
)

#: One kind per batch function (padded and sorted batch as bucket does,
#: and `sorted` is distributed by the multi-worker test below), the token
#: budget for odd batch sizes; the same under `MirroredStrategy` and JAX's
#: `DataParallel`.
DISTRIBUTED = ["bucket", "budget", "packed", "chunk", "window", "stream"]
DATA_PARALLEL = DISTRIBUTED
#: The elements `mirrored_fit.py` trains on: every eager step under the
#: strategy costs, and 24 still give every kind several batches, odd ones
#: among them to fill (as in `data_parallel_fit.py`).
MIRRORED_LENGTHS = TRAIN_LENGTHS[:24]
HERE = os.path.dirname(__file__)


@pytest.fixture(scope="module")
def mirrored():
    """What `mirrored_fit.py` recorded under `MirroredStrategy` (2 CPUs)."""
    completed = subprocess.run(
        [
            sys.executable,
            "mirrored_fit.py",
            str(len(MIRRORED_LENGTHS)),
            *DISTRIBUTED,
            "plain-bucket",
        ],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=600,  # about 10 times the fits on a quiet 2-core machine
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    (line,) = [x for x in completed.stdout.splitlines() if x.startswith("RESULT ")]
    return json.loads(line.removeprefix("RESULT "))


def reference(kind, lengths, first_id, epochs=2, batch_multiple=1):
    """Per epoch, the batches and statistics from a builder used only for
    them (with `batch_multiple` and targets: what `distribute` feeds 2
    replicas, every batch with an even number of rows). One build serves
    every epoch: a build costs more than its epochs' batches."""
    builder = KINDS[kind]()
    if batch_multiple > 1:
        config = {**builder.get_config(), "batch_multiple": batch_multiple}
        builder = type(builder).from_config(config)
    dataset = build(builder, lengths, first_id, with_targets=batch_multiple > 1)
    found = []
    for epoch in range(epochs):
        builder.set_epoch(epoch)
        batches = [trained_tokens(batch) for batch in dataset]
        found.append((batches, builder.statistics()))
    return found


def global_batches(steps, num_steps, epoch):
    """Per step of `epoch`: (replica 0's tokens, replica 1's tokens)."""
    part = steps[2 * num_steps * epoch : 2 * num_steps * (epoch + 1)]
    pairs = []
    for step in range(num_steps):
        by_replica = {r: (shape, v) for r, shape, v in part[2 * step : 2 * step + 2]}
        assert sorted(by_replica) == [0, 1], "both replicas train every step"
        pairs.append(
            tuple(
                np.array(values, "int32").reshape(shape)
                for shape, values in (by_replica[0], by_replica[1])
            )
        )
    return pairs


@pytest.mark.parametrize("kind", [*DISTRIBUTED, "plain-bucket"])
def test_replicas_train_in_lock_step_on_the_global_plan(mirrored, kind):
    recorded = mirrored[kind]
    plan_kind = kind.removeprefix("plain-")
    # distributed with batch_multiple=2; Keras splits the plain dataset's
    # batches as they are.
    batch_multiple = 1 if kind.startswith("plain-") else 2
    epochs = reference(plan_kind, MIRRORED_LENGTHS, 1, batch_multiple=batch_multiple)
    for epoch, (expected, statistics) in enumerate(epochs):
        assert len(recorded["steps"]) == 2 * 2 * len(expected)  # 2 epochs
        pairs = global_batches(recorded["steps"], len(expected), epoch)
        for (first, second), batch in zip(pairs, expected, strict=True):
            # One shape per step: the global batch's padded length ...
            assert first.shape[1:] == second.shape[1:] == batch.shape[1:]
            # ... and the global batch cut in two, in order.
            half = -(-len(batch) // 2)
            np.testing.assert_array_equal(first, batch[:half])
            np.testing.assert_array_equal(second, batch[half:])
        trained = [part for pair in pairs for part in pair]
        if plan_kind != "window":  # windows may overlap; checked by the plan
            assert token_counts(trained) == expected_counts(MIRRORED_LENGTHS, 1)
        assert recorded["padding_efficiency"][epoch] == statistics.padding_efficiency
        assert recorded["statistics"][epoch] == statistics.padding_efficiency


@pytest.mark.parametrize("remainder", ["pad", "even"])
def test_padded_remainders_give_each_replica_one_shape_per_bucket(mirrored, remainder):
    recorded = mirrored["padded_remainders"][remainder]
    steps = recorded["steps"]
    shapes = {tuple(shape) for _, shape, _ in steps}
    # Every bucket's batches have one number of rows, which the replicas
    # share evenly: one per-replica shape per bucket, in both epochs.
    assert len(shapes) == recorded["distinct_shapes"] == 4
    assert len({shape[1] for shape in shapes}) == 4
    # Every element once per epoch (weight 1), filler rows weigh 0.
    weights = [w for _, _, replica_weights in steps for w in replica_weights]
    assert sorted(set(weights)) == [0.0, 1.0]
    assert weights.count(1.0) == 2 * 40
    assert recorded["padding_efficiency"] == recorded["statistics"]


@pytest.fixture(scope="module")
def data_parallel():
    """What `data_parallel_fit.py` recorded on JAX under `DataParallel`."""
    pytest.importorskip("jax", reason="the JAX backend needs jax (pip install jax)")
    completed = subprocess.run(
        [sys.executable, "data_parallel_fit.py", *DATA_PARALLEL],
        cwd=HERE,
        capture_output=True,
        text=True,
        timeout=600,  # about 15 times the fit on a quiet 2-core machine
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind", DATA_PARALLEL)
def test_jax_data_parallel_trains_every_element_once_in_even_batches(
    data_parallel, kind
):
    recorded = data_parallel[kind]
    steps, num_steps = recorded["steps"], recorded["steps_per_epoch"]
    assert len(steps) == 2 * num_steps
    for step in steps:
        # Every batch is split across both devices, filler rows weigh 0.
        assert step["rows"] % 2 == 0 and step["devices"] == 2
        assert set(step["weights"]) <= {0.0, 1.0}
        assert step["rows"] - step["real_rows"] in (0, 1)
    for epoch in range(2):
        part = steps[epoch * num_steps : (epoch + 1) * num_steps]
        labels = sorted(label for step in part for label in step["labels"])
        assert labels == recorded["expected"][epoch]  # each element once
        # The statistics count filler rows as padding, and the callback
        # logs them.
        real = sum(step["real_positions"] for step in part)
        positions = sum(step["positions"] for step in part)
        efficiency = recorded["statistics"][epoch]["efficiency"]
        assert efficiency == pytest.approx(real / positions, abs=1e-12)
        assert recorded["logged"][epoch] == pytest.approx(efficiency, abs=1e-12)
    assert recorded["loss_finite"]
    odd = any(step["real_rows"] % 2 for step in steps)
    if kind == "stream" or odd:  # a stream's remainders may have any size
        assert "Set batch_multiple=2" in recorded["refused"]
    else:
        assert recorded["refused"] is None


def test_jax_data_parallel_fills_the_odd_batches(data_parallel):
    filled = [
        step["rows"] - step["real_rows"]
        for recorded in data_parallel.values()
        for step in recorded["steps"]
    ]
    assert sum(filled) > 0  # the check above saw filler rows


def test_distribute_names_what_is_wrong(mirrored):
    errors = mirrored["errors"]
    assert "call build(...) first" in errors["before_build"]
    assert "bucket_batch_sizes[1] (bucket 1)=5" in errors["indivisible"]
    assert "multiple of 2 (e.g. 4 or 6)" in errors["indivisible"]
    assert "2 replicas each take an equal part" in errors["uneven"]
    assert "batches of 3 rows. Set batch_multiple=2" in errors["uneven"]


def test_a_first_batch_the_replicas_share_with_a_filler_row(mirrored):
    """Keras builds the model from the first per-replica batch of every
    fit, averaged across replicas: parts of one shape, or it fails."""
    recorded = mirrored["uneven_first_batch"]
    assert recorded["shapes"] == [[2, 3], [2, 3]] * 2  # 3 rows + 1 filler
    assert recorded["weights"] == [[1.0, 1.0]] * 2 + [[1.0, 0.0]] * 2
    assert recorded["padding_efficiency"] == [0.5, 0.5]  # 6 of 4 × 3


def run_workers(directory, phases):
    """Both workers of a MultiWorkerMirroredStrategy job, in processes of
    their own, fitting once per phase; returns per phase, per worker its
    `[epoch, step, tokens]` records and its other lines."""
    ports = ",".join(map(str, free_ports(2)))
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "multi_worker_fit.py",
                str(directory),
                str(i),
                ports,
                ",".join(phases),
            ],
            cwd=HERE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    try:
        errors = [worker.communicate(timeout=480)[1] for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    expected = -signal.SIGKILL if phases[-1] == "interrupted" else 0
    for worker, error in zip(workers, errors, strict=True):
        assert worker.returncode == expected, error[-3000:]
    found = {}
    for phase in phases:
        found[phase] = []
        for i in range(2):
            with open(directory / f"{phase}-{i}.jsonl") as log:
                found[phase].append([json.loads(line) for line in log])
    return found


@pytest.fixture(scope="module")
def multi_worker(tmp_path_factory):
    """The full fit, then the interrupted one, in the same 2 processes (one
    TensorFlow start each, not one per fit); then the resumed fit in 2 new
    ones."""
    directory = tmp_path_factory.mktemp("multi_worker")
    runs = run_workers(directory, ["full", "interrupted"])
    runs.update(run_workers(directory, ["resumed"]))
    return runs


def steps_of(records, epoch):
    return [r[2] for r in records if r[0] == epoch and isinstance(r[1], int)]


def test_multi_worker_fit_is_exactly_once_and_in_lock_step(multi_worker):
    workers = multi_worker["full"]
    for epoch, (expected, statistics) in enumerate(reference(KIND, TRAIN_LENGTHS, 1)):
        first, second = (steps_of(records, epoch) for records in workers)
        assert len(first) == len(second) == len(expected)  # equal step counts
        for a, b, batch in zip(first, second, expected, strict=True):
            a, b = np.array(a), np.array(b).reshape(-1, *batch.shape[1:])
            assert a.shape[1:] == b.shape[1:] == batch.shape[1:]  # lock-step
            np.testing.assert_array_equal(np.concatenate([a, b]), batch)
        trained = [np.array(s) for s in first + second]
        assert token_counts(trained) == expected_counts(TRAIN_LENGTHS, 1)
        for records in workers:
            (logs,) = [r[2] for r in records if r[0] == epoch and r[1] == "logs"]
            assert logs["padding_efficiency"] == statistics.padding_efficiency


def test_a_killed_multi_worker_job_resumes_with_the_uninterrupted_batches(
    multi_worker,
):
    for full, interrupted, resumed in zip(*multi_worker.values(), strict=True):
        assert steps_of(interrupted, 0) == steps_of(full, 0)
        assert steps_of(interrupted, 1) == steps_of(full, 1)[: KILL_STEP + 1]
        # BackupAndRestore restarts the interrupted epoch (Keras keeps no
        # position inside it); EpochReshuffle makes it the same epoch.
        assert steps_of(resumed, 0) == []
        assert steps_of(resumed, 1) == steps_of(full, 1)
