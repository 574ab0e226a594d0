"""Sequence packing: efficiency, planning time, Transformer epochs.

On the reference workloads (`workloads.py`: `lognormal`, `bimodal`;
20 000 token-id sequences each) it measures:

- padding efficiency of `PackedBuilder(512)` (best-fit decreasing into rows
  of 512 positions), with no segment limit and with `max_segments_per_row=64`,
  next to `PaddedBuilder(64)` and `BucketBuilder("auto", 16 buckets, 64)`.
  The packed figures are checked by iterating one epoch: the real tokens
  counted from `packed_segment_ids` equal the workload's total and the measured
  efficiency equals `builder.statistics()` exactly;
- planning time of one packed epoch for 1 000 000 `lognormal` lengths:
  `kerasbatch.planning.packing.pack` alone, and `PackedBuilder.adapt` + `plan` (the
  builder packs once more at `adapt` to fix the segment axis);
- the epoch time of a small Transformer encoder classifier trained with
  `model.fit` on the same data (the first `--transformer-elements`, 10 000,
  sequences of each workload, so that the run takes about 5 minutes on 2
  CPU cores) batched three ways: packed rows of 512 (8 rows per batch;
  segment attention mask, positions per sequence, per-segment pooling),
  length buckets and random padded batches (64 sequences per batch; the same
  layers with one segment per row: padding mask, mean over real tokens).
  The model: token + position embeddings (32), one 2-head self-attention
  block with a 64-unit FFN and layer norms, mean pooling, a sigmoid unit;
  Adam, binary cross-entropy averaged over real segments, the same initial
  weights for every method. One warm-up epoch (tracing) and `--epochs` (2)
  timed ones, the methods interleaved epoch by epoch so background load hits
  them alike; the median timed epoch is reported.

Usage:

    .venv/bin/python benchmarks/packing.py --output benchmarks/out/packing.json
    .venv/bin/python benchmarks/packing.py --quick   # 4 000 / 2 000 elements
"""

import argparse
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
from keras import ops  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workloads  # noqa: E402

import kerasbatch  # noqa: E402
from kerasbatch.layers import SegmentAttentionMask, SegmentPooling  # noqa: E402

ROW = 512
VOCAB = 1000
BATCH_SIZE = 64  # sequences per batch, padded and bucketed
ROWS_PER_BATCH = 8  # packed rows per batch: 4 096 positions
PLANNING_ELEMENTS = 1_000_000
TARGET_EFFICIENCY = 0.99
TARGET_PLANNING_SECONDS = 2.0


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def builders():
    """Name → a new builder, for every method compared."""
    return {
        "PackedBuilder(512)": lambda: kerasbatch.PackedBuilder(
            ROW, batch_size=ROWS_PER_BATCH
        ),
        "PackedBuilder(512, max_segments_per_row=64)": lambda: kerasbatch.PackedBuilder(
            ROW, batch_size=ROWS_PER_BATCH, max_segments_per_row=64
        ),
        "BucketBuilder[16]": lambda: kerasbatch.BucketBuilder(
            boundaries="auto", num_buckets=16, batch_size=BATCH_SIZE
        ),
        "PaddedBuilder": lambda: kerasbatch.PaddedBuilder(BATCH_SIZE),
    }


def is_packed(builder):
    return isinstance(builder, kerasbatch.PackedBuilder)


def labels_for(builder, y):
    # Keras' binary cross-entropy averages the last axis: per-segment labels
    # need a trailing axis of 1 to stay per segment.
    return y[:, None] if is_packed(builder) else y


# ------------------------------------------------------------- efficiency
def check_packed_epoch(builder, dataset, lengths):
    """Iterates one epoch; the counted tokens must be the plan's figures."""
    real = padded = 0
    for inputs, _, _ in dataset:
        ids = inputs["packed_segment_ids"].numpy()
        real += int((ids > 0).sum())
        padded += ids.size
    expected = builder.statistics(builder.last_started_epoch)
    ok = real == lengths.sum() and real / padded == expected.padding_efficiency
    return "ok" if ok else f"MISMATCH ({real} tokens, {real / padded})"


def measure_efficiency(name, x, y, lengths):
    rows = []
    for method, make in builders().items():
        builder = make()
        start = time.perf_counter()
        dataset = builder.build(x, labels_for(builder, y))
        build_seconds = time.perf_counter() - start
        stats = builder.statistics(0)
        row = {
            "method": method,
            "efficiency": stats.padding_efficiency,
            "batches": stats.num_batches,
            "shapes": stats.distinct_shapes,
            "build_s": build_seconds,
        }
        if is_packed(builder):
            plan = builder.plan(0)
            row.update(
                rows=plan.num_rows,
                min_rows=int(-(-lengths.sum() // ROW)),
                max_segments=builder.resolved_max_segments,
                check=check_packed_epoch(builder, dataset, lengths),
            )
        rows.append(row)
        log(f"{name} {method}: {stats}")
    return rows


# --------------------------------------------------------------- planning
def measure_planning(repeats):
    rng = np.random.default_rng(0)
    lengths = np.clip(rng.lognormal(3.5, 0.7, PLANNING_ELEMENTS).astype(int), 1, ROW)
    pack_seconds = []
    for seed in range(repeats):
        start = time.perf_counter()
        packing = kerasbatch.planning.packing.pack(
            lengths, ROW, rng=np.random.default_rng(seed)
        )
        pack_seconds.append(time.perf_counter() - start)
    builder = kerasbatch.PackedBuilder(ROW, batch_size=ROWS_PER_BATCH)
    start = time.perf_counter()
    builder.adapt(lengths)
    adapt_seconds = time.perf_counter() - start
    plan_seconds = []
    for epoch in range(repeats):
        start = time.perf_counter()
        builder.plan(epoch)
        plan_seconds.append(time.perf_counter() - start)
    result = {
        "elements": PLANNING_ELEMENTS,
        "pack_s": statistics.median(pack_seconds),
        "adapt_s": adapt_seconds,
        "plan_s": statistics.median(plan_seconds),
        "efficiency": lengths.sum() / (packing.num_rows * ROW),
        "rows": packing.num_rows,
        "max_segments": builder.resolved_max_segments,
    }
    log(f"planning 1M: {result}")
    return result


# ------------------------------------------------------------ transformer
DIM, HEADS = 32, 2


class Encoder(keras.layers.Layer):
    """Token and position embeddings, one self-attention block with FFN."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.tokens = keras.layers.Embedding(VOCAB, DIM)
        self.positions = keras.layers.Embedding(ROW, DIM)
        self.attention = keras.layers.MultiHeadAttention(HEADS, DIM // HEADS)
        self.norm1 = keras.layers.LayerNormalization()
        self.hidden = keras.layers.Dense(2 * DIM, activation="relu")
        self.out = keras.layers.Dense(DIM)
        self.norm2 = keras.layers.LayerNormalization()
        self.mask = SegmentAttentionMask()

    def call(self, tokens, segment_ids, positions):
        x = self.tokens(tokens) + self.positions(positions)
        attended = self.attention(x, x, attention_mask=self.mask(segment_ids))
        x = self.norm1(x + attended)
        return self.norm2(x + self.out(self.hidden(x)))


def packed_model(max_segments):
    inputs = {
        name: keras.Input((ROW,), dtype="int32", name=name)
        for name in ("x", "packed_segment_ids", "positions")
    }
    features = Encoder()(inputs["x"], inputs["packed_segment_ids"], inputs["positions"])
    pooled = SegmentPooling(max_segments)(features, inputs["packed_segment_ids"])
    return keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(pooled))


def padded_model():
    """The same layers on padded batches: one segment (id 1) per row."""
    tokens = keras.Input((None,), dtype="int32")
    segment_ids = ops.cast(ops.not_equal(tokens, 0), "int32")
    positions = ops.cumsum(ops.ones_like(tokens), axis=1) - 1
    features = Encoder()(tokens, segment_ids, positions)
    pooled = SegmentPooling(1)(features, segment_ids)[:, 0]
    return keras.Model(tokens, keras.layers.Dense(1, activation="sigmoid")(pooled))


class EpochTimer(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds = time.perf_counter() - self.start


def measure_transformer(name, x, y, lengths, epochs):
    methods = {}
    for method, make in builders().items():
        if "max_segments" in method:
            continue
        builder = make()
        dataset = builder.build(x, labels_for(builder, y))
        keras.utils.set_random_seed(0)
        model = (
            packed_model(builder.resolved_max_segments)
            if is_packed(builder)
            else padded_model()
        )
        # The mean over real segments: empty segment slots weigh 0 and must
        # not dilute the loss (Keras' default divides by all slots).
        loss = keras.losses.BinaryCrossentropy(reduction="mean_with_sample_weight")
        model.compile(
            optimizer=keras.optimizers.Adam(1e-3),
            loss=loss,
            weighted_metrics=["accuracy"] if is_packed(builder) else None,
            metrics=None if is_packed(builder) else ["accuracy"],
        )
        methods[method] = {"builder": builder, "dataset": dataset, "model": model}
    for state in methods.values():
        state["seconds"] = []
    for epoch in range(1 + epochs):  # epoch 0: warm-up (tracing)
        order = list(methods)
        order = order[epoch % len(order) :] + order[: epoch % len(order)]
        for method in order:
            state = methods[method]
            timer = EpochTimer()
            history = state["model"].fit(
                state["dataset"],
                initial_epoch=epoch,
                epochs=epoch + 1,
                verbose=0,
                shuffle=False,
                callbacks=[
                    kerasbatch.callbacks.EpochReshuffle(state["builder"]),
                    kerasbatch.callbacks.PaddingEfficiency(state["builder"]),
                    timer,
                ],
            )
            state["seconds"].append(timer.seconds)
            state["loss"] = history.history["loss"][-1]
            state["accuracy"] = history.history["accuracy"][-1]
            log(f"{name} {method} epoch {epoch}: {timer.seconds:.2f} s")
    rows = []
    for method, state in methods.items():
        timed = state["seconds"][1:]
        seconds = statistics.median(timed) if timed else state["seconds"][0]
        rows.append(
            {
                "method": method,
                "first_s": state["seconds"][0],
                "epoch_s": seconds,
                "tokens_per_s": float(lengths.sum() / seconds),
                "efficiency": state["builder"].statistics().padding_efficiency,
                "loss": state["loss"],
                "accuracy": state["accuracy"],
            }
        )
    reference = next(r["epoch_s"] for r in rows if r["method"] == "PaddedBuilder")
    for row in rows:
        row["speedup"] = reference / row["epoch_s"]
    return rows


# ----------------------------------------------------------------- report
def print_report(results):
    for name, result in results["workloads"].items():
        print(
            f"\n### {name} ({result['elements']} elements, mean length "
            f"{result['mean_length']:.1f})\n"
        )
        print(
            "| method | pad eff | check | rows (min) | max segs | batches | "
            "shapes | build s |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for row in result["efficiency"]:
            rows = f"{row['rows']} ({row['min_rows']})" if "rows" in row else "-"
            print(
                f"| {row['method']} | {row['efficiency']:.4f} | "
                f"{row.get('check', '-')} | {rows} | {row.get('max_segments', '-')} | "
                f"{row['batches']} | {row['shapes']} | {row['build_s']:.3f} |"
            )
        if result["transformer"]:
            print(
                f"\nTransformer on the first {result['transformer_elements']} elements:"
            )
            print(
                "\n| method | pad eff | 1st epoch s | epoch s | tokens/s | "
                "vs PaddedBuilder | loss | accuracy |"
            )
            print("|---|---:|---:|---:|---:|---:|---:|---:|")
            for row in result["transformer"]:
                print(
                    f"| {row['method']} | {row['efficiency']:.3f} | "
                    f"{row['first_s']:.1f} | {row['epoch_s']:.2f} | "
                    f"{row['tokens_per_s']:,.0f} | {row['speedup']:.2f}x | "
                    f"{row['loss']:.3f} | {row['accuracy']:.3f} |"
                )
    planning = results["planning"]
    print(
        f"\nPlanning {planning['elements']:,} lognormal lengths into rows of {ROW}: "
        f"pack {planning['pack_s']:.3f} s, PackedBuilder.adapt "
        f"{planning['adapt_s']:.3f} s, plan (one epoch) {planning['plan_s']:.3f} s; "
        f"efficiency {planning['efficiency']:.4f}, {planning['rows']} rows, "
        f"max {planning['max_segments']} segments per row."
    )
    print("\nTargets:")
    for target, passed in results["targets"].items():
        print(f"- {target}: {'PASS' if passed else 'FAIL'}")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--num-elements", type=int, default=workloads.NUM_ELEMENTS)
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs")
    parser.add_argument(
        "--transformer-elements",
        type=int,
        default=10_000,
        help="train the Transformer on the first N elements of each workload",
    )
    parser.add_argument(
        "--transformer-workloads",
        default="lognormal,bimodal",
        help="workloads to train the Transformer on ('' for none)",
    )
    parser.add_argument("--planning-repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--output", help="write the results as JSON here")
    args = parser.parse_args(argv)
    if args.quick:
        args.num_elements, args.epochs, args.planning_repeats = 4000, 1, 1
        args.transformer_elements = 2000
    return args


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    results = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "tensorflow": tf.__version__,
            "keras": keras.__version__,
            "numpy": np.__version__,
        },
        "settings": vars(args),
        "workloads": {},
    }
    train_on = [w for w in args.transformer_workloads.split(",") if w]
    for name in workloads.WORKLOADS:
        x, y, lengths = workloads.sequences(name, args.num_elements, VOCAB)
        subset = workloads.sequences(name, args.transformer_elements, VOCAB)
        results["workloads"][name] = {
            "elements": len(x),
            "mean_length": float(lengths.mean()),
            "transformer_elements": len(subset[0]),
            "efficiency": measure_efficiency(name, x, y, lengths),
            "transformer": (
                measure_transformer(name, *subset, args.epochs)
                if name in train_on
                else []
            ),
        }
    results["planning"] = measure_planning(args.planning_repeats)
    packed = [
        row
        for result in results["workloads"].values()
        for row in result["efficiency"]
        if row["method"] == "PackedBuilder(512)"
    ]
    results["targets"] = {
        f"PackedBuilder(512) padding efficiency >= {TARGET_EFFICIENCY} on both "
        "workloads": all(row["efficiency"] >= TARGET_EFFICIENCY for row in packed),
        "packed epochs check out (tokens exactly once, exact statistics)": all(
            row["check"] == "ok" for row in packed
        ),
        f"planning {PLANNING_ELEMENTS:,} sequences < {TARGET_PLANNING_SECONDS} s": (
            results["planning"]["plan_s"] < TARGET_PLANNING_SECONDS
        ),
    }
    results["wall_s"] = time.perf_counter() - started
    print_report(results)
    print(f"\nWall time {results['wall_s']:.0f} s.")
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as f:
            json.dump(results, f, indent=2, default=float)


if __name__ == "__main__":
    main()
