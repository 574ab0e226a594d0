"""Chunk tables and reassembly: where chunks are, and the way back to sequences."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from kerasbatch.planning import chunking
from kerasbatch.planning.chunking import (
    ChunkTable,
    chunk_table,
    context_pair,
    reassemble,
)


def reference_chunks(lengths, size, step):
    """RETURNN's loop: a chunk every `step` frames until one reaches the end."""
    rows = []
    for sequence, length in enumerate(lengths):
        start = 0
        while start < length:
            rows.append((sequence, start, min(size, length - start)))
            if start + size >= length:
                break
            start += step
    return rows


def rows_of(table):
    return list(
        zip(
            table.sequence.tolist(),
            table.offset.tolist(),
            table.length.tolist(),
            strict=True,
        )
    )


def chunk_windows(sequences, table, left, right):
    """Each chunk's frames with `left` and `right` frames of zero context."""
    width = left + int(table.length.max()) + right
    windows = np.zeros((len(table), width, *sequences[0].shape[1:]))
    for row, (sequence, offset, length) in enumerate(rows_of(table)):
        padded = np.concatenate(
            [
                np.zeros((left, *sequences[sequence].shape[1:])),
                sequences[sequence],
                np.zeros((right, *sequences[sequence].shape[1:])),
            ]
        )
        windows[row, : left + length + right] = padded[
            offset : offset + left + length + right
        ]
    return windows


# ------------------------------------------------------------ chunk tables
def test_chunks_tile_each_sequence_and_the_last_one_is_short():
    table = chunk_table([10, 3, 0, 4], chunk_size=4)
    assert rows_of(table) == [
        (0, 0, 4),
        (0, 4, 4),
        (0, 8, 2),
        (1, 0, 3),
        (3, 0, 4),
    ]
    assert len(table) == 5


def test_overlapping_chunks_stop_at_the_first_that_reaches_the_end():
    table = chunk_table([10], chunk_size=4, chunk_step=3)
    assert rows_of(table) == [(0, 0, 4), (0, 3, 4), (0, 6, 4)]
    assert table.coverage([10])[0].tolist() == [1, 1, 1, 2, 1, 1, 2, 1, 1, 1]


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 30), min_size=1, max_size=12),
    size=st.integers(1, 9),
    data=st.data(),
)
def test_chunk_table_matches_the_reference_loop(lengths, size, data):
    step = data.draw(st.integers(1, size))
    table = chunk_table(lengths, size, step)
    assert rows_of(table) == reference_chunks(lengths, size, step)
    coverage = table.coverage(lengths)
    assert [len(c) for c in coverage] == lengths
    assert all((c >= 1).all() for c in coverage)
    if step == size:  # exactly once
        assert all((c == 1).all() for c in coverage)


def test_whole_sequences_are_one_chunk_each():
    table = chunk_table([5, 0, 2], chunk_size=None)
    assert rows_of(table) == [(0, 0, 5), (1, 0, 0), (2, 0, 2)]


def test_chunk_table_selects_and_reorders():
    table = chunk_table([5, 2], chunk_size=3)
    assert rows_of(table[np.array([2, 0])]) == [(1, 0, 2), (0, 0, 3)]
    assert isinstance(table[1:], ChunkTable)


@pytest.mark.parametrize("step", [0, 5])
def test_chunk_step_outside_one_to_chunk_size_is_an_error(step):
    with pytest.raises(ValueError, match=rf"chunk_step must be from 1 to .*got {step}"):
        chunk_table([10], chunk_size=4, chunk_step=step)


# -------------------------------------------------------------- reassembly
@pytest.mark.parametrize(("size", "step"), [(4, 4), (5, 2), (3, 1)])
@pytest.mark.parametrize("context", [0, (2, 1), 3])
def test_reassembling_chunks_gives_back_the_input_exactly(size, step, context):
    rng = np.random.default_rng(size + step)
    lengths = [13, 1, 0, 7]
    sequences = [rng.normal(size=(n, 2)) for n in lengths]
    table = chunk_table(lengths, size, step)
    left, right = context_pair(context)
    order = rng.permutation(len(table))  # any order, e.g. shuffled batches
    windows = chunk_windows(sequences, table[order], left, right)
    restored = reassemble(windows, table[order], lengths, context=context)
    assert len(restored) == len(lengths)
    for original, back in zip(sequences, restored, strict=True):
        np.testing.assert_array_equal(back, original)


def test_overlaps_are_averaged():
    table = chunk_table([6], chunk_size=4, chunk_step=2)  # chunks at 0 and 2
    outputs = np.array([[0.0, 1, 2, 3], [20, 30, 40, 50]])
    (whole,) = reassemble(outputs, table, [6])
    np.testing.assert_array_equal(whole, [0, 1, 11, 16.5, 40, 50])


def test_frames_of_missing_chunks_are_nan():
    table = chunk_table([7], chunk_size=3)[np.array([0, 2])]  # no chunk at 3
    (whole,) = reassemble(np.ones((2, 3)), table, [7])
    np.testing.assert_array_equal(np.isnan(whole), [0, 0, 0, 1, 1, 1, 0])


def test_integer_outputs_become_float_and_float32_stays():
    table = chunk_table([3], chunk_size=3)
    assert reassemble(np.ones((1, 3), "int32"), table, [3])[0].dtype == np.float64
    assert reassemble(np.ones((1, 3), "float32"), table, [3])[0].dtype == np.float32


def test_ragged_tensors_and_several_outputs_are_reassembled():
    table = chunk_table([2, 3], chunk_size=None)
    ragged = tf.ragged.constant([[1.0, 2.0], [3.0, 4.0, 5.0]])
    restored = reassemble({"a": ragged, "b": [ragged, ragged]}, table, [2, 3])
    assert [r.tolist() for r in restored["a"]] == [[1, 2], [3, 4, 5]]
    assert [r.tolist() for r in restored["b"][1]] == [[1, 2], [3, 4, 5]]


def test_wrong_number_of_outputs_is_an_error():
    table = chunk_table([5], chunk_size=2)
    with pytest.raises(ValueError, match=r"shape \(2, 2\) for 3 chunks"):
        reassemble(np.ones((2, 2)), table, [5])


def test_outputs_too_short_for_chunk_and_context_are_an_error():
    table = chunk_table([5], chunk_size=3)
    with pytest.raises(
        ValueError,
        match=r"Chunk 0 needs 5 output frames \(context 1 \+ length 3 \+ context 1\), "
        r"but the outputs have 3",
    ):
        reassemble(np.ones((2, 3)), table, [5], context=1)


@pytest.mark.parametrize("lengths", [[5], [4, 2]])
def test_chunks_outside_the_given_lengths_are_an_error(lengths):
    table = chunk_table([5, 2], chunk_size=3)
    with pytest.raises(ValueError, match=r"lies outside the \d sequences"):
        reassemble(np.ones((3, 3)), table, lengths)


@pytest.mark.parametrize("context", [-1, (1, -2), (1, 2, 3), 1.5, True, "2"])
def test_bad_context_is_an_error(context):
    with pytest.raises(ValueError, match=r"context must be a non-negative int or a"):
        context_pair(context)


def test_context_pair_reads_an_int_as_both_sides():
    assert context_pair(3) == (3, 3)
    assert context_pair([0, 2]) == (0, 2)
    assert chunking.context_pair(np.int64(1)) == (1, 1)
