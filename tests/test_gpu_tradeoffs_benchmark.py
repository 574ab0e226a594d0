"""`benchmarks/gpu_tradeoffs.py` at its smoke size.

The script runs once, in a process of its own on JAX (the backend of the
GPU runs it is made for; about 70 s on 2 CPU cores, bounded by a
timeout), whichever backend runs this suite; its JSON must have every row,
finite losses, and padding and shape figures equal to what the builders
plan.
"""

import argparse
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import kerasbatch

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks")
SCRIPT = os.path.join(BENCHMARKS, "gpu_tradeoffs.py")
sys.path.insert(0, BENCHMARKS)

import gpu_tradeoffs  # noqa: E402  (standard library and numpy at import)

#: About 8 times the run on a quiet 2-core machine: a busy one passes, a hang
#: still fails.
TIMEOUT_SECONDS = 600


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """`(report, stdout)` of one smoke run."""
    output = tmp_path_factory.mktemp("gpu_tradeoffs") / "results.json"
    completed = subprocess.run(
        [sys.executable, SCRIPT, "--size", "smoke", "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        # XLA compiles with less optimisation (tests/conftest.py)
        env={**os.environ, "KERAS_BACKEND": "jax"},
    )
    assert completed.returncode == 0, (
        completed.stdout[-4000:] + completed.stderr[-4000:]
    )
    return json.loads(output.read_text()), completed.stdout


@pytest.fixture(scope="module")
def data(run):
    """`(x, y, lengths)` of the run, drawn again from its settings."""
    report, _ = run
    return gpu_tradeoffs.make_data(argparse.Namespace(**report["settings"]), np)


def rebuilt(row, data):
    """The row's builder, made again from its config and built on the data."""
    x, y, _ = data
    builder = getattr(kerasbatch, row["builder"]["class"]).from_config(
        row["builder"]["config"]
    )
    builder.build(x, y)
    return builder


def test_every_row_trained_with_finite_losses(run):
    report, stdout = run
    epochs = report["settings"]["epochs"]
    assert report["backend"] == "jax"
    assert report["status"] == "complete"
    assert report["nan_rows"] == []
    assert list(report["rows"]) == list(gpu_tradeoffs.ROWS)
    for name in gpu_tradeoffs.TRAINED:
        row = report["rows"][name]
        assert len(row["losses"]) == epochs, name
        assert row["losses_finite"] and all(map(math.isfinite, row["losses"])), name
        assert row["all_tokens_fed"], name
        assert row["steady_epoch_s"] > 0 and row["real_tokens_per_s"] > 0, name
        assert row["pipeline_batches_per_s"] > 0, name
        assert f"| {name}: " in stdout
    assert "losses" not in report["rows"]["longest"]
    assert report["step_overhead"]["rows"] == len(gpu_tradeoffs.TRAINED)


def test_builder_rows_report_the_builders_plans(run, data):
    report, _ = run
    epochs = report["settings"]["epochs"]
    for name in gpu_tradeoffs.BUILDER_ROWS:
        row = report["rows"][name]
        builder = rebuilt(row, data)
        assert row["efficiency"] == builder.statistics(0).padding_efficiency, name
        counted = builder.statistics(row["counted_epoch"]).padding_efficiency
        assert row["efficiency_counted"] == counted, name
        assert row["new_shapes"] == gpu_tradeoffs.planned_shapes(builder, epochs)
        assert row["new_shapes"][0] == builder.statistics(0).distinct_shapes, name
        assert row["shapes_epoch_1_counted"] == len(
            builder.batch_shapes(row["counted_epoch"])
        ), name
        assert row["batches"] == builder.statistics(0).num_batches, name


def test_tf_data_rows_count_their_padding(run, data):
    report, _ = run
    settings = report["settings"]
    _, _, lengths = data
    rows = report["rows"]
    padded = rows["padded"]
    assert padded["new_shapes"][0] in (1, 2)  # full batches and a last one
    assert padded["efficiency"] == lengths.sum() / (len(lengths) * settings["max_len"])
    # bucket_by_sequence_length pads to the boundary less one, then to the multiple.
    boundaries = np.array(gpu_tradeoffs.bbsl_boundaries(settings["max_len"]))
    bounds = boundaries[np.searchsorted(boundaries, lengths, side="right")] - 1
    multiple = settings["pad_to_multiple"]
    expected = lengths.sum() / (-(-bounds // multiple) * multiple).sum()
    assert rows["bbsl"]["efficiency"] == pytest.approx(expected, rel=1e-12)
    longest = rows["longest"]
    assert padded["efficiency"] < longest["efficiency"] < 1
    assert longest["new_shapes"][0] > rows["bbsl"]["new_shapes"][0]


def test_compiles_are_the_planned_shapes(run):
    report, _ = run
    for name in gpu_tradeoffs.TRAINED:
        row = report["rows"][name]
        assert row["compiles"] == row["new_shapes"], name


def test_compile_cost_is_measured(run):
    report, stdout = run
    cost = report["compile_cost"]
    assert cost["seconds"] > 0
    assert cost["seconds_per_shape"] > 0 and cost["seconds_per_position"] > 0
    assert "CompileCost.measure on a fresh model" in stdout
    bucket = cost["estimates"]["bucket"]
    assert bucket["estimated_s"] > 0
    assert bucket["epochs_measured"] == report["settings"]["epochs"]


def test_a_loss_that_is_not_finite_shows_in_the_table():
    row = {
        "description": "d",
        "efficiency": 0.5,
        "new_shapes": [1, 0],
        "compiles": [1, 0],
        "compile_seconds": [1.0, 0.0],
        "losses": [1.0, float("nan")],
        "epoch_seconds": [2.0, 1.0],
        "steps": [4, 4],
        "real_positions": 100,
        "pipeline_batches_per_s": 10.0,
    }
    gpu_tradeoffs.summarize(row, None)
    assert not row["losses_finite"]
    report = {
        "backend": "jax",
        "device": "cpu",
        "settings": {"elements": 1, "batch_size": 1, "epochs": 2},
        "rows": {"padded": row},
    }
    assert "1.000, nan **NOT FINITE**" in gpu_tradeoffs.format_table(report)
