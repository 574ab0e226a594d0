"""Corpora larger than memory: planned from their lengths, read by index.

Writes a token-file corpus once (lognormal lengths, mean 20 tokens; 10**9
tokens is about 50 million sequences), then measures, each in a fresh
process:

- `memory`: the peak resident memory of a `BucketBuilder` (optimal
  boundaries) and a `PackedBuilder` epoch on the grain engine, read from
  the token file, for every corpus size given: the target is at most 32
  bytes a sequence plus 1 GB, whatever the size;
- `planning`: `build` (lengths from the index, boundaries, one epoch's
  plan) on one core, for the corpus's lengths: the target is 30 s for 50
  million lengths;
- `throughput`: the same sequences in an ArrayRecord file, batched by a
  `BucketBuilder` on the grain engine and by the pipeline a Grain user
  writes by hand (`MapDataset` -> shuffle -> `ReadOptions` threads ->
  window of batches sorted by length -> batch -> pad), side by side in one
  process, round after round; with padding efficiency and distinct shapes;
- `gpu`: where JAX sees a GPU, the batches/s of the pipeline from disk
  against the steps/s of a small Transformer on them.

Run from the repository root (the corpus goes to benchmarks/out/on_disk,
git-ignored; 2 GB for 10**9 uint16 tokens):

    .venv/bin/python benchmarks/on_disk.py all --tokens 1e8,1e9
    .venv/bin/python benchmarks/on_disk.py memory --tokens 1e9 --epoch-batches 20000
    .venv/bin/python benchmarks/on_disk.py smoke     # seconds, for the tests

Every figure goes to `--output` (JSON) and a table on stdout.
"""

import argparse
import functools
import importlib.util
import json
import os
import subprocess
import sys
import time

import numpy as np
from process_memory import rss

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIRECTORY = os.path.join(HERE, "out", "on_disk")
#: Sequences written per block, and the corpus's length distribution.
BLOCK = 1_000_000
MEAN_LENGTH = 20.0
SIGMA = 0.6
MAX_LENGTH = 256
VOCABULARY = 50_000
BUCKET = {"num_buckets": 16, "batch_size": 256, "seed": 0}
PACKED = {"sequence_length": 512, "batch_size": 16, "seed": 0}
#: The memory target: bytes a sequence, plus this.
BYTES_PER_SEQUENCE = 32
FIXED_BYTES = 10**9


# ------------------------------------------------------------------ corpus
def corpus_path(directory, tokens):
    return os.path.join(directory, f"corpus_{int(tokens):d}")


def write_corpus(directory, tokens, seed=0):
    """The token file of about `tokens` tokens (written once)."""
    from kerasbatch.io import TokenFile, TokenFileWriter

    path = corpus_path(directory, tokens)
    if os.path.exists(f"{path}.idx"):
        return TokenFile(path)
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    mu = np.log(MEAN_LENGTH) - SIGMA**2 / 2
    written, started = 0, time.perf_counter()
    with TokenFileWriter(f"{path}.partial", dtype="uint16") as writer:
        while written < tokens:
            lengths = np.clip(
                rng.lognormal(mu, SIGMA, BLOCK).astype(np.int64), 1, MAX_LENGTH
            )
            lengths = lengths[
                : np.searchsorted(np.cumsum(lengths), tokens - written) + 1
            ]
            values = rng.integers(1, VOCABULARY, int(lengths.sum()), dtype=np.uint16)
            writer.write_concatenated(values, lengths)
            written += int(lengths.sum())
            print(f"  wrote {writer.count:,} sequences, {written:,} tokens", flush=True)
    for suffix in (".bin", ".idx"):
        os.replace(f"{path}.partial{suffix}", f"{path}{suffix}")
    print(f"corpus {path}: {time.perf_counter() - started:.0f} s", flush=True)
    return TokenFile(path)


def builder_of(kind):
    import kerasbatch

    if kind == "bucket":
        return kerasbatch.BucketBuilder(**BUCKET)
    return kerasbatch.PackedBuilder(**PACKED)


# ------------------------------------------------------------ child parts
def child_memory(args):
    """One epoch (or its first `--epoch-batches`) of `--builder` on the
    token file, in this process: its memory and times."""
    import grain  # noqa: F401  (imported before the base is read)

    import kerasbatch  # noqa: F401
    from kerasbatch.io import TokenFile

    base = rss()
    tokens = TokenFile(args.corpus)
    started = time.perf_counter()
    builder = builder_of(args.builder)
    dataset = builder.build(tokens, engine="grain")
    built = time.perf_counter() - started
    after_build = rss()
    limit = args.epoch_batches or len(dataset)
    started = time.perf_counter()
    batches = 0
    for _ in dataset:
        batches += 1
        if batches >= limit:
            break
    return {
        "builder": args.builder,
        "sequences": len(tokens),
        "tokens": int(tokens.offsets[-1]),
        "build_s": built,
        "epoch_batches": batches,
        "batches_per_epoch": len(dataset),
        "epoch_s": time.perf_counter() - started,
        "base_rss": base,
        "after_build_rss": after_build,
        "peak_rss": rss("VmHWM"),
    }


def child_planning(args):
    """`build` on one core: lengths from the index, boundaries, the plan of
    epoch 0; and `adapt` on the lengths alone."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    import kerasbatch  # noqa: F401
    from kerasbatch.io import TokenFile

    tokens = TokenFile(args.corpus)
    started = time.perf_counter()
    builder = builder_of(args.builder)
    builder.build(tokens, engine="grain")
    builder.plan(0)
    build_s = time.perf_counter() - started
    lengths = tokens.lengths
    started = time.perf_counter()
    planner = builder_of(args.builder)
    planner.adapt(lengths)
    planner.plan(0)
    return {
        "builder": args.builder,
        "sequences": len(tokens),
        "build_and_plan_s": build_s,
        "adapt_and_plan_s": time.perf_counter() - started,
    }


def write_array_record(tokens, path, count):
    """The first `count` sequences of `tokens` as an ArrayRecord file (one
    record each: the uint16 bytes), written once."""
    if os.path.exists(path):
        return
    from array_record.python.array_record_module import ArrayRecordWriter

    writer = ArrayRecordWriter(f"{path}.partial", "group_size:1")
    for start in range(0, count, 65_536):
        for sequence in tokens.__getitems__(range(start, min(start + 65_536, count))):
            writer.write(sequence.tobytes())
    writer.close()
    os.replace(f"{path}.partial", path)


def parse(record):
    return np.frombuffer(record, np.uint16).astype(np.int32)


def hand_written_grain(path, batch_size, window_batches, seed, threads):
    """The pipeline a Grain user writes for length-sorted batches: shuffle
    the records, read them in threads, sort each window of
    `window_batches` batches by length, cut it into batches, pad each."""
    import grain

    class SortedBatches(grain.experimental.FlatMapTransform):
        max_fan_out = window_batches

        def flat_map(self, window):
            window = sorted(window, key=len)
            batches = []
            for start in range(0, len(window), batch_size):
                rows = window[start : start + batch_size]
                out = np.zeros((len(rows), max(map(len, rows))), np.int32)
                for row, sequence in enumerate(rows):
                    out[row, : len(sequence)] = sequence
                batches.append(out)
            return batches

    source = grain.sources.ArrayRecordDataSource(path)
    dataset = grain.MapDataset.source(source).shuffle(seed=seed).map(parse)
    dataset = dataset.to_iter_dataset(
        grain.ReadOptions(num_threads=threads, prefetch_buffer_size=500)
    )
    windows = dataset.batch(batch_size * window_batches, batch_fn=list)
    return grain.experimental.FlatMapIterDataset(windows, SortedBatches())


def child_throughput(args):
    """kerasbatch's BucketBuilder on the grain engine against the
    hand-written Grain pipeline, on one ArrayRecord file, round after
    round: batches/s, sequences/s, padding efficiency, distinct shapes."""
    import grain

    import kerasbatch
    from kerasbatch.io import TokenFile

    tokens = TokenFile(args.corpus)
    count = min(args.sequences, len(tokens))
    path = f"{args.corpus}_{count}.array_record"
    write_array_record(tokens, path, count)
    lengths = tokens.lengths[:count]
    batch_size, threads = 64, 16

    def kerasbatch_epoch(engine):
        source = grain.MapDataset.source(grain.sources.ArrayRecordDataSource(path))
        builder = kerasbatch.BucketBuilder(
            num_buckets=16, batch_size=batch_size, seed=0
        )
        return builder.build(
            source.map(parse), lengths=lengths, engine=engine, read_threads=threads
        )

    def grain_epoch():
        return hand_written_grain(path, batch_size, 32, 0, threads)

    engines = ["grain"]
    if importlib.util.find_spec("tensorflow") is not None:
        engines.append("tf.data")
    methods = {
        f"kerasbatch BucketBuilder ({engine} engine)": functools.partial(
            kerasbatch_epoch, engine
        )
        for engine in engines
    }
    methods["hand-written Grain (shuffle, window sort, pad)"] = grain_epoch
    results = {name: {"seconds": [], "batches": 0} for name in methods}
    for _ in range(args.rounds):
        for name, make in methods.items():
            dataset = make()
            started = time.perf_counter()
            real = padded = batches = 0
            shapes = set()
            for batch in dataset:
                array = np.asarray(batch)
                real += int(np.count_nonzero(array))
                padded += array.size
                batches += 1
                shapes.add(array.shape)
            results[name]["seconds"].append(time.perf_counter() - started)
            results[name].update(
                batches=batches,
                padding_efficiency=real / padded,
                distinct_shapes=len(shapes),
            )
    for result in results.values():
        result["median_s"] = float(np.median(result["seconds"]))
        result["batches_per_s"] = result["batches"] / result["median_s"]
        result["sequences_per_s"] = count / result["median_s"]
    return {"sequences": count, "batch_size": batch_size, "threads": threads, **results}


def child_gpu(args):
    """Batches/s of the pipeline from disk against a JAX model's steps/s."""
    import jax

    if jax.devices()[0].platform != "gpu":
        return {"skipped": "no GPU seen by JAX"}
    import keras

    import kerasbatch
    from kerasbatch.io import TokenFile

    tokens = TokenFile(args.corpus, dtype="int32")
    builder = kerasbatch.BucketBuilder(
        num_buckets=8, batch_size=256, pad_to_bucket=True, remainder="even", seed=0
    )
    dataset = builder.build(tokens, engine="grain")
    limit = min(args.epoch_batches or 2000, len(dataset))
    started = time.perf_counter()
    for count, _ in enumerate(dataset, 1):
        if count >= limit:
            break
    pipeline = limit / (time.perf_counter() - started)
    inputs = keras.Input((None,), dtype="int32")
    hidden = keras.layers.Embedding(VOCABULARY, 256)(inputs)
    for _ in range(4):
        attended = keras.layers.MultiHeadAttention(4, 64)(hidden, hidden)
        hidden = keras.layers.LayerNormalization()(hidden + attended)
    outputs = keras.layers.Dense(VOCABULARY)(hidden)
    model = keras.Model(inputs, outputs)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    shapes = builder.batch_shapes()
    for shape in shapes:  # compile every shape first: time steps only
        rows, length = shape["x"]
        model.train_on_batch(np.ones((rows, length), "int32"), np.ones((rows, length)))
    started = time.perf_counter()
    steps = 0
    for batch in dataset:
        model.train_on_batch(batch, batch)
        steps += 1
        if steps >= limit:
            break
    return {
        "device": str(jax.devices()[0]),
        "pipeline_batches_per_s": pipeline,
        "fit_steps_per_s": steps / (time.perf_counter() - started),
        "shapes": len(shapes),
    }


CHILDREN = {
    "memory": child_memory,
    "planning": child_planning,
    "throughput": child_throughput,
    "gpu": child_gpu,
}


def run_child(part, corpus, args, **extra):
    """The JSON of `part` run in a fresh process."""
    command = [sys.executable, __file__, "--child", part, "--corpus", corpus]
    command += ["--rounds", str(args.rounds), "--sequences", str(args.sequences)]
    if args.epoch_batches:
        command += ["--epoch-batches", str(args.epoch_batches)]
    for key, value in extra.items():
        command += [f"--{key.replace('_', '-')}", str(value)]
    environment = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"}
    completed = subprocess.run(
        command, capture_output=True, text=True, env=environment, check=False
    )
    if completed.returncode:
        raise RuntimeError(f"{part} failed:\n{completed.stderr[-4000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ report
def gigabytes(value):
    return f"{value / 1e9:.2f} GB"


def report_memory(rows):
    print(
        "\n| builder | sequences | tokens | batches read | peak RSS | B/sequence over base | target (32 B x n + 1 GB) | met |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for row in rows:
        target = BYTES_PER_SEQUENCE * row["sequences"] + FIXED_BYTES
        row["target_bytes"] = target
        row["met"] = row["peak_rss"] <= target
        per = (row["peak_rss"] - row["base_rss"]) / row["sequences"]
        print(
            f"| {row['builder']} | {row['sequences']:,} | {row['tokens']:,} | "
            f"{row['epoch_batches']:,} of {row['batches_per_epoch']:,} | "
            f"{gigabytes(row['peak_rss'])} | {per:.1f} | {gigabytes(target)} | "
            f"{'yes' if row['met'] else 'NO'} |"
        )


def report_planning(rows):
    print(
        "\n| builder | sequences | build + plan of epoch 0, 1 core | adapt + plan | target: 30 s at 50 M |"
    )
    print("|---|---:|---:|---:|---|")
    for row in rows:
        if row["sequences"] < 50e6:
            verdict = "n/a (fewer than 50 M)"
        else:
            verdict = "met" if row["build_and_plan_s"] <= 30 else "NOT met"
        print(
            f"| {row['builder']} | {row['sequences']:,} | {row['build_and_plan_s']:.1f} s | "
            f"{row['adapt_and_plan_s']:.1f} s | {verdict} |"
        )


def report_throughput(result):
    print(
        f"\n{result['sequences']:,} sequences from one ArrayRecord file, batch "
        f"{result['batch_size']}, {result['threads']} read threads; median of rounds"
    )
    print(
        "| pipeline | batches/s | sequences/s | padding efficiency | distinct shapes |"
    )
    print("|---|---:|---:|---:|---:|")
    for name, row in result.items():
        if isinstance(row, dict):
            print(
                f"| {name} | {row['batches_per_s']:.1f} | {row['sequences_per_s']:,.0f} | "
                f"{row['padding_efficiency']:.3f} | {row['distinct_shapes']} |"
            )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "part",
        nargs="?",
        default="all",
        choices=("all", "memory", "planning", "throughput", "gpu", "smoke"),
    )
    parser.add_argument(
        "--tokens",
        default="1e8,1e9",
        help="corpus sizes in tokens, comma-separated (memory)",
    )
    parser.add_argument("--directory", default=DEFAULT_DIRECTORY)
    parser.add_argument(
        "--epoch-batches",
        type=int,
        default=0,
        help="batches read per epoch (0: the whole epoch)",
    )
    parser.add_argument(
        "--sequences",
        type=int,
        default=1_000_000,
        help="sequences in the ArrayRecord file (throughput)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", default=None)
    parser.add_argument("--child", choices=tuple(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--corpus", help=argparse.SUPPRESS)
    parser.add_argument("--builder", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(CHILDREN[args.child](args)))
        return 0
    if args.part == "smoke":
        args.tokens, args.sequences, args.rounds = "2e5", 2000, 1
    sizes = [float(size) for size in args.tokens.split(",")]
    corpora = [write_corpus(args.directory, size).path for size in sizes]
    results = {"tokens": sizes}
    parts = ("memory", "planning", "throughput", "gpu")
    if args.part not in ("all", "smoke"):
        parts = (args.part,)
    if "memory" in parts:
        results["memory"] = [
            run_child("memory", corpus, args, builder=builder)
            for corpus in corpora
            for builder in ("bucket", "packed")
        ]
        report_memory(results["memory"])
    if "planning" in parts:
        results["planning"] = [
            run_child("planning", corpora[-1], args, builder=builder)
            for builder in ("bucket", "packed")
        ]
        report_planning(results["planning"])
    if "throughput" in parts:
        results["throughput"] = run_child("throughput", corpora[-1], args)
        report_throughput(results["throughput"])
    if "gpu" in parts:
        results["gpu"] = run_child("gpu", corpora[-1], args)
        print(f"\nGPU: {results['gpu']}")
    if args.output:
        with open(args.output, "w") as file:
            json.dump(results, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
