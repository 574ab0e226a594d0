"""The documentation site's own checks: the API reference holds every public
name with a docstring (the strict build runs `reference_problems` and fails
on what it finds), and docstring Examples render as code."""

import importlib.util
import pathlib
import shutil
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def load(name):
    """A module of `docs/`, by file (the site's hooks are no package)."""
    spec = importlib.util.spec_from_file_location(
        f"kerasbatch_docs_{name}", ROOT / "docs" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


hooks = load("hooks")
doctest_blocks = load("doctest_blocks")


def test_the_reference_is_whole():
    assert hooks.reference_problems() == []


def test_every_public_name_is_checked():
    names = hooks.public_names()
    assert "kerasbatch.BucketBuilder" in names
    assert "kerasbatch.callbacks.EpochReshuffle" in names
    assert "kerasbatch.io.TFRecordLoader" in names  # imported on first use
    assert "kerasbatch.tuner.CompileCost" in names


def test_a_name_missing_from_the_reference_is_named(tmp_path, monkeypatch):
    shutil.copytree(hooks.REFERENCE, tmp_path, dirs_exist_ok=True)
    page = tmp_path / "callbacks.md"
    page.write_text(page.read_text().replace("::: kerasbatch.callbacks.WarmUp\n", ""))
    monkeypatch.setattr(hooks, "REFERENCE", tmp_path)
    assert hooks.reference_problems() == [
        "kerasbatch.callbacks.WarmUp is not on any page of docs/reference/"
    ]


def test_a_public_name_or_method_without_a_docstring_is_named(monkeypatch):
    import kerasbatch

    class Undocumented:
        def run(self):
            pass

    Undocumented.__module__ = "kerasbatch.example"
    monkeypatch.setattr(kerasbatch, "__all__", ["BucketBuilder", "Undocumented"])
    monkeypatch.setattr(kerasbatch, "Undocumented", Undocumented, raising=False)
    monkeypatch.setattr(
        hooks, "documented_identifiers", lambda: {"kerasbatch.Undocumented"}
    )
    assert hooks.reference_problems() == [
        "kerasbatch.BucketBuilder is not on any page of docs/reference/",
        "kerasbatch.Undocumented has no docstring",
        "kerasbatch.Undocumented.run has no docstring",
    ]


def test_doctest_sessions_are_fenced_as_code():
    docstring = (
        "Pads.\n\nExample:\n\n>>> 1 + 1\n2\n>>> [(2, 2), (1, 3)]\n"
        "[(2, 2), (1, 3)]\n\nAfter.\n    >>> x = 1\n"
    )
    assert doctest_blocks.fence_doctests(docstring) == (
        "Pads.\n\nExample:\n\n```pycon\n>>> 1 + 1\n2\n>>> [(2, 2), (1, 3)]\n"
        "[(2, 2), (1, 3)]\n```\n\nAfter.\n    ```pycon\n    >>> x = 1\n    ```"
    )
