"""Modules that moved keep their old import paths, with a DeprecationWarning."""

import importlib
import sys

import pytest

import kerasbatch
from kerasbatch import _moved


@pytest.mark.parametrize("old", sorted(_moved.MOVED))
def test_an_old_path_imports_the_moved_module_and_says_where_it_is(old):
    new = _moved.MOVED[old]
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__name__ == new and module.__spec__.name == new


def test_old_names_from_an_old_path_are_the_new_objects():
    sys.modules.pop("kerasbatch.plan", None)
    with pytest.warns(DeprecationWarning):
        from kerasbatch.plan import BatchPlan  # noqa: PLC0415
    assert BatchPlan is kerasbatch.planning.plan.BatchPlan


@pytest.mark.parametrize(
    "name", sorted(old.split(".")[1] for old in _moved.MOVED if old.count(".") == 1)
)
def test_an_old_attribute_of_the_package_is_the_moved_module(name):
    kerasbatch.__dict__.pop(name, None)
    with pytest.warns(DeprecationWarning, match=f"kerasbatch.{name} moved"):
        module = getattr(kerasbatch, name)
    assert module is importlib.import_module(_moved.MOVED[f"kerasbatch.{name}"])


def test_a_name_that_never_existed_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'boundary'"):
        kerasbatch.boundary  # noqa: B018
