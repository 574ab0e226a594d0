"""What `on_error="skip"` costs the TFRecord loader against `"raise"`.

Writes (once, then reuses) 200 000 records of the `lognormal` workload
(`workloads.py`: token ids, lengths `clip(lognormal(3.5, 0.7), 1, 512)`,
and a label) in 4 shards, and a copy of it in which one record in 10 000 is
bytes that are no Example. Then times full passes of `TFRecordLoader`
(1 parallel read and parse, batches of 64, padded), alternating the
settings round by round so that a busy machine slows them alike:

- `raise` and `skip` on the clean records: the price of skip mode when
  nothing is bad (target: skip at least 0.9x raise's records per second);
- `skip` on the damaged copy: each bad record makes its batch of 256 parse
  again record by record.

Records per second are of the process's CPU time (user + system), which a
shared machine disturbs less than wall time; both are reported, as medians.

Run from the repository root (about 3 minutes on 2 CPU cores, plus about a
minute to write the data the first time):

    .venv/bin/python benchmarks/loader_on_error.py --output benchmarks/out/on_error.json
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import streaming  # noqa: E402
import workloads  # noqa: E402

NUM_RECORDS = 200_000
NUM_SHARDS = 4
BAD_EVERY = 10_000


def write_damaged_copy(clean_dir, damaged_dir):
    """`clean_dir`'s shards with every `BAD_EVERY`-th record replaced by
    bytes that are no Example; returns the number replaced."""
    import tensorflow as tf

    import kerasbatch

    marker = os.path.join(damaged_dir, "complete")
    if os.path.exists(marker):
        return int(open(marker).read())
    os.makedirs(damaged_dir, exist_ok=True)
    manifest = kerasbatch.io.load_manifest(clean_dir)
    manifest.save(damaged_dir)
    replaced = 0
    position = 0
    for name in sorted(os.listdir(clean_dir)):
        if not name.endswith(".tfrecords"):
            continue
        path = os.path.join(damaged_dir, name)
        with tf.io.TFRecordWriter(path) as writer:
            for record in tf.data.TFRecordDataset(os.path.join(clean_dir, name)):
                position += 1
                if position % BAD_EVERY == 0:
                    writer.write(b"\xff\xff no Example")
                    replaced += 1
                else:
                    writer.write(record.numpy())
    with open(marker, "w") as handle:
        handle.write(str(replaced))
    return replaced


def one_pass(data_dir, on_error):
    """`(records, CPU seconds, wall seconds, records skipped)` of one pass."""
    import kerasbatch

    config = streaming.make_loader(data_dir, padding=True).get_config()
    loader = kerasbatch.io.TFRecordLoader(**{**config, "on_error": on_error})
    dataset = loader.build(inputs=["tokens"], outputs=["label"])
    records = 0
    cpu, wall = time.process_time(), time.perf_counter()
    for features, _ in dataset:
        records += int(features["tokens"].shape[0])
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return records, cpu, wall, loader.skipped_records


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default="benchmarks/out/on_error_data")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", help="write the results as JSON here")
    args = parser.parse_args()

    clean = os.path.join(args.data_dir, "clean")
    damaged = os.path.join(args.data_dir, "damaged")
    lengths = workloads.draw_lognormal_lengths(np.random.default_rng(0), NUM_RECORDS)
    streaming.write_records(clean, lengths, np.random.default_rng(1), NUM_SHARDS)
    replaced = write_damaged_copy(clean, damaged)

    settings = {
        "raise (clean)": (clean, "raise"),
        "skip (clean)": (clean, "skip"),
        f"skip (1 bad in {BAD_EVERY})": (damaged, "skip"),
    }
    for data_dir, on_error in settings.values():  # warm-up: traces, file cache
        one_pass(data_dir, on_error)
    runs = {name: [] for name in settings}
    for _ in range(args.rounds):
        for name, (data_dir, on_error) in settings.items():
            runs[name].append(one_pass(data_dir, on_error))

    results = {}
    for name, passes in runs.items():
        records, _, _, skipped = passes[0]
        results[name] = {
            "records": records,
            "skipped": skipped,
            "records_per_cpu_second": statistics.median(r / c for r, c, _, _ in passes),
            "records_per_second": statistics.median(r / w for r, _, w, _ in passes),
        }
    expected = NUM_RECORDS - replaced
    assert results[f"skip (1 bad in {BAD_EVERY})"]["records"] == expected
    assert results[f"skip (1 bad in {BAD_EVERY})"]["skipped"] == replaced
    base = results["raise (clean)"]["records_per_cpu_second"]
    print(
        f"{'setting':<24} {'records':>8} {'skipped':>7} {'rec/CPU-s':>10} "
        f"{'rec/s':>9} {'vs raise':>8}"
    )
    for name, result in results.items():
        ratio = result["records_per_cpu_second"] / base
        result["vs_raise"] = ratio
        print(
            f"{name:<24} {result['records']:>8} {result['skipped']:>7} "
            f"{result['records_per_cpu_second']:>10.0f} "
            f"{result['records_per_second']:>9.0f} {ratio:>7.2f}x"
        )
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as handle:
            json.dump({"rounds": args.rounds, "results": results}, handle, indent=2)


if __name__ == "__main__":
    main()
