"""Runs a test script under one Keras backend, in a process of its own.

Keras picks its backend once per process (`KERAS_BACKEND`), so the tests
that compare backends run their script in a subprocess for each.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest


def run_on_backend(script, backend, timeout=300, needs=()):
    """Runs `script` with `KERAS_BACKEND=backend` and returns its last
    printed line, parsed as JSON. Skips where `backend` (or a package of
    `needs`) is not installed; fails with the script's stderr where it
    fails."""
    for package in (backend, *needs):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed")
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.splitlines()[-1])
