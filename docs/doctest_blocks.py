"""A griffe extension: docstring Examples rendered as code.

kerasbatch's docstrings show their Examples as doctest sessions (`>>>` lines
and what they print), which the test suite runs. Markdown would read them as
text: this extension wraps each session in a fenced `pycon` block before
mkdocstrings renders the docstring.
"""

import re

import griffe

_PROMPT = re.compile(r"^(\s*)>>> ")


def fence_doctests(text):
    """`text` with every doctest session (from a `>>>` line to the next blank
    line) inside a fenced code block."""
    lines = text.splitlines()
    fenced = []
    index = 0
    while index < len(lines):
        prompt = _PROMPT.match(lines[index])
        if not prompt:
            fenced.append(lines[index])
            index += 1
            continue
        indent = prompt.group(1)
        fenced.append(f"{indent}```pycon")
        while index < len(lines) and lines[index].strip():
            fenced.append(lines[index])
            index += 1
        fenced.append(f"{indent}```")
    return "\n".join(fenced)


class DoctestBlocks(griffe.Extension):
    """Fences the doctest sessions of every docstring griffe loads."""

    def on_object(self, *, obj, **kwargs):
        if obj.docstring is not None and ">>> " in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
