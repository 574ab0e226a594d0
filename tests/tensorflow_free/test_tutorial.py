"""Tutorials 07 (Keras on JAX without TensorFlow) and 09 (data on disk) run
top to bottom, print nothing a user should not see and leave no files
behind; CI runs them in the environment without TensorFlow (`run.sh`), and
the other tutorials in the main suite (`test_tutorials.py`)."""

import importlib.util
import os
import pathlib

import pytest
from notebook_output import unwanted_lines

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

TUTORIALS = pathlib.Path(__file__).resolve().parents[2] / "tutorials"
#: Each tutorial, and what its last cells print.
EXPECTED = {
    "07_jax_without_tensorflow.ipynb": "identical on both engines: True",
    "09_data_on_disk.ipynb": "identical to the in-memory build: True",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_tutorial_runs_without_errors(monkeypatch, tmp_path, name):
    monkeypatch.setenv("KERAS_BACKEND", "jax")  # the kernel inherits it
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
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
    unwanted = unwanted_lines(notebook)
    assert not unwanted, f"{name} prints what a user should not see:\n" + (
        "\n".join(unwanted)
    )
    assert sorted(os.listdir(temporary)) == [], f"{name} leaves files behind"
    if importlib.util.find_spec("tensorflow") is None:
        assert "TensorFlow imported: False" in printed
