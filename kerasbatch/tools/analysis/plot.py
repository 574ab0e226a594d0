"""The figure of an `Analysis`: the length histogram beside each strategy's padding efficiency.

`plot_analysis` draws it (`Analysis.plot`; `kerasbatch analyze --plot`)
with `kerasbatch.tools.plotting`, which needs matplotlib;
`check_plot_path` checks that the figure's folder exists before any
planning. Importing this module imports no matplotlib.
"""

import os

__all__ = ["check_plot_path", "plot_analysis"]


def plot_analysis(analysis, path=None):
    """Draws `analysis`'s length histogram and each strategy's padding
    efficiency (see `Analysis.plot`).

    Args:
        analysis: an `Analysis`.
        path: where to save the figure, or None to draw with
            `matplotlib.pyplot`.

    Returns:
        The `matplotlib.figure.Figure`.

    Example:

    >>> import kerasbatch
    >>> analysis = kerasbatch.analyze(
    ...     [3, 5, 8, 13, 2, 9, 4, 6], batch_size=2, epochs=2, backend="torch",
    ...     device="cpu", num_buckets=(2,), verbose=0)
    >>> figure = plot_analysis(analysis)
    >>> [axes.get_title() for axes in figure.axes]  # doctest: +NORMALIZE_WHITESPACE
    ['8 sequences',
     'Padding efficiency (recommended for torch on a CPU: packed 64)']
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
            for row in (analysis.recommended, analysis.recommended_unpacked)
            if row is not None and row.boundaries is not None
        ),
        None,
    )
    plotting.plot_lengths(
        analysis.lengths,
        boundaries=None if bucketed is None else list(bucketed.boundaries),
        ax=lengths_axes,
        title=f"{len(analysis.lengths)} sequences"
        + ("" if bucketed is None else f", boundaries of {bucketed.name}"),
    )
    title = "Padding efficiency"
    if analysis.recommended is not None:
        title += (
            f" (recommended for {analysis.backend} on {analysis.hardware}: "
            f"{analysis.recommended.name})"
        )
    plotting.plot_efficiency(
        {row.name: row.padding_efficiency for row in analysis.rows},
        ax=efficiency_axes,
        title=title,
    )
    efficiency_axes.tick_params(axis="x", labelrotation=60, labelsize=8)
    figure.tight_layout()
    if path is not None:
        figure.savefig(path, dpi=100)
    return figure


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
