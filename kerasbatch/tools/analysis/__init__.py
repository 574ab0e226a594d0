"""`kerasbatch.analyze`: what each way of batching costs on your lengths, before training.

`analyze(lengths)` plans the epochs of every candidate builder from the
lengths alone, with the builders' own planning (`kerasbatch.planning.batching`:
exact, no tensor is built, and neither Keras nor TensorFlow is imported),
and tabulates padding efficiency, distinct batch shapes (what XLA and JAX
compile once each), steps per epoch and real tokens per step. It then
estimates the seconds of a training run with a Keras backend on a CPU or a
GPU and recommends the cheapest row of the table, with the line to paste.
`python -m kerasbatch analyze` runs it from the command line.

One module per part:

- `runner`: `analyze` itself;
- `settings`: its settings, checked, and the defaults they take;
- `strategies`: the candidate builders, planned over the lengths, and
  their `StrategyRow`;
- `costs`: a run's estimated seconds, from what its epochs feed and the
  costs of `kerasbatch.planning.costs` (or a `CompileCost` of your model);
- `report`: the `Analysis`, as text and JSON;
- `plot`: its figure, and `check_plot_path`.

The lengths are read by `kerasbatch.tools.lengths`.
"""

# The names of `__all__` and the defaults (`NUM_BUCKETS`, `PACKED_SEQUENCES`,
# `ROW_MULTIPLE`, `PROGRESS_MIN_SEQUENCES`), importable from here as before.
from kerasbatch.tools.analysis.plot import check_plot_path
from kerasbatch.tools.analysis.report import Analysis
from kerasbatch.tools.analysis.runner import (
    PROGRESS_MIN_SEQUENCES as PROGRESS_MIN_SEQUENCES,
)
from kerasbatch.tools.analysis.runner import analyze
from kerasbatch.tools.analysis.settings import NUM_BUCKETS as NUM_BUCKETS
from kerasbatch.tools.analysis.settings import PACKED_SEQUENCES as PACKED_SEQUENCES
from kerasbatch.tools.analysis.settings import ROW_MULTIPLE as ROW_MULTIPLE
from kerasbatch.tools.analysis.strategies import StrategyRow

__all__ = ["Analysis", "StrategyRow", "analyze", "check_plot_path"]
