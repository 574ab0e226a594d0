"""A flat token file: every sequence's token ids in one binary array, plus an
index of offsets, read by index.

The layout of the LLM pipelines' indexed datasets (Megatron-LM's
`.bin`/`.idx` pair, nanoGPT's `.bin` files): `<path>.bin` holds the tokens of
all sequences back to back, little-endian, in one dtype (`uint16`, `uint32`
or `int32`); `<path>.idx` holds a 24-byte header (the 8 bytes
`KBTOKIDX`, the format version and dtype code as uint32, the number of
sequences as uint64) then `count + 1` int64 offsets into the tokens.
Reading sequence `i` reads its tokens only (one positioned read, `pread`:
no memory map, so that the reader's memory does not grow with the tokens
it has read); the lengths are the offsets' differences, known without
reading any token. Needs NumPy only.
"""

import os

import numpy as np

MAGIC = b"KBTOKIDX"
VERSION = 1
#: The dtypes a token file stores, by their code in the index header.
DTYPES = {0: np.dtype("<u2"), 1: np.dtype("<u4"), 2: np.dtype("<i4")}
_CODES = {dtype: code for code, dtype in DTYPES.items()}
_HEADER = np.dtype(
    [("magic", "S8"), ("version", "<u4"), ("dtype", "<u4"), ("count", "<u8")]
)
#: Offsets buffered by the writer before it writes them out.
_OFFSETS_BUFFER = 1 << 16


def paths_of(path):
    """`(tokens file, index file)` of the token file `path` (`.bin`, `.idx`)."""
    path = os.fspath(path)
    return f"{path}.bin", f"{path}.idx"


def _token_dtype(dtype):
    dtype = np.dtype(dtype).newbyteorder("<")
    if dtype not in _CODES:
        raise ValueError(
            f"A token file stores uint16, uint32 or int32 tokens, got dtype "
            f"{np.dtype(dtype).name}."
        )
    return dtype


class TokenFileWriter:
    """Writes sequences of token ids into a token file, one after another.

    Memory stays constant, whatever the number of sequences: tokens go to
    `<path>.bin` as they come, offsets to `<path>.idx` in blocks; `close`
    (or the end of a `with` block) writes the index header. A writer that
    fails part-way removes both files, so that no half-written file is read.

    Args:
        path: the token file's path, without suffix: the writer makes
            `<path>.bin` and `<path>.idx` (their folder must exist).
        dtype: the stored dtype: `"uint16"` (vocabularies up to 65 536),
            `"uint32"` or `"int32"`. A token outside its range is an error
            that names the sequence.

    Example:

    >>> import os, tempfile
    >>> import numpy as np
    >>> from kerasbatch.io import TokenFile, TokenFileWriter
    >>> path = os.path.join(tempfile.mkdtemp(), "corpus")
    >>> with TokenFileWriter(path, dtype="uint16") as writer:
    ...     writer.write([5, 6, 7])
    ...     writer.write_concatenated(np.arange(5), lengths=[2, 3])
    >>> tokens = TokenFile(path)
    >>> len(tokens), tokens.lengths.tolist(), tokens[2].tolist()
    (3, [3, 2, 3], [2, 3, 4])
    """

    def __init__(self, path, dtype="uint16"):
        self.path = os.fspath(path)
        self.dtype = _token_dtype(dtype)
        self.count = 0
        self._end = 0
        self._offsets = [0]
        self._tokens_path, self._index_path = paths_of(self.path)
        self._tokens = open(self._tokens_path, "wb")  # noqa: SIM115 (closed in close)
        self._index = open(self._index_path, "wb")  # noqa: SIM115
        self._index.write(self._header(0).tobytes())
        self._closed = False

    def _header(self, count):
        header = np.zeros((), _HEADER)
        header["magic"], header["version"] = MAGIC, VERSION
        header["dtype"], header["count"] = _CODES[self.dtype], count
        return header

    def write(self, tokens):
        """Appends one sequence (a 1-D array or list of token ids)."""
        self.write_concatenated(tokens, [len(tokens)])

    def write_concatenated(self, tokens, lengths):
        """Appends many sequences at once: `tokens` holds them back to back,
        `lengths` says how long each is (what a tokenizer's batch gives,
        and the fastest way to write many)."""
        if self._closed:
            raise ValueError(f"The token file writer of {self.path} is closed.")
        tokens = np.asarray(tokens)
        lengths = np.asarray(lengths, dtype=np.int64)
        if tokens.ndim != 1:
            raise ValueError(
                f"Sequence {self.count} has shape {tokens.shape}: a token file "
                "holds 1-D sequences of token ids."
            )
        if (lengths < 0).any() or int(lengths.sum()) != len(tokens):
            raise ValueError(
                f"The lengths of sequences {self.count}.. sum to "
                f"{int(lengths.sum())} (or hold a negative one), but "
                f"{len(tokens)} tokens were given."
            )
        self._check_range(tokens, lengths)
        self._tokens.write(tokens.astype(self.dtype, copy=False).tobytes())
        ends = self._end + np.cumsum(lengths)
        self._offsets.extend(ends.tolist())
        self._end = int(ends[-1]) if len(ends) else self._end
        self.count += len(lengths)
        if len(self._offsets) >= _OFFSETS_BUFFER:
            self._flush_offsets()

    def _check_range(self, tokens, lengths):
        if not len(tokens):
            return
        if tokens.dtype.kind not in "iub":
            raise TypeError(
                f"Sequence {self.count} has dtype {tokens.dtype}: token ids "
                "are integers."
            )
        info = np.iinfo(self.dtype)
        outside = (tokens < info.min) | (tokens > info.max)
        if outside.any():
            at = int(np.flatnonzero(outside)[0])
            sequence = self.count + int(
                np.searchsorted(np.cumsum(lengths), at, "right")
            )
            raise ValueError(
                f"Sequence {sequence} holds the token id {tokens[at]}, outside "
                f"{self.dtype.name}'s range [{info.min}, {info.max}]: write "
                "with a wider dtype (uint32 or int32)."
            )

    def _flush_offsets(self):
        self._index.write(np.asarray(self._offsets, "<i8").tobytes())
        self._offsets = []

    def close(self):
        """Writes the index header; the file is then complete."""
        if self._closed:
            return
        self._flush_offsets()
        self._index.seek(0)
        self._index.write(self._header(self.count).tobytes())
        self._index.close()
        self._tokens.close()
        self._closed = True

    def abort(self):
        """Closes and removes both files (a failed write)."""
        self._closed = True
        for file in (self._index, self._tokens):
            file.close()
        for path in (self._index_path, self._tokens_path):
            if os.path.exists(path):
                os.remove(path)

    def __enter__(self):
        return self

    def __exit__(self, error_type, error, traceback):
        if error_type is None:
            self.close()
        else:
            self.abort()


def write_token_file(path, sequences, dtype="uint16"):
    """Writes `sequences` (an iterable of 1-D token-id arrays or lists) into
    the token file `path` and returns it as a `TokenFile`.

    Example:

    >>> import os, tempfile
    >>> from kerasbatch.io import write_token_file
    >>> path = os.path.join(tempfile.mkdtemp(), "corpus")
    >>> write_token_file(path, [[1, 2], [3]]).lengths.tolist()
    [2, 1]
    """
    with TokenFileWriter(path, dtype) as writer:
        for sequence in sequences:
            writer.write(sequence)
    return TokenFile(path)


class TokenFile:
    """A token file, read by index: `len()` sequences, `tokens[i]` the 1-D
    array of sequence `i`, `lengths` every sequence's length.

    A random-access source for `build` (`builder.build(TokenFile(path),
    engine=...)`): its `lengths` come from the index, so planning reads no
    token, and `__getitems__` reads a batch's sequences in one call.

    Args:
        path: the token file's path, without suffix (`<path>.bin`,
            `<path>.idx`, as `TokenFileWriter` wrote them).
        dtype: the dtype of the arrays read (default: the stored one), e.g.
            `"int32"` for an embedding that takes int32 ids.

    Raises:
        FileNotFoundError: a file is missing (named).
        ValueError: a file is cut short, longer than its index says, or not
            a token file (named, with what was found).

    Example:

    >>> import os, tempfile
    >>> from kerasbatch.io import TokenFile, write_token_file
    >>> path = os.path.join(tempfile.mkdtemp(), "corpus")
    >>> _ = write_token_file(path, [[1, 2, 3], [4]])
    >>> tokens = TokenFile(path, dtype="int32")
    >>> tokens[0], len(tokens)
    (array([1, 2, 3], dtype=int32), 2)
    """

    def __init__(self, path, dtype=None):
        self.path = os.fspath(path)
        self.tokens_path, self.index_path = paths_of(self.path)
        header, self.offsets = _read_index(self.index_path)
        self.stored_dtype = DTYPES[int(header["dtype"])]
        self.dtype = self.stored_dtype if dtype is None else np.dtype(dtype)
        _check_tokens(self.tokens_path, self.stored_dtype, self.offsets)
        self._file = None

    def __getstate__(self):  # a worker process opens the file itself
        return {**self.__dict__, "_file": None}

    def _read(self, start, end):
        """Tokens `[start, end)`: read from the file (no memory map: the
        process's memory does not grow with the tokens read)."""
        if self._file is None:
            self._file = open(self.tokens_path, "rb", buffering=0)  # noqa: SIM115
        size = self.stored_dtype.itemsize
        data = os.pread(self._file.fileno(), int(end - start) * size, int(start) * size)
        if len(data) != (end - start) * size:
            raise ValueError(
                f"The token file's tokens {self.tokens_path} end at byte "
                f"{int(start) * size + len(data)}, before the {int(end)} tokens "
                "its index says: the file was cut short after it was opened."
            )
        return np.frombuffer(data, self.stored_dtype).astype(self.dtype)

    @property
    def paths(self):
        """The files read (what a cache of lengths is keyed on)."""
        return [self.tokens_path, self.index_path]

    @property
    def lengths(self):
        """The length of every sequence, from the index (int32 where the
        lengths fit: what a plan of many sequences holds in memory)."""
        lengths = np.diff(self.offsets)
        if len(lengths) and lengths.max() < 2**31:
            return lengths.astype(np.int32)
        return lengths

    def __len__(self):
        return len(self.offsets) - 1

    def _checked(self, index):
        count = len(self)
        if not -count <= index < count:
            raise IndexError(
                f"Index {index} is out of range for the {count} sequences of "
                f"{self.tokens_path}."
            )
        return index % count

    def __getitem__(self, index):
        index = self._checked(int(index))
        return self._read(self.offsets[index], self.offsets[index + 1])

    def __getitems__(self, indices):
        """The sequences `indices` (a list of arrays)."""
        indices = [self._checked(int(index)) for index in indices]
        starts, ends = self.offsets[indices], self.offsets[np.add(indices, 1)]
        return [self._read(a, b) for a, b in zip(starts, ends, strict=True)]

    def __repr__(self):
        return (
            f"TokenFile({self.path!r}: {len(self)} sequences, "
            f"{int(self.offsets[-1])} {self.stored_dtype.name} tokens)"
        )


def _read_index(path):
    """`(header, offsets)` of the index file `path`, checked."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"The token file's index {path} does not exist.")
    size = os.path.getsize(path)
    if size < _HEADER.itemsize:
        raise ValueError(
            f"The token file's index {path} holds {size} bytes, fewer than its "
            f"{_HEADER.itemsize}-byte header: it is cut short, or not an index."
        )
    header = np.fromfile(path, _HEADER, count=1)[0]
    if header["magic"] != MAGIC or int(header["dtype"]) not in DTYPES:
        raise ValueError(
            f"{path} is not a token file's index (it does not start with "
            f"{MAGIC!r} and a known dtype)."
        )
    count = int(header["count"])
    expected = _HEADER.itemsize + 8 * (count + 1)
    if size != expected:
        raise ValueError(
            f"The token file's index {path} holds {size} bytes, but its "
            f"header promises {count} sequences ({expected} bytes): it is "
            f"{'cut short' if size < expected else 'longer than written'} "
            "(an interrupted write?)."
        )
    offsets = np.fromfile(path, "<i8", count=count + 1, offset=_HEADER.itemsize)
    steps = np.diff(offsets)
    if offsets[0] != 0 or (steps < 0).any():
        at = 0 if offsets[0] != 0 else int(np.flatnonzero(steps < 0)[0]) + 1
        raise ValueError(
            f"The token file's index {path} has offset {at} = {offsets[at]}, "
            "not an increasing offset from 0: the index is damaged."
        )
    return header, offsets


def _check_tokens(path, dtype, offsets):
    """Raises unless the tokens file `path` holds the tokens the index says."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"The token file's tokens {path} do not exist.")
    size = os.path.getsize(path)
    expected = int(offsets[-1]) * dtype.itemsize
    if size != expected:
        raise ValueError(
            f"The token file's tokens {path} hold {size} bytes, but its index "
            f"says {int(offsets[-1])} {dtype.name} tokens ({expected} bytes): "
            f"the file is {'cut short' if size < expected else 'longer than indexed'}."
        )
