"""Two checkouts side by side: elements/s of the same epochs, alternating.

On a small shared machine one timing of one checkout scatters by ±30 %
between identical runs (a process lands in a fast or a slow mode). This
script alternates fresh processes of the two checkouts, `--alternations`
times per case, each pinned to one core, and reports the median
elements/s of each and their ratio. Every process builds the same data
(20 000 lognormal lengths by default), runs `--epochs` epochs and keeps
its fastest.

    python benchmarks/checkouts_ab.py --baseline /tmp/base
    python benchmarks/checkouts_ab.py --baseline /tmp/base --cases grain:bucket stream:python

A case is `engine:builder` (builder `padded`, `bucket` or `packed`) or
`stream:engine` (`StreamBucketBuilder` over the list, or a Grain
`MapDataset` for `grain`).
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent.parent
CASES = (
    "tf.data:padded",
    "grain:padded",
    "python:padded",
    "tf.data:bucket",
    "grain:bucket",
    "python:bucket",
    "tf.data:packed",
    "grain:packed",
    "python:packed",
    "stream:grain",
    "stream:python",
)

CHILD = r"""
import os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import kerasbatch

first, second, elements, epochs = sys.argv[1:5]
rng = np.random.default_rng(0)
lengths = np.clip(rng.lognormal(4.5, 0.8, int(elements)).astype(int), 1, 2000)
values = rng.integers(1, 1000, lengths.sum()).astype("int32")
x = np.split(values, np.cumsum(lengths)[:-1])
if first == "stream":
    engine, source = second, x
    if engine == "grain":
        import grain
        source = grain.MapDataset.source(x)
    builder = kerasbatch.StreamBucketBuilder(
        num_buckets=32, batch_size=64, buffer_size=10_000, seed=0)
    dataset = builder.build(source, lengths, engine=engine)
else:
    engine = first
    builder = {
        "padded": lambda: kerasbatch.PaddedBuilder(batch_size=64, seed=0),
        "bucket": lambda: kerasbatch.BucketBuilder(
            num_buckets=32, batch_size=64, seed=0),
        "packed": lambda: kerasbatch.PackedBuilder(
            512, batch_size=16, seed=0, overflow="truncate"),
    }[second]()
    dataset = builder.build(x, engine=engine)
best = float("inf")
for epoch in range(int(epochs)):
    builder.set_epoch(epoch)
    start = time.perf_counter()
    if engine == "python":
        for index in range(len(dataset)):
            dataset[index]
    else:
        for _ in dataset:
            pass
    best = min(best, time.perf_counter() - start)
print(len(x) / best)
"""


def elements_per_second(checkout, case, args):
    first, second = case.split(":")
    env = dict(os.environ, PYTHONPATH=str(checkout))
    command = [sys.executable, "-c", CHILD, first, second, str(args.elements)]
    command += [str(args.epochs)]
    core = sorted(os.sched_getaffinity(0))[-1]
    result = subprocess.run(
        ["taskset", "-c", str(core), *command],
        env=env,
        cwd=checkout,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return float(result.stdout.split()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, type=pathlib.Path)
    parser.add_argument("--cases", nargs="+", default=list(CASES))
    parser.add_argument("--alternations", type=int, default=5)
    parser.add_argument("--elements", type=int, default=20_000)
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args(argv)
    print(f"{args.alternations} alternations, one core, fastest of {args.epochs}")
    print("| case | baseline el/s | this el/s | ratio |")
    print("|---|---:|---:|---:|")
    for case in args.cases:
        runs = {"baseline": [], "this": []}
        for _ in range(args.alternations):
            runs["baseline"].append(elements_per_second(args.baseline, case, args))
            runs["this"].append(elements_per_second(HERE, case, args))
        base, this = (statistics.median(runs[k]) for k in ("baseline", "this"))
        print(f"| {case} | {base:,.0f} | {this:,.0f} | {this / base:.2f} |", flush=True)


if __name__ == "__main__":
    main()
