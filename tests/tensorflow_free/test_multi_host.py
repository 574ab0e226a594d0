"""Multi-host JAX on loopback: two processes train one `DataParallel` model,
each feeding its part of every global batch, in bucket lock-step
(`multi_host_fit.py`)."""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest
from test_fit_on_numpy_engines import LENGTHS, sequences, trained

import kerasbatch
import kerasbatch.io
from kerasbatch.builders import builder_of
from kerasbatch.engines.numpy.planned import PlannedBatches
from kerasbatch.engines.processes import part_of

HERE = os.path.dirname(os.path.abspath(__file__))
PROCESSES = 2


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize(
    "engine, on_disk", [("grain", False), ("python", False), ("grain", True)]
)
def test_each_process_feeds_its_part_of_every_global_batch(engine, on_disk, tmp_path):
    pytest.importorskip("jax")
    port = free_port()
    token_file = []
    if on_disk:  # read by index: each process reads its rows only
        token_file = [str(tmp_path / "corpus")]
        kerasbatch.io.write_token_file(token_file[0], sequences(LENGTHS), "int32")
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "multi_host_fit.py",
                engine,
                str(port),
                str(index),
                str(PROCESSES),
                str(tmp_path / f"process{index}.npz"),
                *token_file,
            ],
            cwd=HERE,
            env={**os.environ, "PYTHONPATH": HERE, "KERAS_BACKEND": "jax"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(PROCESSES)
    ]
    try:
        outputs = [worker.communicate(timeout=240) for worker in workers]
    finally:
        for worker in workers:  # a hang is a failure, never a stuck suite
            worker.kill()
    for worker, (_, stderr) in zip(workers, outputs, strict=True):
        assert worker.returncode == 0, stderr[-3000:]
    fed = [np.load(tmp_path / f"process{index}.npz") for index in range(PROCESSES)]

    # The global batches, planned in one process with the same settings.
    builder = kerasbatch.BucketBuilder(
        num_buckets=3, batch_size=8, batch_multiple=2, seed=5, remainder="pad"
    )
    dataset = builder.build(
        sequences(LENGTHS), np.zeros(len(LENGTHS), "float32"), engine="python"
    )
    batches = PlannedBatches(builder_of(dataset))
    steps = batches.num_batches
    assert int(fed[0]["count"]) == int(fed[1]["count"]) == 2 * steps
    for step in range(2 * steps):
        epoch, k = divmod(step, steps)
        whole = trained(batches.batch(epoch, k))
        parts = [process[f"part{step}"] for process in fed]
        assert all(part.shape == parts[0].shape for part in parts)  # lock-step
        np.testing.assert_array_equal(np.concatenate(parts), whole)
    if on_disk:
        # Each process read the elements of its rows only, once per batch.
        reads = [int(process["reads"]) for process in fed]
        expected = [0] * PROCESSES
        for step in range(2 * steps):
            epoch, k = divmod(step, steps)
            rows = batches._make.row_elements(batches._served.plan(epoch), k)
            for index in range(PROCESSES):
                part = part_of(rows, index, PROCESSES)
                expected[index] += len(np.unique(np.concatenate(part)))
        # At most those (a thread that reads the same rows twice in a row
        # keeps them), and about half each.
        assert all(0.8 * e <= r <= e for r, e in zip(reads, expected, strict=True))
        for read in reads:
            assert 0.4 * sum(reads) <= read <= 0.6 * sum(reads), reads
    # One model: both processes log the same losses and padding efficiency.
    np.testing.assert_array_equal(fed[0]["loss"], fed[1]["loss"])
    np.testing.assert_allclose(
        fed[0]["efficiency"],
        [builder_of(dataset).statistics(e).padding_efficiency for e in (0, 1)],
    )
