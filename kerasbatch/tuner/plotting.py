"""A matplotlib view of a bucket search: figures per trial and the best buckets."""

import numpy as np

from kerasbatch.tools import plotting
from kerasbatch.tuner import objectives

#: The figures `plot_trials` draws per trial, when trials recorded them.
FIGURES = (objectives.PADDING_EFFICIENCY, objectives.THROUGHPUT)


def plot_trials(tuner, lengths=None, figsize=None):
    """Plots each trial's efficiency and throughput, and the best boundaries.

    One bar chart per figure the trials recorded (`padding_efficiency`,
    `throughput`), one bar per completed trial in the order they ran, labelled
    with its strategy and number of buckets, the best trial in a darker
    colour; then the length histogram with the best trial's boundaries
    resolved on `lengths`.

    Args:
        tuner: a `BucketTuner` that has run (or reloaded) trials.
        lengths: element lengths for the histogram; defaults to those of the
            tuner's last `search` (pass them after reloading a tuner).
        figsize: the figure size; defaults to 5 inches per panel by 3.8.

    Returns:
        The `matplotlib.figure.Figure`.

    Raises:
        RuntimeError: no trial has completed, or no lengths are known.

    Example:

    >>> import tempfile
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> import kerasbatch
    >>> lengths = np.random.default_rng(0).integers(1, 200, 2_000)
    >>> tuner = kerasbatch.tuner.BucketTuner(
    ...     max_trials=4, seed=1, directory=tempfile.mkdtemp())
    >>> tuner.search(lengths=lengths, verbose=0)
    >>> figure = kerasbatch.tuner.plot_trials(tuner)
    >>> [ax.get_title() for ax in figure.axes]
    ['padding_efficiency per trial', 'Best boundaries: uniform, 64 buckets']
    """
    plt = plotting._import_pyplot()
    trials = [
        trial for trial in tuner.oracle.trials.values() if trial.status == "COMPLETED"
    ]
    if not trials:
        raise RuntimeError("No completed trial to plot: run search() first.")
    lengths = tuner.lengths if lengths is None else np.asarray(lengths)
    if lengths is None:
        raise RuntimeError(
            "No lengths to plot: pass lengths= (the tuner was reloaded, not searched)."
        )
    best = tuner.oracle.get_best_trials(1)[0]
    figures = [f for f in FIGURES if any(t.metrics.exists(f) for t in trials)]
    panels = len(figures) + 1
    figure, axes = plt.subplots(1, panels, figsize=figsize or (5 * panels, 3.8))
    labels = [_label(trial) for trial in trials]
    for ax, name in zip(axes, figures, strict=False):
        values = [
            t.metrics.get_last_value(name) if t.metrics.exists(name) else np.nan
            for t in trials
        ]
        colors = ["C3" if t.trial_id == best.trial_id else "C0" for t in trials]
        ax.bar(range(len(trials)), values, color=colors)
        ax.set_xticks(range(len(trials)), labels, rotation=90, fontsize=7)
        ax.set_title(f"{name} per trial")
        ax.set_ylabel("real positions / s" if name == objectives.THROUGHPUT else name)
    builder = tuner.hypermodel.make_builder(best.hyperparameters)
    builder.adapt(lengths)
    hp = best.hyperparameters
    plotting.plot_lengths(
        lengths,
        boundaries=builder.resolved_boundaries or None,
        ax=axes[-1],
        title=(
            f"Best boundaries: {hp.get('boundaries')}, {hp.get('num_buckets')} buckets"
        ),
    )
    figure.tight_layout()
    return figure


def _label(trial):
    hp = trial.hyperparameters
    return f"{trial.trial_id}: {hp.get('boundaries')}/{hp.get('num_buckets')}"
