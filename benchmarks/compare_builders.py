"""Compares kerasbatch's builders with tf.data's own batching on the reference
workloads of `workloads.py`.

Methods (all at `--batch-size`, default 64):

- `padded_batch`: `from_tensor_slices(ragged) -> shuffle(N) -> padded_batch`.
- `bucket_by_sequence_length`: the same source, shuffled, then
  `Dataset.bucket_by_sequence_length` with the hand-picked boundaries
  [16, 32, 48, 64, 96, 128, 192, 256] and the batch size for every bucket.
- `PaddedBuilder`, `SortedBuilder`: kerasbatch's random and sorted batching.
- `BucketBuilder`: `boundaries="auto"` with `--num-buckets` buckets (32), plus
  the 16-bucket and `pad_to_bucket=True` variants.

For every method and workload it measures:

- padding efficiency (real / padded positions) and distinct shapes per epoch,
  by iterating one epoch; for kerasbatch the counts are checked against the
  builder's plan (`builder.statistics()` of that epoch);
- dataset construction time (from the list of numpy arrays);
- pipeline throughput: elements/s over full epochs (median of several, after
  a warm-up epoch), methods interleaved round by round so that background load
  hits them alike;
- the epoch time of a small GRU classifier trained with `model.fit`: first
  epoch (tracing included) and the median of the later ones, again
  interleaved across methods.

Usage:

    .venv/bin/python benchmarks/compare_builders.py --workload all \\
        --output benchmarks/out/results.json --plot benchmarks/out/results.png
    .venv/bin/python benchmarks/compare_builders.py --quick
"""

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workloads  # noqa: E402

import kerasbatch  # noqa: E402

BBSL_BOUNDARIES = [16, 32, 48, 64, 96, 128, 192, 256]
VOCAB = 1000

# The targets this benchmark checks (PASS/FAIL).
TARGET_EFFICIENCY = 0.95
TARGET_MAX_BUCKETS = 32
TARGET_GRU_SPEEDUP = 2.5


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# --------------------------------------------------------------------- methods
@dataclasses.dataclass
class Method:
    """One way of batching: `make(x, y, lengths)` returns `(dataset, builder)`.

    `builder` is the kerasbatch builder, or None for the tf.data baselines.
    """

    name: str
    family: str  # "tf.data" or "kerasbatch"
    make: object
    description: str


def _ragged_source(x, y):
    """`(sequence, label)` elements with dense int32 sequences of shape (T,)."""
    row_lengths = np.fromiter((len(s) for s in x), dtype=np.int64, count=len(x))
    ragged = tf.RaggedTensor.from_row_lengths(np.concatenate(x), row_lengths)
    dataset = tf.data.Dataset.from_tensor_slices((ragged, y))
    # Slices of a RaggedTensor are ragged specs that padded_batch refuses; the
    # identity map turns them into dense (T,) tensors.
    return dataset.map(_identity, num_parallel_calls=tf.data.AUTOTUNE)


def _identity(sequence, label):
    return sequence, label


def _sequence_length(sequence, label):
    return tf.shape(sequence)[0]


def make_padded_batch(batch_size):
    def make(x, y, lengths):
        dataset = _ragged_source(x, y).shuffle(len(x), seed=0)
        dataset = dataset.padded_batch(batch_size)
        return dataset.prefetch(tf.data.AUTOTUNE), None

    return make


def make_bucket_by_sequence_length(batch_size):
    def make(x, y, lengths):
        dataset = _ragged_source(x, y).shuffle(len(x), seed=0)
        dataset = dataset.bucket_by_sequence_length(
            _sequence_length,
            BBSL_BOUNDARIES,
            [batch_size] * (len(BBSL_BOUNDARIES) + 1),
        )
        # group_by_window loses the cardinality; it is known (the number of
        # batches does not depend on the shuffle), and Keras 3 needs it to run
        # every epoch in full (it fixes the step count after the first).
        bucket = np.searchsorted(BBSL_BOUNDARIES, lengths, side="right")
        counts = np.bincount(bucket, minlength=len(BBSL_BOUNDARIES) + 1)
        num_batches = int(np.ceil(counts / batch_size).sum())
        dataset = dataset.prefetch(tf.data.AUTOTUNE)
        return dataset.apply(tf.data.experimental.assert_cardinality(num_batches)), None

    return make


def make_builder(factory):
    def make(x, y, lengths):
        builder = factory()
        return builder.build(x, y), builder

    return make


def methods(batch_size, num_buckets):
    result = [
        Method(
            "padded_batch",
            "tf.data",
            make_padded_batch(batch_size),
            f"shuffle(N) + padded_batch({batch_size})",
        ),
        Method(
            "bucket_by_sequence_length",
            "tf.data",
            make_bucket_by_sequence_length(batch_size),
            f"shuffle(N) + bucket_by_sequence_length({BBSL_BOUNDARIES}, "
            f"batch {batch_size} per bucket)",
        ),
        Method(
            "PaddedBuilder",
            "kerasbatch",
            make_builder(lambda: kerasbatch.PaddedBuilder(batch_size)),
            f"PaddedBuilder({batch_size})",
        ),
        Method(
            "SortedBuilder",
            "kerasbatch",
            make_builder(lambda: kerasbatch.SortedBuilder(batch_size)),
            f"SortedBuilder({batch_size})",
        ),
        Method(
            f"BucketBuilder[{num_buckets}]",
            "kerasbatch",
            make_builder(
                lambda: kerasbatch.BucketBuilder(
                    boundaries="auto", num_buckets=num_buckets, batch_size=batch_size
                )
            ),
            f'BucketBuilder(boundaries="auto", num_buckets={num_buckets}, '
            f"batch_size={batch_size})",
        ),
    ]
    if num_buckets != 16:
        result.append(
            Method(
                "BucketBuilder[16]",
                "kerasbatch",
                make_builder(
                    lambda: kerasbatch.BucketBuilder(
                        boundaries="auto", num_buckets=16, batch_size=batch_size
                    )
                ),
                f'BucketBuilder(boundaries="auto", num_buckets=16, '
                f"batch_size={batch_size})",
            )
        )
    result.append(
        Method(
            f"BucketBuilder[{num_buckets}]+pad_to_bucket",
            "kerasbatch",
            make_builder(
                lambda: kerasbatch.BucketBuilder(
                    boundaries="auto",
                    num_buckets=num_buckets,
                    batch_size=batch_size,
                    pad_to_bucket=True,
                )
            ),
            f'BucketBuilder(boundaries="auto", num_buckets={num_buckets}, '
            f"batch_size={batch_size}, pad_to_bucket=True)",
        )
    )
    return result


# ---------------------------------------------------------------- measuring
def construct(method, x, y, lengths, repeats):
    """Builds the dataset `repeats` times; returns the last and the median time."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        dataset, builder = method.make(x, y, lengths)
        times.append(time.perf_counter() - start)
    return dataset, builder, statistics.median(times)


def measure_padding(dataset, builder, lengths):
    """Iterates one epoch and counts real and padded positions.

    A padded position holds the padding value 0 (token ids are >= 1). For a
    kerasbatch builder the counts are compared with the plan of the epoch the
    iteration ran, which `builder.statistics()` reports.
    """
    real = padded = batches = elements = 0
    shapes = set()
    for batch_x, batch_y in dataset:
        batch_x = batch_x.numpy()
        real += int(np.count_nonzero(batch_x))
        padded += batch_x.size
        batches += 1
        elements += batch_x.shape[0]
        shapes.add(batch_x.shape)
        if batch_y.shape[0] != batch_x.shape[0]:
            raise AssertionError("x and y batch sizes differ")
    result = {
        "padding_efficiency": real / padded,
        "distinct_shapes": len(shapes),
        "num_batches": batches,
        "num_elements": elements,
        "real_positions": real,
        "padded_positions": padded,
        "all_tokens_kept": real == int(lengths.sum()) and elements == len(lengths),
    }
    if builder is not None:
        epoch = builder.last_started_epoch
        plan = builder.plan(epoch)
        stats = builder.statistics(epoch)
        result["planned"] = {
            "epoch": epoch,
            "padding_efficiency": stats.padding_efficiency,
            "distinct_shapes": stats.distinct_shapes,
            "num_batches": stats.num_batches,
        }
        result["verified"] = bool(
            real == int(plan.real_positions.sum())
            and padded == int(plan.padded_positions().sum())
            and result["padding_efficiency"] == stats.padding_efficiency
            and len(shapes) == stats.distinct_shapes
            and batches == stats.num_batches
        )
        if builder.statistics().padding_efficiency != stats.padding_efficiency:
            result["verified"] = False
    return result


def time_epoch(dataset):
    start = time.perf_counter()
    for _ in dataset:
        pass
    return time.perf_counter() - start


def planning_seconds(builder, repeats=5):
    """Median time of planning one new epoch in numpy (the `numpy_function`)."""
    times = []
    for k in range(repeats):
        start = time.perf_counter()
        builder.plan(10_000 + k)  # epochs far beyond the cached ones
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class EpochTimer(keras.callbacks.Callback):
    """Records the wall time and the number of steps of every epoch."""

    def __init__(self):
        super().__init__()
        self.seconds, self.steps = [], []

    def on_epoch_begin(self, epoch, logs=None):
        self._steps = 0
        self._start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self._steps += 1

    def on_epoch_end(self, epoch, logs=None):
        self.seconds.append(time.perf_counter() - self._start)
        self.steps.append(self._steps)


def gru_model():
    keras.utils.set_random_seed(0)  # every method starts from the same weights
    model = keras.Sequential(
        [
            keras.Input((None,), dtype="int32"),
            keras.layers.Embedding(VOCAB, 32, mask_zero=True),
            keras.layers.GRU(32),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile(optimizer=keras.optimizers.Adam(), loss="binary_crossentropy")
    return model


def rotated(items, offset):
    offset %= len(items)
    return items[offset:] + items[:offset]


def run_workload(name, args, method_list):
    log(f"workload {name}: generating {args.num_elements} sequences")
    x, y, lengths = workloads.sequences(name, args.num_elements, VOCAB)
    results = {
        m.name: {"family": m.family, "description": m.description} for m in method_list
    }

    # 1. Construction, padding efficiency (doubles as the warm-up epoch).
    datasets = {}
    for method in method_list:
        log(f"{name} / {method.name}: construct + padding pass")
        dataset, builder, seconds = construct(
            method, x, y, lengths, args.construct_repeats
        )
        entry = results[method.name]
        entry["construct_seconds"] = seconds
        entry.update(measure_padding(dataset, builder, lengths))
        if builder is not None:
            entry["plan_seconds_per_epoch"] = planning_seconds(builder)
            if isinstance(builder, kerasbatch.BucketBuilder):
                entry["boundaries"] = builder.resolved_boundaries
        datasets[method.name] = dataset

    # 2. Pipeline throughput: one full epoch per method per round.
    epoch_times = {m.name: [] for m in method_list}
    for round_ in range(args.pipeline_epochs):
        log(f"{name}: pipeline round {round_ + 1}/{args.pipeline_epochs}")
        for method in rotated(method_list, round_):
            epoch_times[method.name].append(time_epoch(datasets[method.name]))
    for method in method_list:
        entry = results[method.name]
        seconds = statistics.median(epoch_times[method.name])
        entry["pipeline_epoch_seconds"] = epoch_times[method.name]
        entry["pipeline_seconds_median"] = seconds
        entry["elements_per_second"] = len(lengths) / seconds
    del datasets

    # 3. GRU epoch time with model.fit; epoch 0 traces, the later ones are timed.
    if args.gru_epochs:
        models, timers, fit_data = {}, {}, {}
        for method in method_list:
            fit_data[method.name], _ = method.make(x, y, lengths)
            models[method.name] = gru_model()
            timers[method.name] = EpochTimer()
        for epoch in range(args.gru_epochs + 1):
            label = "warm-up" if epoch == 0 else f"{epoch}/{args.gru_epochs}"
            for method in rotated(method_list, epoch):
                log(f"{name} / {method.name}: GRU epoch {label}")
                models[method.name].fit(
                    fit_data[method.name],
                    epochs=epoch + 1,
                    initial_epoch=epoch,
                    shuffle=False,
                    verbose=0,
                    callbacks=[timers[method.name]],
                )
        for method in method_list:
            timer = timers[method.name]
            entry = results[method.name]
            entry["gru_first_epoch_seconds"] = timer.seconds[0]
            entry["gru_epoch_seconds"] = timer.seconds[1:]
            entry["gru_epoch_seconds_median"] = statistics.median(timer.seconds[1:])
            entry["gru_steps_per_epoch"] = timer.steps
            entry["gru_jit_compile"] = bool(models[method.name].jit_compile)
    return {
        "num_elements": len(lengths),
        "total_tokens": int(lengths.sum()),
        "length_mean": float(lengths.mean()),
        "length_max": int(lengths.max()),
        "methods": results,
    }


# ------------------------------------------------------------------ targets
def evaluate_targets(results, args):
    main = f"BucketBuilder[{args.num_buckets}]"
    targets = []
    for workload, data in results.items():
        methods_ = data["methods"]
        bucket = methods_[main]
        targets.append(
            {
                "target": f'BucketBuilder("auto", {args.num_buckets} buckets) '
                f"efficiency >= {TARGET_EFFICIENCY}",
                "workload": workload,
                "value": bucket["padding_efficiency"],
                "passed": bucket["padding_efficiency"] >= TARGET_EFFICIENCY
                and args.num_buckets <= TARGET_MAX_BUCKETS,
            }
        )
        bbsl = methods_["bucket_by_sequence_length"]
        ratio = bucket["elements_per_second"] / bbsl["elements_per_second"]
        targets.append(
            {
                "target": "BucketBuilder pipeline throughput >= "
                "bucket_by_sequence_length",
                "workload": workload,
                "value": ratio,
                "passed": ratio >= 1.0,
            }
        )
        if "gru_epoch_seconds_median" in bucket:
            speedup = (
                methods_["padded_batch"]["gru_epoch_seconds_median"]
                / bucket["gru_epoch_seconds_median"]
            )
            targets.append(
                {
                    "target": f"GRU epoch >= {TARGET_GRU_SPEEDUP}x faster than "
                    "padded_batch",
                    "workload": workload,
                    "value": speedup,
                    "passed": speedup >= TARGET_GRU_SPEEDUP,
                }
            )
    return targets


# ------------------------------------------------------------------ reports
def format_table(workload, data):
    methods_ = data["methods"]
    bbsl = methods_["bucket_by_sequence_length"]
    padded = methods_["padded_batch"]
    header = [
        "method",
        "pad eff",
        "check",
        "shapes",
        "batches",
        "build s",
        "elem/s",
        "vs bbsl",
        "GRU 1st s",
        "GRU s",
        "GRU speedup",
    ]
    rows = []
    for name, entry in methods_.items():
        check = "-"
        if "verified" in entry:
            check = "ok" if entry["verified"] else "MISMATCH"
        if not entry["all_tokens_kept"]:
            check += " LOST"
        gru = entry.get("gru_epoch_seconds_median")
        rows.append(
            [
                name,
                f"{entry['padding_efficiency']:.3f}",
                check,
                str(entry["distinct_shapes"]),
                str(entry["num_batches"]),
                f"{entry['construct_seconds']:.3f}",
                f"{entry['elements_per_second']:,.0f}",
                f"{entry['elements_per_second'] / bbsl['elements_per_second']:.2f}x",
                "-" if gru is None else f"{entry['gru_first_epoch_seconds']:.1f}",
                "-" if gru is None else f"{gru:.2f}",
                "-"
                if gru is None
                else f"{padded['gru_epoch_seconds_median'] / gru:.2f}x",
            ]
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        f"== {workload}: {data['num_elements']} elements, mean length "
        f"{data['length_mean']:.1f}, max {data['length_max']} ==",
        "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def format_targets(targets):
    lines = ["== targets =="]
    for t in targets:
        verdict = "PASS" if t["passed"] else "FAIL"
        value = t["value"]
        shown = f"{value:.3f}" if "efficiency" in t["target"] else f"{value:.2f}x"
        lines.append(f"{verdict}  {t['target']} [{t['workload']}]: {shown}")
    return "\n".join(lines)


def plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    has_gru = all(
        "gru_epoch_seconds_median" in m
        for data in results.values()
        for m in data["methods"].values()
    )
    rows = 2 if has_gru else 1
    fig, axes = plt.subplots(
        rows, len(names), figsize=(6.5 * len(names), 4.2 * rows), squeeze=False
    )
    for column, workload in enumerate(names):
        methods_ = results[workload]["methods"]
        labels = list(methods_)
        colors = [
            "tab:gray" if m["family"] == "tf.data" else "tab:blue"
            for m in methods_.values()
        ]
        positions = np.arange(len(labels))
        ax = axes[0][column]
        values = [m["padding_efficiency"] for m in methods_.values()]
        ax.barh(positions, values, color=colors)
        ax.axvline(TARGET_EFFICIENCY, color="tab:red", linestyle="--", linewidth=1)
        for p, v in zip(positions, values, strict=True):
            ax.text(v + 0.01, p, f"{v:.3f}", va="center", fontsize=8)
        ax.set_yticks(positions, labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(0, 1.15)
        ax.set_xlabel("padding efficiency (real / padded positions)")
        ax.set_title(f"{workload}: padding efficiency")
        if has_gru:
            ax = axes[1][column]
            values = [m["gru_epoch_seconds_median"] for m in methods_.values()]
            ax.barh(positions, values, color=colors)
            for p, v in zip(positions, values, strict=True):
                ax.text(v, p, f" {v:.1f}s", va="center", fontsize=8)
            ax.set_yticks(positions, labels, fontsize=8)
            ax.invert_yaxis()
            ax.set_xlim(0, max(values) * 1.2)
            ax.set_xlabel("GRU epoch time, s (median, model.fit)")
            ax.set_title(f"{workload}: GRU epoch time")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def machine_info():
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "gpus": len(tf.config.list_physical_devices("GPU")),
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "keras_backend": keras.backend.backend(),
        "numpy": np.__version__,
        "kerasbatch": kerasbatch.__version__,
    }


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--workload", choices=[*workloads.WORKLOADS, "all"], default="all"
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--num-buckets", type=int, default=32)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small run (2,048 elements, fewer repetitions) in under 2 minutes",
    )
    parser.add_argument(
        "--num-elements",
        type=int,
        default=None,
        help="elements per workload (default 20,000; 2,048 with --quick)",
    )
    parser.add_argument(
        "--pipeline-epochs",
        type=int,
        default=None,
        help="timed pipeline epochs per method after the warm-up (default 5; 3 "
        "with --quick)",
    )
    parser.add_argument(
        "--gru-epochs",
        type=int,
        default=None,
        help="timed GRU epochs after the warm-up epoch; 0 skips the GRU "
        "(default 3; 1 with --quick)",
    )
    parser.add_argument(
        "--construct-repeats",
        type=int,
        default=3,
        help="dataset constructions timed per method (median)",
    )
    parser.add_argument(
        "--methods",
        default=None,
        help="comma-separated subset of the method names (padded_batch and "
        "bucket_by_sequence_length are always kept: the targets need them)",
    )
    parser.add_argument("--output", help="write the results as JSON to this path")
    parser.add_argument("--plot", help="save a PNG figure to this path")
    args = parser.parse_args(argv)
    if args.num_elements is None:
        args.num_elements = 2048 if args.quick else workloads.NUM_ELEMENTS
    if args.pipeline_epochs is None:
        args.pipeline_epochs = 3 if args.quick else 5
    if args.gru_epochs is None:
        args.gru_epochs = 1 if args.quick else 3
    if not 1 <= args.num_elements <= workloads.NUM_ELEMENTS:
        parser.error(f"--num-elements must be in [1, {workloads.NUM_ELEMENTS}]")
    if args.pipeline_epochs < 1 or args.gru_epochs < 0:
        parser.error("--pipeline-epochs must be >= 1 and --gru-epochs >= 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    method_list = methods(args.batch_size, args.num_buckets)
    if args.methods:
        wanted = set(args.methods.split(",")) | {
            "padded_batch",
            "bucket_by_sequence_length",
            f"BucketBuilder[{args.num_buckets}]",
        }
        unknown = wanted - {m.name for m in method_list}
        if unknown:
            raise SystemExit(f"Unknown methods: {sorted(unknown)}")
        method_list = [m for m in method_list if m.name in wanted]
    names = workloads.WORKLOADS if args.workload == "all" else (args.workload,)
    info = machine_info()
    log(
        f"TF {info['tensorflow']}, Keras {info['keras']} ({info['keras_backend']}), "
        f"{info['cpu_count']} CPU cores, {info['gpus']} GPUs"
    )
    start = time.perf_counter()
    results = {name: run_workload(name, args, method_list) for name in names}
    targets = evaluate_targets(results, args)
    wall = time.perf_counter() - start

    print()
    for name, data in results.items():
        print(format_table(name, data))
        print()
    print(format_targets(targets))
    if args.quick:
        print("(--quick: few elements; the targets are judged on the full run)")
    print(f"\ntotal {wall:.0f} s")

    if args.output:
        report = {
            "command": " ".join([os.path.relpath(sys.executable), *sys.argv]),
            "config": vars(args),
            "machine": info,
            "wall_seconds": wall,
            "results": results,
            "targets": targets,
        }
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as f:
            json.dump(report, f, indent=2, default=_json_default)
        log(f"wrote {args.output}")
    if args.plot:
        plot(results, args.plot)
        log(f"wrote {args.plot}")
    return 0


def _json_default(value):
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


if __name__ == "__main__":
    sys.exit(main())
