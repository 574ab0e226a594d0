"""Every notebook in `tutorials/` runs top to bottom without an error, and
with the logging a user has (TensorFlow's C++ log level unset) prints no
TensorFlow C++ log line and no tqdm warning. Each runs with a temporary
folder of the test's own, so that whatever a tutorial leaves there is seen;
the TFRecord tutorial's errors are checked to read as plain text."""

import os
import pathlib
import sys

import pytest
from notebook_output import unwanted_lines

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "docs"))
import execute_tutorials  # noqa: E402

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
jupyter_client = pytest.importorskip("jupyter_client")

ROOT = pathlib.Path(__file__).resolve().parent.parent
TUTORIALS = ROOT / "tutorials"
NOTEBOOKS = sorted(TUTORIALS.glob("*.ipynb"))
#: The tutorials on JAX without TensorFlow run in the environment without
#: it (`tensorflow_free/test_tutorial.py`, with the same checks); the others
#: run here.
WITHOUT_TENSORFLOW = {"07_jax_without_tensorflow.ipynb", "09_data_on_disk.ipynb"}
RUN_HERE = [path for path in NOTEBOOKS if path.name not in WITHOUT_TENSORFLOW]
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
def test_notebook_is_stored_with_the_outputs_of_its_cells(path):
    # The documentation site renders the notebooks as stored: their outputs
    # must come from one clean run of the cells as they are now
    # (`docs/execute_tutorials.py` stores them so).
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    assert notebook.metadata.kernelspec.name == KERNEL_NAME
    stored = notebook.metadata.get(execute_tutorials.METADATA_KEY, {})
    assert stored.get("sources_sha256") == execute_tutorials.sources_hash(notebook), (
        f"{path.name}'s cells changed since its outputs were stored: run "
        f"python docs/execute_tutorials.py tutorials/{path.name}"
    )
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    counts = [cell.execution_count for cell in code]
    assert counts == list(range(1, len(code) + 1)), "not one run, top to bottom"
    errors = [
        index
        for index, cell in enumerate(code)
        for output in cell.outputs
        if output.output_type == "error"
    ]
    assert not errors, f"stored errors in code cells {errors}"
    unwanted = unwanted_lines(notebook)
    assert not unwanted, f"{path.name} stores what a user should not see:\n" + (
        "\n".join(unwanted)
    )


@pytest.mark.parametrize("path", RUN_HERE, ids=lambda path: path.name)
def test_notebook_runs_cleanly(path, tmp_path, monkeypatch):
    # The kernel inherits this process's environment: a user's has no
    # TF_CPP_MIN_LOG_LEVEL (conftest sets it for the tests' own process),
    # and no PYTEST_CURRENT_TEST, under which ipykernel leaves what C++
    # writes to stderr out of the cells' outputs.
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    # AutoGraph (in TensorFlow's steps and maps) writes the code it converts
    # to modules in TMPDIR and imports them; where Python may write bytecode,
    # it writes theirs beside them, in a `__pycache__` that is Python's, not
    # the tutorial's. The kernel writes none.
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "matplotlib"))
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
    assert sorted(os.listdir(temporary)) == [], f"{path.name} leaves files behind"
    if path.name == "03_tfrecord_manifest.ipynb":
        check_plain_errors(notebook)


def outputs(notebook, stream=None):
    """`(cell index, text)` of every text output (of `stream` alone)."""
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        for output in cell.outputs:
            if output.output_type == "stream":
                if stream is None or output.name == stream:
                    found.append((index, output.text))
            elif stream is None and "data" in output:
                found.append((index, output.data.get("text/plain", "")))
    return found


def check_plain_errors(notebook):
    """The TFRecord tutorial's errors read as one plain sentence: no
    TensorFlow op trace, no escaped quotes."""
    for index, text in outputs(notebook):
        assert "local_rendezvous" not in text, f"cell {index}: {text}"
        assert "assertion failed" not in text, f"cell {index}: {text}"
        assert "[[" not in text, f"cell {index}: {text}"
    printed = "".join(text for _, text in outputs(notebook, "stdout"))
    assert "\\" not in printed
    (error,) = [
        line
        for line in printed.splitlines()
        if line.startswith("TFRecord file ") and "is corrupt or truncated" in line
    ]
    assert error.endswith("and TFRecordLoader.check() lists every problem")
