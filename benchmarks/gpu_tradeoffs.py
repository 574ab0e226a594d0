"""Batching trade-offs of a Transformer on an accelerator, on any Keras
backend: compiles against padding, and whether the input pipeline keeps up.

One process, the backend of `KERAS_BACKEND` (jax, tensorflow or torch). A
Transformer encoder with a per-token task is trained for `--epochs` epochs on
lognormal lengths (`workloads.draw_lognormal_lengths` with the mean of
`--mean-length`, 55 as in the H200 run of `RESULTS.md`; 42 is the reference
`lognormal` workload's),
clipped to `[1, --max-len]`, token ids in `[1, 1000)`, batched six ways
(`--rows`, all at `--batch-size` 64 unless said):

- `padded`: tf.data `padded_batch` with `padded_shapes=[max_len]` (what JAX
  users do: one shape);
- `bbsl`: tf.data `bucket_by_sequence_length` with the boundaries
  [16, 32, 48, 64, 96, 128, 192, 256] and `max_len + 1` (9 buckets in use),
  `pad_to_bucket_boundary=True`, each batch then padded up to a multiple of
  `--pad-to-multiple`;
- `bucket`: `BucketBuilder(num_buckets=8, pad_to_bucket=True,
  remainder="even", pad_to_multiple=--pad-to-multiple)`;
- `budget`: the same with `max_tokens=--max-tokens` (12 rows of `max_len`:
  6144 at 512) instead of a batch size;
- `packed`: `PackedBuilder(max_len, batch_size=--packed-rows (8),
  remainder="even")`: rows with segment ids and positions, one shape;
- `longest`: tf.data `padded_batch` to each batch's longest, counted only
  (its shapes per epoch, not trained: it compiles one shape per distinct
  batch length, about 160 at full size).

`--pad-to-multiple` (64, as in the H200 run) pads the bucketed rows'
lengths to multiples of 64; every padding query then has a fully masked
attention row, which gave a NaN loss where cuDNN flash attention ran.

The model (`--size full`, the default where the backend sees a GPU): token +
position embeddings, 4 encoder blocks of d=256 with 4 heads and an FFN of
1024, `keras.layers.MultiHeadAttention` given
`kerasbatch.layers.SegmentAttentionMask` (segment ids of packed rows; 1 for
real tokens and 0 for padding otherwise), per-token logits of 16 classes (the
target is the token id mod 16), `mixed_bfloat16` on a GPU (float32 on CPU),
`SparseCategoricalCrossentropy(from_logits=True,
reduction="mean_with_sample_weight")` weighed by the per-token sample weights
(the builders' `output_mask=True` / packed weights; ones padded with zeros for
tf.data). Adam 1e-3. Every row starts from the same initial weights; the rows
are interleaved epoch by epoch (round k starts at row k) so that background
load hits them alike; the cheap rows come first in round 1, so a run cut short
still gives figures. `--size smoke` (the default on CPU): 512 elements of at
most 64 tokens, 2 epochs, d=32, 1 block of 2 heads, FFN 64: about a minute on
2 CPU cores.

Recorded per row: padding efficiency (the builder's plan, and counted by
iterating one epoch; tf.data rows counted), distinct shapes in epoch 1 and new
ones later (planned by `batch_shapes` for the builders, counted for tf.data),
compiles in epoch 1 and new ones later with their seconds (JAX: traces of
the train step, seconds of `jax.monitoring` backend-compile events;
TensorFlow: `jit_compile=True`, XLA compilations from TensorFlow's
`device_compiler` log; torch: none), the first and the steady (last) epoch's
seconds, real tokens/s and steps/s in steady state, milliseconds per step,
the input pipeline's batches/s alone (one epoch iterated as numpy, no model)
and every epoch's loss. A line fitted through the rows' steady epochs
(seconds = a x padded positions + b x steps) gives the per-step overhead b.
Then `kerasbatch.tuner.CompileCost.measure` is timed on a fresh model for the
`bucket` setting; its seconds per shape, per position and per step are printed,
with the training time it estimates for every builder row next to the measured
one.

A NaN or inf loss is shown in the table; the script then exits with status 3
unless `--allow-nan`. `--time-budget` seconds (default 330 at full size,
counted from the end of the imports) stops starting work that would not end
in time (estimated from the planned shapes and the seconds per compile seen so
far); the JSON of `--output` is rewritten after every epoch of every row, so a
cut run leaves its figures. At the 6.5 s per shape that the H200 run saw
with JAX, the full size's 30 to 35 compiles should take about 4 of
its 5 minutes (an estimate: this script has not run on a GPU yet).

Usage:

    # CPU smoke run: about 50 s on 2 cores on JAX and TensorFlow, 15 s on torch
    KERAS_BACKEND=jax .venv/bin/python benchmarks/gpu_tradeoffs.py --size smoke \\
        --output benchmarks/out/gpu_tradeoffs_smoke_jax.json
    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/gpu_tradeoffs.py --size smoke

    # full size on a machine with a GPU (TensorFlow, and JAX with CUDA support)
    KERAS_BACKEND=jax python benchmarks/gpu_tradeoffs.py --size full \\
        --output benchmarks/out/gpu_tradeoffs_jax.json
    # torch (per-step overhead): KERAS_BACKEND=torch ... --size full
"""

import argparse
import json
import math
import os
import platform
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import compile_counts  # noqa: E402  (standard library only at import)
import workloads  # noqa: E402  (numpy only)

log = compile_counts.log

VOCAB = 1000
CLASSES = 16  # the per-token target: token id mod CLASSES
BBSL_BOUNDARIES = [16, 32, 48, 64, 96, 128, 192, 256]
NUM_BUCKETS = 8
#: The default token budget in rows of `max_len` (6144 at 512).
BUDGET_ROWS = 12
SEED = 0
NAN_EXIT_STATUS = 3

ROWS = ("padded", "packed", "bucket", "budget", "bbsl", "longest")
TRAINED = ROWS[:-1]
BUILDER_ROWS = ("packed", "bucket", "budget")

SIZES = {
    "full": {
        "elements": 16_384,
        "epochs": 3,
        "d_model": 256,
        "layers": 4,
        "heads": 4,
        "ffn": 1024,
        "max_len": 512,
        "batch_size": 64,
        "packed_rows": 8,
        "time_budget": 330.0,
    },
    "smoke": {
        "elements": 512,
        "epochs": 2,
        "d_model": 32,
        "layers": 1,
        "heads": 2,
        "ffn": 64,
        # Shorter rows and smaller batches: fewer distinct shapes to compile
        # (2 to 6 s each for this model on 2 CPU cores) and cheaper steps;
        # rows of 64, one --pad-to-multiple, leave 11 shapes to train, where
        # 128 left 17.
        "max_len": 64,
        "batch_size": 8,
        "packed_rows": 4,
        "time_budget": None,
    },
}
#: Seconds per compiled shape assumed by `--time-budget` until one is seen
#: (the 4-layer Transformer on JAX with an H200).
GUESSED_SECONDS_PER_SHAPE = 6.5


# ------------------------------------------------------------------- setup
def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--size",
        choices=("auto", "smoke", "full"),
        default="auto",
        help="defaults of the settings below: full where the backend sees a "
        "GPU, else smoke (--small is --size smoke)",
    )
    parser.add_argument("--small", action="store_true", help="--size smoke")
    for name, kind, what in (
        ("elements", int, "sequences (full 16384, smoke 512)"),
        ("epochs", int, "epochs per row; the last is the steady one (3, 2)"),
        ("d-model", int, "model width (256, 32)"),
        ("layers", int, "encoder blocks (4, 1)"),
        ("heads", int, "attention heads (4, 2)"),
        ("ffn", int, "FFN units (1024, 64)"),
        ("time-budget", float, "seconds; 0 for none (full 330, smoke none)"),
    ):
        parser.add_argument(f"--{name}", type=kind, help=what)
    parser.add_argument("--batch-size", type=int, help="(64, 8)")
    parser.add_argument("--max-len", type=int, help="longest sequence (512, 64)")
    parser.add_argument(
        "--mean-length", type=float, default=55.0, help="of the lognormal lengths"
    )
    parser.add_argument(
        "--max-tokens", type=int, help=f"token budget (default {BUDGET_ROWS} x max-len)"
    )
    parser.add_argument("--packed-rows", type=int, help="rows per packed batch (8, 4)")
    parser.add_argument(
        "--pad-to-multiple",
        type=int,
        default=64,
        help="pad the bucketed rows (bbsl, bucket, budget) to multiples of this",
    )
    parser.add_argument(
        "--rows", default=",".join(ROWS), help=f"comma-separated, of {list(ROWS)}"
    )
    parser.add_argument(
        "--dtype-policy", help="default: mixed_bfloat16 on a GPU, float32 otherwise"
    )
    parser.add_argument("--reduction", default="mean_with_sample_weight")
    parser.add_argument(
        "--jit-compile",
        choices=("auto", "true", "false"),
        default="auto",
        help="model.compile's jit_compile; auto: True on TensorFlow (XLA), "
        "Keras' default elsewhere",
    )
    parser.add_argument(
        "--no-measure", action="store_true", help="skip CompileCost.measure"
    )
    parser.add_argument(
        "--allow-nan", action="store_true", help="exit 0 despite a NaN loss"
    )
    parser.add_argument("--output", help="write the results as JSON here")
    args = parser.parse_args(argv)
    if args.small:
        args.size = "smoke"
    args.rows = [r for r in args.rows.split(",") if r]
    unknown = set(args.rows) - set(ROWS)
    if unknown:
        parser.error(f"unknown rows {sorted(unknown)}; valid: {list(ROWS)}")
    return args


def resolve_size(args, has_gpu):
    """Fills the settings left None from the size's defaults."""
    if args.size == "auto":
        args.size = "full" if has_gpu else "smoke"
    for key, value in SIZES[args.size].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if not args.time_budget:
        args.time_budget = None
    if args.max_tokens is None:
        args.max_tokens = BUDGET_ROWS * args.max_len
    if args.epochs < 2:
        raise SystemExit("--epochs must be >= 2 (a first and a steady epoch)")
    if args.d_model % args.heads:
        raise SystemExit("--d-model must be a multiple of --heads")
    if args.max_len % args.pad_to_multiple:
        raise SystemExit("--max-len must be a multiple of --pad-to-multiple")


def prepare_backend():
    """Sets TensorFlow's logging before anything imports it; returns
    `(backend, XLA log or None)`. On TensorFlow stderr goes to a file that
    `device_compiler` logs every XLA compilation to (`compile_counts.XlaLog`)."""
    backend = os.environ.get("KERAS_BACKEND", "tensorflow")
    if backend == "tensorflow":
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
        os.environ.setdefault("TF_CPP_VMODULE", "device_compiler=1")
        return backend, compile_counts.XlaLog()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return backend, None


def import_libraries(backend):
    """Keras first (TensorFlow imported before Keras crashed torch with triton)."""
    import keras
    import numpy as np
    import tensorflow as tf

    if backend != "tensorflow":
        tf.config.set_visible_devices([], "GPU")  # tf.data only
    import kerasbatch

    return keras, np, tf, kerasbatch


def device_of(backend):
    """`(description, has a GPU)` of the backend's first device."""
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        return f"{device} ({device.device_kind})", device.platform == "gpu"
    if backend == "torch":
        import torch

        if torch.cuda.is_available():
            return f"cuda:0 ({torch.cuda.get_device_name(0)})", True
        return "cpu", False
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    return (str(gpus[0]) if gpus else "cpu"), bool(gpus)


def versions(backend):
    import keras
    import numpy as np
    import tensorflow as tf

    result = {
        "keras": keras.__version__,
        "tensorflow": tf.__version__,
        "numpy": np.__version__,
    }
    if backend != "tensorflow":
        result[backend] = __import__(backend).__version__
    return result


# -------------------------------------------------------------------- data
def make_data(args, np):
    """`(x, y, lengths)`: token ids in `[1, VOCAB)`, targets `id % CLASSES`."""
    rng = np.random.default_rng(SEED)
    lengths = workloads.draw_lognormal_lengths(
        rng,
        args.elements,
        mu=workloads.lognormal_mu(args.mean_length),
        max_length=args.max_len,
    ).astype(np.int64)
    tokens = rng.integers(1, VOCAB, int(lengths.sum()), dtype=np.int32)
    x = np.split(tokens, np.cumsum(lengths)[:-1])
    y = [(s % CLASSES).astype(np.int32) for s in x]
    return x, y, lengths


def bbsl_boundaries(max_len):
    """`BBSL_BOUNDARIES` below `max_len`, then `max_len + 1`: with
    `pad_to_bucket_boundary` every bucket pads to its boundary less one, so
    the last bucket in use pads to `max_len`."""
    return [b for b in BBSL_BOUNDARIES if b < max_len] + [max_len + 1]


def describe(name, args):
    """What a row's batches are, with its settings."""
    multiple = f", pad_to_multiple={args.pad_to_multiple}"
    bucketed = (
        f"num_buckets={NUM_BUCKETS}, pad_to_bucket=True, remainder='even'{multiple}"
    )
    return {
        "padded": f"`padded_batch` to {args.max_len}",
        "packed": f"`PackedBuilder({args.max_len}, batch_size={args.packed_rows}, "
        "remainder='even')`",
        "bucket": f"`BucketBuilder({bucketed})`",
        "budget": f"`BucketBuilder({bucketed}, max_tokens={args.max_tokens})`",
        "bbsl": f"`bucket_by_sequence_length`, {len(bbsl_boundaries(args.max_len))} "
        f"buckets, `pad_to_bucket_boundary`{multiple}",
        "longest": "`padded_batch` to each batch's longest (counted, not trained)",
    }[name]


def round_up(value, multiple):
    return -(-value // multiple) * multiple


def tf_source(tf, np, x, y, lengths):
    """Shuffled `(tokens, targets, weights)` of dense int32 / float32 `(T,)`;
    reshuffled on every iteration (every `fit` epoch)."""

    def ragged(values):
        return tf.RaggedTensor.from_row_lengths(values, lengths)

    weights = np.ones(int(lengths.sum()), np.float32)
    dataset = tf.data.Dataset.from_tensor_slices(
        (ragged(np.concatenate(x)), ragged(np.concatenate(y)), ragged(weights))
    )
    # Slices of a RaggedTensor are ragged; the identity map makes them dense.
    dataset = dataset.map(lambda *e: e, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.shuffle(len(lengths), seed=SEED, reshuffle_each_iteration=True)


def make_row(name, args, x, y, lengths, libraries):
    """`(dataset, builder)` of a row; builder None for tf.data."""
    keras, np, tf, kerasbatch = libraries
    if name in BUILDER_ROWS:
        if name == "packed":
            builder = kerasbatch.PackedBuilder(
                args.max_len, batch_size=args.packed_rows, remainder="even", seed=SEED
            )
        else:
            sizing = (
                {"max_tokens": args.max_tokens}
                if name == "budget"
                else {"batch_size": args.batch_size}
            )
            builder = kerasbatch.BucketBuilder(
                num_buckets=NUM_BUCKETS,
                pad_to_bucket=True,
                remainder="even",
                pad_to_multiple=args.pad_to_multiple,
                output_mask=True,
                seed=SEED,
                **sizing,
            )
        return builder.build(x, y), builder
    source = tf_source(tf, np, x, y, lengths)
    if name == "padded":
        shapes = ([args.max_len],) * 3
        dataset = source.padded_batch(args.batch_size, padded_shapes=shapes)
    elif name == "longest":
        dataset = source.padded_batch(args.batch_size)
    else:  # bbsl
        boundaries = bbsl_boundaries(args.max_len)
        dataset = source.bucket_by_sequence_length(
            lambda tokens, targets, weights: tf.shape(tokens)[0],
            boundaries,
            [args.batch_size] * (len(boundaries) + 1),
            pad_to_bucket_boundary=True,
        )
        multiple = args.pad_to_multiple
        if multiple > 1:

            def pad_to_multiple(*batch):
                length = tf.shape(batch[0])[1]
                extra = (multiple - length % multiple) % multiple
                return tuple(tf.pad(t, [[0, 0], [0, extra]]) for t in batch)

            dataset = dataset.map(pad_to_multiple)
        # group_by_window loses the cardinality; it is known, and Keras needs
        # it to run every epoch in full (it fixes the step count after the
        # first).
        bucket = np.searchsorted(boundaries, lengths, side="right")
        counts = np.bincount(bucket, minlength=len(boundaries) + 1)
        batches = int(np.ceil(counts / args.batch_size).sum())
        dataset = dataset.apply(tf.data.experimental.assert_cardinality(batches))
    return dataset.prefetch(tf.data.AUTOTUNE), None


def bbsl_efficiency(args, np, lengths):
    """The exact padding efficiency of the `bbsl` row: every element padded
    to its bucket's boundary less one, rounded up to `--pad-to-multiple`."""
    boundaries = np.array(bbsl_boundaries(args.max_len))
    padded = boundaries[np.searchsorted(boundaries, lengths, side="right")] - 1
    padded = -(-padded // args.pad_to_multiple) * args.pad_to_multiple
    return float(lengths.sum() / padded.sum())


# ---------------------------------------------------------------- pipeline
def count_epochs(dataset, epochs, np):
    """Iterates `epochs` epochs as numpy: real and padded positions of the
    first, distinct shapes of the first and new ones in each later epoch.
    Real positions are those of non-zero sample weight: filler rows (of
    `remainder="even"`) may hold copies of real tokens, weighted 0."""
    seen, new, first = set(), [], None
    for _ in range(epochs):
        real = padded = batches = 0
        shapes = set()
        for _, _, weights in dataset.as_numpy_iterator():
            real += int(np.count_nonzero(weights))
            padded += weights.size
            batches += 1
            shapes.add(weights.shape)
        if first is None:
            first = {"real": real, "padded": padded, "batches": batches}
        new.append(len(shapes - seen))
        seen |= shapes
    return first, new


def pipeline_rate(dataset):
    """`(batches/s, seconds)` of one epoch iterated as numpy, no model."""
    start = time.perf_counter()
    batches = sum(1 for _ in dataset.as_numpy_iterator())
    seconds = time.perf_counter() - start
    return batches / seconds, seconds


def planned_shapes(builder, epochs):
    """New distinct shapes `batch_shapes` plans in each epoch."""
    seen, new = set(), []
    for epoch in range(epochs):
        shapes = {tuple(sorted(s.items())) for s in builder.batch_shapes(epoch)}
        new.append(len(shapes - seen))
        seen |= shapes
    return new


def describe_row(name, dataset, builder, args, lengths, np):
    """The row's padding and shape figures, before training."""
    row = {"description": describe(name, args), "trained": name in TRAINED}
    counted, counted_new = count_epochs(dataset, 1 if builder else args.epochs, np)
    row["real_positions"] = counted["real"]
    row["padded_positions"] = counted["padded"]
    row["batches"] = counted["batches"]
    row["efficiency_counted"] = counted["real"] / counted["padded"]
    row["all_tokens_fed"] = counted["real"] == int(lengths.sum())
    if builder is not None:
        counted_epoch = builder.last_started_epoch
        stats = builder.statistics(0)
        row["builder"] = {
            "class": type(builder).__name__,
            "config": builder.get_config(),
        }
        row["efficiency"] = stats.padding_efficiency
        row["counted_epoch"] = counted_epoch
        row["efficiency_plan_of_counted_epoch"] = builder.statistics(
            counted_epoch
        ).padding_efficiency
        row["new_shapes"] = planned_shapes(builder, args.epochs)
        row["shapes_source"] = "batch_shapes"
        row["shapes_epoch_1_counted"] = counted_new[0]
    else:
        row["efficiency"] = row["efficiency_counted"]
        row["new_shapes"] = counted_new
        row["shapes_source"] = "counted"
    row["pipeline_batches_per_s"], row["pipeline_seconds"] = pipeline_rate(dataset)
    return row


# ------------------------------------------------------------------- model
def build_model(args, libraries, packed, pos_size):
    """The Transformer encoder; packed rows feed segment ids and positions."""
    keras, _, _, kerasbatch = libraries
    from keras import layers, ops

    from kerasbatch.layers import SegmentAttentionMask

    keras.utils.set_random_seed(SEED)
    tokens = keras.Input((None,), dtype="int32", name="x")
    if packed:
        segment_ids = keras.Input((None,), dtype="int32", name="packed_segment_ids")
        positions = keras.Input((None,), dtype="int32", name="positions")
        inputs = {
            "x": tokens,
            "packed_segment_ids": segment_ids,
            "positions": positions,
        }
    else:  # one segment per row: 1 for real tokens (ids >= 1), 0 for padding
        segment_ids = ops.cast(ops.not_equal(tokens, 0), "int32")
        positions = ops.cumsum(ops.ones_like(tokens), axis=1) - 1
        inputs = tokens
    h = layers.Embedding(VOCAB, args.d_model)(tokens)
    h = h + layers.Embedding(pos_size, args.d_model)(positions)
    mask = SegmentAttentionMask()(segment_ids)
    for _ in range(args.layers):
        attended = layers.MultiHeadAttention(args.heads, args.d_model // args.heads)(
            h, h, attention_mask=mask
        )
        h = layers.LayerNormalization()(h + attended)
        hidden = layers.Dense(args.ffn, activation="relu")(h)
        h = layers.LayerNormalization()(h + layers.Dense(args.d_model)(hidden))
    logits = layers.Dense(CLASSES, dtype="float32")(h)
    return keras.Model(inputs, logits)


def compile_model(model, args, keras, backend):
    if args.jit_compile == "auto":
        jit_compile = True if backend == "tensorflow" else "auto"
    else:
        jit_compile = args.jit_compile == "true"
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=args.reduction
        ),
        jit_compile=jit_compile,
    )
    return model


class Models:
    """Fresh compiled models, all starting from one set of initial weights."""

    def __init__(self, args, libraries, backend):
        self.args, self.libraries, self.backend = args, libraries, backend
        self.pos_size = round_up(args.max_len, args.pad_to_multiple)
        self.initial = build_model(args, libraries, False, self.pos_size).get_weights()

    def fresh(self, packed):
        model = build_model(self.args, self.libraries, packed, self.pos_size)
        model.set_weights(self.initial)
        return compile_model(model, self.args, self.libraries[0], self.backend)


# ---------------------------------------------------------------- compiles
class CompileMeter:
    """Compiles and their seconds so far, per backend: JAX traces of each
    model's train step and backend-compile seconds; TensorFlow's XLA log;
    nothing on torch."""

    def __init__(self, backend, xla_log):
        self.backend, self.xla_log = backend, xla_log
        self.jax = compile_counts.JaxCompiles() if backend == "jax" else None

    def watch(self, model):
        """A `TraceCounter` on the model (JAX: one train-step trace per compile)."""
        return compile_counts.TraceCounter(model) if self.jax else None

    def read(self, traces=None):
        """`(compiles, seconds, all backend compiles)`; None on torch."""
        if self.jax is not None:
            count, seconds = self.jax.compiles()
            return (len(traces.shapes) if traces else count), seconds, count
        if self.xla_log is not None:
            count, seconds = self.xla_log.compiles()
            return count, seconds, count
        return None


def difference(after, before):
    if after is None:
        return None
    return tuple(a - b for a, b in zip(after, before, strict=True))


# ---------------------------------------------------------------- training
class Run:
    """The report of the run, written to `--output` after every step of it."""

    def __init__(self, args, backend, device, has_gpu):
        self.args, self.started = args, time.perf_counter()
        self.report = {
            "command": " ".join([os.path.relpath(sys.executable), *sys.argv]),
            "settings": {k: v for k, v in vars(args).items()},
            "backend": backend,
            "device": device,
            "gpu": has_gpu,
            "machine": {
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
            },
            "versions": versions(backend),
            "status": "running",
            "rows": {},
        }

    def elapsed(self):
        return time.perf_counter() - self.started

    def save(self):
        self.report["wall_seconds"] = self.elapsed()
        if self.args.output:
            path = os.path.abspath(self.args.output)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path + ".tmp", "w") as f:
                json.dump(self.report, f, indent=2, default=_json_default)
            os.replace(path + ".tmp", path)

    def over_budget(self, seconds):
        budget = self.args.time_budget
        return budget is not None and self.elapsed() + seconds > budget


def seconds_per_compile(rows):
    """Seconds per compile seen so far: compile seconds over compiles (the
    first epochs' seconds where no compile seconds were recorded), or a guess."""
    compiles = seconds = first_epochs = 0
    for row in rows.values():
        if row.get("compiles"):
            compiles += sum(row["compiles"])
            seconds += sum(row["compile_seconds"])
            first_epochs += row["epoch_seconds"][0]
    if not compiles:
        return GUESSED_SECONDS_PER_SHAPE
    return (seconds or first_epochs) / compiles


def expected_seconds(row, epoch, rows, backend):
    """What the next epoch of `row` should take, for the time budget."""
    if row["epoch_seconds"]:
        return row["epoch_seconds"][-1]
    steady = [r["epoch_seconds"][-1] for r in rows.values() if r.get("epoch_seconds")]
    step_part = max(steady) if steady else 0.0
    if backend == "torch":
        return step_part
    return row["new_shapes"][0] * seconds_per_compile(rows) + step_part


def train_rows(run, states, args, libraries, meter, backend):
    _, _, _, kerasbatch = libraries
    from compare_builders import rotated

    rows = run.report["rows"]
    names = [n for n in TRAINED if n in states]
    for epoch in range(args.epochs):
        for name in rotated(names, epoch):
            state, row = states[name], rows[name]
            if row.get("skipped"):
                continue
            expected = expected_seconds(row, epoch, rows, backend)
            if run.over_budget(expected):
                row["skipped"] = (
                    f"time budget: epoch {epoch + 1} expected {expected:.0f} s at "
                    f"{run.elapsed():.0f} s of {args.time_budget:.0f}"
                )
                log(f"{name}: skipped, {row['skipped']}")
                run.save()
                continue
            callbacks = [state["timer"], progress_callback(f"{name} epoch {epoch + 1}")]
            if state["builder"] is not None:
                callbacks.append(kerasbatch.callbacks.EpochReshuffle(state["builder"]))
            before = meter.read(state["traces"])
            history = state["model"].fit(
                state["dataset"],
                epochs=epoch + 1,
                initial_epoch=epoch,
                verbose=0,
                callbacks=callbacks,
            )
            spent = difference(meter.read(state["traces"]), before)
            loss = float(history.history["loss"][-1])
            row["losses"].append(loss)
            row["epoch_seconds"].append(state["timer"].seconds[-1])
            row["steps"].append(state["timer"].steps[-1])
            if spent is not None:
                row["compiles"].append(spent[0])
                row["compile_seconds"].append(spent[1])
                row["backend_compiles"].append(spent[2])
            summarize(row, args)
            compiled = (
                f", {spent[0]} compiles ({spent[1]:.1f} s)" if spent is not None else ""
            )
            log(
                f"{name} epoch {epoch + 1}: {row['epoch_seconds'][-1]:.2f} s, "
                f"{row['steps'][-1]} steps{compiled}, loss {loss:.4f}"
                + ("" if math.isfinite(loss) else "  <-- NOT FINITE")
            )
            run.save()


def progress_callback(label, every=30.0):
    """A callback that logs the steps done every `every` seconds within an
    epoch, so that a long first epoch of compiles shows it is moving."""
    import keras

    class Progress(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.steps, self.start = 0, time.perf_counter()
            self.last = self.start

        def on_train_batch_end(self, batch, logs=None):
            self.steps += 1
            now = time.perf_counter()
            if now - self.last >= every:
                self.last = now
                log(f"  {label}: {self.steps} steps in {now - self.start:.0f} s")

    return Progress()


def summarize(row, args):
    """Steady-state figures from the last epoch run."""
    seconds, steps = row["epoch_seconds"], row["steps"]
    row["first_epoch_s"] = seconds[0]
    row["losses_finite"] = all(math.isfinite(v) for v in row["losses"])
    if len(seconds) < 2:
        return
    row["steady_epoch_s"] = seconds[-1]
    row["real_tokens_per_s"] = row["real_positions"] / seconds[-1]
    row["steps_per_s"] = steps[-1] / seconds[-1]
    row["ms_per_step"] = 1000 * seconds[-1] / steps[-1]


def step_overhead(rows, np):
    """Least squares of the steady epochs: seconds = a x padded positions +
    b x steps, neither negative; b is the per-step overhead."""
    done = [r for r in rows.values() if r.get("steady_epoch_s")]
    if len(done) < 3:
        return None
    design = np.array([[r["padded_positions"], r["steps"][-1]] for r in done], float)
    seconds = np.array([r["steady_epoch_s"] for r in done])
    coefficients = np.linalg.lstsq(design, seconds, rcond=None)[0]
    if (coefficients < 0).any():  # noise: keep the one term that fits alone
        keep = int(np.argmax(coefficients))
        coefficients = np.zeros(2)
        column = design[:, keep]
        coefficients[keep] = column @ seconds / (column @ column)
    per_position, per_step = coefficients
    return {
        "seconds_per_position": float(per_position),
        "ms_per_step": float(1000 * per_step),
        "rows": len(done),
    }


# ----------------------------------------------------------- compile cost
def measure_compile_cost(run, args, libraries, models, meter, x, y, states):
    """Times `CompileCost.measure` on a fresh model for the `bucket` setting."""
    _, _, _, kerasbatch = libraries
    import warnings

    bucket = states.get("bucket")
    if bucket is None:
        return None
    guess = 3 * seconds_per_compile(run.report["rows"]) + 10
    if run.over_budget(guess):
        log(f"CompileCost.measure: skipped, expected {guess:.0f} s over the budget")
        return {"skipped": f"time budget: expected {guess:.0f} s"}
    model = models.fresh(packed=False)
    traces = meter.watch(model)
    before = meter.read(traces)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cost = kerasbatch.tuner.CompileCost.measure(
            model, x, y, builder=bucket["builder"], epochs=args.epochs
        )
    seconds = time.perf_counter() - start
    spent = difference(meter.read(traces), before)
    result = {
        "builder": "bucket",
        "seconds": seconds,
        "seconds_per_shape": cost.seconds_per_shape,
        "seconds_per_position": cost.seconds_per_position,
        "seconds_per_step": cost.seconds_per_step,
        "compiles": None if spent is None else spent[0],
        "compile_seconds": None if spent is None else spent[1],
        # CompileCost's own (stacklevel 2: they name this file).
        "warnings": sorted(
            {str(w.message) for w in caught if w.filename == os.path.abspath(__file__)}
        ),
        "estimates": {},
    }
    for name in BUILDER_ROWS:
        state, row = states.get(name), run.report["rows"].get(name)
        if state is None or not row.get("epoch_seconds"):
            continue
        measured = {
            "measured_s": sum(row["epoch_seconds"]),
            "epochs_measured": len(row["epoch_seconds"]),
        }
        try:
            estimate = cost.estimate(state["builder"])
        except Exception as error:  # noqa: BLE001 (recorded, the run goes on)
            measured["error"] = f"{type(error).__name__}: {error}"
            log(f"CompileCost.estimate({name}) failed: {measured['error']}")
        else:
            measured["estimated_s"] = estimate.training_time
            measured["estimated_compile_s"] = estimate.compile_time
        result["estimates"][name] = measured
    log(
        f"CompileCost.measure: {seconds:.1f} s; seconds_per_shape "
        f"{cost.seconds_per_shape:.3g}, per_position {cost.seconds_per_position:.3g}, "
        f"per_step {cost.seconds_per_step:.3g}"
    )
    return result


# ------------------------------------------------------------------ output
def _json_default(value):
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, tuple | set):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _number(value, spec):
    return "-" if value is None else format(value, spec)


def _series(values):
    return "-" if values is None else ", ".join(map(str, values)) or "-"


def format_table(report):
    rows = report["rows"]
    lines = [
        f"{report['backend']} on {report['device']}, {report['settings']['elements']} "
        f"sequences, batch {report['settings']['batch_size']}, "
        f"{report['settings']['epochs']} epochs",
        "",
        "| batches | pad eff | shapes ep 1 | new shapes later | compiles ep 1 | "
        "new compiles later | compile s | epoch 1 s | steady epoch s | "
        "real tokens/s | steps/s | ms/step | pipeline batches/s | losses |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, r in rows.items():
        compiles = r.get("compiles") or None
        losses = r.get("losses") or []
        loss_text = ", ".join(f"{v:.3f}" for v in losses) or "-"
        if losses and not r["losses_finite"]:
            loss_text += " **NOT FINITE**"
        if r.get("skipped"):
            loss_text += f" ({r['skipped']})"
        if name == "longest":
            loss_text = (
                f"not trained: about {r['estimated_compile_s']:.0f} s of compiles"
                if r.get("estimated_compile_s") is not None
                else "not trained"
            )
        lines.append(
            f"| {name}: {r['description']} | {r['efficiency']:.3f} | "
            f"{r['new_shapes'][0]} | {_series(r['new_shapes'][1:])} | "
            f"{compiles[0] if compiles else '-'} | "
            f"{_series(compiles[1:]) if compiles else '-'} | "
            f"{_number(sum(r['compile_seconds']) if compiles else None, '.1f')} | "
            f"{_number(r.get('first_epoch_s'), '.2f')} | "
            f"{_number(r.get('steady_epoch_s'), '.2f')} | "
            f"{_number(r.get('real_tokens_per_s'), ',.0f')} | "
            f"{_number(r.get('steps_per_s'), '.1f')} | "
            f"{_number(r.get('ms_per_step'), '.1f')} | "
            f"{r['pipeline_batches_per_s']:,.0f} | {loss_text} |"
        )
    overhead = report.get("step_overhead")
    if overhead:
        lines.append(
            f"\nSteady epochs fitted as a x padded positions + b x steps over "
            f"{overhead['rows']} rows: {overhead['ms_per_step']:.2f} ms per step, "
            f"{overhead['seconds_per_position'] * 1e9:.2f} ns per padded position."
        )
    cost = report.get("compile_cost")
    if cost and not cost.get("skipped"):
        lines.append(
            f"\nCompileCost.measure on a fresh model, `bucket` setting: "
            f"{cost['seconds']:.1f} s; seconds_per_shape "
            f"{cost['seconds_per_shape']:.3g}, seconds_per_position "
            f"{cost['seconds_per_position']:.3g}, seconds_per_step "
            f"{cost['seconds_per_step']:.3g}"
            + (f"; {cost['compiles']} compiles" if cost["compiles"] is not None else "")
        )
        for name, e in cost["estimates"].items():
            if "error" in e:
                lines.append(f"- {name}: CompileCost.estimate failed: {e['error']}")
                continue
            lines.append(
                f"- {name}: estimated {e['estimated_s']:.1f} s "
                f"({e['estimated_compile_s']:.1f} s compiling) for "
                f"{report['settings']['epochs']} epochs, measured "
                f"{e['measured_s']:.1f} s over {e['epochs_measured']}"
            )
        for warning in cost["warnings"]:
            lines.append(f"- warning: {warning}")
    elif cost:
        lines.append(f"\nCompileCost.measure: skipped ({cost['skipped']})")
    return "\n".join(lines)


# -------------------------------------------------------------------- main
def run_benchmark(args, backend, xla_log):
    libraries = import_libraries(backend)
    keras, np, tf, kerasbatch = libraries
    if keras.backend.backend() != backend:
        raise SystemExit(
            f"KERAS_BACKEND={backend} but Keras runs {keras.backend.backend()}"
        )
    device, has_gpu = device_of(backend)
    resolve_size(args, has_gpu)
    policy = args.dtype_policy or ("mixed_bfloat16" if has_gpu else "float32")
    args.dtype_policy = policy
    keras.config.set_dtype_policy(policy)
    run = Run(args, backend, device, has_gpu)
    log(
        f"{backend} on {device}: size {args.size}, {args.elements} elements, "
        f"{args.epochs} epochs, d={args.d_model} x {args.layers} layers, {policy}, "
        f"time budget {args.time_budget}"
    )
    x, y, lengths = make_data(args, np)
    run.report["data"] = {
        "elements": len(lengths),
        "real_tokens": int(lengths.sum()),
        "mean_length": float(lengths.mean()),
        "max_length": int(lengths.max()),
    }
    meter = CompileMeter(backend, xla_log)
    models = Models(args, libraries, backend)
    states = {}
    for name in [n for n in ROWS if n in args.rows]:
        dataset, builder = make_row(name, args, x, y, lengths, libraries)
        row = describe_row(name, dataset, builder, args, lengths, np)
        if name == "bbsl":
            row["efficiency_expected"] = bbsl_efficiency(args, np, lengths)
        run.report["rows"][name] = row
        log(
            f"{name}: efficiency {row['efficiency']:.3f}, shapes {row['new_shapes']}, "
            f"{row['batches']} batches, pipeline {row['pipeline_batches_per_s']:.0f} "
            "batches/s"
        )
        if name in TRAINED:
            model = models.fresh(packed=name == "packed")
            from compare_builders import EpochTimer

            states[name] = {
                "dataset": dataset,
                "builder": builder,
                "model": model,
                "traces": meter.watch(model),
                "timer": EpochTimer(),
            }
            row.update(
                losses=[],
                epoch_seconds=[],
                steps=[],
                compiles=[] if meter.read() is not None else None,
                compile_seconds=[],
                backend_compiles=[],
            )
        run.save()
    train_rows(run, states, args, libraries, meter, backend)
    rows = run.report["rows"]
    run.report["step_overhead"] = step_overhead(rows, np)
    if "longest" in rows and backend != "torch":
        rows["longest"]["estimated_compile_s"] = sum(
            rows["longest"]["new_shapes"]
        ) * seconds_per_compile({k: v for k, v in rows.items() if k != "longest"})
    if not args.no_measure:
        run.report["compile_cost"] = measure_compile_cost(
            run, args, libraries, models, meter, x, y, states
        )
    trained = [r for r in rows.values() if r.get("losses")]
    not_finite = [
        n for n, r in rows.items() if r.get("losses") and not r["losses_finite"]
    ]
    run.report["nan_rows"] = not_finite
    run.report["status"] = (
        "time budget" if any(r.get("skipped") for r in rows.values()) else "complete"
    )
    run.save()
    print("\n" + format_table(run.report), flush=True)
    print(
        f"\nWall time {run.elapsed():.0f} s ({len(trained)} rows trained), "
        f"{os.cpu_count()} CPU cores; status: {run.report['status']}.",
        flush=True,
    )
    if not_finite:
        print(f"\nNOT FINITE LOSS in rows: {', '.join(not_finite)}", flush=True)
        if not args.allow_nan:
            return NAN_EXIT_STATUS
    return 0


def main(argv=None):
    args = parse_args(argv)
    backend, xla_log = prepare_backend()
    try:
        return run_benchmark(args, backend, xla_log)
    except BaseException:
        # On TensorFlow stderr is the XLA log file: the traceback goes to stdout.
        if xla_log is not None:
            traceback.print_exc(file=sys.stdout)
            sys.stdout.flush()
        raise


if __name__ == "__main__":
    sys.exit(main())
