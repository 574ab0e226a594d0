"""CPU seconds of the first tf.data build in a fresh process, as written and
with AutoGraph.

tf.data converts every function it traces with AutoGraph unless told not
to; the engine traces its own functions as written (`plain` in
`kerasbatch.engines.tf_data.as_written`). AutoGraph's cost falls on the
first build of each process (it caches its conversions), which is every
build of a short script, a notebook kernel or a worker. This runs, for
each builder, one fresh process per setting and repeat: "as written" is
the library as it is, "AutoGraph" the same with `plain` made to convert
(what tf.data does by default). Each process builds once, on 300 sequences
of 1-59 tokens, and times the build and one epoch. The last row is a
`kerasbatch.io.TFRecordLoader` of the same sequences (written to TFRecord
files first, untimed): its length pass and its build with a
`StreamBucketBuilder`, as the data-on-disk guide does them; "AutoGraph" there
makes `kerasbatch.io`'s entry points convert as well:

    python benchmarks/first_build.py --repeats 3
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

BUILDERS = {
    "BucketBuilder": "kerasbatch.BucketBuilder(num_buckets=4, batch_size=16)",
    "PaddedBuilder": "kerasbatch.PaddedBuilder(batch_size=16)",
    "PackedBuilder": "kerasbatch.PackedBuilder(64, batch_size=8)",
    "ChunkBuilder": "kerasbatch.ChunkBuilder(8, batch_size=16)",
    "WindowBuilder": "kerasbatch.WindowBuilder(16)",
    "StreamBucketBuilder": (
        "kerasbatch.StreamBucketBuilder(boundaries=[16, 32], batch_size=16)"
    ),
    "TFRecordLoader": "LOADER",
}

#: Run in a fresh process: argv[1] is the builder expression, argv[2]
#: "autograph" or "as-written". Prints the build's and the epoch's CPU-s.
ONE_BUILD = """
import json, sys, time
import numpy as np
import tensorflow as tf
import kerasbatch
from kerasbatch.engines.tf_data import as_written
if sys.argv[2] == "autograph":  # what tf.data does by default
    as_written.plain = lambda function: function
    for name in ("engines.tf_data.pipeline", "engines.tf_data.stream_blocks",
                 "engines.tf_data.stream_pipeline", "io.parsing"):
        module = __import__("kerasbatch." + name, fromlist=["plain"])
        module.plain = as_written.plain
rng = np.random.default_rng(0)
x = [rng.integers(1, 100, size=n).astype("int32") for n in rng.integers(1, 60, 300)]
y = np.arange(300, dtype="float32")
if sys.argv[1] == "LOADER":
    import tempfile
    from kerasbatch.io import TFRecordLoader, write_dataset
    temporary = tempfile.TemporaryDirectory()  # removed as the process ends
    directory = temporary.name + "/records"
    write_dataset(directory, [{"tokens": s} for s in x], num_shards=4)
    loader = TFRecordLoader(
        type="independent",
        dataset={"type": "dir", "args": {"data_dir": directory}},
        target_batch_size=16, drop_remainder=False, epochs=1, padding=False,
        num_prefetch=1, num_read_buffer_bytes=0,
        primary_features=[{"from_name": "tokens", "to_name": "x"}],
    )
    builder = kerasbatch.StreamBucketBuilder(boundaries=[16, 32], batch_size=16)
    names = {"inputs": ["x"], "outputs": []}
    build = lambda: loader.build(
        **names, builder=builder, lengths=loader.lengths(**names, verbose=0)
    )
elif isinstance(builder := eval(sys.argv[1]), kerasbatch.StreamBucketBuilder):
    ragged = tf.ragged.constant(x)
    source = tf.data.Dataset.from_tensor_slices((ragged, y))
    build = lambda: builder.build(source)
else:
    build = lambda: builder.build(x, y)
start = time.process_time()
dataset = build()
built = time.process_time() - start
start = time.process_time()
for _ in dataset:
    pass
print(json.dumps({"build": built, "epoch": time.process_time() - start}))
"""


def one_build(expression, setting):
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(
        [sys.executable, "-c", ONE_BUILD, expression, setting],
        capture_output=True,
        text=True,
        env=environment,
        timeout=600,
        check=False,
    )
    if done.returncode:
        raise RuntimeError(f"{expression} ({setting}) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument(
        "--builders", help=f"comma-separated, of {list(BUILDERS)} (default all)"
    )
    args = parser.parse_args()
    results = {}
    print(
        "| builder | build, AutoGraph | build, as written | epoch, AutoGraph "
        "| epoch, as written |"
    )
    print("|---|---:|---:|---:|---:|")
    names = args.builders.split(",") if args.builders else list(BUILDERS)
    unknown = set(names) - set(BUILDERS)
    if unknown:
        parser.error(f"unknown builders {sorted(unknown)}; valid: {list(BUILDERS)}")
    for name in names:
        expression = BUILDERS[name]
        runs = {setting: [] for setting in ("autograph", "as-written")}
        for _ in range(args.repeats):  # settings alternate: the same load
            for setting, found in runs.items():
                found.append(one_build(expression, setting))
        medians = {
            setting: {
                part: statistics.median(run[part] for run in found)
                for part in ("build", "epoch")
            }
            for setting, found in runs.items()
        }
        results[name] = medians
        print(
            f"| {name} | {medians['autograph']['build']:.2f} "
            f"| {medians['as-written']['build']:.2f} "
            f"| {medians['autograph']['epoch']:.2f} "
            f"| {medians['as-written']['epoch']:.2f} |",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as file:
            json.dump(results, file, indent=1)


if __name__ == "__main__":
    main()
