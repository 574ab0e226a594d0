"""Streaming throughput side by side: raw tf.data, the loader alone, the
loader with `StreamBucketBuilder` (targets: at least 1.5x raw tf.data and
0.85x the loader alone).

Writes (once, then reuses) 200 000 SequenceExample records in 8 shards with
`kerasbatch.io.write_dataset`: token ids with lengths
`clip(lognormal(3.5, 0.7), 1, 512)` and a label. Then measures, each in a
fresh process and alternating, `--repeats` times (the best run counts):

- `raw`: what a tf.data user writes: `interleave` of the files, batches of
  256 records parsed with `tf.io.parse_sequence_example`, `unbatch`, each
  sequence cut to its length, and
  `bucket_by_sequence_length` with the same boundaries and batch size as the
  builder (so padding differs only by the builder's shuffle buffer);
- `loader`: `TFRecordLoader.build` alone (batches of 64, padded);
- `stream`: `TFRecordLoader` + `StreamBucketBuilder("auto", 32 buckets,
  batch 64, buffer 10 000)`, with the lengths from the length index.

Targets: `stream` >= 1.5x the records/s of `raw`, and >= 0.85x `loader`.

Run from the repository root (about 3 minutes on 2 CPU cores, plus one
minute to write the data the first time):

    .venv/bin/python benchmarks/stream_throughput.py
"""

import argparse
import glob
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import streaming  # noqa: E402
import workloads  # noqa: E402

NUM_RECORDS = 200_000
NUM_SHARDS = 8
PARSE_BATCH = 256
TASKS = ("raw", "loader", "stream")


def write_data(data_dir, num_records):
    rng = np.random.default_rng(0)
    lengths = workloads.draw_lognormal_lengths(rng, num_records)
    streaming.write_records(data_dir, lengths, rng, NUM_SHARDS)


def raw_dataset(data_dir, boundaries, reads):
    import tensorflow as tf

    files = sorted(glob.glob(os.path.join(data_dir, "*.tfrecords")))

    def parse(serialized):
        context, sequences, lengths = tf.io.parse_sequence_example(
            serialized,
            context_features={"label": tf.io.FixedLenFeature([], tf.int64)},
            sequence_features={"tokens": tf.io.FixedLenSequenceFeature([], tf.int64)},
        )
        return sequences["tokens"], lengths["tokens"], context["label"]

    records = tf.data.Dataset.from_tensor_slices(files).interleave(
        tf.data.TFRecordDataset,
        cycle_length=reads,
        num_parallel_calls=reads if reads > 1 else None,
    )
    elements = records.batch(PARSE_BATCH).map(parse).unbatch()
    elements = elements.map(
        lambda tokens, length, label: ({"tokens": tokens[:length]}, {"label": label})
    )
    return elements.bucket_by_sequence_length(
        lambda inputs, targets: tf.shape(inputs["tokens"])[0],
        bucket_boundaries=boundaries,
        bucket_batch_sizes=[streaming.BATCH_SIZE] * (len(boundaries) + 1),
    ).prefetch(2)


def worker(args):
    """One measurement in this (fresh) process; prints a JSON line."""
    loader = streaming.make_loader(args.data_dir, args.reads)
    names = {"inputs": ["tokens"], "outputs": ["label"]}
    lengths = loader.lengths(**names, verbose=0)
    builder = streaming.stream_builder()
    stream = loader.build(**names, builder=builder, lengths=lengths)
    if args.task == "raw":
        dataset = raw_dataset(args.data_dir, builder.resolved_boundaries, args.reads)
    elif args.task == "loader":
        padded = streaming.make_loader(args.data_dir, args.reads, padding=True)
        dataset = padded.build(**names)
    else:
        dataset = stream
    records = 0
    start = time.perf_counter()
    for inputs, _ in dataset:
        records += int(inputs["tokens"].shape[0])
    seconds = time.perf_counter() - start
    result = {"task": args.task, "seconds": seconds, "records": records}
    result["records_per_second"] = records / seconds
    if args.task == "stream":
        result["padding_efficiency"] = builder.statistics().padding_efficiency
    elif args.task == "raw":  # counted in a second, untimed pass
        real = padded = 0
        for inputs, _ in dataset:
            real += int(np.count_nonzero(inputs["tokens"]))
            padded += int(np.prod(inputs["tokens"].shape))
        result["padding_efficiency"] = real / padded
    print(json.dumps(result))


def run_worker(args, task):
    arguments = ["--data-dir", args.data_dir, "--reads", args.reads]
    return streaming.run_worker(__file__, task, "--worker", task, *arguments)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="benchmarks/out/stream_200k")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--reads", type=int, default=1)
    parser.add_argument("--worker", choices=TASKS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(argparse.Namespace(**{**vars(args), "task": args.worker}))
        return
    write_data(args.data_dir, NUM_RECORDS)
    best = {}
    for _ in range(args.repeats):
        for task in TASKS:
            result = run_worker(args, task)
            if result["records_per_second"] > best.get(task, {}).get(
                "records_per_second", 0
            ):
                best[task] = result
    rate = {task: best[task]["records_per_second"] for task in TASKS}
    print(f"stream / raw tf.data: {rate['stream'] / rate['raw']:.2f}x (target 1.5x)")
    print(
        f"stream / loader:      {rate['stream'] / rate['loader']:.2f}x (target 0.85x)"
    )
    for task in ("raw", "stream"):
        print(f"{task} padding efficiency: {best[task]['padding_efficiency']:.4f}")


if __name__ == "__main__":
    main()
