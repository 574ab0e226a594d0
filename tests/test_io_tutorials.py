"""The TFRecord tutorials (02, 03) leave nothing behind and print plain text.

Run as a user would (TensorFlow's C++ log level unset), with the kernel's
temporary folder one of the test's own, so that whatever a tutorial leaves
there is seen.
"""

import os
import pathlib

import pytest
from notebook_output import unwanted_lines

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

TUTORIALS = pathlib.Path(__file__).resolve().parent.parent / "tutorials"


def run(name, tmp_path, monkeypatch):
    """Runs a tutorial with `tmp_path/tmp` as its TMPDIR: `(notebook, what
    is left there)`."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))  # the kernel inherits it
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    # under which ipykernel leaves what C++ writes to stderr out of outputs
    monkeypatch.delenv("PYTEST_CURRENT_TEST", raising=False)
    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "matplotlib"))
    notebook = nbformat.read(TUTORIALS / name, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(TUTORIALS)}},
    )
    client.execute()
    unwanted = unwanted_lines(notebook)
    assert not unwanted, f"{name} prints what a user should not see:\n" + (
        "\n".join(unwanted)
    )
    return notebook, sorted(os.listdir(temporary))


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


def test_tutorial_02_removes_its_temporary_folder(tmp_path, monkeypatch):
    _, left = run("02_tuning_buckets.ipynb", tmp_path, monkeypatch)
    assert left == []


def test_tutorial_03_removes_its_files_and_prints_plain_errors(tmp_path, monkeypatch):
    notebook, left = run("03_tfrecord_manifest.ipynb", tmp_path, monkeypatch)
    assert left == []  # 1.2 MB of TFRecords before
    texts = outputs(notebook)
    for index, text in texts:
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
