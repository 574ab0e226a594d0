"""The site's plots, drawn from the builders' own plans at every build.

Each figure plans the reference workloads (`benchmarks/workloads.py`:
20 000 lognormal or bimodal lengths) with kerasbatch's builders, from the
lengths alone, and returns PNG bytes.
"""

import io
import pathlib
import sys

import matplotlib
import numpy as np

matplotlib.use("Agg")

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import workloads  # noqa: E402

import kerasbatch  # noqa: E402
from kerasbatch.planning import boundaries as boundaries_lib  # noqa: E402
from kerasbatch.tools import plotting  # noqa: E402

BATCH_SIZE = 64
BUCKET_COUNTS = (1, 2, 4, 8, 16, 32, 64)
EPOCHS = 20


def _png(figure):
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    matplotlib.pyplot.close(figure)
    return buffer.getvalue()


def lengths_figure():
    """Each workload's length histogram with 16 optimal bucket boundaries."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for ax, name in zip(axes, workloads.WORKLOADS, strict=True):
        lengths = workloads.lengths(name)
        boundaries = boundaries_lib.optimal(lengths, 16)
        plotting.plot_lengths(
            lengths, boundaries, ax=ax, title=f"{name}: 16 optimal buckets"
        )
    return _png(figure)


def efficiency(lengths, **settings):
    """Padding efficiency of one epoch of `BucketBuilder(**settings)`."""
    builder = kerasbatch.BucketBuilder(batch_size=BATCH_SIZE, seed=0, **settings)
    builder.adapt(lengths)
    return builder.statistics().padding_efficiency


def efficiency_figure():
    """Padding efficiency against the number of buckets, per strategy."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 3.6), sharey=True)
    for ax, name in zip(axes, workloads.WORKLOADS, strict=True):
        lengths = workloads.lengths(name)
        for strategy in ("uniform", "quantile", "equal_tokens", "optimal"):
            values = [
                efficiency(lengths, num_buckets=count, boundaries=strategy)
                for count in BUCKET_COUNTS
            ]
            ax.plot(BUCKET_COUNTS, values, marker="o", label=strategy)
        padded = efficiency(lengths, num_buckets=1, boundaries="optimal")
        ax.axhline(padded, color="grey", linestyle=":", label="one bucket")
        ax.set_xscale("log", base=2)
        ax.set_xticks(BUCKET_COUNTS, [str(count) for count in BUCKET_COUNTS])
        ax.set_xlabel("buckets")
        ax.set_title(f"{name}, batch size {BATCH_SIZE}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("padding efficiency")
    axes[0].legend(loc="lower right")
    return _png(figure)


def compiled_shapes(builder, lengths):
    """Distinct shapes fed so far after each of `EPOCHS` epochs."""
    builder.adapt(lengths)
    seen, counts = set(), []
    for epoch in range(EPOCHS):
        for shapes in builder.batch_shapes(epoch):
            seen.add(tuple(sorted(shapes.items())))
        counts.append(len(seen))
    return counts


def compiles_figure():
    """Shapes compiled so far (once each under XLA) against epochs."""
    import matplotlib.pyplot as plt

    lengths = workloads.lengths("lognormal")
    builders = {
        "PaddedBuilder": kerasbatch.PaddedBuilder(BATCH_SIZE, seed=0),
        "BucketBuilder(16)": kerasbatch.BucketBuilder(
            num_buckets=16, batch_size=BATCH_SIZE, seed=0
        ),
        'BucketBuilder(16, pad_to_bucket=True, remainder="even")': (
            kerasbatch.BucketBuilder(
                num_buckets=16,
                batch_size=BATCH_SIZE,
                pad_to_bucket=True,
                remainder="even",
                seed=0,
            )
        ),
        'PackedBuilder(512, remainder="even")': kerasbatch.PackedBuilder(
            512, batch_size=8, remainder="even", seed=0
        ),
    }
    figure, ax = plt.subplots(figsize=(8, 4))
    epochs = np.arange(1, EPOCHS + 1)
    for label, builder in builders.items():
        ax.plot(epochs, compiled_shapes(builder, lengths), marker=".", label=label)
    ax.set_yscale("log")
    ax.set_xlabel("epochs trained")
    ax.set_ylabel("distinct shapes so far (compiles)")
    ax.set_title("lognormal, 20 000 sequences, batch size 64")
    ax.set_xticks([1, 5, 10, 15, 20])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _png(figure)


def draw_all():
    """`{file name: PNG bytes}` of every plot."""
    return {
        "lengths.png": lengths_figure(),
        "efficiency-vs-buckets.png": efficiency_figure(),
        "compiles-vs-epochs.png": compiles_figure(),
    }
