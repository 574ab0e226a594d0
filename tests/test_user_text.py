"""Nothing a user reads points at things a user does not have.

The library's code and docstrings (and so its command-line output), the
README, the tutorials, the benchmarks and any docs name no issue-tracker
numbers ("issue 23"), no internal design documents ("seed 001", a
`shared/` folder, `DESIGN.md`): they say what is meant in words, or cite a
public source (RETURNN, Lhotse, the TFRecord format, tf.data).
"""

import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: What a user has no way to look up, each with why. A reference may run over
#: a line break, in prose or in a comment (`[\s#]+`).
FORBIDDEN = [
    (re.compile(r"\bissues?[\s#]*\d+", re.IGNORECASE), "an issue number"),
    (re.compile(r"\b(?:the|this|that)[\s#]+issue\b", re.IGNORECASE), "the issue"),
    (re.compile(r"\bseeds?[\s#]+0\d\d\b", re.IGNORECASE), "a design seed"),
    (re.compile(r"\bthe[\s#]+seed(?:'s|s')", re.IGNORECASE), "a design seed"),
    (re.compile(r"\bseeds/"), "the design seeds' folder"),
    (re.compile(r"(?<![\w.-])shared/"), "a shared/ folder"),
    (re.compile(r"\bDESIGN\.md\b"), "the design notes"),
]

TEXT_SUFFIXES = {".py", ".md", ".txt", ".rst", ".ipynb", ".toml", ".cfg", ".json"}


def user_files():
    """Every file a user reads: the package, README, tutorials, benchmarks,
    docs and the package's metadata."""
    files = [ROOT / "README.md", ROOT / "pyproject.toml"]
    files += (ROOT / "kerasbatch").rglob("*.py")
    files += (ROOT / "tutorials").glob("*.ipynb")
    for folder in ("benchmarks", "docs"):
        files += (
            path
            for path in (ROOT / folder).rglob("*")
            if path.is_file()
            and path.suffix in TEXT_SUFFIXES
            and "__pycache__" not in path.parts
        )
    return sorted(path for path in files if path.exists())


def texts_of(path):
    """`(where, text)`: the file's text, or each of a notebook's cells."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".ipynb":
        yield "", text
        return
    for index, cell in enumerate(json.loads(text)["cells"]):
        source = cell["source"]
        yield f"cell {index} ", "".join(source) if isinstance(source, list) else source


def references(path):
    """`"where (what): line"` of every forbidden reference in the file, in
    the file's order."""
    for where, text in texts_of(path):
        lines = text.splitlines()
        found = {}
        for pattern, what in FORBIDDEN:
            for match in pattern.finditer(text):
                number = text.count("\n", 0, match.start()) + 1
                found.setdefault(number, []).append(what)
        for number, whats in sorted(found.items()):
            line = lines[number - 1].strip()
            yield f"{where}line {number} ({', '.join(dict.fromkeys(whats))}): {line}"


def test_user_files_are_found():
    names = {path.relative_to(ROOT).as_posix() for path in user_files()}
    assert {"README.md", "kerasbatch/__init__.py"} <= names
    assert any(name.startswith("tutorials/") for name in names)
    assert any(name.startswith("benchmarks/") for name in names)


def test_forbidden_patterns_catch_the_references():
    caught = [
        "as in seed 000",
        "Seed 001's loaders",
        "checks the seed's rules",
        "(issue 23)",
        "issue 10's target",
        "the issue's figures",
        "see ../shared/DESIGN.md",
        "`shared/DESIGN.md`",
        "../shared/seeds/003_c62e6e749f527e77.txt",
        "RETURNN's recipe (seed\n003) is",
        "# (issue\n    # 23)",
    ]
    passed = [
        "seed=0",
        "a separate generator (seed 1)",
        "issues a warning",
        "unshared/x",
    ]
    for text in caught:
        assert any(pattern.search(text) for pattern, _ in FORBIDDEN), text
    for text in passed:
        assert not any(pattern.search(text) for pattern, _ in FORBIDDEN), text


def test_nothing_a_user_reads_cites_what_they_do_not_have():
    found = [
        f"{path.relative_to(ROOT).as_posix()}, {reference}"
        for path in user_files()
        for reference in references(path)
    ]
    assert not found, (
        "Say what is meant in words, or cite the public source:\n" + "\n".join(found)
    )
