"""Tutorial 07 (Keras on JAX without TensorFlow) runs top to bottom; CI runs
it in the environment without TensorFlow (`run.sh`)."""

import importlib.util
import pathlib

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

TUTORIAL = (
    pathlib.Path(__file__).resolve().parents[2]
    / "tutorials"
    / "07_jax_without_tensorflow.ipynb"
)


def test_tutorial_07_runs_without_errors(monkeypatch):
    monkeypatch.setenv("KERAS_BACKEND", "jax")  # the kernel inherits it
    notebook = nbformat.read(TUTORIAL, as_version=4)
    nbclient.NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(TUTORIAL.parent)}},
    ).execute()
    last = notebook.cells[-1].outputs[-1]["text"]
    assert "identical on both engines: True" in last
    if importlib.util.find_spec("tensorflow") is None:
        assert "TensorFlow imported: False" in last
