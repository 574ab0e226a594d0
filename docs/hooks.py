"""MkDocs hooks of the kerasbatch site.

- The API reference must be whole: every public name of `import kerasbatch`
  (and of its subpackages that declare `__all__`) is documented on a
  reference page and has a docstring, and so has every public method of a
  documented class. Otherwise the build fails, naming what is missing.
- The plots (`images/*.png`) are drawn from the builders' own plans of the
  reference workloads at every build, so they show what the code does now;
  the benchmarks' plots are copied from `benchmarks/`.
"""

import inspect
import pathlib
import re
import sys
import types

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = pathlib.Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"

#: The benchmark plots that guides show, copied to `images/benchmarks/`.
BENCHMARK_PLOTS = (
    "results.png",
    "compile_counts.png",
    "tune.png",
    "tune_lognormal_trials.png",
    "tune_bimodal_trials.png",
)

_DIRECTIVE = re.compile(r"^::: (\S+)", re.MULTILINE)


def documented_identifiers():
    """The identifiers the reference pages document (`::: name` lines)."""
    return {
        identifier
        for page in sorted(REFERENCE.glob("*.md"))
        for identifier in _DIRECTIVE.findall(page.read_text(encoding="utf-8"))
    }


def public_names():
    """`{identifier: object}` of every public name: `kerasbatch.__all__`,
    and the `__all__` of each subpackage it lists."""
    import kerasbatch

    names = {}
    for name in kerasbatch.__all__:
        value = getattr(kerasbatch, name)
        names[f"kerasbatch.{name}"] = value
        if isinstance(value, types.ModuleType):
            for member in getattr(value, "__all__", ()):
                names[f"kerasbatch.{name}.{member}"] = getattr(value, member)
    return names


def _own_doc(value):
    """The docstring written for `value` itself (not its type's)."""
    if isinstance(value, (types.ModuleType, type)) or callable(value):
        return inspect.getdoc(value)
    return "constant"  # a constant's docstring is the comment the reference reads


def reference_problems():
    """What the API reference lacks, one line each."""
    documented = documented_identifiers()
    problems = []
    for identifier, value in sorted(public_names().items()):
        if identifier not in documented:
            problems.append(f"{identifier} is not on any page of docs/reference/")
        if not _own_doc(value):
            problems.append(f"{identifier} has no docstring")
        if isinstance(value, type) and identifier in documented:
            problems.extend(
                f"{identifier}.{method} has no docstring"
                for method in _public_methods(value)
                if not inspect.getdoc(getattr(value, method))
            )
    return problems


def _public_methods(cls):
    """Public methods that kerasbatch defines on `cls` or its bases."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        owner = next((base for base in cls.__mro__ if name in vars(base)), None)
        if owner is None or not owner.__module__.startswith("kerasbatch"):
            continue
        member = vars(owner)[name]
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        if inspect.isfunction(member) or isinstance(member, property):
            yield name


def on_pre_build(config):
    problems = reference_problems()
    if problems:
        raise PluginError(
            "The API reference is incomplete:\n  " + "\n  ".join(problems)
        )


def on_files(files, config):
    if str(ROOT / "docs") not in sys.path:  # once, though `mkdocs serve` rebuilds
        sys.path.insert(0, str(ROOT / "docs"))
    import plots

    for name, content in plots.draw_all().items():
        files.append(File.generated(config, f"images/{name}", content=content))
    for name in BENCHMARK_PLOTS:
        content = (ROOT / "benchmarks" / name).read_bytes()
        files.append(
            File.generated(config, f"images/benchmarks/{name}", content=content)
        )
    return files
