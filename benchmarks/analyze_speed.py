"""How long `kerasbatch analyze` takes, end to end, on 20 000 lengths.

Writes the `lognormal` reference lengths
(`np.clip(np.random.default_rng(0).lognormal(3.5, 0.7, 20_000).astype(int),
1, 512)`) to a `.npy` file and times `python -m kerasbatch analyze` on them
in a fresh process, as a user runs it (imports, reading, planning every
candidate for 10 epochs, the report): the wall time of `--repeats` runs
after one unmeasured run, and their median. The target is 1.5 s or less.

`--source DIR` runs the kerasbatch of another checkout (e.g. a
`git worktree` of an older commit) instead of the installed one.

Usage:

    python benchmarks/analyze_speed.py [--repeats 7] [--source DIR]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

TARGET_SECONDS = 1.5


def lognormal_lengths():
    lengths = np.random.default_rng(0).lognormal(3.5, 0.7, 20_000).astype(int)
    return np.clip(lengths, 1, 512)


def run_seconds(command, environment, cwd):
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=environment, cwd=cwd)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--source", default=None, help="a checkout whose kerasbatch to run"
    )
    parser.add_argument(
        "--backend", default="jax", help="the --backend of the command (jax)"
    )
    arguments = parser.parse_args()
    environment = dict(os.environ)
    cwd = None
    if arguments.source:
        # `python -m` searches the working directory first.
        cwd = os.path.abspath(arguments.source)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "lengths.npy")
        np.save(path, lognormal_lengths())
        command = [
            sys.executable,
            "-m",
            "kerasbatch",
            "analyze",
            path,
            "--backend",
            arguments.backend,
        ]
        run_seconds(command, environment, cwd)  # warm the file caches
        times = [
            run_seconds(command, environment, cwd) for _ in range(arguments.repeats)
        ]
    median = statistics.median(times)
    print(f"command: {' '.join(command[1:])}")
    print(f"runs (s): {', '.join(f'{t:.2f}' for t in times)}")
    print(
        f"median {median:.2f} s, fastest {min(times):.2f} s (target <= "
        f"{TARGET_SECONDS} s: {'met' if median <= TARGET_SECONDS else 'missed'})"
    )


if __name__ == "__main__":
    main()
