"""Multi-host JAX on loopback: two processes train one `DataParallel` model,
each feeding its part of every global batch, in bucket lock-step
(`multi_host_fit.py`)."""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest
from multi_host_fit import CONFIGS, output
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


@pytest.fixture(scope="module")
def fed_parts(tmp_path_factory):
    """Two processes, each training every configuration of `CONFIGS` in turn
    (JAX's start and the coordinator's handshake once, not per
    configuration): the directory of their `.npz` files."""
    pytest.importorskip("jax")
    directory = tmp_path_factory.mktemp("multi_host")
    token_file = str(directory / "corpus")  # read by index: each its rows only
    kerasbatch.io.write_token_file(token_file, sequences(LENGTHS), "int32")
    port = free_port()
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "multi_host_fit.py",
                str(port),
                str(index),
                str(PROCESSES),
                str(directory),
                token_file,
            ],
            cwd=HERE,
            env={
                **os.environ,
                "PYTHONPATH": HERE,
                "KERAS_BACKEND": "jax",
                # The configurations train the same model on the same shapes:
                # the later ones read its compiled steps from the cache.
                "JAX_COMPILATION_CACHE_DIR": str(directory / "jax_cache"),
                "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            },
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(PROCESSES)
    ]
    try:
        outputs = [worker.communicate(timeout=480) for worker in workers]
    finally:
        for worker in workers:  # a hang is a failure, never a stuck suite
            worker.kill()
    return directory, [
        (worker.returncode, stderr)
        for worker, (_, stderr) in zip(workers, outputs, strict=True)
    ]


# One worker runs the three (`run.sh` gives each module to one worker), so
# the module's fixture starts the two processes once.
@pytest.mark.parametrize(
    "engine, on_disk", [("grain", False), ("python", False), ("grain", True)]
)
def test_each_process_feeds_its_part_of_every_global_batch(engine, on_disk, fed_parts):
    directory, ended = fed_parts
    for returncode, stderr in ended:
        assert returncode == 0, stderr[-3000:]
    data = "disk" if on_disk else "memory"
    assert (engine, data) in CONFIGS
    fed = [
        np.load(output(directory, engine, data, index)) for index in range(PROCESSES)
    ]

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
