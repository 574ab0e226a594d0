"""`kerasbatch.analyze`: what each way of batching costs on your lengths, before training.

`analyze(lengths)` plans the epochs of every candidate builder on the
lengths alone (`builder.adapt`, then `builder.plan(epoch)`: exact, no
tensor is built) and tabulates padding efficiency, distinct batch shapes
(what XLA and JAX compile once each), steps per epoch and real tokens per
step. It then estimates the seconds of a training run on a Keras backend
and recommends the builder that costs least, with the line to paste.

The estimate is the tuner's (`kerasbatch.tuner.CompileCost`):

    run seconds = padded positions of all epochs × seconds_per_position
                + steps of all epochs × seconds_per_step
                + distinct shapes of all epochs × seconds_per_shape

with the costs of `BACKEND_COSTS` (measured, see there) or of a
`CompileCost` measured on your own model. `python -m kerasbatch analyze`
runs it from the command line.
"""

import dataclasses
import math
import numbers
import os

import keras
import numpy as np

from kerasbatch import boundaries as boundaries_lib
from kerasbatch import sources
from kerasbatch.builders import (
    BucketBuilder,
    PackedBuilder,
    PaddedBuilder,
    SortedBuilder,
)

__all__ = ["BACKEND_COSTS", "Analysis", "BackendCosts", "StrategyRow", "analyze"]

#: The number of buckets of the bucket rows.
NUM_BUCKETS = (4, 8, 16, 32, 64)
#: Seconds to compile one batch shape: a 4-layer Transformer encoder (d=256,
#: 4 heads) train step on JAX with an H200 GPU (issue 23).
COMPILE_SECONDS_PER_SHAPE = 6.5
#: Packed rows are the longest length rounded up to a multiple of this.
ROW_MULTIPLE = 64
#: Planning shows a progress bar from this many sequences on (`verbose=1`).
PROGRESS_MIN_SEQUENCES = 100_000
_HISTOGRAM_BINS = 12
_BAR_WIDTH = 40


@dataclasses.dataclass(frozen=True)
class BackendCosts:
    """What one training step costs on a Keras backend, for `analyze`'s estimate.

    Attributes:
        seconds_per_position: seconds per padded position fed (padding
            included: it is computed as data is).
        seconds_per_step: fixed seconds per step (optimizer update, dispatch,
            framework overhead), whatever the batch holds.
        compiles: whether every new batch shape is compiled (XLA on JAX);
            each costs `compile_seconds_per_shape`.
        source: where the figures come from.

    Example:

    >>> from kerasbatch.analysis import BACKEND_COSTS
    >>> BACKEND_COSTS["torch"].seconds_per_step
    0.024
    >>> BACKEND_COSTS["jax"].compiles, BACKEND_COSTS["tensorflow"].compiles
    (True, False)
    """

    seconds_per_position: float
    seconds_per_step: float
    compiles: bool
    source: str

    def to_dict(self):
        """The costs as a JSON-serialisable dict."""
        return dataclasses.asdict(self)


#: Default costs per backend, each measured on one machine; only their
#: ratios matter for the ranking. Give a `CompileCost` measured on your model
#: (`kerasbatch.tuner.CompileCost.measure`) for your own figures.
#:
#: - `jax`: a line fitted to the steady epochs of a 4-layer Transformer
#:   encoder on an H200 (issue 23; 16 384 lognormal sequences, mean 55):
#:   padded to 512 (1.41 s), 8 buckets (0.95 s), 8 buckets under a token
#:   budget of 6144 (0.72 s) and packed rows of 512 (0.76 s); the line
#:   gives them within 5 %. Every shape compiles (6.5 s each there), so
#:   bounded shapes and one-shape packing win, and a token budget (fewer,
#:   fuller steps) beats a fixed batch size.
#: - `torch`: Keras on torch on the same GPU took about 24 ms a step
#:   whatever the padding (padded-512 6.1 s, buckets 6.7 s, token budget
#:   5.5 s per epoch) and compiles nothing: per-step overhead sets its
#:   speed (positions nearly free), so fewer, larger steps help more than
#:   less padding.
#: - `tensorflow`: Keras on TensorFlow without XLA (`jit_compile=False`;
#:   Keras' `"auto"` on a CPU), the GRU of `benchmarks/RESULTS.md` on 2 CPU
#:   cores: 2.4 ms a step and 0.24 ms per padded time step of 64 rows.
#:   Padding efficiency dominates. On a GPU `jit_compile="auto"` compiles
#:   every shape with XLA: choose `jax` there.
BACKEND_COSTS = {
    "jax": BackendCosts(
        seconds_per_position=6.5e-8,
        seconds_per_step=3.4e-3,
        compiles=True,
        source="a 4-layer Transformer, JAX on an H200, issue 23",
    ),
    "tensorflow": BackendCosts(
        seconds_per_position=3.75e-6,
        seconds_per_step=2.4e-3,
        compiles=False,
        source="a GRU, TensorFlow without XLA on 2 CPU cores, benchmarks/RESULTS.md",
    ),
    "torch": BackendCosts(
        seconds_per_position=1e-8,
        seconds_per_step=0.024,
        compiles=False,
        source="a 4-layer Transformer, torch on an H200, issue 23",
    ),
}


@dataclasses.dataclass(frozen=True)
class StrategyRow:
    """One way of batching the lengths, and what its epochs cost.

    Every figure comes from the builder's own plans (`adapt` on the lengths,
    then `plan(epoch)`), so it is what `builder.statistics()` and
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
            shape (what XLA would spend compiling).
        estimated_seconds: the run's estimated seconds on the backend (see
            the module docstring).
        boundaries: the resolved bucket boundaries, or None.

    Example:

    >>> import kerasbatch
    >>> analysis = kerasbatch.analyze(
    ...     [3, 5, 8, 13, 2, 9, 4, 6], batch_size=2, epochs=2, backend="torch",
    ...     num_buckets=(2,), verbose=0)
    >>> row = analysis.rows[2]
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
    compile_seconds: float
    estimated_seconds: float
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
        """A new builder with these arguments (not built)."""
        classes = {
            cls.__name__: cls
            for cls in (PaddedBuilder, SortedBuilder, BucketBuilder, PackedBuilder)
        }
        return classes[self.builder_class](**self.arguments)

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
        recommended: the row of least estimated seconds.
        recommended_unpacked: the same among the rows that do not pack
            (for a model that cannot take packed rows).
        backend: `"jax"`, `"tensorflow"` or `"torch"`.
        epochs: the epochs of the estimated run.
        costs: the `BackendCosts` the estimate used.
        compile_seconds_per_shape: seconds per compiled shape.
        batch_size, max_tokens, sequence_length, seed: the settings of the
            rows (sequence_length: of the packed rows).

    Example:

    >>> import kerasbatch
    >>> analysis = kerasbatch.analyze(
    ...     [3, 5, 8, 13, 2, 9, 4, 6], batch_size=2, epochs=2, backend="torch",
    ...     num_buckets=(2,), verbose=0)
    >>> print(analysis.table())
    strategy           pad. eff.  shapes  new later  steps/epoch  tokens/step  compile s  est. torch s
    padded                 0.694       4          0            4           12       26.0         0.192
    sorted +               0.862       4          0            4           12       26.0         0.192
    buckets 2              0.568       2          0            5           10       13.0          0.24
    buckets 2, tokens      0.568       2          0            4           12       13.0         0.192
    packed 64 *            0.781       1          0            1           50        6.5         0.048
    2 epochs; compile s: shapes of all epochs x 6.5 s; * recommended, + without packing
    >>> analysis.recommended_unpacked.builder_line
    'kerasbatch.SortedBuilder(batch_size=2)'
    """

    lengths: np.ndarray = dataclasses.field(repr=False)
    rows: tuple
    recommended: StrategyRow
    recommended_unpacked: StrategyRow
    backend: str
    epochs: int
    costs: BackendCosts
    compile_seconds_per_shape: float
    batch_size: int
    max_tokens: int
    sequence_length: int
    seed: int

    def __repr__(self):
        return (
            f"Analysis({len(self.lengths)} sequences, {len(self.rows)} strategies, "
            f"backend={self.backend!r}, epochs={self.epochs}, "
            f"recommended={self.recommended.builder_line})"
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
            "median": int(np.quantile(lengths, 0.5, method="higher")),
            "p90": int(np.quantile(lengths, 0.9, method="higher")),
            "p99": int(np.quantile(lengths, 0.99, method="higher")),
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
        """The strategies as a text table; `*` marks the recommendation."""
        headers = (
            "strategy",
            "pad. eff.",
            "shapes",
            "new later",
            "steps/epoch",
            "tokens/step",
            "compile s",
            f"est. {self.backend} s",
        )
        cells = []
        for row in self.rows:
            mark = " *" if row is self.recommended else ""
            if row is self.recommended_unpacked and row is not self.recommended:
                mark = " +"
            cells.append(
                (
                    row.name + mark,
                    f"{row.padding_efficiency:.3f}",
                    str(row.distinct_shapes),
                    str(row.new_shapes_later),
                    str(row.steps_per_epoch),
                    f"{row.tokens_per_step:.0f}",
                    _seconds_text(row.compile_seconds),
                    _seconds_text(row.estimated_seconds),
                )
            )
        widths = [
            max(len(header), *(len(cell[i]) for cell in cells))
            for i, header in enumerate(headers)
        ]

        def line(values):
            first = f"{values[0]:<{widths[0]}}"
            rest = (f"{v:>{w}}" for v, w in zip(values[1:], widths[1:], strict=True))
            return "  ".join([first, *rest])

        lines = [line(headers)] + [line(cell) for cell in cells]
        lines.append(
            f"{self.epochs} epochs; compile s: shapes of all epochs x "
            f"{self.compile_seconds_per_shape:g} s; * recommended"
            + (
                ""
                if self.recommended is self.recommended_unpacked
                else ", + without packing"
            )
        )
        return "\n".join(lines)

    def recommendation(self):
        """The recommended builder, why, and the line to paste."""
        best, unpacked = self.recommended, self.recommended_unpacked
        costs = self.costs
        compiles = (
            f" + {self.compile_seconds_per_shape:g} s per new shape"
            if costs.compiles
            else "; no compiles"
        )
        lines = [
            f"Recommended on {self.backend}, {self.epochs} epochs: {best.name} "
            f"(estimated {_seconds_text(best.estimated_seconds)} s)",
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
        lines.append(
            f"  Estimate: {costs.seconds_per_position:.3g} s per padded position "
            f"+ {costs.seconds_per_step:.3g} s per step{compiles} "
            f"({costs.source})."
        )
        return "\n".join(lines)

    def to_dict(self):
        """Every figure as JSON-serialisable values."""
        edges, counts = self.histogram_counts()
        return {
            "summary": self.summary(),
            "histogram": {"edges": edges.tolist(), "counts": counts.tolist()},
            "backend": self.backend,
            "epochs": self.epochs,
            "costs": self.costs.to_dict(),
            "compile_seconds_per_shape": self.compile_seconds_per_shape,
            "batch_size": self.batch_size,
            "max_tokens": self.max_tokens,
            "sequence_length": self.sequence_length,
            "seed": self.seed,
            "rows": [row.to_dict() for row in self.rows],
            "recommended": self.recommended.name,
            "recommended_unpacked": self.recommended_unpacked.name,
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
        """
        from kerasbatch import plotting

        if path is None:
            import matplotlib.pyplot as plt

            figure = plt.figure(figsize=(13, 4))
        else:
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
                if row.boundaries is not None
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
        plotting.plot_efficiency(
            {row.name: row.padding_efficiency for row in self.rows},
            ax=efficiency_axes,
            title=f"Padding efficiency (recommended on {self.backend}: "
            f"{self.recommended.name})",
        )
        efficiency_axes.tick_params(axis="x", labelrotation=60, labelsize=8)
        figure.tight_layout()
        if path is not None:
            figure.savefig(path, dpi=100)
        return figure


def analyze(
    lengths,
    *,
    batch_size=32,
    max_tokens=None,
    sequence_length=None,
    epochs=10,
    backend=None,
    compile_seconds_per_shape=COMPILE_SECONDS_PER_SHAPE,
    num_buckets=NUM_BUCKETS,
    seed=0,
    features=None,
    verbose=1,
):
    """What each way of batching costs on these lengths, and which to use.

    Plans `epochs` epochs of each strategy from the lengths alone and
    tabulates them: `PaddedBuilder` and `SortedBuilder` (`batch_size`),
    `BucketBuilder(num_buckets=n, pad_to_bucket=True, remainder="even")`
    for each `n` of `num_buckets`, by `batch_size` and by the token budget
    `max_tokens` (rows whose boundaries equal the row before are left out),
    and `PackedBuilder(sequence_length, batch_size=max_tokens //
    sequence_length, remainder="even")`. The recommendation is the row of
    least estimated seconds on `backend` (see the module docstring), and
    the best row without packing for models that cannot take packed rows.

    Args:
        lengths: the sequences' lengths: a path to a `.npy` file (a 1-D int
            array) or a `.txt` file (one length per line), a TFRecord
            dataset's directory (its manifest and records: the length-index
            pass of `kerasbatch.io.TFRecordLoader.lengths`, cached in
            `__lengths__/`), a 1-D array or list of lengths, or the
            sequences themselves as builders take them (a list of arrays, a
            `tf.RaggedTensor`, a dict of those: their lengths are taken).
        batch_size: elements per batch of the fixed-size rows.
        max_tokens: the token budget (batch size × padded length) of the
            budget and packed rows. Default: `batch_size` × the 90th
            percentile length (what a batch of most sequences holds), at
            least the longest length.
        sequence_length: the packed rows' length. Default: the longest
            length rounded up to a multiple of 64.
        epochs: epochs of the estimated run; all are planned.
        backend: `"jax"`, `"tensorflow"` or `"torch"` (its `BACKEND_COSTS`).
            Default: Keras' backend.
        compile_seconds_per_shape: seconds to compile one batch shape, or a
            `kerasbatch.tuner.CompileCost` measured on your model, whose
            seconds per shape, per position and per step then replace the
            backend's default costs.
        num_buckets: the bucket counts of the bucket rows.
        seed: the builders' seed.
        features: for a TFRecord directory, the variable-length features
            that make an element's length (default: all of them).
        verbose: 1 shows progress bars while lengths are read from
            TFRecords and while the epochs of 100 000 or more sequences are
            planned; 0 shows none.

    Returns:
        An `Analysis`.

    Raises:
        FileNotFoundError: a path that does not exist.
        ValueError: empty, negative or non-integer lengths (naming the
            element, or the file and line), an unknown backend, or settings
            no batch can meet (`max_tokens` or `sequence_length` shorter
            than the longest sequence).
        TypeError: lengths or settings of the wrong type.

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> lengths = np.random.default_rng(0).integers(1, 200, 2000)
    >>> analysis = kerasbatch.analyze(
    ...     lengths, batch_size=32, epochs=2, backend="jax",
    ...     num_buckets=(4, 8), verbose=0)
    >>> [row.name for row in analysis.rows]  # doctest: +NORMALIZE_WHITESPACE
    ['padded', 'sorted', 'buckets 4', 'buckets 8', 'buckets 4, tokens',
     'buckets 8, tokens', 'packed 256']
    >>> analysis.recommended.builder_line
    'kerasbatch.PackedBuilder(256, batch_size=22, remainder="even")'
    >>> analysis.recommended_unpacked.name
    'buckets 4, tokens'
    >>> row = analysis.rows[3]
    >>> builder = row.make_builder()
    >>> builder.adapt(lengths)
    >>> builder.statistics().padding_efficiency == row.padding_efficiency
    True
    """
    backend, costs, seconds_per_shape = _costs(backend, compile_seconds_per_shape)
    epochs = _positive_int(epochs, "epochs")
    batch_size = _positive_int(batch_size, "batch_size")
    seed = _int(seed, "seed")
    num_buckets = _num_buckets(num_buckets)
    lengths = read_lengths(lengths, features=features, verbose=verbose)
    longest = int(lengths.max())
    if longest == 0:
        raise ValueError(
            f"Every one of the {len(lengths)} sequences is empty (length 0): "
            "there is nothing to batch."
        )
    if max_tokens is None:
        p90 = int(np.quantile(lengths, 0.9, method="higher"))
        max_tokens = max(batch_size * p90, longest)
    max_tokens = _positive_int(max_tokens, "max_tokens")
    if max_tokens < longest:
        raise ValueError(
            f"max_tokens={max_tokens} is less than the longest sequence "
            f"({longest}): no batch could hold it. Give max_tokens >= {longest}."
        )
    if sequence_length is None:
        sequence_length = -(-longest // ROW_MULTIPLE) * ROW_MULTIPLE
    sequence_length = _positive_int(sequence_length, "sequence_length")
    if sequence_length < longest:
        raise ValueError(
            f"sequence_length={sequence_length} is shorter than the longest "
            f"sequence ({longest}): packed rows must hold every sequence. Give "
            f"sequence_length >= {longest}."
        )

    strategies = list(
        _strategies(batch_size, max_tokens, sequence_length, num_buckets, seed)
    )
    show = verbose and len(lengths) >= PROGRESS_MIN_SEQUENCES
    progress = keras.utils.Progbar(
        len(strategies) * epochs, unit_name="epoch plan", verbose=1 if show else 0
    )
    rows, seen_boundaries, done = [], set(), 0
    for name, cls, arguments in strategies:
        builder = cls(**arguments)
        builder.adapt(lengths)
        boundaries = getattr(builder, "resolved_boundaries", None)
        if boundaries is not None:
            key = (arguments.get("max_tokens"), tuple(boundaries))
            if key in seen_boundaries:  # fewer distinct lengths than buckets
                done += epochs
                progress.update(done)
                continue
            seen_boundaries.add(key)
            boundaries = tuple(int(b) for b in boundaries)
        shapes, positions, steps = set(), 0, 0
        for epoch in range(epochs):
            plan = builder.plan(epoch)
            if epoch == 0:
                statistics = plan.statistics()
                first_shapes = statistics.distinct_shapes
                real = int(plan.real_positions.sum())
            shapes.update(map(tuple, plan.shapes().tolist()))
            positions += int(plan.padded_positions().sum())
            steps += plan.num_batches
            done += 1
            progress.update(done)
        run_seconds = positions * costs.seconds_per_position
        run_seconds += steps * costs.seconds_per_step
        if costs.compiles:
            run_seconds += len(shapes) * seconds_per_shape
        rows.append(
            StrategyRow(
                name=name,
                builder_class=cls.__name__,
                arguments=arguments,
                padding_efficiency=statistics.padding_efficiency,
                distinct_shapes=first_shapes,
                new_shapes_later=len(shapes) - first_shapes,
                steps_per_epoch=statistics.num_batches,
                tokens_per_step=real / max(statistics.num_batches, 1),
                compile_seconds=len(shapes) * seconds_per_shape,
                estimated_seconds=run_seconds,
                boundaries=boundaries,
            )
        )
    progress.update(done, finalize=True)
    return Analysis(
        lengths=lengths,
        rows=tuple(rows),
        recommended=min(rows, key=_seconds),
        recommended_unpacked=min((r for r in rows if not r.packed), key=_seconds),
        backend=backend,
        epochs=epochs,
        costs=costs,
        compile_seconds_per_shape=seconds_per_shape,
        batch_size=batch_size,
        max_tokens=max_tokens,
        sequence_length=sequence_length,
        seed=seed,
    )


def read_lengths(source, *, features=None, verbose=1):
    """The lengths of `source`, as `analyze` takes them, validated.

    Args:
        source: a `.npy` or `.txt` path, a TFRecord dataset's directory (or
            its `__manifest__.json`), a 1-D array or list of lengths, or
            sequences as builders take them (see `analyze`).
        features: for a TFRecord dataset, the variable-length features that
            make an element's length (default: all).
        verbose: 1 shows the TFRecord length-index pass's progress bar.

    Returns:
        A 1-D int64 array with at least one non-negative length.

    Example:

    >>> import numpy as np
    >>> from kerasbatch.analysis import read_lengths
    >>> read_lengths([np.zeros(3), np.zeros(5)]).tolist()
    [3, 5]
    >>> read_lengths([4, 2]).tolist()
    [4, 2]
    """
    if isinstance(source, str | os.PathLike):
        return _read_file(os.fspath(source), features, verbose)
    if features is not None:
        raise ValueError("features applies to a TFRecord dataset's directory only.")
    if isinstance(source, np.ndarray) and source.dtype != object:
        return boundaries_lib.as_lengths(source)
    if isinstance(source, list | tuple) and all(
        isinstance(value, numbers.Integral) and not isinstance(value, bool)
        for value in source
    ):
        return boundaries_lib.as_lengths(np.asarray(source, dtype=np.int64))
    if isinstance(source, list | tuple) and not len(source):
        raise ValueError("lengths is empty; need at least one length.")
    return sources.from_inputs(source).element_lengths().astype(np.int64)


def _pairs(edges):
    """`(edges[i], edges[i + 1])` for every bin."""
    return zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True)


# ------------------------------------------------------------------ helpers
def _strategies(batch_size, max_tokens, sequence_length, num_buckets, seed):
    """`(name, builder class, constructor arguments)` of every row."""
    seeded = {"seed": seed} if seed else {}
    yield "padded", PaddedBuilder, {"batch_size": batch_size, **seeded}
    yield "sorted", SortedBuilder, {"batch_size": batch_size, **seeded}
    bucketed = {"pad_to_bucket": True, "remainder": "even", **seeded}
    for count in num_buckets:
        arguments = {"num_buckets": count, "batch_size": batch_size, **bucketed}
        yield f"buckets {count}", BucketBuilder, arguments
    for count in num_buckets:
        arguments = {"num_buckets": count, "max_tokens": max_tokens, **bucketed}
        yield f"buckets {count}, tokens", BucketBuilder, arguments
    packed = {
        "sequence_length": sequence_length,
        "batch_size": max(1, max_tokens // sequence_length),
        "remainder": "even",
        **seeded,
    }
    yield f"packed {sequence_length}", PackedBuilder, packed


def _costs(backend, compile_seconds_per_shape):
    """`(backend, BackendCosts, seconds per shape)` of the arguments."""
    if backend is None:
        backend = keras.config.backend()
        if backend not in BACKEND_COSTS:
            raise ValueError(
                f"Keras' backend is {backend!r}, which analyze has no costs for: "
                f"give backend= one of {sorted(BACKEND_COSTS)}."
            )
    if backend not in BACKEND_COSTS:
        raise ValueError(
            f"backend must be one of {sorted(BACKEND_COSTS)}, got {backend!r}."
        )
    costs = BACKEND_COSTS[backend]
    measured = compile_seconds_per_shape
    if all(
        hasattr(measured, name)
        for name in ("seconds_per_shape", "seconds_per_position", "seconds_per_step")
    ):
        source = f"measured: {type(measured).__name__}"
        costs = BackendCosts(
            seconds_per_position=float(measured.seconds_per_position),
            seconds_per_step=float(measured.seconds_per_step),
            compiles=True,
            source=source,
        )
        return backend, costs, float(measured.seconds_per_shape)
    if (
        not isinstance(measured, numbers.Real)
        or isinstance(measured, bool)
        or not math.isfinite(measured)
        or measured < 0
    ):
        raise ValueError(
            "compile_seconds_per_shape must be a number of seconds >= 0 or a "
            f"kerasbatch.tuner.CompileCost, got {measured!r}."
        )
    return backend, costs, float(measured)


def _read_file(path, features, verbose):
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{path} does not exist. Give a .npy or .txt file of lengths, or a "
            "TFRecord dataset's directory."
        )
    if os.path.isdir(path) or os.path.basename(path) == "__manifest__.json":
        return _tfrecord_lengths(path, features, verbose)
    if features is not None:
        raise ValueError("features applies to a TFRecord dataset's directory only.")
    extension = os.path.splitext(path)[1].lower()
    if extension == ".npy":
        try:
            lengths = np.load(path, allow_pickle=False)
        except ValueError as error:
            raise ValueError(
                f"{path} is not a .npy file of int lengths ({error})."
            ) from error
    elif extension == ".txt":
        lengths = _read_text(path)
    else:
        raise ValueError(
            f"{path}: give a .npy or .txt file of lengths, or a TFRecord "
            f"dataset's directory; {extension or 'no extension'!r} is neither."
        )
    try:
        return boundaries_lib.as_lengths(lengths)
    except (TypeError, ValueError) as error:
        raise type(error)(f"{path}: {error}") from error


def _read_text(path):
    """One int per line (blank lines skipped); errors name the line."""
    with open(path) as file:
        lines = file.read().splitlines()
    values = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text:
            continue
        try:
            values.append(int(text))
        except ValueError:
            raise ValueError(
                f"{path}, line {number}: {text[:40]!r} is not an integer length "
                "(the file holds one length per line)."
            ) from None
    return np.asarray(values, dtype=np.int64)


def _tfrecord_lengths(path, features, verbose):
    from kerasbatch.io import TFRecordLoader, load_manifest

    directory = path if os.path.isdir(path) else os.path.dirname(path) or "."
    manifest_path = os.path.join(directory, "__manifest__.json")
    if not os.path.isfile(manifest_path):
        raise FileNotFoundError(
            f"{directory} has no __manifest__.json, so it is no TFRecord dataset "
            "(kerasbatch.io.write_dataset writes one). Give a dataset's "
            "directory, or a .npy or .txt file of lengths."
        )
    manifest = load_manifest(manifest_path)
    sequences = [spec.name for spec in manifest.features if spec.var_len]
    if features is None:
        features = sequences
        if not features:
            raise ValueError(
                f"The dataset in {directory} has no variable-length feature "
                "(var_len in its manifest): every element has the same length."
            )
    else:
        features = [features] if isinstance(features, str) else list(features)
        for name in features:
            if name not in manifest.names:
                raise ValueError(
                    f"The dataset in {directory} has no feature {name!r}; its "
                    f"features are {list(manifest.names)}."
                )
            if name not in sequences:
                raise ValueError(
                    f"Feature {name!r} of the dataset in {directory} is not "
                    "variable-length (var_len), so it has no length."
                )
    loader = TFRecordLoader(
        type="independent",
        dataset={"type": "dir", "args": {"data_dir": directory}},
        target_batch_size=1,
        drop_remainder=False,
        epochs=1,
        num_read_buffer_bytes=0,
        num_prefetch=1,
        primary_features=[{"from_name": n, "to_name": n} for n in features],
    )
    lengths = loader.lengths(inputs=list(features), verbose=verbose)
    if not len(lengths):
        raise ValueError(f"The dataset in {directory} holds no record.")
    return boundaries_lib.as_lengths(lengths)


def _seconds_text(seconds):
    """Seconds with one decimal, or 3 significant digits below 1 s."""
    return f"{seconds:.1f}" if seconds >= 1 or seconds == 0 else f"{seconds:.3g}"


def _seconds(row):
    return row.estimated_seconds


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
