"""The package's layers: planning needs NumPy alone."""

import ast
import pathlib

import pytest

import kerasbatch

PACKAGE = pathlib.Path(kerasbatch.__file__).parent
#: What planning may import from kerasbatch: itself and the base modules.
PLANNING_MAY_IMPORT = (
    "kerasbatch.planning",
    "kerasbatch.checks",
    "kerasbatch.config",
    "kerasbatch.optional",
)


def imported_modules(path):
    """Every module `path` imports, at its top or inside functions."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [node.module] + [
                f"{node.module}.{alias.name}" for alias in node.names
            ]
    return names


PLANNING = sorted((PACKAGE / "planning").glob("*.py"))


def test_planning_has_its_modules():
    names = {path.stem for path in PLANNING}
    assert {"plan", "orders", "boundaries", "packing", "built"} <= names


@pytest.mark.parametrize("path", PLANNING, ids=lambda path: path.stem)
def test_planning_imports_neither_keras_nor_tensorflow(path):
    for name in imported_modules(path):
        root = name.split(".")[0]
        assert root not in ("keras", "tensorflow", "jax", "torch", "grain"), (
            f"{path.name} imports {name}"
        )
        if root == "kerasbatch" and name != "kerasbatch":
            assert name.startswith(PLANNING_MAY_IMPORT), f"{path.name} imports {name}"


def test_the_check_finds_an_import_of_tensorflow(tmp_path):
    module = tmp_path / "bad.py"
    module.write_text("def f():\n    import tensorflow as tf\n    return tf\n")
    assert "tensorflow" in imported_modules(module)
