"""What the streaming benchmarks (`stream_tfrecords.py`, `stream_throughput.py`)
share: their records on disk, their loader and builder, and their worker
processes.

kerasbatch (and with it TensorFlow) is imported only in the functions that use
it, as the scripts do.
"""

import json
import os
import subprocess
import sys
import time

import numpy as np

BATCH_SIZE = 64
NUM_BUCKETS = 32
BUFFER_SIZE = 10_000
VOCAB = 1000


def write_records(data_dir, lengths, rng, num_shards):
    """Writes one SequenceExample record per length into `num_shards` shards:
    `tokens`, ids in `[1, VOCAB)`, and a binary `label`, both drawn from `rng`.

    Writes once: a marker file names the number of records, and with it and
    the manifest there this returns 0.0; else the seconds the writing took.
    """
    import kerasbatch

    manifest = os.path.join(data_dir, kerasbatch.io.MANIFEST_NAME)
    marker = os.path.join(data_dir, f"complete-{len(lengths)}")
    if os.path.exists(manifest) and os.path.exists(marker):
        return 0.0
    start = time.perf_counter()
    tokens = rng.integers(1, VOCAB, int(lengths.sum()))
    rows = np.split(tokens, np.cumsum(lengths)[:-1])
    labels = rng.integers(0, 2, len(lengths))
    records = [
        {"tokens": r, "label": np.int64(y)} for r, y in zip(rows, labels, strict=True)
    ]
    kerasbatch.io.write_dataset(
        data_dir,
        records,
        num_shards=num_shards,
        features={"tokens": {"var_len": True}},
        overwrite=True,
    )
    open(marker, "w").close()
    return time.perf_counter() - start


def make_loader(data_dir, reads=1, parses=1, padding=False):
    """One pass over the records of `data_dir`, `tokens` and `label`, in
    batches of `BATCH_SIZE`."""
    import kerasbatch

    return kerasbatch.io.TFRecordLoader(
        type="independent",
        dataset={"type": "dir", "args": {"data_dir": data_dir}},
        target_batch_size=BATCH_SIZE,
        drop_remainder=False,
        epochs=1,
        num_read_buffer_bytes=1 << 20,
        num_prefetch=2,
        num_parallel_reads=reads,
        num_parallel_parses=parses,
        padding=padding,
        primary_features=[
            {"from_name": "tokens", "to_name": "tokens"},
            {"from_name": "label", "to_name": "label"},
        ],
    )


def stream_builder():
    """`StreamBucketBuilder("auto", NUM_BUCKETS buckets, batch BATCH_SIZE,
    buffer BUFFER_SIZE)`."""
    import kerasbatch

    return kerasbatch.StreamBucketBuilder(
        boundaries="auto",
        num_buckets=NUM_BUCKETS,
        batch_size=BATCH_SIZE,
        buffer_size=BUFFER_SIZE,
    )


def run_worker(script, task, *arguments):
    """Runs `script` with `arguments` in a fresh process (TensorFlow's logs
    off); prints and returns the JSON object of its last line of output."""
    command = [sys.executable, os.path.abspath(script), *map(str, arguments)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    output = subprocess.run(command, capture_output=True, text=True, env=env)
    if output.returncode:
        raise RuntimeError(f"worker {task} failed:\n{output.stderr[-3000:]}")
    result = json.loads(output.stdout.strip().splitlines()[-1])
    print(json.dumps(result), flush=True)
    return result
