"""Tutorials 07 (Keras on JAX without TensorFlow) and 09 (data on disk) run
top to bottom; CI runs them in the environment without TensorFlow
(`run.sh`)."""

import importlib.util
import pathlib

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

TUTORIALS = pathlib.Path(__file__).resolve().parents[2] / "tutorials"
#: Each tutorial, and what its last cells print.
EXPECTED = {
    "07_jax_without_tensorflow.ipynb": "identical on both engines: True",
    "09_data_on_disk.ipynb": "identical to the in-memory build: True",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_tutorial_runs_without_errors(monkeypatch, name):
    monkeypatch.setenv("KERAS_BACKEND", "jax")  # the kernel inherits it
    notebook = nbformat.read(TUTORIALS / name, as_version=4)
    nbclient.NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(TUTORIALS)}},
    ).execute()
    printed = "".join(
        output.get("text", "")
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
    )
    assert EXPECTED[name] in printed
    if importlib.util.find_spec("tensorflow") is None:
        assert "TensorFlow imported: False" in printed
