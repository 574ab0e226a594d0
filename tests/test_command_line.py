"""The `kerasbatch` command starts fast and quietly; the package's import order.

`--help`, `--version` and `analyze` must not import TensorFlow or Keras
(seconds, and native log lines); `import kerasbatch` must import Keras
before TensorFlow, since TensorFlow first crashes Keras on torch where
triton is installed.
"""

import importlib.util
import json
import os
import pathlib
import resource
import subprocess
import sys

import pytest

import kerasbatch

HEAVY = ("tensorflow", "keras", "jax", "torch")
#: Generous: the answers take under half a CPU second. The checks count the
#: CPU seconds of the command, not the wall clock, which a busy machine
#: stretches however little the command does.
SECONDS = 2.0


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(command, env=None):
    """`(result, CPU seconds)` of `command` in a process of its own."""
    start = children_cpu_seconds()
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    return result, children_cpu_seconds() - start


def imported_and_other_lines(stderr):
    """The top-level packages `-X importtime` lists, and stderr's other lines."""
    modules, other = set(), []
    for line in stderr.splitlines():
        if line.startswith("import time:"):
            name = line.rsplit("|", 1)[1].strip()
            modules.add(name.split(".")[0])
        elif line.strip():
            other.append(line)
    return modules, other


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        ("--help", "usage: kerasbatch"),
        ("--version", f"kerasbatch {kerasbatch.__version__}"),
    ],
)
def test_help_and_version_import_no_tensorflow(argument, expected):
    result, seconds = run(
        [sys.executable, "-X", "importtime", "-m", "kerasbatch", argument]
    )
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout
    modules, other = imported_and_other_lines(result.stderr)
    assert "kerasbatch" in modules and "argparse" in modules
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
    assert other == []  # no TensorFlow log line, nothing else
    assert seconds < SECONDS


def test_the_console_script_is_as_fast():
    script = pathlib.Path(sys.executable).parent / "kerasbatch"
    if not script.exists():
        pytest.skip(f"no console script at {script} (package not pip-installed)")
    result, seconds = run(
        [str(script), "--version"], env={"PYTHONPROFILEIMPORTTIME": "1"}
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"kerasbatch {kerasbatch.__version__}"
    modules, other = imported_and_other_lines(result.stderr)
    assert not modules & set(HEAVY) and other == []
    assert seconds < SECONDS


def test_the_command_defers_the_import_of_keras_and_tensorflow():
    # The console script's argv[0]: the package defers TensorFlow until a
    # pipeline name is used. (A plain import, which registers everything at
    # once, is checked on every backend with the import order below.)
    script = (
        "import sys\n"
        "sys.argv = ['/bin/kerasbatch']\n"
        "import kerasbatch\n"
        "print('tensorflow' in sys.modules, 'kerasbatch.layers' in sys.modules)\n"
        "builder = kerasbatch.BucketBuilder(num_buckets=2)\n"
        "print(type(builder).__name__, kerasbatch.analyze.__module__)\n"
        "print('tensorflow' in sys.modules)\n"
    )
    command = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split("\n")
    assert command[:3] == [
        "False False",
        "BucketBuilder kerasbatch.tools.analysis.runner",
        "True",
    ]


#: Runs `kerasbatch analyze` as the console script does (the package defers
#: Keras), then prints the heavy packages it imported and the CPU seconds it
#: took.
ANALYZE = """
import json, sys, time
sys.argv = ["kerasbatch"]
start = time.process_time()
from kerasbatch.__main__ import main
main(["analyze", {path!r}, "--json", "--epochs", "2"])
seconds = time.process_time() - start
print(json.dumps({{"imported": [m for m in {heavy!r} if m in sys.modules],
                   "seconds": seconds}}))
"""


def test_analyze_imports_neither_keras_nor_tensorflow(tmp_path):
    import numpy as np

    np.save(tmp_path / "lengths.npy", np.arange(1, 2000) % 300 + 1)
    keras_home = tmp_path / "keras_home"
    keras_home.mkdir()
    (keras_home / "keras.json").write_text('{"backend": "jax"}')
    environment = {k: v for k, v in os.environ.items() if k != "KERAS_BACKEND"}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            ANALYZE.format(path=str(tmp_path / "lengths.npy"), heavy=HEAVY),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**environment, "KERAS_HOME": str(keras_home)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    *report, last = result.stdout.strip().splitlines()
    found = json.loads(last)
    assert found["imported"] == [], found  # planning is NumPy
    # Keras' backend, read from its keras.json without importing Keras.
    assert json.loads("\n".join(report))["backend"] == "jax"
    assert found["seconds"] < SECONDS


RECORD_ORDER = """
import importlib.abc, json, sys
order = []
class Recorder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in {heavy!r} and top not in order:
            order.append(top)
        return None
sys.meta_path.insert(0, Recorder())
import kerasbatch
registered = ["tensorflow" in sys.modules, "kerasbatch.layers" in sys.modules]
import keras
imported = list(order)
plain = [type(kerasbatch.BucketBuilder(num_buckets=2)).__name__,
         kerasbatch.analyze.__module__]
import numpy as np
kerasbatch.PaddedBuilder(batch_size=2).build([np.ones(2)])  # the tf.data engine
print(json.dumps({{"imported": imported, "order": order,
                   "backend": keras.config.backend(),
                   "registered": registered, "plain": plain}}))
"""


@pytest.mark.parametrize("backend", ["torch", "jax", "tensorflow"])
def test_keras_is_imported_before_tensorflow(backend):
    if importlib.util.find_spec(backend) is None:
        pytest.skip(
            f"{backend} is not installed: the import order on KERAS_BACKEND="
            f"{backend} cannot be checked here"
        )
    result, _ = run(
        [sys.executable, "-c", RECORD_ORDER.format(heavy=HEAVY)],
        env={"KERAS_BACKEND": backend},
    )
    # A segfault (where triton is installed and TensorFlow came first) is -11.
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["backend"] == backend
    # A plain import registers everything at once (the layers too), and
    # names the builders and the analysis as the package documents them.
    tensorflow_imported, layers_registered = found["registered"]
    assert layers_registered, found
    assert found["plain"] == ["BucketBuilder", "kerasbatch.tools.analysis.runner"]
    if backend == "tensorflow":  # Keras on TensorFlow imports it at once
        assert tensorflow_imported, found
    if backend == "jax":  # the tf.data engine imports it when used (Keras on
        # torch imports it itself where it is installed)
        assert "tensorflow" not in found["imported"], found
    order = found["order"]
    assert "tensorflow" in order, order
    assert order.index("keras") < order.index("tensorflow"), order
    if backend != "tensorflow":  # Keras loads its backend first
        assert order.index(backend) < order.index("tensorflow"), order
