"""The engines side by side: speed, memory, and Grain's packing.

    .venv/bin/python benchmarks/engines.py throughput [--elements 20000 1000000]
    .venv/bin/python benchmarks/engines.py memory [--elements 1000000]
    .venv/bin/python benchmarks/engines.py packing
    .venv/bin/python benchmarks/engines.py stream [--elements 20000 1000000]

- `throughput`: elements/s and batches/s of one epoch (at most `--batches`
  batches) of the same builder on the `tf.data`, `grain` and `python`
  engines, measured in one process on one core (`sched_setaffinity`),
  `--rounds` times each (round r is epoch r, planned within the time),
  engines interleaved; the ratio to `tf.data`.
- `memory`: what `build` adds to the resident memory of a fresh process,
  and the peak while iterating `--batches` batches, against the raw bytes
  of the token values; one process per engine.
- `packing`: kerasbatch's `grain` engine (`PackedBuilder`) against Grain's
  own `FirstFitPackIterDataset` and `BestFitPackIterDataset` on the
  reference workloads, rows of 512, 16 rows per batch: padding efficiency
  and packed rows/s.
- `stream`: elements/s of `StreamBucketBuilder` (32 buckets, batches of
  64, a shuffle buffer of 10 000) on one core, as `throughput`: the
  `tf.data` engine over `Dataset.from_tensor_slices` of a ragged tensor
  (its fastest in-memory input), the `grain` engine over a Grain
  `MapDataset.source` of the arrays and the `python` engine over the list.
"""

import argparse
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import workloads  # noqa: E402
from process_memory import rss  # noqa: E402

import kerasbatch  # noqa: E402

ENGINES = ("tf.data", "grain", "python")
BUILDERS = {
    "padded": lambda: kerasbatch.PaddedBuilder(batch_size=64, seed=0),
    "bucket": lambda: kerasbatch.BucketBuilder(num_buckets=32, batch_size=64, seed=0),
    "packed": lambda: kerasbatch.PackedBuilder(512, batch_size=16, seed=0),
}


def data(num_elements):
    rng = np.random.default_rng(0)
    lengths = workloads.draw_lognormal_lengths(rng, num_elements)
    values = rng.integers(1, 1000, lengths.sum()).astype("int32")
    return np.split(values, np.cumsum(lengths)[:-1]), values.nbytes


def one_epoch(dataset, engine, max_batches):
    """Iterates up to `max_batches` batches; returns `(batches, seconds)`."""
    start = time.perf_counter()
    count = 0
    if engine == "python":
        for index in range(min(len(dataset), max_batches)):
            dataset[index]
            count += 1
    else:
        for _ in dataset:
            count += 1
            if count >= max_batches:
                break
    return count, time.perf_counter() - start


def throughput(args):
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    print(
        f"one core; {args.rounds} rounds, best of each; at most {args.batches} batches"
    )
    print("| elements | builder | engine | elements/s | batches/s | vs tf.data |")
    print("|---:|---|---|---:|---:|---:|")
    for num_elements in args.elements:
        x, _ = data(num_elements)
        for name, make in BUILDERS.items():
            datasets = {}
            for engine in ENGINES:
                builder = make()
                dataset = builder.build(x, engine=engine)
                served = kerasbatch.builders.builder_of(dataset)
                datasets[engine] = (dataset, served)
            best = {engine: np.inf for engine in ENGINES}
            counts = {}
            for round_ in range(args.rounds):
                for engine in ENGINES:
                    dataset, served = datasets[engine]
                    served.set_epoch(round_)  # a new epoch: planned in the time
                    count, seconds = one_epoch(dataset, engine, args.batches)
                    counts[engine] = count
                    best[engine] = min(best[engine], seconds)
            rates = {
                engine: elements_in(datasets[engine][1].plan(0), counts[engine])
                / best[engine]
                for engine in ENGINES
            }
            for engine in ENGINES:
                count, rate = counts[engine], rates[engine]
                reference = rates["tf.data"]
                print(
                    f"| {num_elements:,} | {name} | {engine} | {rate:,.0f} | "
                    f"{count / best[engine]:,.0f} | {rate / reference:.2f}x |",
                    flush=True,
                )


def stream(args):
    import grain
    import tensorflow as tf

    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    print(
        f"one core; {args.rounds} rounds, best of each; at most {args.batches} batches"
    )
    print("| elements | engine | elements/s | batches/s | vs tf.data |")
    print("|---:|---|---:|---:|---:|")
    for num_elements in args.elements:
        x, _ = data(num_elements)
        lengths = np.array([len(a) for a in x])
        sources = {
            "tf.data": tf.data.Dataset.from_tensor_slices(
                tf.RaggedTensor.from_row_lengths(np.concatenate(x), lengths)
            ),
            "grain": grain.MapDataset.source(x),
            "python": x,
        }
        datasets = {}
        for engine in ENGINES:
            builder = kerasbatch.StreamBucketBuilder(
                num_buckets=32, batch_size=64, buffer_size=10_000, seed=0
            )
            datasets[engine] = (
                builder.build(sources[engine], lengths, engine=engine),
                builder,
            )
        best = {engine: np.inf for engine in ENGINES}
        elements = {}
        for round_ in range(args.rounds):
            for engine in ENGINES:
                dataset, builder = datasets[engine]
                builder.set_epoch(round_)
                count, seconds = one_epoch(dataset, engine, args.batches)
                best[engine] = min(best[engine], seconds)
                elements[engine] = (count, builder.statistics().num_elements)
        for engine in ENGINES:
            count, _ = elements[engine]
            rate = elements_of(datasets[engine], engine, count) / best[engine]
            reference = (
                elements_of(datasets["tf.data"], "tf.data", elements["tf.data"][0])
                / best["tf.data"]
            )
            print(
                f"| {num_elements:,} | {engine} | {rate:,.0f} | "
                f"{count / best[engine]:,.0f} | {rate / reference:.2f}x |",
                flush=True,
            )


def elements_of(built, engine, count):
    """The elements of the first `count` batches of a stream's last epoch
    (all of them where the epoch ran to its end)."""
    _, builder = built
    statistics = builder.statistics()
    if statistics.num_batches == count:
        return statistics.num_elements
    return statistics.num_elements * count / statistics.num_batches


def elements_in(plan, count):
    """The elements of the first `count` batches of `plan`."""
    if hasattr(plan, "row_splits"):  # packed: batches of rows of elements
        return int(plan.row_splits[plan.batch_splits[count]])
    return int(plan.batch_splits[count])


def memory(args):
    if args.engine is None:
        print("| engine | raw MB | build adds | peak in build | peak while iterating |")
        print("|---|---:|---:|---:|---:|")
        for engine in ENGINES:
            result = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "memory",
                    "--engine",
                    engine,
                    "--elements",
                    str(args.elements[0]),
                    "--batches",
                    str(args.batches),
                ],
                capture_output=True,
                text=True,
                check=True,
            )
            print(result.stdout.strip().splitlines()[-1], flush=True)
        return
    x, raw = data(args.elements[0])
    if args.engine == "tf.data":
        import tensorflow  # noqa: F401  (its import is not the build's)
    else:
        import grain  # noqa: F401
    before = rss()
    builder = kerasbatch.BucketBuilder(num_buckets=32, batch_size=64)
    dataset = builder.build(x, engine=args.engine)
    after, built_peak = rss(), rss("VmHWM")
    one_epoch(dataset, args.engine, args.batches)
    peak = rss("VmHWM")

    def share(size):
        return f"{(size - before) / 1e6:.0f} MB ({(size - before) / raw:.2f}x)"

    print(
        f"| {args.engine} | {raw / 1e6:.0f} | {share(after)} | {share(built_peak)} "
        f"| {share(peak)} |"
    )


def packing(args):
    import grain
    from grain import experimental

    rows, length = 16, 512
    print(f"rows of {length}, {rows} rows per batch; {args.rounds} rounds, best")
    print("| workload | packer | padding efficiency | rows/s |")
    print("|---|---|---:|---:|")
    for workload in workloads.WORKLOADS:
        x, _, _ = workloads.sequences(workload)
        real = sum(len(s) for s in x)
        results = {}
        for packer in ("kerasbatch", "FirstFit", "BestFit"):
            best, fed = np.inf, 0
            for _ in range(args.rounds):
                start = time.perf_counter()
                fed = 0
                if packer == "kerasbatch":
                    builder = kerasbatch.PackedBuilder(length, batch_size=rows, seed=0)
                    dataset = builder.build(x, engine="grain")
                    for batch in dataset:
                        fed += len(batch["x"])
                else:
                    source = grain.MapDataset.source([{"x": s} for s in x])
                    kind = getattr(experimental, f"{packer}PackIterDataset")
                    packed = kind(
                        source.to_iter_dataset(),
                        length_struct={"x": length},
                        num_packing_bins=rows,
                    )
                    for batch in packed.batch(rows):
                        fed += len(batch["x"])
                best = min(best, time.perf_counter() - start)
            results[packer] = (real / (fed * length), fed / best)
        for packer, (efficiency, rate) in results.items():
            print(
                f"| {workload} | {packer} | {efficiency:.4f} | {rate:,.0f} |",
                flush=True,
            )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["throughput", "memory", "packing", "stream"])
    parser.add_argument("--elements", type=int, nargs="+", default=None)
    parser.add_argument("--batches", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engine", choices=ENGINES, default=None)
    args = parser.parse_args()
    if args.elements is None:
        args.elements = [1_000_000] if args.what == "memory" else [20_000, 1_000_000]
    {
        "throughput": throughput,
        "memory": memory,
        "packing": packing,
        "stream": stream,
    }[args.what](args)


if __name__ == "__main__":
    main()
