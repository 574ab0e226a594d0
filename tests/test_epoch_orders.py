"""Epoch orders: NumPy plans and in-graph batches agree bit for bit, and
built datasets call no Python (serialisable, checkpointable mid-epoch)."""

import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from conftest import make_sequences
from hypothesis import given, settings
from hypothesis import strategies as st

import kerasbatch
from kerasbatch.engines import served
from kerasbatch.engines.tf_data import orders as epochs
from kerasbatch.planning import orders
from kerasbatch.planning import plan as plan_lib


@settings(max_examples=30, deadline=None)
@given(
    groups=st.lists(st.integers(0, 5), min_size=1, max_size=60),
    sizes=st.lists(st.integers(1, 7), min_size=6, max_size=6),
    one_size=st.booleans(),
    remainder=st.sampled_from(["keep", "drop", "pad", "even"]),
    shuffle_units=st.booleans(),
    shuffle_batches=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
    epoch=st.integers(0, 2**20),
    chunk_units=st.sampled_from([None, 1, 2, 5]),
    slice_positions=st.sampled_from([None, 1, 8, 20]),
    sparse_keys=st.booleans(),
)
def test_in_graph_batches_equal_the_numpy_plan(
    groups,
    sizes,
    one_size,
    remainder,
    shuffle_units,
    shuffle_batches,
    seed,
    epoch,
    chunk_units,
    slice_positions,
    sparse_keys,
):
    units = np.random.default_rng(seed).permutation(len(groups))
    keys = np.array(groups)
    if one_size and sparse_keys:  # any keys (sorted batches: lengths)
        keys = keys * 100_003
    order = orders.EpochOrder.of_groups(
        units,
        keys,
        sizes[:1] if one_size else sizes,
        remainder,
        shuffle_units=shuffle_units,
        shuffle_batches=shuffle_batches,
    )
    indices, splits = order.batches(seed, epoch)
    expected = np.split(indices, splits[1:-1]) if len(splits) > 1 else []
    # Units sorted chunk after chunk of groups (chunk_units), the batches
    # made slice after slice (slice_positions): the same batches.
    graph_order = epochs.GraphOrder(order, seed, chunk_units, slice_positions)
    epoch_tensor = tf.constant(epoch, tf.int64)
    rows, row_sizes, capacities = graph_order.batch_rows(epoch_tensor)
    ordered, taken = graph_order.epoch(epoch_tensor)
    size = graph_order.slice_batches
    sliced = [
        graph_order.rows(ordered, taken[start : start + size])
        for start in range(0, order.num_batches, size)
    ]
    assert len(sliced) == graph_order.slices
    for part, whole in enumerate((rows, row_sizes, capacities)):
        parts = [s[part].numpy() for s in sliced]
        np.testing.assert_array_equal(
            whole.numpy(), np.concatenate(parts) if parts else whole.numpy()[:0]
        )
    # Rows fed: the group's batch size for a padded remainder, the group's
    # largest batch when cut evenly, else the size.
    group_of = dict(zip(units.tolist(), groups, strict=True))
    key = [0 if one_size else group_of[int(e[0])] for e in expected]
    full = [sizes[0] if one_size else sizes[k] for k in key]
    largest = {}
    for k, e in zip(key, expected, strict=True):
        largest[k] = max(largest.get(k, 0), len(e))
    fed = {
        "pad": full,
        "even": [largest[k] for k in key],
    }.get(remainder, [len(e) for e in expected])
    if remainder == "even":  # sizes differ by at most one, up to the batch size
        assert all(f - len(e) in (0, 1) for f, e in zip(fed, expected, strict=True))
        assert all(f <= s for f, s in zip(fed, full, strict=True))
    assert order.batch_capacities(seed, epoch).tolist() == fed
    assert capacities.numpy().tolist() == fed
    actual = [
        row[:size] for row, size in zip(rows.numpy(), row_sizes.numpy(), strict=True)
    ]
    assert (rows.numpy()[rows.numpy() < 0] == -1).all()
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_array_equal(a, e)
    # Every unit at most once; all of them unless remainders are dropped.
    assert len(np.unique(indices)) == len(indices)
    if remainder != "drop":
        assert sorted(indices.tolist()) == sorted(units.tolist())


def test_the_hash_is_the_same_in_numpy_and_tensorflow():
    expected = orders.hash31(7, 3, orders.UNIT_STREAM, 100_000)
    actual = epochs.hash31(7, tf.constant(3, tf.int64), orders.UNIT_STREAM, 100_000)
    np.testing.assert_array_equal(actual.numpy(), expected)
    assert expected.min() >= 0 and expected.max() < 2**31
    assert len(np.unique(expected)) > 99_990  # a good spread


def test_a_streams_draws_hash_the_same_in_numpy_and_tensorflow():
    # A stream's emissions draw with the planned builders' rule: a numpy
    # engine can shuffle a stream's buffer exactly as its tf.data graph does.
    for emission, draw in ((0, 0), (5, 1), (2**20, 0)):
        stream = orders.emission_stream(emission, draw)
        expected = orders.hash31(7, 3, stream, 1000)
        graph_stream = orders.emission_stream(tf.constant(emission, tf.int64), draw)
        actual = epochs.hash31(7, tf.constant(3, tf.int64), graph_stream, 1000)
        np.testing.assert_array_equal(actual.numpy(), expected)
    assert orders.emission_stream(0, 1) != orders.emission_stream(1, 0)


@settings(max_examples=50, deadline=None)
@given(
    groups=st.lists(st.integers(0, 2**31 - 1), min_size=0, max_size=80)
    | st.lists(st.integers(0, 9), min_size=0, max_size=80),
    max_chunks=st.integers(1, 20),
    chunk_units=st.integers(1, 30),
)
def test_chunks_are_runs_of_whole_groups_in_key_order(groups, max_chunks, chunk_units):
    groups = np.array(groups, np.int64)
    chunks = epochs.chunks(groups, max_chunks, chunk_units)
    assert 1 <= len(chunks) <= max(1, min(max_chunks, len(groups) // chunk_units))
    if not len(groups):
        assert chunks.tolist() == [[0, 0]]
        return
    keys = np.unique(groups)
    chunk_of_key = np.searchsorted(chunks[:, 0], keys, side="right") - 1
    # Every key lies in exactly one chunk, and chunks follow in key order.
    assert (chunks[:, 0] <= chunks[:, 1]).all()
    assert (chunks[1:, 0] > chunks[:-1, 1]).all()
    assert chunks[0, 0] == keys[0] and chunks[-1, 1] == keys[-1]
    assert (chunk_of_key >= 0).all()
    assert (keys <= chunks[chunk_of_key, 1]).all()


def test_the_hash_of_some_indices_is_the_hash_at_those_indices():
    everything = orders.hash31(7, 3, orders.UNIT_STREAM, 1000)
    indices = np.array([999, 0, 5, 5, 17])
    some = epochs.hash31_at(7, tf.constant(3, tf.int64), orders.UNIT_STREAM, indices)
    np.testing.assert_array_equal(some.numpy(), everything[indices])


def test_epochs_and_seeds_give_different_orders():
    order = orders.EpochOrder.of_groups(
        np.arange(50), np.zeros(50, np.int64), [5], "keep",
        shuffle_units=True, shuffle_batches=True,
    )  # fmt: skip
    plans = {tuple(order.batches(s, e)[0]) for s in (0, 1) for e in (0, 1, 2)}
    assert len(plans) == 6


def test_group_keys_out_of_range_are_an_error():
    with pytest.raises(ValueError, match="Group keys must lie in"):
        orders.EpochOrder.of_groups(
            [0], [-1], [1], "keep", shuffle_units=True, shuffle_batches=True
        )


GRAPH_BUILDERS = {
    "padded": lambda: kerasbatch.PaddedBuilder(batch_size=8, seed=3),
    "sorted": lambda: kerasbatch.SortedBuilder(batch_size=8, seed=3),
    "bucket": lambda: kerasbatch.BucketBuilder(
        num_buckets=3, batch_size=8, seed=3, pad_to_bucket=True
    ),
    "truncating": lambda: kerasbatch.BucketBuilder(
        boundaries=[5, 12], batch_size=8, seed=3, truncate=True
    ),
    "chunk": lambda: kerasbatch.ChunkBuilder(6, batch_size=8, seed=3),
    "window": lambda: kerasbatch.WindowBuilder(4, 4, drop_remainder=False, seed=3),
    "packed": lambda: kerasbatch.PackedBuilder(24, batch_size=3, seed=3),
}


def flat(batch):
    return [np.asarray(t) for t in tf.nest.flatten(batch)]


def graph_ops(dataset):
    graph = tf.compat.v1.GraphDef()
    graph.ParseFromString(
        dataset._as_serialized_graph(
            external_state_policy=tf.data.experimental.ExternalStatePolicy.IGNORE
        ).numpy()
    )
    names = {node.op for node in graph.node}
    for function in graph.library.function:
        names |= {node.op for node in function.node_def}
    return names


@pytest.mark.parametrize("kind", GRAPH_BUILDERS)
def test_built_datasets_call_no_python(kind):
    x, _ = make_sequences(60, max_length=20, min_length=1)
    dataset = GRAPH_BUILDERS[kind]().build(x, np.arange(60))
    assert not {"PyFunc", "EagerPyFunc", "PyFuncStateless"} & graph_ops(dataset)


@pytest.mark.parametrize("kind", sorted(set(GRAPH_BUILDERS) - {"packed"}))
def test_every_epoch_yields_its_plan_and_statistics(kind):
    x, lengths = make_sequences(60, max_length=20, min_length=1)
    builder = GRAPH_BUILDERS[kind]()
    dataset = builder.build(x, np.arange(60))
    for epoch in range(3):
        batches = [tuple(np.asarray(t) for t in batch) for batch in dataset]
        plan = builder.plan(epoch)
        assert builder.last_started_epoch == epoch
        assert len(batches) == plan.num_batches == int(dataset.cardinality())
        for (batch_x, ids), planned, padded in zip(
            batches, plan.batches(), plan.padded_lengths, strict=True
        ):
            if kind != "chunk":  # chunks carry their sequence's id
                np.testing.assert_array_equal(ids, planned)
            assert batch_x.shape[1] == padded[0]


@pytest.fixture
def small_chunks_and_slices(monkeypatch):
    """Orders sorted in chunks of 4 units, epochs made in slices of 24
    positions (3 batches of 8: a checkpoint after 2 is within a slice):
    what a million elements do, on 60."""
    monkeypatch.setattr(epochs, "CHUNK_UNITS", 4)
    monkeypatch.setattr(epochs, "SLICE_POSITIONS", 24)


@pytest.mark.parametrize("kind", sorted(set(GRAPH_BUILDERS) - {"packed", "chunk"}))
def test_epochs_in_chunks_and_slices_yield_their_plans(kind, small_chunks_and_slices):
    x, _ = make_sequences(60, max_length=20, min_length=1)
    builder = GRAPH_BUILDERS[kind]()
    dataset = builder.build(x, np.arange(60))
    built = served.served_by(dataset).built
    order = epochs.GraphOrder(built.order, built.seed)  # as the pipeline makes it
    assert order.slices > 1
    if order.order.shuffle_units and not order.one_group:
        assert len(order.chunks) > 1
    for epoch in range(2):
        batches = [tuple(np.asarray(t) for t in batch) for batch in dataset]
        plan = builder.plan(epoch)
        assert len(batches) == plan.num_batches == int(dataset.cardinality())
        for (batch_x, ids), planned, padded in zip(
            batches, plan.batches(), plan.padded_lengths, strict=True
        ):
            np.testing.assert_array_equal(ids, planned)
            assert batch_x.shape[1] == padded[0]


@pytest.mark.parametrize("kind", ["bucket", "sorted"])
def test_an_iterator_checkpointed_within_a_slice_resumes_with_the_same_batches(
    kind, tmp_path, small_chunks_and_slices
):
    test_an_iterator_checkpointed_mid_epoch_resumes_with_the_same_batches(
        kind, tmp_path
    )


@pytest.mark.parametrize("kind", GRAPH_BUILDERS)
def test_an_iterator_checkpointed_mid_epoch_resumes_with_the_same_batches(
    kind, tmp_path
):
    x, _ = make_sequences(60, max_length=20, min_length=1)
    builder = GRAPH_BUILDERS[kind]()
    dataset = builder.build(x, np.arange(60))
    builder.set_epoch(2)
    iterator = iter(dataset)
    next(iterator), next(iterator)
    path = tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / "it"))
    uninterrupted = [flat(b) for b in iterator]

    builder = GRAPH_BUILDERS[kind]()  # as a restarted process would
    dataset = builder.build(x, np.arange(60))
    restored = iter(dataset)
    tf.train.Checkpoint(iterator=restored).restore(path)
    resumed = [flat(b) for b in restored]
    assert len(resumed) == len(uninterrupted) == int(dataset.cardinality()) - 2
    for a, b in zip(resumed, uninterrupted, strict=True):
        for ta, tb in zip(a, b, strict=True):
            np.testing.assert_array_equal(ta, tb)


@pytest.mark.parametrize("shuffle", [True, False])
def test_packed_rows_in_the_graph_are_the_planned_rows(shuffle):
    x, _ = make_sequences(300, max_length=19, min_length=1)
    builder = kerasbatch.PackedBuilder(
        32, batch_size=4, seed=5, shuffle=shuffle, drop_remainder=shuffle
    )
    dataset = builder.build(x)
    for epoch in range(3):
        rows = [row for batch in dataset for row in batch["x"].numpy()]
        plan = builder.plan(epoch)
        assert len(rows) == plan.num_rows
        for row, planned in zip(rows, plan.rows(), strict=True):
            ids = row[row > 0]  # element i is i + 1 repeated
            np.testing.assert_array_equal(np.unique(ids), np.sort(planned + 1))
            assert np.array_equal(
                ids[np.sort(np.unique(ids, return_index=True)[1])], planned + 1
            )


@settings(max_examples=15, deadline=None)
@given(
    boundaries=st.lists(st.integers(1, 60), min_size=0, max_size=6, unique=True),
    truncate=st.booleans(),
    limit=st.sampled_from([None, 5, 30]),
)
def test_buckets_assign_and_cut_alike_in_numpy_and_tensorflow(
    boundaries, truncate, limit
):
    """`Buckets` serves BucketBuilder (NumPy) and StreamBucketBuilder (in the
    graph): both engines give every length the same bucket and cut."""
    from kerasbatch.engines.tf_data import buckets as graph_buckets
    from kerasbatch.planning.buckets import Buckets

    buckets = Buckets.of(sorted(boundaries), 70, truncate)
    lengths = np.arange(0, 72)
    assigned = buckets.assign(lengths)
    cut = buckets.cut_limits(assigned, plan_lib.NO_LIMIT if limit is None else limit)
    for length in lengths:
        bucket = graph_buckets.assign(buckets, tf.constant(length, tf.int64))
        assert int(bucket) == assigned[length]
        limit_tensor = None if limit is None else tf.constant(limit, tf.int64)
        graph_cut = graph_buckets.cut_limit(buckets, bucket, limit_tensor)
        expected = plan_lib.NO_LIMIT if graph_cut is None else int(graph_cut)
        assert expected == cut[length]


def test_planning_imports_and_runs_without_tensorflow():
    # One process (Keras on JAX costs seconds to import): the planning
    # modules import first, then the package, with no TensorFlow.
    script = (
        "import os, sys\n"
        "os.environ['KERAS_BACKEND'] = 'jax'  # Keras' own needs TensorFlow\n"
        "sys.modules['tensorflow'] = None  # any import of it fails\n"
        "import numpy as np\n"
        "from kerasbatch.planning import boundaries, buckets, orders, packing, plan\n"
        "print(len(orders.EpochOrder.of_groups(np.arange(4), np.zeros(4, np.int64),"
        " [2], 'keep', shuffle_units=True, shuffle_batches=True).batches(0, 0)[0]))\n"
        "import kerasbatch\n"
        "order = kerasbatch.planning.orders.EpochOrder.of_groups(\n"
        "    np.arange(6), np.array([0, 1, 0, 1, 0, 1]), [2, 2], 'keep',\n"
        "    shuffle_units=True, shuffle_batches=True)\n"
        "indices, splits = order.batches(seed=1, epoch=3)\n"
        "print(sorted(indices.tolist()), len(splits) - 1)\n"
        "print(kerasbatch.planning.boundaries.optimal(np.arange(1, 50), 4))\n"
        "print(kerasbatch.planning.buckets.Buckets.of([3], 9, True).assign([2, 5]))\n"
        "builder = kerasbatch.BucketBuilder(num_buckets=2, batch_size=2)\n"
        "try:\n"
        "    builder.build([np.ones(n) for n in (1, 2, 3)])\n"
        "except ImportError as error:\n"
        "    print(error)\n"
        "print(len(builder.build([np.ones(n) for n in (1, 2, 3)], engine='python')))\n"
        "print(any(m.split('.')[0] == 'tensorflow'\n"
        "          for m, v in sys.modules.items() if v is not None))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    output = result.stdout.splitlines()
    assert output.pop(0) == "4"  # the planning modules alone
    assert output[0] == "[0, 1, 2, 3, 4, 5] 4"
    assert output[2] == "[0 1]"
    # The tf.data engine says what it needs, and which engines need nothing.
    assert "tf.data engine" in output[3] and "pip install tensorflow" in output[3]
    assert "engine='grain' or engine='python'" in output[3]
    assert output[4] == "2"
    assert output[5] == "False"
