"""The bounded-memory sorts give the orders of the stable argsorts they
stand for, also across many slices and runs."""

import numpy as np
import pytest

from kerasbatch.planning import orders, sorting


@pytest.fixture(params=[False, True], ids=["one slice", "many slices"])
def small_slices(request, monkeypatch):
    if request.param:
        monkeypatch.setattr(sorting, "SLICE", 64)
        monkeypatch.setattr(sorting, "RUN", 8)


@pytest.mark.parametrize("case", range(12))
def test_stable_order_is_the_stable_argsort(small_slices, case):
    rng = np.random.default_rng(case)
    count = int(rng.integers(0, 2000))
    num_keys = int(rng.choice([1, 3, 40, 5000]))
    keys = rng.integers(0, num_keys, count).astype(rng.choice([np.int32, np.int64]))
    order = sorting.stable_order(keys, num_keys)
    assert order.dtype == np.int32
    np.testing.assert_array_equal(order, np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(
        sorting.key_counts(keys, num_keys), np.bincount(keys, minlength=num_keys)
    )


@pytest.mark.parametrize("case", range(12))
def test_sort_segments_is_the_stable_argsort_of_segment_and_hash(small_slices, case):
    rng = np.random.default_rng(case)
    count = int(rng.integers(0, 3000))
    # Segments of every kind: empty, single, short and longer than a run.
    cuts = rng.choice(count + 1, int(rng.integers(0, 200)), replace=True)
    splits = np.sort(np.concatenate([[0], cuts, [count]])).astype(np.int64)
    hashes = orders.hash31(case, 1, 2, count)
    values = rng.permutation(count).astype(np.int32)
    segment = np.repeat(np.arange(len(splits) - 1), np.diff(splits))
    expected = values[np.argsort(segment * orders.MAX_GROUP + hashes, kind="stable")]
    result = sorting.sort_segments(values, splits, lambda start, end: hashes[start:end])
    assert result.dtype == values.dtype
    np.testing.assert_array_equal(result, expected)


def test_sort_segments_breaks_ties_by_position(small_slices):
    values = np.arange(40)
    result = sorting.sort_segments(
        values, np.array([0, 25, 40]), lambda start, end: np.zeros(end - start, int)
    )
    np.testing.assert_array_equal(result, values)


def test_hash31_at_agrees_with_hash31():
    positions = np.array([5, 0, 2**21 + 3, 7], np.int32)
    np.testing.assert_array_equal(
        orders.hash31_at(3, 4, 5, positions),
        orders.hash31(3, 4, 5, 2**21 + 4)[positions],
    )


@pytest.mark.parametrize("shuffle", [False, True])
def test_packed_slots_are_those_of_the_stable_argsorts(small_slices, shuffle):
    from kerasbatch.planning import batching

    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 40, 3000)
    candidates = np.sort(rng.choice(5000, len(lengths), replace=False))
    order = batching.packed_order(candidates, lengths, 64, 4, "keep", shuffle)
    for epoch in range(3):
        keys = lengths * orders.MAX_GROUP
        if shuffle:
            keys = keys + orders.hash31(9, epoch, orders.UNIT_STREAM, len(lengths))
        elements = candidates[np.argsort(keys, kind="stable")][order.slot_ranks]
        if shuffle:
            keys = order.row_of_slot * orders.MAX_GROUP + orders.hash31(
                9, epoch, orders.SLOT_STREAM, len(elements)
            )
            elements = elements[np.argsort(keys, kind="stable")]
        np.testing.assert_array_equal(order.slot_elements(9, epoch), elements)
