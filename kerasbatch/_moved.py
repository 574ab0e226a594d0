"""The old import paths of modules that moved, kept working.

`import kerasbatch.boundaries` (or `from kerasbatch.plan import BatchPlan`)
imports the module from its new home, `kerasbatch.planning.boundaries`,
with a `DeprecationWarning` that names it; `kerasbatch.boundaries` as an
attribute does the same (`kerasbatch.__getattr__`). The module is the same
object under both names.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: Old module path -> new module path.
MOVED = {
    "kerasbatch.analysis": "kerasbatch.tools.analysis",
    "kerasbatch.batching": "kerasbatch.planning.batching",
    "kerasbatch.boundaries": "kerasbatch.planning.boundaries",
    "kerasbatch.buckets": "kerasbatch.planning.buckets",
    "kerasbatch.builders.prepared": "kerasbatch.planning.prepared",
    "kerasbatch.chunking": "kerasbatch.planning.chunking",
    "kerasbatch.costs": "kerasbatch.planning.costs",
    "kerasbatch.demo": "kerasbatch.tools.demo",
    "kerasbatch.engines.numpy_batches": "kerasbatch.engines.numpy.batches",
    "kerasbatch.epochs": "kerasbatch.engines.tf_data.orders",
    "kerasbatch.lengths": "kerasbatch.tools.lengths",
    "kerasbatch.model_inputs": "kerasbatch.data.model_inputs",
    "kerasbatch.orders": "kerasbatch.planning.orders",
    "kerasbatch.outputs": "kerasbatch.data.outputs",
    "kerasbatch.packing": "kerasbatch.planning.packing",
    "kerasbatch.padding": "kerasbatch.data.padding",
    "kerasbatch.plan": "kerasbatch.planning.plan",
    "kerasbatch.plotting": "kerasbatch.tools.plotting",
    "kerasbatch.prediction": "kerasbatch.tools.prediction",
    # The reducers (settings) and their graph reductions (Window).
    "kerasbatch.reducers": "kerasbatch.engines.tf_data.reducers",
    "kerasbatch.remainders": "kerasbatch.planning.remainders",
    "kerasbatch.restore": "kerasbatch.tools.restore",
    "kerasbatch.sources": "kerasbatch.data.sources",
}


def moved_module(old):
    """The module `old` (an old path in `MOVED`) now is, with a
    `DeprecationWarning` that names its new path."""
    new = MOVED[old]
    warnings.warn(
        f"{old} moved to {new}; import it from there ({old} will be removed).",
        DeprecationWarning,
        stacklevel=3,
    )
    return importlib.import_module(new)


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths of `MOVED`: each is its new module."""

    def find_spec(self, name, path=None, target=None):
        if name not in MOVED:
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        module = moved_module(spec.name)
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module):
        # The import system gave the module the alias's spec: it keeps its own.
        module.__spec__ = module.__spec__.loader_state


def install():
    """Makes the old paths importable (once per process)."""
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Alias())
