"""XLA compiles per epoch and what they cost: static shapes for XLA and JAX.

Part 1, padding only (no training, seconds): the padding efficiency that the
filler rows of `remainder="pad"` and `"even"` cost, against `remainder="keep"`, for
`BucketBuilder(boundaries="auto", num_buckets=32, pad_to_bucket=True)` on
both reference workloads at their full 20 000 elements (`workloads.py`),
with a batch size of 64 and with a token budget (`max_tokens`). Figures from
the builders' plans (`builder.adapt` + `statistics`, `batch_shapes`).

Part 2, training: a model compiled with XLA is trained on the first
`--elements` (1 000) `lognormal` sequences for `--epochs` (3) epochs with
every batching method below, the methods interleaved epoch by epoch (one
epoch of each, in a rotating order) so that background load hits them alike.
Every (backend, model) pair runs in a fresh process of its own:

- TensorFlow, `model.compile(jit_compile=True)` on CPU. Compiles are XLA
  compilations, counted from TensorFlow's own log (`device_compiler` logs
  "Compilation of XLA executable time" once per compilation; the worker
  sends its stderr to a file and counts those lines around every epoch). The
  train step's Python traces are no measure here: Keras wraps it in
  `tf.function(reduce_retracing=True)`, which relaxes the shapes to
  `(None, None)` after the first retrace, while XLA still compiles once per
  concrete shape.
- JAX (`KERAS_BACKEND=jax`, which jit-compiles the train step). Compiles
  are traces of the train step (a `jax.jit` compiles once per trace: it
  caches by shape and never relaxes it); the seconds are those of JAX's
  backend-compile events (`jax.monitoring`).

Models: the GRU classifier of `compare_builders.py` and the small
Transformer encoder of `packing.py` (token + position embeddings of 32, one
2-head attention block with a padding mask (`SegmentAttentionMask`), mean
pooling), the same initial weights for every method.

Methods (batch size 64, 32 buckets):

- `padded_batch`, `bucket_by_sequence_length` (8 hand boundaries): tf.data's
  own, as in `compare_builders.py`;
- `BucketBuilder[32]`: `BucketBuilder(boundaries="auto", num_buckets=32)`
  defaults (each batch padded to its longest sequence);
- `bounded`: the same with `pad_to_bucket=True, remainder="even"` (one shape
  per bucket, every epoch the same, less than one filler row per batch);
  `bounded(pad)` with `remainder="pad"` instead (a full batch of filler at
  worst); `bounded+m8` with `pad_to_multiple=8` too (buckets whose bounds
  round up alike share a shape); `bounded[8]` with 8 buckets (fewer
  shapes: what the tuner's "training_time" objective picks for short runs);
- `SortedBuilder+m{k}`: `SortedBuilder(pad_to_multiple=k, remainder="even")`;
- `PackedBuilder` (Transformer only): `PackedBuilder(512, batch_size=8,
  remainder="even")`, rows of 512 with segment ids, one shape.

Columns: compiles in epoch 1 and new ones in the later epochs (with the
shapes the builder's plan says each epoch adds, `batch_shapes`, to check
them), compile seconds, padding efficiency (the plan's, filler rows counted
as padding; for tf.data, counted by iterating one epoch), the first epoch's
seconds (compiles included) and the last epoch's (steady state), and ratios.

Usage:

    .venv/bin/python benchmarks/compile_counts.py \\
        --output benchmarks/out/compile_counts.json \\
        --plot benchmarks/compile_counts.png
    .venv/bin/python benchmarks/compile_counts.py --padding-only
    .venv/bin/python benchmarks/compile_counts.py --elements 1000 \\
        --backends jax --models gru   # smoke run
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH_SIZE = 64
NUM_BUCKETS = 32
#: Buckets of the bounded setting with fewer shapes, as the tuner's
#: "training_time" objective picks for short runs.
FEW_BUCKETS = 8
REMAINDERS = ("keep", "pad", "even")
MAX_TOKENS = 4096  # the token budget of part 1: 64 rows of 64, 8 rows of 512
BACKENDS = ("tensorflow", "jax")
MODELS = ("gru", "transformer")
XLA_COMPILE_LINE = "Compilation of XLA executable time:"

# The targets this benchmark checks (PASS/FAIL).
TARGET_FILLER_LOSS = 0.01
TARGET_FIRST_EPOCH_SPEEDUP = 2.0
TARGET_STEADY_SPEEDUP = 2.5


def log(message, stream=None):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=stream or sys.stdout)
    (stream or sys.stdout).flush()


def _imports():
    """TensorFlow, Keras and the benchmarks' modules: imported only once the
    worker has set its backend and TensorFlow's logging."""
    sys.path.insert(0, HERE)
    import compare_builders
    import keras
    import numpy as np
    import packing
    import workloads

    import kerasbatch

    return compare_builders, packing, workloads, kerasbatch, keras, np


# ----------------------------------------------------------- part 1: padding
def padding_part(num_elements):
    """Filler-row padding loss of remainder='pad' and 'even' vs 'keep', from
    the plans."""
    _, _, workloads, kerasbatch, _, _ = _imports()
    sizings = {
        f"batch_size={BATCH_SIZE}": {"batch_size": BATCH_SIZE},
        f"max_tokens={MAX_TOKENS}": {"max_tokens": MAX_TOKENS},
    }
    variants = {
        "pad_to_bucket": {"pad_to_bucket": True},
        "pad_to_bucket, pad_to_multiple=8": {
            "pad_to_bucket": True,
            "pad_to_multiple": 8,
        },
        "batch padding (defaults)": {},
    }
    rows = []
    for workload in workloads.WORKLOADS:
        lengths = workloads.lengths(workload, num_elements)
        for sizing, sizing_options in sizings.items():
            for variant, options in variants.items():
                row = {"workload": workload, "sizing": sizing, "variant": variant}
                for remainder in REMAINDERS:
                    builder = kerasbatch.BucketBuilder(
                        boundaries="auto",
                        num_buckets=NUM_BUCKETS,
                        remainder=remainder,
                        seed=0,
                        **sizing_options,
                        **options,
                    )
                    builder.adapt(lengths)
                    stats = builder.statistics(0)
                    seen, new = set(), []
                    for epoch in range(3):
                        shapes = {s["x"] for s in builder.batch_shapes(epoch)}
                        new.append(len(shapes - seen))
                        seen |= shapes
                    row[remainder] = {
                        "efficiency": stats.padding_efficiency,
                        "batches": stats.num_batches,
                        "shapes": stats.distinct_shapes,
                        "new_shapes": new,
                    }
                row["loss"] = {
                    r: row["keep"]["efficiency"] - row[r]["efficiency"]
                    for r in REMAINDERS[1:]
                }
                rows.append(row)
    return rows


def format_padding(rows, num_elements):
    lines = [
        f"Part 1: filler rows of remainder='pad' and 'even' ({num_elements} elements per "
        f"workload, BucketBuilder(boundaries='auto', num_buckets={NUM_BUCKETS}), "
        "epoch 0's plan)",
        "",
        "| workload | sizing | padding | eff keep | eff pad | eff even | "
        "loss pad | loss even | new shapes in epochs 1, 2, 3: keep | pad | even "
        "| batches keep / pad / even |",
        "|---|---|---|---:|---:|---:|---:|---:|---|---|---|---:|",
    ]
    for r in rows:
        keep, pad, even = r["keep"], r["pad"], r["even"]
        lines.append(
            f"| {r['workload']} | {r['sizing']} | {r['variant']} | "
            f"{keep['efficiency']:.4f} | {pad['efficiency']:.4f} | "
            f"{even['efficiency']:.4f} | {r['loss']['pad']:.4f} | "
            f"{r['loss']['even']:.4f} | "
            + " | ".join(", ".join(map(str, r[k]["new_shapes"])) for k in REMAINDERS)
            + f" | {keep['batches']} / {pad['batches']} / {even['batches']} |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------- part 2: training
def method_names(model, sorted_multiple, wanted=None):
    names = [
        "padded_batch",
        "bucket_by_sequence_length",
        f"BucketBuilder[{NUM_BUCKETS}]",
        "bounded",
        "bounded(pad)",
        "bounded+m8",
        f"bounded[{FEW_BUCKETS}]",
        f"SortedBuilder+m{sorted_multiple}",
    ]
    if model == "transformer":
        names.append("PackedBuilder")
    if wanted:
        unknown = set(wanted) - set(names)
        if unknown:
            raise SystemExit(f"Unknown methods {sorted(unknown)}; valid: {names}")
        names = [n for n in names if n in wanted]
    return names


def make_method(name, x, y, lengths, model, sorted_multiple):
    """`(dataset, builder)`: builder None for the tf.data baselines."""
    compare_builders, packing, _, kerasbatch, _, _ = _imports()
    if name == "padded_batch":
        return compare_builders.make_padded_batch(BATCH_SIZE)(x, y, lengths)
    if name == "bucket_by_sequence_length":
        make = compare_builders.make_bucket_by_sequence_length(BATCH_SIZE)
        return make(x, y, lengths)
    bucketed = {
        "boundaries": "auto",
        "num_buckets": NUM_BUCKETS,
        "batch_size": BATCH_SIZE,
    }
    bounded = {**bucketed, "pad_to_bucket": True, "remainder": "even"}
    factories = {
        f"BucketBuilder[{NUM_BUCKETS}]": lambda: kerasbatch.BucketBuilder(**bucketed),
        "bounded": lambda: kerasbatch.BucketBuilder(**bounded),
        "bounded(pad)": lambda: kerasbatch.BucketBuilder(
            **{**bounded, "remainder": "pad"}
        ),
        f"bounded[{FEW_BUCKETS}]": lambda: kerasbatch.BucketBuilder(
            **{**bounded, "num_buckets": FEW_BUCKETS}
        ),
        "bounded+m8": lambda: kerasbatch.BucketBuilder(**bounded, pad_to_multiple=8),
        f"SortedBuilder+m{sorted_multiple}": lambda: kerasbatch.SortedBuilder(
            BATCH_SIZE, pad_to_multiple=sorted_multiple, remainder="even"
        ),
        "PackedBuilder": lambda: kerasbatch.PackedBuilder(
            packing.ROW, batch_size=packing.ROWS_PER_BATCH, remainder="even"
        ),
    }
    builder = factories[name]()
    labels = packing.labels_for(builder, y) if model == "transformer" else y
    return builder.build(x, labels), builder


def make_model(model, builder, jit_compile):
    compare_builders, packing, _, kerasbatch, keras, _ = _imports()
    if model == "gru":
        built = compare_builders.gru_model()  # seeded, compiled without XLA
        loss = "binary_crossentropy"
    else:
        keras.utils.set_random_seed(0)
        if isinstance(builder, kerasbatch.PackedBuilder):
            built = packing.packed_model(builder.resolved_max_segments)
        else:
            built = packing.padded_model()
        loss = keras.losses.BinaryCrossentropy(reduction="mean_with_sample_weight")
    built.compile(
        optimizer=keras.optimizers.Adam(1e-3), loss=loss, jit_compile=jit_compile
    )
    return built


class TraceCounter:
    """Wraps a model's `train_step`: records the data shapes of every trace
    (a jitted step runs the Python function only when it traces)."""

    def __init__(self, model):
        self.shapes = []
        step = model.train_step

        def counted(*args):
            data = args[-1]  # TF: (data,); JAX: (state, data)
            x = data[0] if isinstance(data, tuple | list) else data
            first = next(iter(x.values())) if isinstance(x, dict) else x
            self.shapes.append(tuple(first.shape))
            return step(*args)

        model.train_step = counted


class XlaLog:
    """Counts TensorFlow's XLA compilations: the worker's stderr (fd 2) goes
    to a file that TensorFlow's `device_compiler` logs every compilation to."""

    def __init__(self):
        fd, self.path = tempfile.mkstemp(suffix=".log")
        self.console = os.fdopen(os.dup(2), "w")  # progress stays on the console
        os.dup2(fd, 2)
        os.close(fd)

    def compiles(self):
        """`(compilations so far, their seconds)`."""
        count, seconds = 0, 0.0
        with open(self.path, errors="replace") as f:
            for line in f:
                if XLA_COMPILE_LINE in line:
                    count += 1
                    # "... time: 1.76 s (1760545 us) ..."
                    micros = line.split("(", 1)[1].split(" us)", 1)[0]
                    seconds += int(micros) / 1e6
        return count, seconds


class JaxCompiles:
    """Counts JAX's backend compilations and their seconds (all jitted
    functions, the small helpers included)."""

    def __init__(self):
        import jax.monitoring

        self.count, self.seconds = 0, 0.0
        jax.monitoring.register_event_duration_secs_listener(self._event)

    def _event(self, event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            self.count += 1
            self.seconds += duration

    def compiles(self):
        return self.count, self.seconds


def padding_of(dataset, builder, lengths):
    """`(efficiency, distinct shapes)` of epoch 0: the plan's, or counted by
    iterating one epoch (tf.data)."""
    compare_builders, *_ = _imports()
    if builder is not None:
        stats = builder.statistics(0)
        return stats.padding_efficiency, stats.distinct_shapes
    measured = compare_builders.measure_padding(dataset, None, lengths)
    return measured["padding_efficiency"], measured["distinct_shapes"]


def worker(args):
    """Trains one model with every method on one backend; prints JSON."""
    backend = os.environ["KERAS_BACKEND"]
    counter = XlaLog() if backend == "tensorflow" else None
    console = counter.console if counter else sys.stderr
    compare_builders, _, workloads, kerasbatch, keras, np = _imports()
    if backend == "jax":
        counter = JaxCompiles()
    x, y, lengths = workloads.sequences(
        "lognormal", args.elements, compare_builders.VOCAB
    )
    names = method_names(args.model, args.sorted_multiple, args.methods)
    states = {}
    for name in names:
        dataset, builder = make_method(
            name, x, y, lengths, args.model, args.sorted_multiple
        )
        efficiency, shapes = padding_of(dataset, builder, lengths)
        model = make_model(args.model, builder, jit_compile=True)
        planned = None
        if builder is not None:
            seen, planned = set(), []
            for epoch in range(args.epochs):
                epoch_shapes = {
                    tuple(sorted(s.items())) for s in builder.batch_shapes(epoch)
                }
                planned.append(len(epoch_shapes - seen))
                seen |= epoch_shapes
        states[name] = {
            "dataset": dataset,
            "builder": builder,
            "model": model,
            "traces": TraceCounter(model),
            "timer": compare_builders.EpochTimer(),
            "result": {
                "efficiency": efficiency,
                "shapes_epoch_1": shapes,
                "planned_new_shapes": planned,
                "compiles": [],
                "compile_seconds": [],
                "traces": [],
            },
        }
    for epoch in range(args.epochs):
        for name in compare_builders.rotated(names, epoch):
            state = states[name]
            callbacks = [state["timer"]]
            if state["builder"] is not None:
                callbacks.append(kerasbatch.callbacks.EpochReshuffle(state["builder"]))
            count, seconds = counter.compiles()
            traces = len(state["traces"].shapes)
            state["model"].fit(
                state["dataset"],
                epochs=epoch + 1,
                initial_epoch=epoch,
                verbose=0,
                callbacks=callbacks,
            )
            new_count, new_seconds = counter.compiles()
            result = state["result"]
            result["compiles"].append(new_count - count)
            result["compile_seconds"].append(new_seconds - seconds)
            result["traces"].append(len(state["traces"].shapes) - traces)
            log(
                f"{backend} {args.model} {name} epoch {epoch + 1}: "
                f"{state['timer'].seconds[-1]:.1f} s, {new_count - count} compiles "
                f"({new_seconds - seconds:.1f} s)",
                console,
            )
    results = {}
    for name, state in states.items():
        result = state["result"]
        result["epoch_seconds"] = state["timer"].seconds
        result["steps"] = state["timer"].steps
        if backend == "jax":
            # Every trace of the jitted train step is one compile; the
            # backend events also count JAX's small helper jits.
            result["all_jax_compiles"] = result["compiles"]
            result["compiles"] = result["traces"]
        results[name] = result
    report = {
        "backend": backend,
        "model": args.model,
        "jit_compile": bool(next(iter(states.values()))["model"].jit_compile),
        "keras": keras.__version__,
        "methods": results,
    }
    print(json.dumps(report), flush=True)


def run_worker(backend, model, args):
    """Runs `worker` in a fresh process with `backend`; returns its report."""
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        "--model",
        model,
        "--elements",
        str(args.elements),
        "--epochs",
        str(args.epochs),
        "--sorted-multiple",
        str(args.sorted_multiple),
    ]
    if args.methods:
        command += ["--methods", ",".join(args.methods)]
    env = dict(os.environ, KERAS_BACKEND=backend)
    if backend == "tensorflow":
        # INFO logs on, and device_compiler's log of every XLA compilation.
        env.update(TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="device_compiler=1")
    else:
        env.update(TF_CPP_MIN_LOG_LEVEL="3")
    output = subprocess.run(command, stdout=subprocess.PIPE, text=True, env=env)
    if output.returncode:
        raise RuntimeError(f"worker {backend}/{model} failed ({output.returncode})")
    return json.loads(output.stdout.strip().splitlines()[-1])


def ratios(report, sorted_multiple):
    methods = report["methods"]

    def first(name):
        return methods[name]["epoch_seconds"][0]

    def last(name):
        return methods[name]["epoch_seconds"][-1]

    bucket = f"BucketBuilder[{NUM_BUCKETS}]"
    few = f"bounded[{FEW_BUCKETS}]"
    result = {
        "first epoch: bounded vs BucketBuilder defaults": first(bucket)
        / first("bounded"),
        "first epoch: bounded vs bucket_by_sequence_length": first(
            "bucket_by_sequence_length"
        )
        / first("bounded"),
        f"first epoch: {few} vs BucketBuilder defaults": first(bucket) / first(few),
        f"first epoch: {few} vs bucket_by_sequence_length": first(
            "bucket_by_sequence_length"
        )
        / first(few),
        "steady epoch: BucketBuilder defaults vs padded_batch": last("padded_batch")
        / last(bucket),
        "steady epoch: bounded vs padded_batch": last("padded_batch") / last("bounded"),
    }
    if "PackedBuilder" in methods:
        result["steady epoch: PackedBuilder vs bounded"] = last("bounded") / last(
            "PackedBuilder"
        )
        result["steady epoch: PackedBuilder vs BucketBuilder defaults"] = last(
            bucket
        ) / last("PackedBuilder")
    return result


def format_training(report):
    methods = report["methods"]
    padded = methods["padded_batch"]["epoch_seconds"]
    bbsl = methods["bucket_by_sequence_length"]["epoch_seconds"]
    epochs = len(padded)
    later = ", ".join(f"ep {k + 1}" for k in range(1, epochs))
    lines = [
        f"{report['backend']} (jit_compile={report['jit_compile']}), {report['model']}",
        "",
        f"| method | pad eff | shapes ep 1 | compiles ep 1 | new compiles {later} | "
        "planned new shapes | compile s | 1st epoch s | 1st vs bbsl | "
        f"ep {epochs} s | ep {epochs} vs padded_batch |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, m in methods.items():
        planned = m["planned_new_shapes"]
        seconds = m["epoch_seconds"]
        lines.append(
            f"| {name} | {m['efficiency']:.3f} | {m['shapes_epoch_1']} | "
            f"{m['compiles'][0]} | {', '.join(map(str, m['compiles'][1:]))} | "
            f"{'-' if planned is None else ', '.join(map(str, planned))} | "
            f"{sum(m['compile_seconds']):.0f} | {seconds[0]:.1f} | "
            f"{bbsl[0] / seconds[0]:.2f}x | {seconds[-1]:.2f} | "
            f"{padded[-1] / seconds[-1]:.2f}x |"
        )
    return "\n".join(lines)


def evaluate_targets(padding_rows, reports, num_buckets):
    targets = []
    for row in padding_rows:
        if row["variant"] != "pad_to_bucket":
            continue
        for remainder in REMAINDERS[1:]:
            targets.append(
                {
                    "target": f"filler-row efficiency loss <= {TARGET_FILLER_LOSS} "
                    f"(remainder={remainder!r}, {row['sizing']})",
                    "where": row["workload"],
                    "value": f"{row['loss'][remainder]:.4f}",
                    "passed": row["loss"][remainder] <= TARGET_FILLER_LOSS,
                }
            )
    for report in reports:
        where = f"{report['backend']} {report['model']}"
        bounded = report["methods"]["bounded"]
        targets.append(
            {
                "target": f"bounded: compiles in epoch 1 <= buckets ({num_buckets}), "
                "0 later",
                "where": where,
                "value": ", ".join(map(str, bounded["compiles"])),
                "passed": bounded["compiles"][0] <= num_buckets
                and not any(bounded["compiles"][1:]),
            }
        )
        r = ratios(report, None)
        few = f"bounded[{FEW_BUCKETS}]"
        for key, goal in (
            (
                "first epoch: bounded vs BucketBuilder defaults",
                TARGET_FIRST_EPOCH_SPEEDUP,
            ),
            (
                "first epoch: bounded vs bucket_by_sequence_length",
                TARGET_FIRST_EPOCH_SPEEDUP,
            ),
            (
                f"first epoch: {few} vs BucketBuilder defaults",
                TARGET_FIRST_EPOCH_SPEEDUP,
            ),
            (
                f"first epoch: {few} vs bucket_by_sequence_length",
                TARGET_FIRST_EPOCH_SPEEDUP,
            ),
            (
                "steady epoch: BucketBuilder defaults vs padded_batch",
                TARGET_STEADY_SPEEDUP,
            ),
            ("steady epoch: bounded vs padded_batch", TARGET_STEADY_SPEEDUP),
        ):
            targets.append(
                {
                    "target": f"{key} >= {goal}x",
                    "where": where,
                    "value": f"{r[key]:.2f}x",
                    "passed": r[key] >= goal,
                }
            )
        for key in r:
            if key.startswith("steady epoch: PackedBuilder"):
                targets.append(
                    {
                        "target": f"{key} (reported)",
                        "where": where,
                        "value": f"{r[key]:.2f}x",
                        "passed": None,
                    }
                )
    return targets


def format_targets(targets):
    lines = ["| target | where | value | verdict |", "|---|---|---:|---|"]
    for t in targets:
        verdict = {True: "MET", False: "NOT MET", None: "-"}[t["passed"]]
        lines.append(f"| {t['target']} | {t['where']} | {t['value']} | {verdict} |")
    return "\n".join(lines)


def plot(reports, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(
        1, len(reports), figsize=(5.2 * len(reports), 4.2), squeeze=False
    )
    for ax, report in zip(axes[0], reports, strict=True):
        methods = report["methods"]
        names = list(methods)
        epochs = len(next(iter(methods.values()))["compiles"])
        positions = np.arange(len(names))
        left = np.zeros(len(names))
        for epoch in range(epochs):
            values = np.array([methods[n]["compiles"][epoch] for n in names])
            ax.barh(positions, values, left=left, label=f"epoch {epoch + 1}")
            left += values
        for p, total in zip(positions, left, strict=True):
            ax.text(total, p, f" {total:.0f}", va="center", fontsize=8)
        ax.axvline(NUM_BUCKETS, color="tab:red", linestyle="--", linewidth=1)
        ax.set_xlim(0, max(left.max(), NUM_BUCKETS) * 1.15)
        ax.set_yticks(positions, names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("XLA compiles (stacked by epoch)")
        ax.set_title(f"{report['backend']}, {report['model']}", fontsize=10)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--elements", type=int, default=1000, help="training elements (lognormal)"
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument(
        "--padding-elements",
        type=int,
        default=20_000,
        help="elements per workload of part 1 (the reference workloads: 20 000)",
    )
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument(
        "--sorted-multiple",
        type=int,
        default=16,
        help="pad_to_multiple of the SortedBuilder row",
    )
    parser.add_argument(
        "--methods",
        default="",
        help="comma-separated subset of the methods (the targets need "
        "padded_batch, bucket_by_sequence_length, BucketBuilder[32], bounded)",
    )
    parser.add_argument("--padding-only", action="store_true", help="part 1 only")
    parser.add_argument("--output", help="write the results as JSON here")
    parser.add_argument("--plot", help="save a PNG of compiles per epoch here")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", choices=MODELS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.methods = [m for m in args.methods.split(",") if m]
    if args.epochs < 2:
        parser.error("--epochs must be >= 2 (new compiles in later epochs)")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    started = time.perf_counter()
    log(f"part 1: padding, {args.padding_elements} elements per workload")
    padding_rows = padding_part(args.padding_elements)
    reports = []
    if not args.padding_only:
        for model in [m for m in args.models.split(",") if m]:
            for backend in [b for b in args.backends.split(",") if b]:
                log(f"part 2: {backend} / {model}, {args.elements} elements")
                reports.append(run_worker(backend, model, args))
    targets = evaluate_targets(padding_rows, reports, NUM_BUCKETS)
    wall = time.perf_counter() - started
    print()
    print(format_padding(padding_rows, args.padding_elements))
    for report in reports:
        print(
            f"\nPart 2: {args.elements} lognormal elements, batch {BATCH_SIZE}, ",
            end="",
        )
        print(format_training(report))
        for key, value in ratios(report, args.sorted_multiple).items():
            print(f"- {key}: {value:.2f}x")
    print("\nTargets:\n")
    print(format_targets(targets))
    print(f"\nWall time {wall:.0f} s, {os.cpu_count()} CPU cores.")
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as f:
            json.dump(
                {
                    "command": " ".join([os.path.relpath(sys.executable), *sys.argv]),
                    "settings": vars(args),
                    "machine": {
                        "cpus": os.cpu_count(),
                        "platform": platform.platform(),
                        "python": platform.python_version(),
                    },
                    "padding": padding_rows,
                    "training": reports,
                    "targets": targets,
                    "wall_seconds": wall,
                },
                f,
                indent=2,
            )
    if args.plot and reports:
        plot(reports, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
