"""Chunks of long sequences: where they are, and outputs put back together.

A sequence of `T` frames is cut into chunks of `chunk_size` frames, one
starting every `chunk_step` frames (`chunk_step < chunk_size` overlaps them),
as RETURNN's TensorFlow data pipeline does. Chunking stops at the first chunk that
reaches the end of the sequence, so every frame is in at least one chunk and
only a sequence's last chunk can be shorter than `chunk_size`. A sequence of
0 frames has no chunk.

`reassemble` is the way back: it places every chunk's output at its frames,
averages where chunks overlap, and returns one output per frame of every
sequence.
"""

import dataclasses

import numpy as np

from kerasbatch import optional


@dataclasses.dataclass(frozen=True, eq=False)
class ChunkTable:
    """Chunks of sequences, one entry per chunk.

    Attributes:
        sequence: int64 index of each chunk's sequence.
        offset: int64 first frame of each chunk in its sequence.
        length: int64 frames in each chunk.

    Example:

    >>> table = chunk_table([5, 2], chunk_size=3)
    >>> table
    ChunkTable(sequence=[0, 0, 1], offset=[0, 3, 0], length=[3, 2, 2])
    >>> table[[2, 0]]
    ChunkTable(sequence=[1, 0], offset=[0, 0], length=[2, 3])
    """

    sequence: np.ndarray
    offset: np.ndarray
    length: np.ndarray

    def __len__(self):
        return len(self.sequence)

    def __getitem__(self, indices):
        """The chunks at `indices` (an int array or a slice), in that order."""
        return ChunkTable(
            self.sequence[indices], self.offset[indices], self.length[indices]
        )

    def __repr__(self):
        return (
            f"ChunkTable(sequence={self.sequence.tolist()}, "
            f"offset={self.offset.tolist()}, length={self.length.tolist()})"
        )

    def coverage(self, lengths):
        """How many of these chunks hold each frame of every sequence.

        Args:
            lengths: frames of every sequence (the sequences the chunks index).

        Returns:
            A list with one int64 array of shape `(lengths[i],)` per sequence.

        Example:

        >>> table = chunk_table([5], chunk_size=3, chunk_step=2)
        >>> table.coverage([5])
        [array([1, 1, 2, 1, 1])]
        """
        lengths = _sequence_lengths(lengths, self)
        _, _, frames = _chunk_frames(self, lengths)
        counts = np.bincount(frames, minlength=int(lengths.sum()))
        return np.split(counts, np.cumsum(lengths)[:-1])


def chunk_table(lengths, chunk_size, chunk_step=None):
    """The chunks of sequences of `lengths` frames.

    Args:
        lengths: 1-D ints, the frames of every sequence.
        chunk_size: frames per chunk, or None for one chunk per sequence
            holding all of it (also a sequence of 0 frames).
        chunk_step: frames between the starts of consecutive chunks of a
            sequence, from 1 to `chunk_size`. Defaults to `chunk_size`: the
            chunks tile the sequence.

    Returns:
        A `ChunkTable`, sequence after sequence, each in frame order.

    Example:

    >>> chunk_table([7, 0, 2], chunk_size=4, chunk_step=2)
    ChunkTable(sequence=[0, 0, 0, 2], offset=[0, 2, 4, 0], length=[4, 4, 3, 2])
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if chunk_size is None:
        everything = np.arange(len(lengths), dtype=np.int64)
        return ChunkTable(everything, np.zeros_like(everything), lengths.copy())
    step = chunk_size if chunk_step is None else chunk_step
    if not 0 < step <= chunk_size:
        raise ValueError(
            f"chunk_step must be from 1 to chunk_size={chunk_size}, got {step}."
        )
    # Chunks start at 0, step, 2 step, ... up to the first that reaches T.
    later_chunks = np.maximum(0, -(-(lengths - chunk_size) // step))
    counts = np.where(lengths > 0, 1 + later_chunks, 0)
    sequence = np.repeat(np.arange(len(lengths), dtype=np.int64), counts)
    first_chunk = np.repeat(np.cumsum(counts) - counts, counts)
    offset = (np.arange(len(sequence), dtype=np.int64) - first_chunk) * step
    length = np.minimum(chunk_size, lengths[sequence] - offset)
    return ChunkTable(sequence, offset, length)


def reassemble(chunk_outputs, chunks, lengths, context=0):
    """Whole-sequence outputs from the outputs of chunks.

    Every chunk's output frames are placed at the chunk's frames; where chunks
    overlap, their outputs are averaged. Frames that no chunk holds (chunks
    left out, e.g. by a builder's `min_chunk_size`) are NaN.

    Args:
        chunk_outputs: outputs of shape `(num_chunks, time, *features)`, in
            the order of `chunks`: a numpy array, a `tf.Tensor` or a
            `tf.RaggedTensor` (what `model.predict` returns when batches
            differ in length); a dict or list of those for a model with
            several outputs. Output frame `context_left + t` belongs to frame
            `offset + t` of the chunk's sequence, for `t < length`.
        chunks: the `ChunkTable` of the chunks, in the order of the outputs.
        lengths: 1-D ints, the frames of every sequence.
        context: frames of each output to skip before the chunk's own frames
            and after them: an int for both sides or a `(left, right)` pair.
            0 (the default) for a model whose outputs match the chunk's
            frames (e.g. `padding="valid"` convolutions fed chunks with
            context); the builder's context for a model that keeps its
            input's length.

    Returns:
        A list with one float array of shape `(lengths[i], *features)` per
        sequence (a dict or list of such lists for several outputs).

    Raises:
        ValueError: the number of outputs is not the number of chunks, or an
            output has fewer frames than its chunk and context need.

    Example:

    >>> import numpy as np
    >>> table = chunk_table([5], chunk_size=3, chunk_step=2)
    >>> outputs = np.array([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]])
    >>> reassemble(outputs, table, [5])  # frame 2 is in both chunks
    [array([ 1. ,  2. ,  6.5, 20. , 30. ])]
    """
    if isinstance(chunk_outputs, dict):
        return {
            key: reassemble(value, chunks, lengths, context)
            for key, value in chunk_outputs.items()
        }
    if isinstance(chunk_outputs, list | tuple):
        return [reassemble(value, chunks, lengths, context) for value in chunk_outputs]
    left, right = context_pair(context)
    lengths = _sequence_lengths(lengths, chunks)
    outputs = _as_numpy(chunk_outputs)
    if outputs.ndim < 2 or len(outputs) != len(chunks):
        raise ValueError(
            f"Got chunk outputs of shape {outputs.shape} for {len(chunks)} chunks; "
            "they need shape (num_chunks, time, ...), one row per chunk."
        )
    needed = left + chunks.length + right
    short = np.flatnonzero(needed > outputs.shape[1])
    if len(short):
        first = short[0]
        raise ValueError(
            f"Chunk {first} needs {needed[first]} output frames (context "
            f"{left} + length {chunks.length[first]} + context {right}), but "
            f"the outputs have {outputs.shape[1]}."
        )
    rows, times, frames = _chunk_frames(chunks, lengths)
    values = outputs[rows, left + times].astype(np.float64)
    total = int(lengths.sum())
    # The mean as one chunk's value plus the mean difference to it: equal
    # outputs of overlapping chunks give back exactly that value.
    covered, first = np.unique(frames, return_index=True)
    reference = np.full((total, *outputs.shape[2:]), np.nan)
    reference[covered] = values[first]
    differences = np.zeros_like(reference)
    np.add.at(differences, frames, values - reference[frames])
    counts = np.bincount(frames, minlength=total)
    counts = np.maximum(counts, 1).reshape((total,) + (1,) * (outputs.ndim - 2))
    averaged = reference + differences / counts
    averaged = averaged.astype(np.result_type(outputs.dtype, np.float32))
    return np.split(averaged, np.cumsum(lengths)[:-1])


def context_pair(context):
    """`(left, right)` frames of context from an int or a pair of ints.

    Raises:
        ValueError: a side is negative or not an int, or `context` is
            neither an int nor a pair.
    """
    sides = list(context) if isinstance(context, list | tuple) else [context] * 2
    if len(sides) != 2 or not all(
        isinstance(side, int | np.integer) and not isinstance(side, bool) and side >= 0
        for side in sides
    ):
        raise ValueError(
            "context must be a non-negative int or a (left, right) pair of "
            f"them, got {context!r}."
        )
    return int(sides[0]), int(sides[1])


def _sequence_lengths(lengths, chunks):
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.ndim != 1:
        raise ValueError(f"lengths must be 1-D, got shape {lengths.shape}.")
    outside = chunks.sequence >= len(lengths)
    if not outside.any():
        outside = chunks.offset + chunks.length > lengths[chunks.sequence]
    if outside.any():
        first = np.flatnonzero(outside)[0]
        raise ValueError(
            f"Chunk {first} (sequence {chunks.sequence[first]}, offset "
            f"{chunks.offset[first]}, length {chunks.length[first]}) lies "
            f"outside the {len(lengths)} sequences of the given lengths."
        )
    return lengths


def _chunk_frames(chunks, lengths):
    """Per chunk frame: its chunk, its time in the chunk and its flat frame."""
    rows = np.repeat(np.arange(len(chunks)), chunks.length)
    first_of_chunk = np.repeat(np.cumsum(chunks.length) - chunks.length, chunks.length)
    times = np.arange(len(rows), dtype=np.int64) - first_of_chunk
    sequence_starts = np.cumsum(lengths) - lengths
    frames = sequence_starts[chunks.sequence][rows] + chunks.offset[rows] + times
    return rows, times, frames


def _as_numpy(outputs):
    """`outputs` as a numpy array: a `tf.RaggedTensor` padded (where
    TensorFlow is imported at all; without it, outputs are not tensors)."""
    tensorflow = optional.imported("tensorflow")
    if tensorflow is not None and isinstance(outputs, tensorflow.RaggedTensor):
        outputs = outputs.to_tensor()
    return np.asarray(outputs)
