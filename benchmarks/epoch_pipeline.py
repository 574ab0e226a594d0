"""Pipeline throughput of the built datasets, against another checkout.

The builders compute each epoch's plan inside the `tf.data` graph; earlier
versions did it in a Python callback. This measures elements/s of iterating
whole epochs of `PaddedBuilder`, `SortedBuilder` and
`BucketBuilder(num_buckets=32)` datasets (batch size 64, the `lognormal`
workload) for this checkout and, side by side, for a baseline checkout
(e.g. a `git worktree` of the commit before): every round runs one fresh
process per checkout, alternately, so background load hits both alike.
Each process builds once, iterates a warm-up epoch, then times `--epochs`
epochs; the figure is the median over rounds of each process's median epoch.

Usage:

    git worktree add /tmp/baseline <commit>
    .venv/bin/python benchmarks/epoch_pipeline.py --baseline /tmp/baseline \\
        --elements 20000 100000 --rounds 3
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MEASURE = r"""
import json, os, statistics, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np
import kerasbatch
elements, epochs, checkout = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
# The checkout measured is the one asked for, never the working directory's.
assert kerasbatch.__file__.startswith(checkout), (kerasbatch.__file__, checkout)
rng = np.random.default_rng(0)
lengths = np.clip(rng.lognormal(3.5, 0.7, elements).astype(int), 1, 512)
x = [rng.integers(1, 1000, n).astype("int32") for n in lengths]
builders = {
    "PaddedBuilder": kerasbatch.PaddedBuilder(64),
    "SortedBuilder": kerasbatch.SortedBuilder(64),
    "BucketBuilder(32)": kerasbatch.BucketBuilder(num_buckets=32, batch_size=64),
}
result = {}
for name, builder in builders.items():
    dataset = builder.build(x)
    for _ in dataset:
        pass
    times = []
    for _ in range(epochs):
        start = time.perf_counter()
        for _ in dataset:
            pass
        times.append(time.perf_counter() - start)
    result[name] = elements / statistics.median(times)
print(json.dumps(result))
"""


def measure(checkout, elements, epochs):
    checkout = os.path.abspath(checkout)
    environment = dict(os.environ, PYTHONPATH=checkout)
    output = subprocess.run(
        [sys.executable, "-c", MEASURE, str(elements), str(epochs), checkout],
        cwd=checkout,  # `python -c` imports from the working directory first
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="another checkout")
    parser.add_argument("--elements", type=int, nargs="+", default=[20_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    print("| elements | builder | baseline el/s | this el/s | ratio |")
    print("|---:|---|---:|---:|---:|")
    for elements in args.elements:
        runs = {"baseline": [], "this": []}
        for _ in range(args.rounds):
            runs["baseline"].append(measure(args.baseline, elements, args.epochs))
            runs["this"].append(measure(HERE, elements, args.epochs))
        for name in runs["this"][0]:
            base = statistics.median(r[name] for r in runs["baseline"])
            this = statistics.median(r[name] for r in runs["this"])
            print(
                f"| {elements} | {name} | {base:,.0f} | {this:,.0f} | "
                f"{this / base:.2f} |"
            )
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
