"""Lines in a notebook's outputs that a user should not see: TensorFlow's
and absl's C++ log lines, tqdm's warning where ipywidgets is missing, and
Keras' warning that it ignores fit(shuffle=True)."""

import re

#: What each kind of unwanted line looks like.
UNWANTED = [
    # glog/absl format: severity, MMDD, time (`E0000 00:00:1795746899.66 ...`)
    (re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d"), "a C++ log line"),
    (re.compile(r"All log messages before absl::InitializeLog\(\)"), "absl"),
    (re.compile(r"cuInit|cuda drivers|cuda_platform|cudart_stub"), "CUDA"),
    (re.compile(r"rebuild TensorFlow with the appropriate compiler"), "CPU"),
    (re.compile(r"oneDNN custom operations"), "oneDNN"),
    (re.compile(r"TqdmWarning|IProgress not found"), "tqdm"),
    # Keras' warning for fit(shuffle=True) on a dataset that shuffles itself:
    # the tutorials pass shuffle=False, as the guides tell users to.
    (re.compile(r"`shuffle=True` was passed, but will be ignored"), "shuffle"),
]


def unwanted_lines(notebook):
    """`"cell N: (kind) line"` for every unwanted line of every code cell's
    text outputs (stdout and stderr streams, and text/plain results)."""
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        for output in cell.outputs:
            if output.output_type == "stream":
                text = output.text
            else:
                text = output.get("data", {}).get("text/plain", "")
            for line in text.splitlines():
                for pattern, kind in UNWANTED:
                    if pattern.search(line):
                        found.append(f"cell {index}: ({kind}) {line.strip()[:200]}")
                        break
    return found
