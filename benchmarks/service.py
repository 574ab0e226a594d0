"""tf.data service with 1 and 2 local workers vs the local pipeline.

Two pipelines, each measured locally and through a tf.data service whose
dispatcher and workers run in processes of their own on loopback:

- `BucketBuilder(num_buckets=32)` on in-memory token sequences
  (`distribute_with_service`, `distributed_epoch`): the workers gather and
  pad the batches;
- `TFRecordLoader` + `StreamBucketBuilder(32)` on SequenceExample records
  (`distribute_with_service`, `ShardingPolicy.HINT`): the workers read and
  parse the records (the CPU-heavy part), then bucket and pad their share.

Every figure is elements/s over whole epochs after a warm-up epoch, the
median over `--rounds` rounds in which the configurations take turns.

Usage:

    .venv/bin/python benchmarks/service.py --elements 40000 --rounds 3
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

import kerasbatch  # noqa: E402
from kerasbatch.io import TFRecordLoader, write_dataset  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
import workloads  # noqa: E402
from loopback import tf_data_service  # noqa: E402

#: The service's processes run until the measurements are over (a day at most).
LIFETIME = 24 * 3600


def elements_per_second(dataset, count_elements, epochs):
    for _ in dataset:  # warm-up epoch
        pass
    rates = []
    for _ in range(epochs):
        start = time.perf_counter()
        elements = sum(count_elements(batch) for batch in dataset)
        rates.append(elements / (time.perf_counter() - start))
    return statistics.median(rates)


def first(batch):
    x = batch[0] if isinstance(batch, tuple) else batch
    return int((x["x"] if isinstance(x, dict) else x).shape[0])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--elements", type=int, default=40000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2)
    arguments = parser.parse_args()
    x = workloads.draw_lognormal_sequences(np.random.default_rng(0), arguments.elements)

    directory = tempfile.mkdtemp()
    write_dataset(directory, [{"tokens": s} for s in x], num_shards=8)
    loader = TFRecordLoader(
        type="independent",
        dataset={"type": "dir", "args": {"data_dir": directory}},
        target_batch_size=64,
        drop_remainder=False,
        epochs=1,
        num_read_buffer_bytes=0,
        num_prefetch=1,
        padding=False,
        primary_features=[{"from_name": "tokens", "to_name": "x"}],
    )
    names = {"inputs": ["x"], "outputs": []}
    record_lengths = loader.lengths(**names, verbose=0)

    rates = {}
    with (
        tf_data_service(1, LIFETIME) as one_worker,
        tf_data_service(2, LIFETIME) as two_workers,
    ):
        services = {1: one_worker, 2: two_workers}
        for _ in range(arguments.rounds):
            for workers in (0, 1, 2):
                epochs = arguments.epochs
                builder = kerasbatch.BucketBuilder(num_buckets=32, batch_size=64)
                dataset = builder.build(x)
                if workers:
                    dataset = builder.distribute_with_service(
                        services[workers], epochs=epochs + 1
                    )
                    rate = elements_per_second_stream(dataset, epochs + 1)
                else:
                    rate = elements_per_second(dataset, first, epochs)
                rates.setdefault(("in-memory BucketBuilder", workers), []).append(rate)

                stream = kerasbatch.StreamBucketBuilder(num_buckets=32, batch_size=64)
                dataset = loader.build(**names, builder=stream, lengths=record_lengths)
                if workers:
                    dataset = stream.distribute_with_service(
                        services[workers], epochs=epochs + 1
                    )
                rate = elements_per_second(dataset, first, epochs)
                rates.setdefault(("TFRecord stream", workers), []).append(rate)

    print(f"{'pipeline':26} {'local':>10} {'1 worker':>10} {'2 workers':>10}")
    for pipeline in ("in-memory BucketBuilder", "TFRecord stream"):
        local = statistics.median(rates[(pipeline, 0)])
        cells = [f"{local:10.0f}"]
        for workers in (1, 2):
            rate = statistics.median(rates[(pipeline, workers)])
            cells.append(f"{rate / local:9.2f}x")
        print(f"{pipeline:26} " + " ".join(cells))
    print("(local: elements/s; service: ratio to local)")


def elements_per_second_stream(dataset, epochs):
    """Elements/s of all epochs but the first (warm-up) of one long stream."""
    iterator = iter(dataset)
    per_epoch = len(dataset) // epochs
    for _ in range(per_epoch):
        next(iterator)
    start = time.perf_counter()
    elements = sum(first(batch) for batch in iterator)
    return elements / (time.perf_counter() - start)


if __name__ == "__main__":
    main()
