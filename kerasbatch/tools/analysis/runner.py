"""`analyze`: every candidate strategy planned over the lengths, and the cheapest.

`analyze` checks its settings (`kerasbatch.tools.analysis.settings`), reads
the lengths (`kerasbatch.tools.lengths`), plans the epochs of every
candidate (`kerasbatch.tools.analysis.strategies`), prices them with the
backend's costs (`kerasbatch.tools.analysis.costs`) and returns the
`Analysis` (`kerasbatch.tools.analysis.report`) with the cheapest row
recommended. Imports neither Keras nor TensorFlow (only to read a TFRecord
dataset, or sequences as builders take them).
"""

import sys

from kerasbatch.planning import costs as costs_lib
from kerasbatch.tools.analysis import settings
from kerasbatch.tools.analysis.report import Analysis
from kerasbatch.tools.analysis.settings import NUM_BUCKETS
from kerasbatch.tools.analysis.strategies import candidates, evaluate
from kerasbatch.tools.lengths import read_lengths

__all__ = ["PROGRESS_MIN_SEQUENCES", "analyze"]

#: Planning shows its progress from this many sequences on (`verbose=1`).
PROGRESS_MIN_SEQUENCES = 100_000


def analyze(
    lengths,
    *,
    batch_size=32,
    max_tokens=None,
    sequence_length=None,
    epochs=10,
    backend=None,
    device=None,
    compile_seconds_per_shape=None,
    num_buckets=NUM_BUCKETS,
    seed=0,
    features=None,
    tokens=None,
    tokenizer=None,
    verbose=1,
):
    """What each way of batching costs on these lengths, and which to use.

    Plans `epochs` epochs of each strategy from the lengths alone and
    tabulates them: `PaddedBuilder` and `SortedBuilder` (`batch_size`);
    `BucketBuilder(num_buckets=n, pad_to_bucket=True, remainder="even")`
    for one bucket (every batch padded to the longest length: one fixed
    shape) and for each `n` of `num_buckets`, by `batch_size` and by the
    token budget `max_tokens` (rows whose boundaries equal an earlier row's
    are left out); and `PackedBuilder(L, batch_size=max_tokens // L,
    remainder="even")` for each packed row length `L`. The recommendation
    is the row of least estimated seconds with `backend` on `device` (see
    `kerasbatch.tools.analysis.costs`), and the best row without packing
    for models that cannot take packed rows.

    Args:
        lengths: the sequences' lengths: a path to a `.npy` file (a 1-D int
            array), a `.txt` file (one length per line) or, with `tokens`
            or `tokenizer`, any text file (a sequence per non-blank line); a
            TFRecord dataset's directory (its manifest and records: the
            length-index pass of `kerasbatch.io.TFRecordLoader.lengths`,
            cached in `__lengths__/`; needs TensorFlow); a 1-D array or
            list of lengths; a list of str with `tokens` or `tokenizer`; or
            the sequences themselves as builders take them (a list of
            arrays, a `tf.RaggedTensor`, a dict of those: their lengths are
            taken; needs Keras).
        batch_size: elements per batch of the fixed-size rows.
        max_tokens: the token budget (batch size × padded length) of the
            budget and packed rows. Default: `batch_size` × the 90th
            percentile length (what a batch of most sequences holds), at
            least the longest length.
        sequence_length: the packed rows' length, or a list of lengths.
            Default: rows that hold about 1, 2, 4 and 8 sequences of the
            90th percentile length (at least the longest length, rounded up
            to a multiple of 64), those beyond `max_tokens` left out.
        epochs: epochs of the estimated run; all are planned.
        backend: `"jax"`, `"tensorflow"` or `"torch"`. Default: Keras'
            backend (where Keras is imported, else `KERAS_BACKEND`, else
            the one in Keras' `keras.json`, else Keras' default,
            `"tensorflow"`), read without importing Keras.
        device: `"cpu"` or `"gpu"`: the hardware whose costs
            (`kerasbatch.planning.costs.BACKEND_COSTS`) the estimate uses. Default: `"gpu"` where this
            machine shows an NVIDIA GPU (and `CUDA_VISIBLE_DEVICES` does not
            hide it), else `"cpu"`.
        compile_seconds_per_shape: seconds to compile a batch shape, which
            replace the costs' own (0: no compiles); or a
            `kerasbatch.tuner.CompileCost` measured on your model, whose
            seconds per shape, per position and per step then replace the
            costs altogether. Default: the costs' own.
        num_buckets: the bucket counts of the bucket rows (one bucket is
            always a row).
        seed: the builders' seed.
        features: for a TFRecord directory, the variable-length features
            that make an element's length (default: all of them).
        tokens: for text, what a sequence's length counts: `"words"`
            (whitespace-separated), `"chars"` (characters of the line,
            without its line ending) or `"bytes"` (its UTF-8 bytes).
        tokenizer: for text, a function from a line (a str) to its tokens
            (anything with a `len()`, e.g. a list of token ids), instead of
            `tokens`.
        verbose: 1 shows progress while lengths are read from TFRecords and
            while the epochs of 100 000 or more sequences are planned; 0
            shows none.

    Returns:
        An `Analysis`.

    Raises:
        FileNotFoundError: a path that does not exist.
        ValueError: empty, negative, too long or non-integer lengths (naming
            the element, or the file and line), an unknown backend or
            device, or settings no batch can meet (`max_tokens` or
            `sequence_length` shorter than the longest sequence).
        TypeError: lengths or settings of the wrong type.
        ImportError: a TFRecord dataset without TensorFlow installed.

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> lengths = np.random.default_rng(0).integers(1, 200, 2000)
    >>> analysis = kerasbatch.analyze(
    ...     lengths, batch_size=32, epochs=2, backend="jax", device="gpu",
    ...     num_buckets=(4, 8), verbose=0)
    >>> [row.name for row in analysis.rows]  # doctest: +NORMALIZE_WHITESPACE
    ['padded', 'sorted', 'buckets 1', 'buckets 4', 'buckets 8',
     'buckets 1, tokens', 'buckets 4, tokens', 'buckets 8, tokens',
     'packed 256', 'packed 384', 'packed 768', 'packed 1472']
    >>> analysis.recommended.builder_line
    'kerasbatch.PackedBuilder(384, batch_size=15, remainder="even")'
    >>> analysis.recommended_unpacked.name
    'buckets 1'
    >>> row = analysis.rows[3]
    >>> builder = row.make_builder()
    >>> builder.adapt(lengths)
    >>> builder.statistics().padding_efficiency == row.padding_efficiency
    True
    """
    backend = costs_lib.resolve_backend(backend)
    device, device_reason = costs_lib.resolve_device(device)
    costs = costs_lib.resolve_costs(backend, device, compile_seconds_per_shape)
    epochs = settings.positive_int(epochs, "epochs")
    batch_size = settings.positive_int(batch_size, "batch_size")
    seed = settings.integer(seed, "seed")
    num_buckets = settings.bucket_counts(num_buckets)
    lengths = read_lengths(
        lengths, features=features, tokens=tokens, tokenizer=tokenizer, verbose=verbose
    )
    if int(lengths.max()) == 0:
        raise ValueError(
            f"Every one of the {len(lengths)} sequences is empty (length 0): "
            "there is nothing to batch."
        )
    max_tokens = settings.token_budget(max_tokens, lengths, batch_size)
    sequence_lengths = settings.packed_row_lengths(sequence_length, lengths, max_tokens)
    strategies = list(
        candidates(lengths, batch_size, max_tokens, sequence_lengths, num_buckets, seed)
    )
    progress = _Progress(
        len(strategies) * epochs,
        show=verbose and len(lengths) >= PROGRESS_MIN_SEQUENCES,
    )
    rows = [evaluate(strategy, epochs, costs, progress) for strategy in strategies]
    progress.close()
    recommended = recommended_unpacked = None
    if costs is not None:
        recommended = min(rows, key=_seconds)
        recommended_unpacked = min((r for r in rows if not r.packed), key=_seconds)
    return Analysis(
        lengths=lengths,
        rows=tuple(rows),
        recommended=recommended,
        recommended_unpacked=recommended_unpacked,
        backend=backend,
        device=device,
        device_reason=device_reason,
        costs=costs,
        epochs=epochs,
        batch_size=batch_size,
        max_tokens=max_tokens,
        sequence_lengths=sequence_lengths,
        seed=seed,
    )


class _Progress:
    """A line on stderr counting the epoch plans made, where `show` and
    stderr is a terminal."""

    def __init__(self, total, show):
        self.total, self.done = total, 0
        self.show = bool(show) and sys.stderr.isatty()

    def advance(self):
        self.done += 1
        if self.show:
            sys.stderr.write(f"\rPlanning epochs: {self.done}/{self.total}")
            sys.stderr.flush()

    def close(self):
        if self.show:
            sys.stderr.write("\n")


def _seconds(row):
    return row.estimated_seconds
