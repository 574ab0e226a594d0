"""What `kerasbatch.analyze` found, as a report: text, JSON and a figure.

`Analysis` holds the lengths, a `StrategyRow` per strategy and the
recommendation; `str(analysis)` is the report `kerasbatch analyze` prints
(a length histogram, the table of strategies, the recommended builder and
the line to paste), `to_dict()` every figure as JSON-serialisable values
(`--json`), and `plot()` the figure (`kerasbatch.tools.analysis.plot`).
"""

import dataclasses

import numpy as np

from kerasbatch.planning.costs import BackendCosts
from kerasbatch.tools.analysis.plot import plot_analysis
from kerasbatch.tools.analysis.settings import quantile
from kerasbatch.tools.analysis.strategies import StrategyRow

__all__ = ["Analysis"]

_HISTOGRAM_BINS = 12
_BAR_WIDTH = 40


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
        device: `"cpu"` or `"gpu"`: the hardware the estimate is for
            (`hardware` names it as the report does: `"a CPU"`, `"a GPU"`).
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

    @property
    def hardware(self):
        """The device as the report names it: `"a GPU"` or `"a CPU"`."""
        return "a GPU" if self.device == "gpu" else "a CPU"

    def summary(self):
        """Count, range, mean and percentiles of the lengths (a dict)."""
        lengths = self.lengths
        return {
            "sequences": len(lengths),
            "tokens": int(lengths.sum()),
            "shortest": int(lengths.min()),
            "longest": int(lengths.max()),
            "mean": float(lengths.mean()),
            "median": quantile(lengths, 0.5),
            "p90": quantile(lengths, 0.9),
            "p99": quantile(lengths, 0.99),
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
            footer += f"; no estimate for {self.backend} on {self.hardware}"
        else:
            footer += f" with {self.backend} on {self.hardware}"
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
                f"on {self.hardware} ({self.device_reason}); measure your "
                "model's with kerasbatch.tuner.CompileCost.measure and give it "
                "as compile_seconds_per_shape, or choose from the table."
            )
        best, unpacked = self.recommended, self.recommended_unpacked
        lines = [
            f"Recommended for {self.backend} on {self.hardware}, {self.epochs} "
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
            f"  Estimate for {self.backend} on {self.hardware} "
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
        return plot_analysis(self, path)

    def _mark(self, row):
        if row is self.recommended:
            return " *"
        if row is self.recommended_unpacked:
            return " +"
        return ""


def _pairs(edges):
    """`(edges[i], edges[i + 1])` for every bin."""
    return zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True)


def _seconds_text(seconds):
    """Seconds with one decimal, or 3 significant digits below 1 s."""
    return f"{seconds:.1f}" if seconds >= 1 or seconds == 0 else f"{seconds:.3g}"


def _name(row):
    return None if row is None else row.name
