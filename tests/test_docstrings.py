"""Every docstring Example in the package runs and prints what it shows."""

import doctest
import importlib
import pkgutil

import matplotlib
import pytest

import kerasbatch

matplotlib.use("Agg")

MODULES = sorted(
    name
    for _, name, _ in pkgutil.walk_packages(kerasbatch.__path__, "kerasbatch.")
    if name != "kerasbatch.__main__"
)


#: Modules whose public classes and functions must show an Example.
WITH_EXAMPLES = {
    "kerasbatch.tools.analysis.costs",
    "kerasbatch.tools.analysis.plot",
    "kerasbatch.tools.analysis.report",
    "kerasbatch.tools.analysis.runner",
    "kerasbatch.tools.analysis.settings",
    "kerasbatch.tools.analysis.strategies",
    "kerasbatch.planning.batching",
    "kerasbatch.planning.boundaries",
    "kerasbatch.builders.base",
    "kerasbatch.builders.bucket_builder",
    "kerasbatch.builders.chunk_builder",
    "kerasbatch.builders.packed_builder",
    "kerasbatch.builders.padded_builder",
    "kerasbatch.builders.sorted_builder",
    "kerasbatch.builders.stream_bucket_builder",
    "kerasbatch.callbacks.epoch_reshuffle",
    "kerasbatch.callbacks.padding_efficiency",
    "kerasbatch.callbacks.throughput",
    "kerasbatch.callbacks.warm_up",
    "kerasbatch.planning.chunking",
    "kerasbatch.config",
    "kerasbatch.planning.costs",
    "kerasbatch.io.dataset_check",
    "kerasbatch.io.dataset_parsing",
    "kerasbatch.io.error_messages",
    "kerasbatch.io.manifest",
    "kerasbatch.io.parsing",
    "kerasbatch.io.records",
    "kerasbatch.io.writer",
    "kerasbatch.data.outputs",
    "kerasbatch.data.random_access",
    "kerasbatch.io.token_file",
    "kerasbatch.tuner.batch_sizes",
    "kerasbatch.tuner.bucket_tuner",
    "kerasbatch.tuner.compile_cost",
    "kerasbatch.tuner.hypermodel",
    "kerasbatch.tuner.objectives",
    "kerasbatch.tuner.plotting",
    "kerasbatch.tuner.search_space",
    "kerasbatch.layers.pad_sequences",
    "kerasbatch.layers.segments",
    "kerasbatch.tools.lengths",
    "kerasbatch.planning.packing",
    "kerasbatch.losses.masked_mean_squared_error",
    "kerasbatch.losses.negative_snr",
    "kerasbatch.planning.orders",
    "kerasbatch.planning.sorting",
    "kerasbatch.data.padding",
    "kerasbatch.tools.plotting",
    "kerasbatch.data.reducers",
    "kerasbatch.builders.window_builder",
}


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} docstring example(s) failed in {name}"
    if name in WITH_EXAMPLES:
        assert result.attempted > 0, f"{name} shows no runnable Example"
