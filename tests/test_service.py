"""Builders on the tf.data service: dispatcher and workers in processes of
their own on loopback (`service_server.py`), bounded in time."""

import dataclasses
import time

import numpy as np
import pytest
import tensorflow as tf
from loopback import free_ports, tf_data_service
from test_built_datasets import (
    BUILDERS,
    TRAIN_LENGTHS,
    build,
    build_from_loader,
    expected_counts,
    recorder,
    records_loader,
    sequences,
    token_counts,
    tokens,
)

import kerasbatch
from kerasbatch.callbacks import EpochReshuffle, PaddingEfficiency
from kerasbatch.io import add_record_counts, load_manifest, write_dataset

#: One in-memory kind per batch function the workers run: padded and
#: sorted batch as bucket does (one pipeline, other plans).
IN_MEMORY = ["bucket", "packed", "chunk", "window"]


def free_port():
    return free_ports(1)[0]


@pytest.fixture(scope="module")
def two_workers():
    with tf_data_service(num_workers=2) as address:
        yield address


@pytest.fixture(scope="module")
def one_worker():
    with tf_data_service(num_workers=1) as address:
        yield address


def reference_epochs(kind, epochs):
    """`reference(kind, TRAIN_LENGTHS, 1, epoch)[0]` for every epoch, from
    one builder used only for them (a build for every epoch costs more than
    the epochs' batches)."""
    builder = BUILDERS[kind]()
    dataset = build(builder, TRAIN_LENGTHS, 1)
    batches = []
    for epoch in range(epochs):
        builder.set_epoch(epoch)
        batches.append([tokens(batch) for batch in dataset])
    return batches


def batch_key(batch):
    return batch.shape, batch.tobytes()


@pytest.mark.parametrize("kind", IN_MEMORY)
def test_distributed_epoch_makes_every_batch_once_across_two_workers(two_workers, kind):
    builder = BUILDERS[kind]()
    train = build(builder, TRAIN_LENGTHS, 1)
    remote = builder.distribute_with_service(two_workers, epochs=2)
    arrived = [tokens(batch) for batch in remote]
    expected = reference_epochs(kind, 2)
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
    expected = [b for epoch in reference_epochs("packed", 2) for b in epoch]
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


def padding_efficiency(batches):
    real = sum(int(np.count_nonzero(b)) for b in batches)
    return real / sum(b.size for b in batches)


def test_stream_files_are_sharded_across_workers_and_counted_at_the_client(
    two_workers, tmp_path
):
    loader = records_loader(tmp_path / "records", TRAIN_LENGTHS, 1)
    builder = BUILDERS["stream"]()
    build_from_loader(builder, loader)
    remote = builder.distribute_with_service(two_workers, epochs=2)
    model = recorder()
    history = model.fit(
        remote,
        epochs=2,
        verbose=0,
        callbacks=[EpochReshuffle(builder), PaddingEfficiency(builder, dataset=remote)],
    )
    per_epoch = len(model.trained) // 2
    for epoch in range(2):
        trained = model.trained[epoch * per_epoch : (epoch + 1) * per_epoch]
        assert token_counts(trained) == expected_counts(TRAIN_LENGTHS, 1)
        logged = history.history["padding_efficiency"][epoch]
        assert logged == pytest.approx(padding_efficiency(trained), abs=1e-12)
    statistics = builder.statistics(dataset=remote)
    assert statistics.num_elements == len(TRAIN_LENGTHS)
    assert statistics.num_batches == per_epoch


def test_stream_modes_that_cannot_shard_are_refused(tmp_path):
    loader = records_loader(tmp_path / "records", TRAIN_LENGTHS[:9], 1)
    builder = BUILDERS["stream"]()
    build_from_loader(builder, loader)
    address = f"grpc://127.0.0.1:{free_port()}"
    sharding = tf.data.experimental.service.ShardingPolicy
    for mode in (sharding.FILE, "distributed_epoch"):
        with pytest.raises(ValueError, match="ShardingPolicy.HINT or"):
            builder.distribute_with_service(address, processing_mode=mode)


def test_stream_epochs_past_the_registered_ones_are_a_clear_error(
    two_workers, tmp_path
):
    loader = records_loader(tmp_path / "records", TRAIN_LENGTHS[:9], 1)
    builder = BUILDERS["stream"]()
    build_from_loader(builder, loader)
    remote = builder.distribute_with_service(two_workers, epochs=1, initial_epoch=3)
    builder.set_epoch(3)
    assert sum(len(tokens(b)) for b in remote) == 9
    with pytest.raises(tf.errors.InvalidArgumentError, match="larger epochs="):
        list(remote)  # epoch 4 was not registered


def test_a_stream_without_files_is_shared_out_by_elements(two_workers):
    from test_built_datasets import stream

    builder = BUILDERS["stream"]()
    builder.build(stream(TRAIN_LENGTHS, 1), lengths=TRAIN_LENGTHS)
    remote = builder.distribute_with_service(two_workers, epochs=1)
    arrived = [tokens(batch) for batch in remote]
    assert token_counts(arrived) == expected_counts(TRAIN_LENGTHS, 1)
    assert builder.statistics(dataset=remote).num_elements == len(TRAIN_LENGTHS)


def test_a_shardable_dataset_must_match_the_dataset():
    from test_built_datasets import stream

    builder = BUILDERS["stream"]()
    other = stream(TRAIN_LENGTHS, 1).map(lambda x: tf.cast(x, tf.float32))
    with pytest.raises(ValueError, match="shardable must be the same dataset"):
        builder.build(stream(TRAIN_LENGTHS, 1), lengths=TRAIN_LENGTHS, shardable=other)


def test_lengths_that_do_not_match_fail_on_the_workers(two_workers):
    from test_built_datasets import stream

    given = np.minimum(TRAIN_LENGTHS, TRAIN_LENGTHS.max() - 1)  # the longest cut
    builder = BUILDERS["stream"]()
    builder.build(stream(TRAIN_LENGTHS, 1), lengths=given)
    remote = builder.distribute_with_service(two_workers, epochs=1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="do not match"):
        list(remote)


def test_a_zlib_dataset_needs_record_counts_on_the_workers(two_workers, tmp_path):
    """Workers run no Python, so the zlib stream's own check cannot run
    there: without record counts reading fails naming the fix."""
    directory = tmp_path / "records"
    records = [{"tokens": s} for s in sequences(TRAIN_LENGTHS[:9], 1)]
    manifest = write_dataset(directory, records, num_shards=2, compression="zlib")
    dataclasses.replace(manifest, record_counts=None).save(directory)
    builder = BUILDERS["stream"]()
    build_from_loader(builder, records_loader(directory, TRAIN_LENGTHS[:9], 1))
    remote = builder.distribute_with_service(two_workers, epochs=1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="add_record_counts"):
        list(remote)
    add_record_counts(directory, verbose=0)
    assert load_manifest(directory).record_counts
    builder = BUILDERS["stream"]()
    build_from_loader(builder, records_loader(directory, TRAIN_LENGTHS[:9], 1))
    remote = builder.distribute_with_service(two_workers, epochs=1)
    arrived = [tokens(batch) for batch in remote]
    assert token_counts(arrived) == expected_counts(TRAIN_LENGTHS[:9], 1)
