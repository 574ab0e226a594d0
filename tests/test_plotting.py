import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import kerasbatch  # noqa: E402
from kerasbatch.tools import plotting  # noqa: E402
from kerasbatch.tools.plotting import plot_efficiency, plot_lengths  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def boundary_lines(ax):
    return [line for line in ax.lines if line.get_gid() == plotting.BOUNDARY_GID]


def legend_texts(ax):
    return [text.get_text() for text in ax.get_legend().get_texts()]


# ------------------------------------------------------------------ lengths
def test_plot_lengths_draws_one_line_per_boundary():
    lengths = np.arange(1, 101)
    ax = plot_lengths(lengths, boundaries=[10, 30, 70])
    lines = boundary_lines(ax)
    assert len(lines) == 3
    assert [line.get_xdata()[0] for line in lines] == [10, 30, 70]
    assert legend_texts(ax) == ["sequences", "bucket boundaries"]
    assert ax.get_xlabel() == "sequence length"
    assert ax.get_ylabel() == "number of sequences"
    assert ax.get_title() == "100 sequences, 4 buckets"


def test_plot_lengths_without_boundaries_draws_only_the_histogram():
    ax = plot_lengths([3, 4, 4, 9])
    assert len(ax.lines) == 0
    assert legend_texts(ax) == ["sequences"]
    assert ax.get_title() == "4 sequences"


def test_plot_lengths_with_empty_boundaries_is_one_bucket():
    ax = plot_lengths([3, 4, 4, 9], boundaries=[])
    assert boundary_lines(ax) == []
    assert ax.get_title() == "4 sequences, 1 bucket"


def test_plot_lengths_histogram_counts_every_length():
    lengths = np.random.default_rng(0).integers(0, 1000, 5000)
    ax = plot_lengths(lengths)
    heights = [patch.get_height() for patch in ax.patches]
    assert sum(heights) == len(lengths)
    assert len(ax.patches) <= 80


def test_plot_lengths_default_bins_are_integer_aligned():
    lengths = np.array([1, 1, 2, 5, 5, 5])
    ax = plot_lengths(lengths, boundaries=[2, 5])
    edges = [patch.get_x() for patch in ax.patches]
    widths = {patch.get_width() for patch in ax.patches}
    assert edges == [1, 2, 3, 4, 5]
    assert widths == {1}
    # Length 5 is in the bin [5, 6), right of the boundary 5: bucket [5, inf).
    assert [patch.get_height() for patch in ax.patches] == [2, 1, 0, 0, 3]


def test_plot_lengths_takes_bins_and_title():
    ax = plot_lengths(np.arange(100), bins=5, title="lengths")
    assert len(ax.patches) == 5
    assert ax.get_title() == "lengths"


def test_plot_lengths_draws_on_the_given_axes():
    _, (left, right) = plt.subplots(1, 2)
    ax = plot_lengths([1, 2, 3], boundaries=[2], ax=right)
    assert ax is right
    assert len(boundary_lines(right)) == 1
    assert len(left.lines) == len(left.patches) == 0


def test_plot_lengths_marks_a_bucket_builders_boundaries():
    rng = np.random.default_rng(0)
    lengths = np.clip(rng.lognormal(3.0, 0.7, 400).astype(int), 1, 200)
    x = [rng.integers(1, 50, n) for n in lengths]
    builder = kerasbatch.BucketBuilder(num_buckets=6, batch_size=16)
    builder.build(x, y=np.zeros(len(x)))
    ax = plot_lengths(lengths, builder.resolved_boundaries)
    lines = boundary_lines(ax)
    assert len(lines) == len(builder.resolved_boundaries) == 5
    assert [line.get_xdata()[0] for line in lines] == builder.resolved_boundaries


def test_plot_lengths_accepts_integer_valued_floats():
    ax = plot_lengths([1.0, 2.0, 2.0])
    assert sum(patch.get_height() for patch in ax.patches) == 3


@pytest.mark.parametrize(
    "lengths, error, match",
    [
        ([], ValueError, "empty"),
        (np.array([], dtype=int), ValueError, "empty"),
        ([[1, 2], [3, 4]], ValueError, "1-D"),
        ([1, -2, 3], ValueError, "non-negative"),
        ([1.5, 2.0], ValueError, "integer-valued"),
        ([1.0, np.nan], ValueError, "integer-valued"),
        (["a", "b"], TypeError, "integers"),
    ],
)
def test_plot_lengths_rejects_bad_lengths(lengths, error, match):
    with pytest.raises(error, match=match):
        plot_lengths(lengths)


@pytest.mark.parametrize(
    "boundaries, error, match",
    [
        ([10, 5], ValueError, "strictly increasing"),
        ([0, 5], ValueError, "positive"),
        ([2.5], TypeError, "ints"),
        (10, TypeError, "list"),
    ],
)
def test_plot_lengths_rejects_bad_boundaries(boundaries, error, match):
    with pytest.raises(error, match=match):
        plot_lengths([1, 2, 3], boundaries=boundaries)


# --------------------------------------------------------------- efficiency
def test_plot_efficiency_draws_one_labelled_bar_per_method():
    ax = plot_efficiency({"padded": 0.25, "sorted": 0.98, "bucketed": 0.9})
    assert len(ax.patches) == 3
    assert [float(bar.get_height()) for bar in ax.patches] == [0.25, 0.98, 0.9]
    assert [tick.get_text() for tick in ax.get_xticklabels()] == [
        "padded",
        "sorted",
        "bucketed",
    ]
    assert [text.get_text() for text in ax.texts] == ["0.25", "0.98", "0.90"]
    assert "padding efficiency" in ax.get_ylabel()
    assert ax.get_title() == "Padding efficiency"
    assert ax.get_ylim() == (0, 1.1)


def test_plot_efficiency_reads_statistics_and_builders():
    x = [np.ones(n, dtype=np.int32) for n in (1, 2, 3, 4, 50, 60)]
    padded = kerasbatch.PaddedBuilder(batch_size=2, shuffle=False)
    padded.build(x)
    ordered = kerasbatch.SortedBuilder(batch_size=2, shuffle=False)
    ordered.build(x)
    ax = plot_efficiency({"padded": padded, "sorted": ordered.statistics()})
    assert [float(bar.get_height()) for bar in ax.patches] == [
        padded.statistics().padding_efficiency,
        ordered.statistics().padding_efficiency,
    ]


def test_plot_efficiency_draws_on_the_given_axes():
    _, axes = plt.subplots()
    assert plot_efficiency({"a": 0.5}, ax=axes, title="t") is axes
    assert axes.get_title() == "t"


@pytest.mark.parametrize(
    "results, error, match",
    [
        ({}, ValueError, "empty"),
        ([0.5, 0.7], TypeError, "dict"),
        ({"a": 1.5}, ValueError, r"results\['a'\]"),
        ({"a": -0.1}, ValueError, r"\[0, 1\]"),
        ({"a": "high"}, TypeError, "efficiency"),
        ({"a": True}, TypeError, "efficiency"),
    ],
)
def test_plot_efficiency_rejects_bad_results(results, error, match):
    with pytest.raises(error, match=match):
        plot_efficiency(results)


def test_plot_efficiency_needs_a_built_builder():
    with pytest.raises(RuntimeError, match="call build"):
        plot_efficiency({"padded": kerasbatch.PaddedBuilder(batch_size=2)})


# ------------------------------------------------------------------ general
@pytest.mark.parametrize(
    "plot, argument", [(plot_lengths, [1, 2, 3]), (plot_efficiency, {"a": 0.5})]
)
def test_missing_matplotlib_says_how_to_install_it(monkeypatch, plot, argument):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        plot(argument)
