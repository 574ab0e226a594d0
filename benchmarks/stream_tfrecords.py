"""Streams 1 million variable-length TFRecord records through a bucketing builder.

Writes (once, then reuses) the `lognormal` workload (`workloads.py`)
scaled to 1 000 000 records: token ids with lengths
`clip(lognormal(3.5, 0.7), 1, 512)` and a label, in 16 TFRecord shards
with a manifest. Then, each in a fresh process so that its peak memory is its
own:

- the length-index pass (`TFRecordLoader.lengths`), uncached;
- one full pass of `TFRecordLoader` + `StreamBucketBuilder("auto", 32
  buckets, batch 64, buffer 10 000)`, with 1 parallel read and parse, and with
  16 (all shards) parallel reads and 2 parses (the cores of this machine):
  records/s, peak resident memory (target: under 2 GB), padding efficiency;
- the in-memory `BucketBuilder` with the same settings on the same lengths,
  for the padding efficiency the stream gives up to its bounded buffer.

Run from the repository root (about 5 minutes on 2 CPU cores, plus about 2
minutes to write the data the first time):

    .venv/bin/python benchmarks/stream_tfrecords.py --output benchmarks/out/stream.json
"""

import argparse
import json
import os
import resource
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import streaming  # noqa: E402
import workloads  # noqa: E402

NUM_RECORDS = 1_000_000
NUM_SHARDS = 16
MEMORY_LIMIT = 2 * 2**30


def write_data(data_dir, num_records):
    lengths = workloads.draw_lognormal_lengths(np.random.default_rng(0), num_records)
    return streaming.write_records(
        data_dir, lengths, np.random.default_rng(1), NUM_SHARDS
    )


def peak_memory():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def worker(args):
    """One measurement in this (fresh) process; prints a JSON line."""
    import kerasbatch

    loader = streaming.make_loader(args.data_dir, args.reads, args.parses)
    names = {"inputs": ["tokens"], "outputs": ["label"]}
    start = time.perf_counter()
    lengths = loader.lengths(**names, cache=args.task != "index", verbose=0)
    index_seconds = time.perf_counter() - start
    result = {"task": args.task, "reads": args.reads, "parses": args.parses}
    if args.task == "index":
        result.update(seconds=index_seconds, records=len(lengths))
    elif args.task == "in_memory":
        builder = kerasbatch.BucketBuilder(
            boundaries="auto",
            num_buckets=streaming.NUM_BUCKETS,
            batch_size=streaming.BATCH_SIZE,
        )
        builder.adapt(lengths)
        statistics = builder.statistics(0)
        result.update(
            padding_efficiency=statistics.padding_efficiency,
            batches=statistics.num_batches,
            distinct_shapes=statistics.distinct_shapes,
        )
    else:
        builder = streaming.stream_builder()
        dataset = loader.build(**names, builder=builder, lengths=lengths)
        start = time.perf_counter()
        batches = records = 0
        for _, targets in dataset:
            batches += 1
            records += int(targets["label"].shape[0])
        seconds = time.perf_counter() - start
        statistics = builder.statistics()
        result.update(
            seconds=seconds,
            records=records,
            records_per_second=records / seconds,
            batches=batches,
            cardinality=int(dataset.cardinality()),
            padding_efficiency=statistics.padding_efficiency,
            distinct_shapes=statistics.distinct_shapes,
        )
    result["peak_memory_bytes"] = peak_memory()
    print(json.dumps(result))


def run_worker(args, task, reads=1, parses=1):
    arguments = ["--task", task, "--reads", reads, "--parses", parses]
    arguments += ["--data-dir", args.data_dir]
    return streaming.run_worker(__file__, task, "--worker", *arguments)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="benchmarks/out/stream_data")
    parser.add_argument("--num-records", type=int, default=NUM_RECORDS)
    parser.add_argument("--output")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--task", default="stream", help=argparse.SUPPRESS)
    parser.add_argument("--reads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--parses", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    os.makedirs(args.data_dir, exist_ok=True)
    write_seconds = write_data(args.data_dir, args.num_records)
    print(f"data: {args.data_dir} (written in {write_seconds:.0f} s)", flush=True)
    report = {
        "command": " ".join([os.path.relpath(sys.executable), *sys.argv]),
        "write_seconds": write_seconds,
        "index": run_worker(args, "index"),
        "in_memory": run_worker(args, "in_memory"),
        "stream_1_read": run_worker(args, "stream", reads=1, parses=1),
        "stream_all_reads": run_worker(
            args, "stream", reads=NUM_SHARDS, parses=os.cpu_count()
        ),
    }
    ratio = (
        report["stream_1_read"]["padding_efficiency"]
        / report["in_memory"]["padding_efficiency"]
    )
    report["efficiency_vs_in_memory"] = ratio
    peak = max(
        report[k]["peak_memory_bytes"] for k in ("stream_1_read", "stream_all_reads")
    )
    report["targets"] = [
        {
            "target": "peak memory of a streaming pass < 2 GB",
            "value": peak,
            "passed": peak < MEMORY_LIMIT,
        }
    ]
    print(json.dumps({k: v for k, v in report.items() if k != "command"}, indent=2))
    if args.output:
        with open(args.output, "w") as file:
            json.dump(report, file, indent=2)
    return 0 if all(t["passed"] for t in report["targets"]) else 1


if __name__ == "__main__":
    sys.exit(main())
