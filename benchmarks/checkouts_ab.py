"""Two checkouts side by side: elements/s of the same epochs, interleaved.

On a small shared machine one timing scatters by ±30 % between identical
processes (a process lands in a fast or a slow mode), so separate
processes per checkout cannot resolve a few percent. Here one process,
pinned to one core, imports both: the baseline checkout's package is
copied under the name `kerasbatch_baseline` (its imports and Keras
registrations renamed), and the two builders of each case run their
epochs in turn (ABAB, then BABA), `--rounds` epochs each. Reported: the
median elements/s of each and their ratio (this / baseline).

    git worktree add /tmp/base a072bf8
    python benchmarks/checkouts_ab.py --baseline /tmp/base

A case is `engine:builder` (`padded`, `bucket`, `packed` or `stream`, a
`StreamBucketBuilder` over the list, a Grain `MapDataset` for `grain`, or
a `tf.data.Dataset` of a ragged tensor for `tf.data`); 20 000 lognormal
lengths by default.
"""

import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent.parent
CASES = tuple(
    f"{engine}:{kind}"
    for kind in ("padded", "bucket", "packed", "stream")
    for engine in ("tf.data", "grain", "python")
)

CHILD = r"""
import os, statistics, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, sys.argv[1])
import numpy as np
import kerasbatch, kerasbatch_baseline

engine, kind = sys.argv[2].split(":")
elements, rounds = int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
lengths = np.clip(rng.lognormal(4.5, 0.8, elements).astype(int), 1, 2000)
values = rng.integers(1, 1000, lengths.sum()).astype("int32")
x = np.split(values, np.cumsum(lengths)[:-1])


def make(package):
    if kind == "stream":
        source = x
        if engine == "grain":
            import grain
            source = grain.MapDataset.source(x)
        elif engine == "tf.data":
            import tensorflow as tf
            source = tf.data.Dataset.from_tensor_slices(
                tf.RaggedTensor.from_row_lengths(values, lengths))
        builder = package.StreamBucketBuilder(
            num_buckets=32, batch_size=64, buffer_size=10_000, seed=0)
        return builder, builder.build(source, lengths, engine=engine)
    builder = {
        "padded": lambda: package.PaddedBuilder(batch_size=64, seed=0),
        "bucket": lambda: package.BucketBuilder(
            num_buckets=32, batch_size=64, seed=0),
        "packed": lambda: package.PackedBuilder(
            512, batch_size=16, seed=0, overflow="truncate"),
    }[kind]()
    return builder, builder.build(x, engine=engine)


runs = {"baseline": make(kerasbatch_baseline), "this": make(kerasbatch)}
seconds = {"baseline": [], "this": []}
for epoch in range(rounds):
    order = ("baseline", "this") if epoch % 2 == 0 else ("this", "baseline")
    for name in order:
        builder, dataset = runs[name]
        builder.set_epoch(epoch)
        start = time.perf_counter()
        if engine == "python":
            for index in range(len(dataset)):
                dataset[index]
        else:
            for _ in dataset:
                pass
        seconds[name].append(time.perf_counter() - start)
print(*(elements / statistics.median(seconds[k]) for k in ("baseline", "this")))
"""


def renamed_copy(checkout, into):
    """The checkout's `kerasbatch` package as `kerasbatch_baseline` in `into`."""
    target = pathlib.Path(into) / "kerasbatch_baseline"
    shutil.copytree(pathlib.Path(checkout) / "kerasbatch", target)
    for path in target.rglob("*.py"):
        text = path.read_text()
        path.write_text(re.sub(r"\bkerasbatch\b", "kerasbatch_baseline", text))
    return into


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, type=pathlib.Path)
    parser.add_argument("--cases", nargs="+", default=list(CASES))
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--elements", type=int, default=20_000)
    args = parser.parse_args(argv)
    core = sorted(os.sched_getaffinity(0))[-1]
    print(f"one process per case on core {core}; {args.rounds} epochs each, ABAB")
    print("| case | baseline el/s | this el/s | ratio |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        renamed_copy(args.baseline, folder)
        for case in args.cases:
            command = [sys.executable, "-c", CHILD, folder, case]
            command += [str(args.elements), str(args.rounds)]
            result = subprocess.run(
                ["taskset", "-c", str(core), *command],
                env=dict(os.environ, PYTHONPATH=str(HERE)),
                capture_output=True,
                text=True,
                check=True,
                timeout=1200,
            )
            base, this = map(float, result.stdout.split()[-2:])
            print(f"| {case} | {base:,.0f} | {this:,.0f} | {this / base:.3f} |")


if __name__ == "__main__":
    main()
