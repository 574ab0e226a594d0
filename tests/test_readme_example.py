"""The README: its quickstart runs as it is written and prints what its last
comment says it prints; it stays short, and its links lead to files."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent


def opening_example():
    """The README's first python block."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.search(r"```python\n(.*?)```", readme, re.DOTALL).group(1)


def test_opening_example_runs_and_prints_its_comment(capsys):
    code = opening_example()
    *_, printed_comment = code.rstrip().splitlines()
    assert printed_comment.startswith("# "), "the block ends with what it prints"
    exec(compile(code, "README.md (opening example)", "exec"), {})
    printed = capsys.readouterr().out.rstrip().splitlines()[-1]
    said = printed_comment[2:]
    if said.endswith("..."):  # the rest of the line left out
        assert printed.startswith(said[:-3]), (printed, said)
    else:
        assert printed == said


def test_the_readme_links_to_files_that_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [target for target in targets if "://" not in target]
    assert "docs/guides/getting-started.md" in local
    missing = [target for target in local if not (ROOT / target).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_the_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 200, f"README.md has {lines} lines: move details to docs/"
