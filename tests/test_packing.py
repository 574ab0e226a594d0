"""The packing planner: best-fit decreasing, vectorised, on numpy alone."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerasbatch.planning import packing


def reference_best_fit_decreasing(lengths, capacity, max_segments=None):
    """Best-fit decreasing, one sequence at a time: the definition.

    Longest first (ties by index); each goes to the row with the least room
    that fits it (ties: the oldest row), or a new row. Empty sequences take
    one position.
    """
    sizes = np.maximum(lengths, 1)
    remaining, rows = [], []
    for index in sorted(range(len(lengths)), key=lambda i: (-sizes[i], i)):
        fitting = [
            r
            for r in range(len(rows))
            if remaining[r] >= sizes[index]
            and (max_segments is None or len(rows[r]) < max_segments)
        ]
        if fitting:
            best = min(fitting, key=lambda r: (remaining[r], r))
        else:
            best = len(rows)
            rows.append([])
            remaining.append(capacity)
        rows[best].append(index)
        remaining[best] -= sizes[index]
    return rows


def lognormal(num=20_000):
    rng = np.random.default_rng(0)
    return np.clip(rng.lognormal(3.5, 0.7, num).astype(int), 1, 512)


def bimodal():
    rng = np.random.default_rng(0)
    lengths = np.concatenate([rng.normal(12, 4, 14_000), rng.normal(200, 50, 6_000)])
    return np.clip(np.rint(rng.permutation(lengths)), 1, 512).astype(int)


def check_packing(packing_, lengths, capacity, max_segments=None):
    """Every sequence once; rows within capacity and the segment limit."""
    assert sorted(packing_.order.tolist()) == list(range(len(lengths)))
    for row in packing_.rows():
        assert len(row) >= 1
        assert np.maximum(lengths[row], 1).sum() <= capacity
        if max_segments is not None:
            assert len(row) <= max_segments


# ------------------------------------------------------------- best fit
def test_a_small_packing_by_hand():
    packing_ = packing.pack(np.array([5, 3, 2, 7, 1]), capacity=8)
    # 7 opens row 0, 5 row 1; 3 fits row 1 exactly; 2 fits nowhere (rooms
    # 1 and 0): row 2; 1 goes to the fullest row it fits, row 0 (room 1).
    assert [r.tolist() for r in packing_.rows()] == [[3, 4], [0, 1], [2]]
    np.testing.assert_array_equal(packing_.row_splits, [0, 2, 4, 5])
    assert packing_.num_rows == 3


def test_best_fit_prefers_the_fullest_row_not_the_first():
    # 8 opens row 0 (room 2), 6 row 1 (room 4), 3 joins row 1 (room 1). The
    # 1 fits both rows: best fit takes row 1, the fuller; first fit row 0.
    rows = packing.pack(np.array([8, 1, 3, 6]), capacity=10).rows()
    assert [r.tolist() for r in rows] == [[0], [3, 2, 1]]


@settings(max_examples=150, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 20), min_size=0, max_size=60),
    capacity=st.integers(20, 40),
    max_segments=st.one_of(st.none(), st.integers(1, 6)),
)
def test_matches_one_at_a_time_best_fit_decreasing(lengths, capacity, max_segments):
    lengths = np.array(lengths, dtype=np.int64)
    packing_ = packing.pack(lengths, capacity, max_segments)
    expected = reference_best_fit_decreasing(lengths, capacity, max_segments)
    assert [r.tolist() for r in packing_.rows()] == expected
    check_packing(packing_, lengths, capacity, max_segments)


def test_no_sequences_make_no_rows():
    packing_ = packing.pack(np.zeros(0, dtype=np.int64), capacity=8)
    assert packing_.num_rows == 0
    np.testing.assert_array_equal(packing_.row_splits, [0])


def test_empty_sequences_take_one_position_each():
    packing_ = packing.pack(np.array([0, 0, 0, 3]), capacity=4)
    assert [r.tolist() for r in packing_.rows()] == [[3, 0], [1, 2]]


def test_sequences_as_long_as_the_row_fill_one_row_each():
    packing_ = packing.pack(np.array([8, 8, 8]), capacity=8)
    assert packing_.segments_per_row.tolist() == [1, 1, 1]


def test_max_segments_bounds_every_row():
    lengths = np.ones(10, dtype=np.int64)
    assert packing.pack(lengths, 100).segments_per_row.tolist() == [10]
    limited = packing.pack(lengths, 100, max_segments=4)
    assert limited.segments_per_row.tolist() == [4, 4, 2]


# ------------------------------------------------------------ shuffling
def test_rng_shuffles_but_keeps_the_row_structure():
    lengths = np.random.default_rng(1).integers(1, 30, 500)
    plain = packing.pack(lengths, 64)
    first = packing.pack(lengths, 64, rng=np.random.default_rng(0))
    again = packing.pack(lengths, 64, rng=np.random.default_rng(0))
    other = packing.pack(lengths, 64, rng=np.random.default_rng(1))
    for packing_ in (first, other):
        check_packing(packing_, lengths, 64)
    # Deterministic per generator state ...
    np.testing.assert_array_equal(first.order, again.order)
    np.testing.assert_array_equal(first.row_splits, again.row_splits)
    # ... reshuffled by another ...
    assert not np.array_equal(first.order, other.order)

    # ... with the same rows, as multisets of lengths, in another order.
    def templates(packing_):
        return [tuple(sorted(lengths[row])) for row in packing_.rows()]

    assert sorted(templates(first)) == sorted(templates(plain))
    assert templates(first) != templates(plain)


def test_rng_shuffles_sequences_within_rows_and_ties_between_rows():
    lengths = np.full(40, 4)
    rows = [
        packing.pack(lengths, 16, rng=np.random.default_rng(s)).rows() for s in (0, 1)
    ]
    as_sets = [sorted(tuple(sorted(r)) for r in rs) for rs in rows]
    assert as_sets[0] != as_sets[1]  # equal lengths trade rows
    in_order = [all(np.all(np.diff(r) > 0) for r in rs) for rs in rows]
    assert not all(in_order)  # and are not kept in index order


# ------------------------------------------------------------ targets
@pytest.mark.parametrize(
    "lengths", [lognormal(), bimodal()], ids=["lognormal", "bimodal"]
)
def test_reference_workloads_pack_at_least_99_percent(lengths):
    packing_ = packing.pack(lengths, 512, rng=np.random.default_rng(0))
    check_packing(packing_, lengths, 512)
    efficiency = lengths.sum() / (packing_.num_rows * 512)
    assert efficiency >= 0.99
    # Within one row of the bound ceil(tokens / 512).
    assert packing_.num_rows <= -(-lengths.sum() // 512) + 1


def test_packs_a_million_sequences():
    # Its speed is measured side by side in benchmarks/packing.py, not here.
    lengths = lognormal(1_000_000)
    packing_ = packing.pack(lengths, 512, rng=np.random.default_rng(0))
    assert lengths.sum() / (packing_.num_rows * 512) >= 0.99
    assert len(packing_.order) == 1_000_000


# ------------------------------------------------------------ bad input
def test_a_sequence_longer_than_the_row_is_named():
    with pytest.raises(
        ValueError,
        match=r"Sequence 2 has length 9: too long .* capacity 8 \(2 sequences",
    ):
        packing.pack(np.array([1, 8, 9, 10]), 8)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"lengths": [1, -2], "capacity": 4}, r"Sequence 1 has length -2: negative"),
        ({"lengths": [1], "capacity": 0}, r"capacity must be a positive int, got 0"),
        ({"lengths": [1], "capacity": 2.5}, r"capacity must be a positive int"),
        ({"lengths": [1], "capacity": 4, "max_segments": 0}, r"max_segments must be"),
        (
            {"lengths": [[1, 2]], "capacity": 4},
            r"lengths must be 1-D, got shape \(1, 2\)",
        ),
    ],
)
def test_bad_arguments(arguments, message):
    arguments["lengths"] = np.array(arguments["lengths"])
    with pytest.raises(ValueError, match=message):
        packing.pack(**arguments)


def test_float_lengths_are_rejected():
    with pytest.raises(TypeError, match="lengths must be integers, got dtype float64"):
        packing.pack(np.array([1.5, 2.0]), 4)
