"""Runs tutorial notebooks and stores them with their outputs.

The site renders the notebooks as they are stored, outputs included, so
that a reader sees what each cell prints without running it. After changing
a notebook, run it again with this script (the test suite checks that the
stored outputs belong to the cells as they are now):

    python docs/execute_tutorials.py tutorials/01_quickstart.ipynb ...

The tutorials on JAX without TensorFlow (07 and 09) are run with the Python
of an environment without TensorFlow, as `tests/tensorflow_free/run.sh`
makes one:

    KERAS_BACKEND=jax /tmp/kerasbatch-without-tensorflow/bin/python \\
        docs/execute_tutorials.py tutorials/07_jax_without_tensorflow.ipynb
"""

import argparse
import hashlib
import os
import pathlib
import tempfile

#: Where the hash of the cells the outputs belong to is kept, in the
#: notebook's metadata.
METADATA_KEY = "kerasbatch"


def sources_hash(notebook):
    """A hash of the notebook's code cells, in order."""
    digest = hashlib.sha256()
    for cell in notebook.cells:
        if cell.cell_type == "code":
            digest.update(cell.source.encode("utf-8") + b"\0")
    return digest.hexdigest()


def execute(path):
    """Runs the notebook at `path` top to bottom and stores it with its
    outputs (a cell that fails stops it, and nothing is stored)."""
    import nbclient
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory() as temporary:
        environment = {"TMPDIR": temporary}
        previous = {name: os.environ.get(name) for name in environment}
        os.environ.update(environment)
        os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
        try:
            nbclient.NotebookClient(
                notebook,
                timeout=900,
                kernel_name="python3",
                record_timing=False,
                resources={"metadata": {"path": str(path.parent)}},
            ).execute()
        finally:
            for name, value in previous.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    notebook.metadata[METADATA_KEY] = {"sources_sha256": sources_hash(notebook)}
    notebook.metadata.pop("widgets", None)  # widget state: large, not rendered
    nbformat.write(notebook, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=pathlib.Path)
    for path in parser.parse_args().notebooks:
        print(f"running {path}", flush=True)
        execute(path.resolve())


if __name__ == "__main__":
    main()
