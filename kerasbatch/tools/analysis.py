"""`kerasbatch.analyze`: what each way of batching costs on your lengths, before training.

`analyze(lengths)` plans the epochs of every candidate builder from the
lengths alone, with the builders' own planning (`kerasbatch.planning.batching`:
exact, no tensor is built, and neither Keras nor TensorFlow is imported),
and tabulates padding efficiency, distinct batch shapes (what XLA and JAX
compile once each), steps per epoch and real tokens per step. It then
estimates the seconds of a training run with a Keras backend on a CPU or a
GPU and recommends the cheapest row of the table, with the line to paste.

The estimate is the tuner's (`kerasbatch.tuner.CompileCost`), with a term
for attention:

    run seconds = padded positions of all epochs × seconds_per_position
                + pairs of padded positions in a row, all epochs
                  (rows × padded length² of every batch)
                  × seconds_per_position_pair
                + steps of all epochs × seconds_per_step
                + distinct shapes of all epochs × seconds_per_shape

with the costs of `kerasbatch.planning.costs.BACKEND_COSTS` (measured on the
hardware each names) or of a `CompileCost` measured on your own model.
`python -m kerasbatch analyze` runs it from the command line.
"""

import dataclasses
import numbers
import os
import sys

import numpy as np

from kerasbatch.planning import batching
from kerasbatch.planning import costs as costs_lib
from kerasbatch.planning import plan as plan_lib
from kerasbatch.planning.costs import BackendCosts
from kerasbatch.tools.lengths import read_lengths

__all__ = ["Analysis", "StrategyRow", "analyze", "check_plot_path"]

#: The number of buckets of the bucket rows (besides one bucket: every
#: batch padded to the longest length, one fixed shape).
NUM_BUCKETS = (4, 8, 16, 32, 64)
#: Packed rows hold about this many sequences of the 90th percentile length
#: (at least the longest, rounded up to a multiple of `ROW_MULTIPLE`).
PACKED_SEQUENCES = (1, 2, 4, 8)
#: Packed row lengths are multiples of this.
ROW_MULTIPLE = 64
#: Planning shows its progress from this many sequences on (`verbose=1`).
PROGRESS_MIN_SEQUENCES = 100_000
_HISTOGRAM_BINS = 12
_BAR_WIDTH = 40


@dataclasses.dataclass(frozen=True)
class StrategyRow:
    """One way of batching the lengths, and what its epochs cost.

    Every figure comes from the builders' own planning
    (`kerasbatch.planning.batching`), so it is what `builder.statistics()` and
    `builder.batch_shapes()` report after `build` on data of these lengths.

    Attributes:
        name: the row's label, e.g. `"buckets 8, tokens"`.
        builder_class: the builder's class name, e.g. `"BucketBuilder"`.
        arguments: the builder's constructor arguments.
        padding_efficiency: real / padded positions of the first epoch.
        distinct_shapes: distinct batch shapes of the first epoch.
        new_shapes_later: shapes of the later epochs that the first did
            not feed (each is one more compile under XLA).
        steps_per_epoch: batches of the first epoch (the same every epoch).
        tokens_per_step: real positions per step in the first epoch.
        compile_seconds: all the epochs' distinct shapes × the seconds per
            shape, or None where shapes are not compiled.
        estimated_seconds: the run's estimated seconds (see the module
            docstring), or None where `analyze` has no costs.
        boundaries: the resolved bucket boundaries, or None.

    Example:

    >>> import kerasbatch
    >>> analysis = kerasbatch.analyze(
    ...     [3, 5, 8, 13, 2, 9, 4, 6], batch_size=2, epochs=2, backend="torch",
    ...     device="cpu", num_buckets=(2,), verbose=0)
    >>> row = analysis.rows[3]
    >>> row.name, row.boundaries, row.steps_per_epoch
    ('buckets 2', (7,), 5)
    >>> row.builder_line
    'kerasbatch.BucketBuilder(num_buckets=2, batch_size=2, pad_to_bucket=True, remainder="even")'
    """

    name: str
    builder_class: str
    arguments: dict
    padding_efficiency: float
    distinct_shapes: int
    new_shapes_later: int
    steps_per_epoch: int
    tokens_per_step: float
    compile_seconds: float | None
    estimated_seconds: float | None
    boundaries: tuple | None = None

    @property
    def packed(self):
        """Whether the rows hold several sequences (the model must take
        segment ids)."""
        return self.builder_class == "PackedBuilder"

    @property
    def builder_line(self):
        """The Python expression that makes this builder."""
        arguments = dict(self.arguments)
        parts = []
        if self.packed:
            parts.append(str(arguments.pop("sequence_length")))
        parts += [f"{key}={_literal(value)}" for key, value in arguments.items()]
        return f"kerasbatch.{self.builder_class}({', '.join(parts)})"

    def make_builder(self):
        """A new builder with these arguments (not built; imports Keras)."""
        from kerasbatch import builders

        return getattr(builders, self.builder_class)(**self.arguments)

    def to_dict(self):
        """The row as a JSON-serialisable dict, with its `builder_line`."""
        row = dataclasses.asdict(self)
        row["boundaries"] = None if self.boundaries is None else list(self.boundaries)
        row["builder_line"] = self.builder_line
        row["packed"] = self.packed
        return row


@dataclasses.dataclass(frozen=True, eq=False)
class Analysis:
    """What `analyze` found: the lengths, a row per strategy, the recommendation.

    `str(analysis)` is the whole report (histogram, table, recommendation);
    `table()`, `histogram()` and `recommendation()` are its parts;
    `to_dict()` gives every figure as JSON-serialisable values; `plot()`
    draws the length histogram and each strategy's padding efficiency.

    Attributes:
        lengths: int64 length of every sequence.
        rows: a `StrategyRow` per strategy, in table order.
        recommended: the row of least estimated seconds (None without
            costs).
        recommended_unpacked: the same among the rows that do not pack
            (for a model that cannot take packed rows).
        backend: `"jax"`, `"tensorflow"` or `"torch"`.
        device: `"cpu"` or `"gpu"`: the hardware the estimate is for.
        device_reason: how the device was chosen, e.g. `"as asked"`.
        costs: the `BackendCosts` the estimate used, or None where there
            are no figures for the backend on the device.
        epochs: the epochs of the estimated run.
        batch_size, max_tokens, sequence_lengths, seed: the settings of the
            rows (sequence_lengths: of the packed rows).

    Example:

    >>> import kerasbatch
    >>> analysis = kerasbatch.analyze(
    ...     [3, 5, 8, 13, 2, 9, 4, 6], batch_size=2, epochs=2, backend="torch",
    ...     device="cpu", num_buckets=(2,), verbose=0)
    >>> print(analysis.table())
    strategy           pad. eff.  shapes  new later  steps/epoch  tokens/step  est. s
    padded                 0.694       4          0            4           12  0.0499
    sorted +               0.862       4          0            4           12  0.0498
    buckets 1              0.481       1          0            4           12  0.0502
    buckets 2              0.568       2          0            5           10  0.0624
    buckets 1, tokens      0.481       1          0            4           12  0.0502
    buckets 2, tokens      0.568       2          0            4           12    0.05
    packed 64 *            0.781       1          0            1           50  0.0129
    2 epochs with torch on a CPU, which compiles no shape; * recommended, + without packing
    >>> analysis.recommended_unpacked.builder_line
    'kerasbatch.SortedBuilder(batch_size=2)'
    """

    lengths: np.ndarray = dataclasses.field(repr=False)
    rows: tuple
    recommended: StrategyRow | None
    recommended_unpacked: StrategyRow | None
    backend: str
    device: str
    device_reason: str
    costs: BackendCosts | None
    epochs: int
    batch_size: int
    max_tokens: int
    sequence_lengths: tuple
    seed: int

    def __repr__(self):
        best = "None" if self.recommended is None else self.recommended.builder_line
        return (
            f"Analysis({len(self.lengths)} sequences, {len(self.rows)} strategies, "
            f"backend={self.backend!r}, device={self.device!r}, "
            f"epochs={self.epochs}, recommended={best})"
        )

    def __str__(self):
        return "\n\n".join([self.histogram(), self.table(), self.recommendation()])

    def summary(self):
        """Count, range, mean and percentiles of the lengths (a dict)."""
        lengths = self.lengths
        return {
            "sequences": len(lengths),
            "tokens": int(lengths.sum()),
            "shortest": int(lengths.min()),
            "longest": int(lengths.max()),
            "mean": float(lengths.mean()),
            "median": _quantile(lengths, 0.5),
            "p90": _quantile(lengths, 0.9),
            "p99": _quantile(lengths, 0.99),
        }

    def histogram_counts(self, bins=_HISTOGRAM_BINS):
        """`(edges, counts)` of about `bins` integer-aligned bins
        `[edges[i], edges[i + 1])` of equal width covering the lengths."""
        low, high = int(self.lengths.min()), int(self.lengths.max())
        width = max(1, -(-(high + 1 - low) // bins))
        edges = np.arange(low, high + width + 1, width)
        counts, _ = np.histogram(self.lengths, bins=edges)
        return edges, counts

    def histogram(self, bins=_HISTOGRAM_BINS, width=_BAR_WIDTH):
        """The length histogram as text bars, under a line of percentiles."""
        s = self.summary()
        lines = [
            f"{s['sequences']} sequences, {s['tokens']} tokens: lengths "
            f"{s['shortest']} to {s['longest']}, mean {s['mean']:.1f}, median "
            f"{s['median']}, 90% <= {s['p90']}, 99% <= {s['p99']}"
        ]
        edges, counts = self.histogram_counts(bins)
        labels = [f"{a}-{b - 1}" if b - 1 > a else f"{a}" for a, b in _pairs(edges)]
        label_width = max(len(label) for label in labels)
        most = max(int(counts.max()), 1)
        for label, count in zip(labels, counts, strict=True):
            bar = "█" * round(width * count / most)
            if count and not bar:
                bar = "▏"
            lines.append(
                f"  {label:>{label_width}} | {bar + ' ' if bar else ''}{count}"
            )
        return "\n".join(lines)

    def table(self):
        """The strategies as a text table; `*` marks the recommendation, `+`
        the best without packing. The compile column shows only where
        shapes are compiled, the estimate only where there are costs."""
        costs = self.costs
        compiles = costs is not None and costs.compiles
        columns = [
            ("strategy", lambda row: row.name + self._mark(row)),
            ("pad. eff.", lambda row: f"{row.padding_efficiency:.3f}"),
            ("shapes", lambda row: str(row.distinct_shapes)),
            ("new later", lambda row: str(row.new_shapes_later)),
            ("steps/epoch", lambda row: str(row.steps_per_epoch)),
            ("tokens/step", lambda row: f"{row.tokens_per_step:.0f}"),
        ]
        if compiles:
            columns.append(
                ("compile s", lambda row: _seconds_text(row.compile_seconds))
            )
        if costs is not None:
            columns.append(("est. s", lambda row: _seconds_text(row.estimated_seconds)))
        cells = [[show(row) for _, show in columns] for row in self.rows]
        headers = [header for header, _ in columns]
        widths = [
            max(len(header), *(len(cell[i]) for cell in cells))
            for i, header in enumerate(headers)
        ]

        def line(values):
            first = f"{values[0]:<{widths[0]}}"
            rest = (f"{v:>{w}}" for v, w in zip(values[1:], widths[1:], strict=True))
            return "  ".join([first, *rest])

        lines = [line(headers)] + [line(cell) for cell in cells]
        footer = f"{self.epochs} epochs"
        if costs is None:
            footer += f"; no estimate for {self.backend} on {self._hardware()}"
        else:
            footer += f" with {self.backend} on {self._hardware()}"
            if compiles:
                footer += (
                    f"; compile s: shapes of all epochs x {costs.seconds_per_shape:g} s"
                )
            else:
                footer += ", which compiles no shape"
            footer += "; * recommended"
            if self.recommended is not self.recommended_unpacked:
                footer += ", + without packing"
        lines.append(footer)
        return "\n".join(lines)

    def recommendation(self):
        """The recommended builder, why, and the line to paste; or, without
        costs, how to get them."""
        costs = self.costs
        if costs is None:
            return (
                f"No time estimate: analyze has no figures for {self.backend} "
                f"on {self._hardware()} ({self.device_reason}); measure your "
                "model's with kerasbatch.tuner.CompileCost.measure and give it "
                "as compile_seconds_per_shape, or choose from the table."
            )
        best, unpacked = self.recommended, self.recommended_unpacked
        lines = [
            f"Recommended for {self.backend} on {self._hardware()}, {self.epochs} "
            f"epochs: {best.name} (estimated {_seconds_text(best.estimated_seconds)} s)",
            f"    builder = {best.builder_line}",
        ]
        if best.packed:
            lines += [
                "  Packed rows need a model that takes them: x gains "
                '"packed_segment_ids" and "positions"; give attention',
                "  kerasbatch.layers.SegmentAttentionMask and compile the loss "
                'with reduction="mean_with_sample_weight".',
                f"  Without packing: {unpacked.name} (estimated "
                f"{_seconds_text(unpacked.estimated_seconds)} s)",
                f"    builder = {unpacked.builder_line}",
            ]
        if any(row.arguments.get("remainder") == "even" for row in (best, unpacked)):
            lines.append(
                '  remainder="even" adds filler rows of zero sample_weight: '
                "build with targets y."
            )
        terms = [f"{costs.seconds_per_position:.3g} s per padded position"]
        if costs.seconds_per_position_pair:
            terms.append(
                f"{costs.seconds_per_position_pair:.3g} s per pair of positions "
                "in a row"
            )
        terms.append(f"{costs.seconds_per_step:.3g} s per step")
        if costs.compiles:
            terms.append(f"{costs.seconds_per_shape:g} s per new shape")
        lines.append(
            f"  Estimate for {self.backend} on {self._hardware()} "
            f"({self.device_reason}): {' + '.join(terms)}"
            f"{'' if costs.compiles else ' (no compiles)'}, measured on "
            f"{costs.hardware} with {costs.source}."
        )
        return "\n".join(lines)

    def to_dict(self):
        """Every figure as JSON-serialisable values."""
        edges, counts = self.histogram_counts()
        return {
            "summary": self.summary(),
            "histogram": {"edges": edges.tolist(), "counts": counts.tolist()},
            "backend": self.backend,
            "device": self.device,
            "device_reason": self.device_reason,
            "costs": None if self.costs is None else self.costs.to_dict(),
            "epochs": self.epochs,
            "batch_size": self.batch_size,
            "max_tokens": self.max_tokens,
            "sequence_lengths": list(self.sequence_lengths),
            "seed": self.seed,
            "rows": [row.to_dict() for row in self.rows],
            "recommended": _name(self.recommended),
            "recommended_unpacked": _name(self.recommended_unpacked),
        }

    def plot(self, path=None):
        """Draws the length histogram and each strategy's padding efficiency.

        The histogram marks the bucket boundaries of the recommended bucket
        row (the recommendation, or the one without packing), if any.

        Args:
            path: where to save the figure (`.png`, or any format matplotlib
                writes), or None to draw with `matplotlib.pyplot` (shown in
                notebooks).

        Returns:
            The `matplotlib.figure.Figure`.

        Raises:
            ImportError: matplotlib is not installed.
            FileNotFoundError: the folder of `path` does not exist.
        """
        from kerasbatch.tools import plotting

        if path is None:
            import matplotlib.pyplot as plt

            figure = plt.figure(figsize=(13, 4))
        else:
            check_plot_path(path)
            try:
                from matplotlib.figure import Figure
            except ImportError as error:
                raise ImportError(
                    "Analysis.plot needs matplotlib; install it with "
                    "`pip install matplotlib`."
                ) from error
            figure = Figure(figsize=(13, 4))
        lengths_axes, efficiency_axes = figure.subplots(
            1, 2, gridspec_kw={"width_ratios": [1, 1.3]}
        )
        bucketed = next(
            (
                row
                for row in (self.recommended, self.recommended_unpacked)
                if row is not None and row.boundaries is not None
            ),
            None,
        )
        plotting.plot_lengths(
            self.lengths,
            boundaries=None if bucketed is None else list(bucketed.boundaries),
            ax=lengths_axes,
            title=f"{len(self.lengths)} sequences"
            + ("" if bucketed is None else f", boundaries of {bucketed.name}"),
        )
        title = "Padding efficiency"
        if self.recommended is not None:
            title += (
                f" (recommended for {self.backend} on {self._hardware()}: "
                f"{self.recommended.name})"
            )
        plotting.plot_efficiency(
            {row.name: row.padding_efficiency for row in self.rows},
            ax=efficiency_axes,
            title=title,
        )
        efficiency_axes.tick_params(axis="x", labelrotation=60, labelsize=8)
        figure.tight_layout()
        if path is not None:
            figure.savefig(path, dpi=100)
        return figure

    def _hardware(self):
        return "a GPU" if self.device == "gpu" else "a CPU"

    def _mark(self, row):
        if row is self.recommended:
            return " *"
        if row is self.recommended_unpacked:
            return " +"
        return ""


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
    the module docstring), and the best row without packing for models
    that cannot take packed rows.

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
    epochs = _positive_int(epochs, "epochs")
    batch_size = _positive_int(batch_size, "batch_size")
    seed = _int(seed, "seed")
    num_buckets = _num_buckets(num_buckets)
    lengths = read_lengths(
        lengths, features=features, tokens=tokens, tokenizer=tokenizer, verbose=verbose
    )
    longest = int(lengths.max())
    if longest == 0:
        raise ValueError(
            f"Every one of the {len(lengths)} sequences is empty (length 0): "
            "there is nothing to batch."
        )
    if max_tokens is None:
        max_tokens = max(batch_size * _quantile(lengths, 0.9), longest)
    max_tokens = _positive_int(max_tokens, "max_tokens")
    if max_tokens < longest:
        raise ValueError(
            f"max_tokens={max_tokens} is less than the longest sequence "
            f"({longest}): no batch could hold it; give max_tokens >= {longest}."
        )
    sequence_lengths = _sequence_lengths(sequence_length, lengths, max_tokens)
    strategies = list(
        _strategies(
            lengths, batch_size, max_tokens, sequence_lengths, num_buckets, seed
        )
    )
    progress = _Progress(
        len(strategies) * epochs,
        show=verbose and len(lengths) >= PROGRESS_MIN_SEQUENCES,
    )
    rows = [_row(strategy, epochs, costs, progress) for strategy in strategies]
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


def _row(strategy, epochs, costs, progress):
    """The `StrategyRow` of `epochs` epochs of `strategy`'s plans, estimated
    with `costs` (or not, where None)."""
    shapes, positions, pairs, steps = set(), 0, 0.0, 0
    for epoch in range(epochs):
        plan = strategy.plan(epoch)
        if epoch == 0:
            statistics = plan.statistics()
            real = int(plan.real_positions.sum())
        shapes.update(map(tuple, plan.shapes().tolist()))
        fed = plan.padded_positions().reshape(plan.num_batches, -1).sum(axis=1)
        positions += int(fed.sum())
        pairs += float((fed.astype(float) ** 2 / plan.batch_rows).sum())
        steps += plan.num_batches
        progress.advance()
    compile_seconds = estimate = None
    if costs is not None:
        compile_seconds = len(shapes) * costs.seconds_per_shape
        estimate = (
            positions * costs.seconds_per_position
            + pairs * costs.seconds_per_position_pair
            + steps * costs.seconds_per_step
            + compile_seconds
        )
        if not costs.compiles:
            compile_seconds = None
    return StrategyRow(
        name=strategy.name,
        builder_class=strategy.builder_class,
        arguments=strategy.arguments,
        padding_efficiency=statistics.padding_efficiency,
        distinct_shapes=statistics.distinct_shapes,
        new_shapes_later=len(shapes) - statistics.distinct_shapes,
        steps_per_epoch=statistics.num_batches,
        tokens_per_step=real / max(statistics.num_batches, 1),
        compile_seconds=compile_seconds,
        estimated_seconds=estimate,
        boundaries=strategy.boundaries,
    )


def check_plot_path(path):
    """Raises a `FileNotFoundError` of one sentence where the folder a plot
    is to be written to does not exist (before any planning).

    Args:
        path: where the plot is to be written.

    Example:

    >>> check_plot_path("lengths.png")  # the working directory exists
    >>> check_plot_path("/no/such/folder/lengths.png")
    Traceback (most recent call last):
    ...
    FileNotFoundError: Cannot write the plot to /no/such/folder/lengths.png: the folder /no/such/folder does not exist.
    """
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.isdir(folder):
        raise FileNotFoundError(
            f"Cannot write the plot to {os.fspath(path)}: the folder {folder} "
            "does not exist."
        )


# --------------------------------------------------------------- strategies
@dataclasses.dataclass(frozen=True)
class _Strategy:
    """A row to plan: its builder, and its epochs' plans (`plan(epoch)`)."""

    name: str
    builder_class: str
    arguments: dict
    plan: object
    boundaries: tuple | None = None


def _strategies(lengths, batch_size, max_tokens, sequence_lengths, num_buckets, seed):
    """Every row's `_Strategy`, planned as the builders plan (each calls
    `kerasbatch.planning.batching` as below, with these arguments' defaults)."""
    everything = np.arange(len(lengths), dtype=np.int64)
    limits = np.broadcast_to(np.int64(plan_lib.NO_LIMIT), lengths.shape)
    components = {"x": lengths}
    seeded = {"seed": seed} if seed else {}

    def planned(order, padding, bounds=None):
        return lambda epoch: batching.batch_plan(
            order,
            seed,
            epoch,
            element_limits=limits,
            element_bounds=bounds,
            component_lengths=components,
            paddings={"x": padding},
            dropped=0,
        )

    fixed = {"batch_size": batch_size, **seeded}
    order = batching.random_order(everything, batch_size, "keep", shuffle=True)
    yield _Strategy("padded", "PaddedBuilder", fixed, planned(order, "batch"))
    order = batching.sorted_order(everything, lengths, batch_size, "keep", shuffle=True)
    yield _Strategy("sorted", "SortedBuilder", fixed, planned(order, "batch"))
    bucketed = {"pad_to_bucket": True, "remainder": "even", **seeded}
    layouts, seen = {}, set()
    for budget in (None, max_tokens):
        for count in sorted({1, *num_buckets}):
            if count not in layouts:
                boundaries = batching.resolve_boundaries(batching.AUTO, lengths, count)
                layouts[count] = batching.bucket_layout(
                    lengths,
                    everything,
                    limits,
                    components,
                    {"x": "bucket"},
                    boundaries=boundaries,
                    last_upper=int(lengths.max()),
                    truncate=False,
                    pad_to_multiple=1,
                )
            layout = layouts[count]
            boundaries = layout.buckets.boundaries
            if (budget, boundaries) in seen:  # fewer distinct lengths than buckets
                continue
            seen.add((budget, boundaries))
            if budget is None:
                sizes = [batch_size] * layout.buckets.num_buckets
                sizing, name = {"batch_size": batch_size}, f"buckets {count}"
            else:
                sizes = [
                    batching.budget_batch_size(budget, padded, members)
                    for padded, members in zip(
                        layout.padded_lengths, layout.counts, strict=True
                    )
                ]
                sizing, name = {"max_tokens": budget}, f"buckets {count}, tokens"
            order = batching.bucket_order(
                everything, layout.bucket_of, sizes, "even", shuffle=True
            )
            yield _Strategy(
                name,
                "BucketBuilder",
                {"num_buckets": count, **sizing, **bucketed},
                planned(order, "bucket", layout.element_bounds),
                boundaries,
            )
    for sequence_length in sequence_lengths:
        rows = max(1, max_tokens // sequence_length)
        order = batching.packed_order(
            everything, lengths, sequence_length, rows, "even", shuffle=True
        )
        yield _Strategy(
            f"packed {sequence_length}",
            "PackedBuilder",
            {
                "sequence_length": sequence_length,
                "batch_size": rows,
                "remainder": "even",
                **seeded,
            },
            _packed_plans(order, seed, sequence_length, lengths),
        )


def _packed_plans(order, seed, sequence_length, lengths):
    """`plan(epoch)` of packed rows of `lengths`."""
    return lambda epoch: batching.packed_plan(
        order,
        seed,
        epoch,
        sequence_length=sequence_length,
        lengths=lengths,
        cut_lengths=lengths,
        component_names=("x",),
        dropped=0,
    )


def _sequence_lengths(sequence_length, lengths, max_tokens):
    """The packed rows' lengths, sorted."""
    longest = int(lengths.max())
    if sequence_length is None:
        p90 = _quantile(lengths, 0.9)
        candidates = {
            plan_lib.round_up(max(longest, count * p90), ROW_MULTIPLE)
            for count in PACKED_SEQUENCES
        }
        shortest = min(candidates)
        return tuple(sorted(c for c in candidates if c == shortest or c <= max_tokens))
    given = (
        sequence_length
        if isinstance(sequence_length, list | tuple)
        else [sequence_length]
    )
    if not given:
        raise ValueError("sequence_length must hold at least one length.")
    checked = sorted({_positive_int(value, "sequence_length") for value in given})
    if checked[0] < longest:
        raise ValueError(
            f"sequence_length={checked[0]} is shorter than the longest "
            f"sequence ({longest}): packed rows must hold every sequence; give "
            f"sequence_length >= {longest}."
        )
    return tuple(checked)


# --------------------------------------------------------------- helpers
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


def _pairs(edges):
    """`(edges[i], edges[i + 1])` for every bin."""
    return zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True)


def _quantile(lengths, q):
    return int(np.quantile(lengths, q, method="higher"))


def _seconds_text(seconds):
    """Seconds with one decimal, or 3 significant digits below 1 s."""
    return f"{seconds:.1f}" if seconds >= 1 or seconds == 0 else f"{seconds:.3g}"


def _seconds(row):
    return row.estimated_seconds


def _name(row):
    return None if row is None else row.name


def _literal(value):
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def _positive_int(value, name):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name} must be a positive int, got {value!r}.")
    if value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return int(value)


def _int(value, name):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {value!r}.")
    return int(value)


def _num_buckets(values):
    if isinstance(values, numbers.Integral):
        values = (values,)
    values = tuple(
        _positive_int(value, f"num_buckets[{i}]") for i, value in enumerate(values)
    )
    if not values:
        raise ValueError("num_buckets must hold at least one bucket count.")
    return values
