"""`kerasbatch analyze` where TensorFlow is not installed and no Keras
backend is set: planning is NumPy, so it runs; only a TFRecord dataset needs
TensorFlow, and says so in one sentence."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np


def analyze(*arguments):
    environment = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    return subprocess.run(
        [sys.executable, "-m", "kerasbatch", "analyze", *map(str, arguments)],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
    )


def test_analyze_runs_without_tensorflow_or_a_keras_backend(tmp_path):
    assert importlib.util.find_spec("tensorflow") is None
    lengths = np.random.default_rng(0).lognormal(3.5, 0.7, 2000).astype(int) + 1
    np.save(tmp_path / "lengths.npy", lengths)
    result = analyze(tmp_path / "lengths.npy", "--backend", "jax", "--epochs", "2")
    assert result.returncode == 0, result.stderr
    assert "Recommended for jax on a " in result.stdout
    assert result.stderr == ""
    (tmp_path / "lines.md").write_text("Apache License\nVersion 2.0\n")
    words = analyze(tmp_path / "lines.md", "--tokens", "words", "--json")
    assert words.returncode == 0, words.stderr
    assert json.loads(words.stdout)["summary"]["tokens"] == 4


def test_a_tfrecord_dataset_says_it_needs_tensorflow(tmp_path):
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "__manifest__.json").write_text("{}")
    result = analyze(tmp_path / "records", "--backend", "jax")
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"kerasbatch analyze: error: Reading the TFRecord dataset in "
        f"{tmp_path / 'records'} needs TensorFlow and Keras, which could not be "
        "imported ("
    )
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
