"""Runs test scripts under one Keras backend.

Keras picks its backend once per process (`KERAS_BACKEND`), so the tests
that compare backends run their script under each. A script for the
backend this test process runs on runs here, in a namespace of its own;
the scripts for another backend run in one process per backend, started
at the first of them and kept for the rest: importing TensorFlow, Keras
and a backend costs each process seconds before any work, and every
script gets the same fresh namespace, and its own warning filters, as it
would in a process of its own. That process reads scripts from its stdin
and ends when its stdin closes (when this test process ends, or a script
runs past its time).
"""

import atexit
import contextlib
import importlib.util
import io
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
import warnings

import pytest

#: The line that comes before each script's reply (native code may write to
#: stdout too).
_REPLY = "kerasbatch-test-reply:"

_SERVE = f"""
import sys
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
import backend_process

for line in sys.stdin:
    reply = backend_process.run_here(backend_process.json.loads(line))
    sys.stdout.write({_REPLY!r} + backend_process.json.dumps(reply) + "\\n")
    sys.stdout.flush()
"""


@contextlib.contextmanager
def _time_limit(seconds):
    """Raises `TimeoutError` in the code it wraps after `seconds` (on the
    main thread, where a signal can reach it; elsewhere, no limit)."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return

    def late(signum, frame):
        raise TimeoutError(f"the script ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, late)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_here(script, timeout=None):
    """Runs `script` in a namespace of its own, with its own warning filters,
    within `timeout` seconds (none where `None`), and returns what it
    printed, and the error it raised if it failed or ran late."""
    printed = io.StringIO()
    try:
        # The warnings it does not catch itself go nowhere, as a process's
        # stderr would.
        with (
            _time_limit(timeout),
            contextlib.redirect_stdout(printed),
            warnings.catch_warnings(record=True),
        ):
            exec(compile(script, "<test script>", "exec"), {"__name__": "__main__"})
    except BaseException:  # noqa: BLE001 - told to the test that sent it
        return {"error": traceback.format_exc(), "printed": printed.getvalue()}
    return {"printed": printed.getvalue()}


class _Process:
    """A process of one backend that runs the scripts sent to it, in turn."""

    def __init__(self, backend):
        # A file, not a pipe: nothing reads it until the process fails.
        self.stderr = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed by stop()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            env={**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"},
        )
        self.replies = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            if line.startswith(_REPLY):
                self.replies.put(json.loads(line[len(_REPLY) :]))
        self.replies.put(None)  # the process ended

    def run(self, script, timeout):
        self.process.stdin.write(json.dumps(script) + "\n")
        self.process.stdin.flush()
        try:
            reply = self.replies.get(timeout=timeout)
        except queue.Empty:
            reply = "late"
        if reply == "late":
            self.process.kill()
            self.stop()
            pytest.fail(f"the script ran past {timeout} s")
        if reply is None:
            self.stderr.seek(0)
            ended = self.stderr.read()[-3000:]
            self.stop()
            pytest.fail(f"the backend's process ended:\n{ended}")
        return reply

    def stop(self):
        with contextlib.suppress(OSError):
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.stderr.close()


_processes = {}


@atexit.register
def _stop_all():
    for process in _processes.values():
        process.stop()


def run_on_backend(script, backend, timeout=300, needs=()):
    """Runs `script` on Keras' `backend` and returns its last printed line,
    parsed as JSON. Skips where `backend` (or a package of `needs`) is not
    installed; fails with the script's error where it fails."""
    for package in (backend, *needs):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed")
    import keras

    if backend == keras.backend.backend():
        reply = run_here(script, timeout)
    else:
        process = _processes.get(backend)
        if process is None or process.process.poll() is not None:
            process = _processes[backend] = _Process(backend)
        reply = process.run(script, timeout)
    assert "error" not in reply, reply["error"][-3000:]
    return json.loads(reply["printed"].splitlines()[-1])
