"""Matplotlib views of sequence lengths, bucket boundaries and padding.

Two helpers, each drawing on a given `matplotlib.axes.Axes` (or a new one)
and returning it:

- `plot_lengths`: a histogram of sequence lengths with the bucket boundaries
  drawn as vertical lines, to see where the buckets cut the data.
- `plot_efficiency`: a bar chart of padding efficiency per batching method.

matplotlib is optional (`pip install matplotlib`); it is imported when a
function is called, never when `kerasbatch` is imported. With `ax=None` the
figure is made with `matplotlib.pyplot.subplots`, so it shows in notebooks;
in long-running scripts close it with `plt.close(ax.figure)`.

Example:

>>> import matplotlib
>>> matplotlib.use("Agg")
>>> import numpy as np
>>> from kerasbatch.tools import plotting
>>> lengths = np.random.default_rng(0).integers(1, 100, 1000)
>>> ax = plotting.plot_lengths(lengths, boundaries=[20, 50])
>>> ax.get_xlabel()
'sequence length'
"""

import numbers

import numpy as np

from kerasbatch.planning import boundaries as boundaries_lib

__all__ = ["plot_efficiency", "plot_lengths"]

#: The `gid` of the vertical lines `plot_lengths` draws at bucket boundaries.
BOUNDARY_GID = "kerasbatch-boundary"
#: About how many bars `plot_lengths` draws by default.
_DEFAULT_NUM_BINS = 80


def plot_lengths(lengths, boundaries=None, ax=None, bins=None, title=None):
    """Plots a histogram of sequence lengths with bucket boundaries.

    Boundaries follow `kerasbatch.BucketBuilder`: `[b_0, ..., b_{n-1}]` make
    the buckets `[0, b_0), [b_0, b_1), ..., [b_{n-1}, inf)`. Each boundary is
    drawn as a dashed vertical line at `x = b_i` (line `gid`:
    `BOUNDARY_GID`). The default bins are integer-aligned, `[k, k + w)`, so
    a line at `b_i` falls exactly on a bin edge when `w` is 1 and never cuts
    a length in two.

    Args:
        lengths: 1-D sequence of non-negative integer lengths (one per
            sequence), e.g. `builder.lengths`.
        boundaries: bucket boundaries to mark, a strictly increasing list of
            positive ints such as `builder.resolved_boundaries`, or None.
        ax: the `matplotlib.axes.Axes` to draw on; None makes a new figure.
        bins: passed to `Axes.hist`; None picks about 80 integer-aligned
            bins of equal integer width.
        title: the axes title; None writes the number of sequences and
            buckets.

    Returns:
        The `matplotlib.axes.Axes` drawn on.

    Raises:
        ImportError: matplotlib is not installed.
        ValueError: `lengths` is empty, not 1-D, negative or not integral;
            `boundaries` is not strictly increasing and positive.
        TypeError: `lengths` or `boundaries` hold non-numbers.

    Example:

    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> import kerasbatch
    >>> from kerasbatch.tools.plotting import plot_lengths
    >>> rng = np.random.default_rng(0)
    >>> x = [rng.integers(1, 100, n) for n in rng.integers(1, 60, 500)]
    >>> builder = kerasbatch.BucketBuilder(num_buckets=4, batch_size=16)
    >>> _ = builder.build(x, y=rng.integers(0, 2, 500))
    >>> ax = plot_lengths(builder.lengths, builder.resolved_boundaries)
    >>> len(builder.resolved_boundaries), len(ax.lines)
    (3, 3)
    """
    plt = _import_pyplot()
    lengths = boundaries_lib.as_lengths(lengths)
    if boundaries is not None:
        boundaries = boundaries_lib.validate_boundaries(boundaries, allow_empty=True)
    if bins is None:
        bins = _integer_bins(lengths)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))

    ax.hist(lengths, bins=bins, color="tab:blue", alpha=0.8, label="sequences")
    for i, boundary in enumerate(boundaries or []):
        ax.axvline(
            boundary,
            color="tab:red",
            linestyle="--",
            linewidth=1,
            gid=BOUNDARY_GID,
            label="bucket boundaries" if i == 0 else None,
        )
    ax.set_xlabel("sequence length")
    ax.set_ylabel("number of sequences")
    if title is None:
        title = f"{len(lengths)} sequences"
        if boundaries is not None:
            num_buckets = len(boundaries) + 1
            title += f", {num_buckets} bucket{'s' if num_buckets > 1 else ''}"
    ax.set_title(title)
    ax.legend(loc="upper right")
    return ax


def plot_efficiency(results, ax=None, title="Padding efficiency"):
    """Plots a bar chart of padding efficiency per batching method.

    Args:
        results: a dict mapping a method's name (the bar's label) to its
            padding efficiency: a number in `[0, 1]`, a
            `kerasbatch.PlanStatistics`, or a built `kerasbatch` builder
            (its `statistics()` is used). Bars keep the dict's order.
        ax: the `matplotlib.axes.Axes` to draw on; None makes a new figure.
        title: the axes title.

    Returns:
        The `matplotlib.axes.Axes` drawn on; each bar is labelled with its
        value.

    Raises:
        ImportError: matplotlib is not installed.
        TypeError: `results` is not a dict, or a value is none of the above.
        ValueError: `results` is empty or an efficiency is outside `[0, 1]`.

    Example:

    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from kerasbatch.tools.plotting import plot_efficiency
    >>> ax = plot_efficiency({"padded": 0.24, "bucketed": 0.95})
    >>> [tick.get_text() for tick in ax.get_xticklabels()]
    ['padded', 'bucketed']
    >>> [round(float(bar.get_height()), 2) for bar in ax.patches]
    [0.24, 0.95]
    """
    plt = _import_pyplot()
    if not isinstance(results, dict):
        raise TypeError(
            "results must be a dict mapping names to efficiencies, "
            f"PlanStatistics or builders, got {type(results).__name__}."
        )
    if not results:
        raise ValueError("results is empty; need at least one method to plot.")
    names = [str(name) for name in results]
    values = [_efficiency(name, value) for name, value in results.items()]
    if ax is None:
        _, ax = plt.subplots(figsize=(max(3.0, 1.2 * len(names) + 1.5), 3.5))

    colors = [f"C{i % 10}" for i in range(len(names))]
    bars = ax.bar(names, values, color=colors)
    ax.bar_label(bars, labels=[f"{v:.2f}" for v in values], padding=2)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("padding efficiency\n(real / padded positions)")
    ax.set_title(title)
    return ax


def _import_pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError(
            "kerasbatch.tools.plotting needs matplotlib; install it with "
            "`pip install matplotlib`."
        ) from e
    return plt


def _integer_bins(lengths):
    """Bin edges `low, low + w, ...` of equal integer width `w` covering lengths."""
    low, high = int(lengths.min()), int(lengths.max())
    width = max(1, -(-(high + 1 - low) // _DEFAULT_NUM_BINS))
    return np.arange(low, high + width + 1, width)


def _efficiency(name, value):
    if hasattr(value, "statistics") and callable(value.statistics):
        value = value.statistics()
    if hasattr(value, "padding_efficiency"):
        value = value.padding_efficiency
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(
            f"results[{name!r}] must be an efficiency in [0, 1], a "
            f"PlanStatistics or a built builder, got {type(value).__name__}."
        )
    value = float(value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(
            f"results[{name!r}] = {value} is not a padding efficiency in [0, 1]."
        )
    return value
