"""The README's opening example runs as it is written, and prints what its
last comment says it prints."""

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
