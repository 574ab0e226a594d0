"""Every notebook in `tutorials/` runs top to bottom without an error, and
with the logging a user has (TensorFlow's C++ log level unset) prints no
TensorFlow C++ log line and no tqdm warning."""

import pathlib
import sys

import pytest
from notebook_output import unwanted_lines

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
jupyter_client = pytest.importorskip("jupyter_client")

TUTORIALS = pathlib.Path(__file__).resolve().parent.parent / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))
KERNEL_NAME = "python3"


def test_there_are_tutorials():
    assert NOTEBOOKS, f"no notebooks in {TUTORIALS}"


def test_python3_kernel_runs_this_interpreter():
    # ipykernel's "python3" kernel spec starts `python`, which jupyter_client
    # replaces with sys.executable. A user-level "python3" kernel spec pointing
    # at another interpreter would shadow it and run the notebooks without
    # this environment's packages.
    manager = jupyter_client.KernelManager(kernel_name=KERNEL_NAME)
    command = manager.format_kernel_cmd()
    assert command[0] == sys.executable, (
        f"The {KERNEL_NAME!r} kernel spec in {manager.kernel_spec.resource_dir} "
        f"starts {command[0]}, not {sys.executable}. Remove it "
        f"(`jupyter kernelspec remove {KERNEL_NAME}`) or reinstall this "
        f"environment's with `{sys.executable} -m ipykernel install --sys-prefix`."
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_is_stored_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    assert notebook.metadata.kernelspec.name == KERNEL_NAME
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            assert not cell.outputs, f"cell {index} has stored outputs"
            assert cell.execution_count is None, f"cell {index} has a count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.name)
def test_notebook_runs_without_errors_or_log_lines(path, monkeypatch):
    # The kernel inherits this process's environment: a user's has no
    # TF_CPP_MIN_LOG_LEVEL (conftest sets it for the tests' own process),
    # and no PYTEST_CURRENT_TEST, under which ipykernel leaves what C++
    # writes to stderr out of the cells' outputs.
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=600,
        kernel_name=KERNEL_NAME,
        resources={"metadata": {"path": str(TUTORIALS)}},
    )
    client.execute()  # raises CellExecutionError, naming the cell, on an error
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == "error"
    ]
    assert not errors
    unwanted = unwanted_lines(notebook)
    assert not unwanted, f"{path.name} prints what a user should not see:\n" + (
        "\n".join(unwanted)
    )
