"""Builders on the tf.data service: dispatcher and workers in processes of
their own on loopback (`service_server.py`), bounded in time."""

import contextlib
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from test_built_datasets import (
    BUILDERS,
    TRAIN_LENGTHS,
    build,
    expected_counts,
    recorder,
    reference,
    token_counts,
    tokens,
)

import kerasbatch
from kerasbatch.callbacks import PaddingEfficiency

IN_MEMORY = ["padded", "sorted", "bucket", "packed", "chunk", "window"]
HERE = os.path.dirname(__file__)
START_TIMEOUT = 120


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def tf_data_service(num_workers):
    """A dispatcher and `num_workers` workers, each in its own process; yields
    the dispatcher's address and stops them all."""
    port = free_port()
    processes = []

    def start(role, argument):
        process = subprocess.Popen(
            [sys.executable, "service_server.py", role, str(argument)],
            cwd=HERE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        processes.append(process)
        return process

    try:
        start("dispatcher", port)
        workers = [start("worker", port) for _ in range(num_workers)]
        deadline = time.monotonic() + START_TIMEOUT
        for process in [processes[0], *workers]:
            line = ""
            while time.monotonic() < deadline and not line:
                line = process.stdout.readline().strip()
            assert line == "ready", "a tf.data service process did not start"
        yield f"grpc://127.0.0.1:{port}"
    finally:
        for process in processes:
            process.stdin.close()  # the server exits when its stdin closes
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def two_workers():
    with tf_data_service(num_workers=2) as address:
        yield address


@pytest.fixture(scope="module")
def one_worker():
    with tf_data_service(num_workers=1) as address:
        yield address


def batch_key(batch):
    return batch.shape, batch.tobytes()


@pytest.mark.parametrize("kind", IN_MEMORY)
def test_distributed_epoch_makes_every_batch_once_across_two_workers(two_workers, kind):
    builder = BUILDERS[kind]()
    train = build(builder, TRAIN_LENGTHS, 1)
    remote = builder.distribute_with_service(two_workers, epochs=2)
    arrived = [tokens(batch) for batch in remote]
    expected = [reference(kind, TRAIN_LENGTHS, 1, epoch)[0] for epoch in range(2)]
    assert len(arrived) == len(remote) == 2 * len(train)
    # Every batch of both epochs exactly once, in an order the workers chose.
    assert sorted(map(batch_key, arrived)) == sorted(
        batch_key(batch) for epoch in expected for batch in epoch
    )
    if kind != "window":  # windows may overlap; checked by the batches
        doubled = {i: 2 * n for i, n in expected_counts(TRAIN_LENGTHS, 1).items()}
        assert token_counts(arrived) == doubled


def test_fit_on_the_service_trains_and_reports_each_epoch(two_workers):
    builder = BUILDERS["bucket"]()
    train = build(builder, TRAIN_LENGTHS, 1)
    remote = builder.distribute_with_service(two_workers, epochs=3, initial_epoch=1)
    model = recorder()
    history = model.fit(
        remote,
        epochs=3,
        steps_per_epoch=len(train),
        verbose=0,
        callbacks=[PaddingEfficiency(builder, dataset=remote)],
    )
    assert len(model.trained) == 3 * len(train)
    assert token_counts(model.trained) == {
        i: 3 * n for i, n in expected_counts(TRAIN_LENGTHS, 1).items()
    }
    assert history.history["padding_efficiency"] == [
        builder.statistics(epoch).padding_efficiency for epoch in (1, 2, 3)
    ]
    assert builder.last_started_epoch == 3


def test_parallel_epochs_with_one_worker_keeps_the_plans_order(one_worker):
    builder = BUILDERS["packed"]()
    train = build(builder, TRAIN_LENGTHS, 1)
    remote = builder.distribute_with_service(
        one_worker, processing_mode="parallel_epochs", num_workers=1, epochs=2
    )
    arrived = [tokens(batch) for batch in remote]
    expected = [
        b for e in range(2) for b in reference("packed", TRAIN_LENGTHS, 1, e)[0]
    ]
    assert len(arrived) == len(expected) == 2 * len(train)
    for actual, batch in zip(arrived, expected, strict=True):
        np.testing.assert_array_equal(actual, batch)


def test_modes_that_cannot_keep_exactly_once_are_refused():
    builder = BUILDERS["bucket"]()
    build(builder, TRAIN_LENGTHS, 1)
    address = f"grpc://127.0.0.1:{free_port()}"
    with pytest.raises(ValueError, match="each element N times"):
        builder.distribute_with_service(address, processing_mode="parallel_epochs")
    with pytest.raises(ValueError, match="num_workers=2"):
        builder.distribute_with_service(
            address, processing_mode="parallel_epochs", num_workers=2
        )
    with pytest.raises(ValueError, match="cannot keep every epoch exactly once"):
        builder.distribute_with_service(address, processing_mode="data")


def test_an_unreachable_dispatcher_fails_fast_naming_its_address():
    builder = BUILDERS["sorted"]()
    build(builder, TRAIN_LENGTHS, 1)
    address = f"grpc://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    with pytest.raises(ConnectionError, match=address):
        builder.distribute_with_service(address, timeout=5)
    assert time.monotonic() - started < 10
    with pytest.raises(ValueError, match="grpc://host:port"):
        builder.distribute_with_service("no port here")


def test_service_needs_a_build_and_sane_epochs():
    with pytest.raises(RuntimeError, match="call build"):
        kerasbatch.SortedBuilder(4).distribute_with_service("grpc://127.0.0.1:1")
    builder = BUILDERS["sorted"]()
    build(builder, TRAIN_LENGTHS, 1)
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="epochs must be a positive int"):
            builder.distribute_with_service("grpc://127.0.0.1:1", epochs=bad)
    with pytest.raises(ValueError, match="initial_epoch"):
        builder.distribute_with_service("grpc://127.0.0.1:1", initial_epoch=-1)


def test_statistics_answer_for_the_served_dataset(one_worker):
    builder = BUILDERS["padded"]()
    train = build(builder, TRAIN_LENGTHS, 1)
    remote = builder.distribute_with_service(
        one_worker, processing_mode="parallel_epochs", num_workers=1
    )
    assert kerasbatch.builders.builder_of(remote) is kerasbatch.builders.builder_of(
        train
    )
    assert builder.statistics(dataset=remote, epoch=0) == builder.statistics(
        dataset=train, epoch=0
    )
