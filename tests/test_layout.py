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


def load_layout_benchmark():
    """`benchmarks/layout.py`, the measure of the package's structure."""
    import importlib.util

    path = PACKAGE.parent / "benchmarks" / "layout.py"
    spec = importlib.util.spec_from_file_location("layout_benchmark", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_layers_import_one_way_and_tensorflow_stays_home(monkeypatch):
    layout = load_layout_benchmark()
    # The repeated-code count needs a tool CI has not; the rest is ast.
    monkeypatch.setattr(layout, "run_duplicates", lambda _: {"pairs": None})
    summary = layout.measure(PACKAGE.parent)["summary"]
    counted = {name: value for name, value in summary.items() if value is not None}
    assert set(counted.values()) == {0}, {k: v for k, v in counted.items() if v}
    assert len(counted) == len(summary) - 1
