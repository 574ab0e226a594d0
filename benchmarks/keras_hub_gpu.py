"""keras-hub models on kerasbatch batches, on a GPU without TensorFlow.

Trains a keras-hub `BertTextClassifier` and a `GPT2CausalLM` (random
weights, built from configs; no preset is downloaded) on the `lognormal`
workload with `kerasbatch.ModelInputs.keras_hub(model)`, on the numpy
`grain` engine (keras-hub's task models fit on tf.data or Grain datasets
only), no TensorFlow needed. For each model and
batching it records:

- the epoch times (the first one holds the compiles) and the losses, which
  must be finite: filler rows (`remainder="pad"`) and padding positions
  must never give a NaN, whatever attention kernel the backend picks;
- the distinct batch shapes (one compile each on JAX);
- the pipeline's own batches/s against the model's steps/s (does it keep
  the accelerator fed?);
- for a few rows: the outputs on the bucketed batch against each text run
  alone (the padding mask is right when they agree).

Batchings: keras-hub's way (every batch padded to `--max-length`),
bucketed (`BucketBuilder`, padded to the bucket bounds), and for the causal
LM packed rows (stock backbone, so packed texts see each other: its speed,
not its outputs).

Run on a machine with a GPU (JAX installed with CUDA support, keras-hub; see
`benchmarks/RESULTS.md`):

    KERAS_BACKEND=jax python benchmarks/keras_hub_gpu.py --output keras_hub_gpu.json

Smoke run on CPU: `--elements 256 --layers 1 --hidden 32 --max-length 128`.
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import keras  # noqa: E402
import keras_hub  # noqa: E402
import workloads  # noqa: E402

import kerasbatch  # noqa: E402
from kerasbatch import ModelInputs, Padding  # noqa: E402


def _arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--elements", type=int, default=8192)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--engine", default="grain", choices=["grain", "python"])
    parser.add_argument("--models", default="bert,gpt2")
    parser.add_argument("--dtype-policy", default="mixed_bfloat16")
    parser.add_argument("--output", default=None)
    parser.add_argument(
        "--time-budget",
        type=float,
        default=None,
        help="seconds: no new row starts after this many",
    )
    return parser.parse_args()


VOCAB = 1000


def _model(name, args):
    options = dict(
        vocabulary_size=VOCAB,
        num_layers=args.layers,
        num_heads=max(1, args.hidden // 64),
        hidden_dim=args.hidden,
        intermediate_dim=4 * args.hidden,
        max_sequence_length=args.max_length,
    )
    keras.utils.set_random_seed(0)
    if name == "bert":
        backbone = keras_hub.models.BertBackbone(**options)
        model = keras_hub.models.BertTextClassifier(backbone, 2, preprocessor=None)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    else:
        backbone = keras_hub.models.GPT2Backbone(**options)
        model = keras_hub.models.GPT2CausalLM(backbone, preprocessor=None)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(loss=loss, optimizer=keras.optimizers.Adam(1e-4))
    return model


def _builders(name, model, args):
    inputs = ModelInputs.keras_hub(model)
    batch = args.batch_size
    builders = {
        "fixed": kerasbatch.PaddedBuilder(
            batch_size=batch,
            padding=Padding(length=args.max_length),
            remainder="pad",
            model_inputs=inputs,
        ),
        "bucket": kerasbatch.BucketBuilder(
            num_buckets=8,
            batch_size=batch,
            pad_to_bucket=True,
            remainder="pad",
            model_inputs=inputs,
        ),
    }
    if name == "gpt2":
        builders["packed"] = kerasbatch.PackedBuilder(
            args.max_length,
            batch_size=max(1, batch // 4),
            remainder="pad",
            model_inputs=inputs,
        )
    return builders


def _pipeline_rate(dataset, seconds=3.0):
    """Batches/s of iterating the built dataset alone (numpy engines)."""
    count, start = 0, time.perf_counter()
    for _ in dataset:
        count += 1
        if time.perf_counter() - start > seconds:
            break
    return count / (time.perf_counter() - start)


def _alone_gap(model, dataset, rows=2):
    """Largest |output on the batch − output alone| over the real positions
    of `rows` rows of the first batch."""
    batch = next(iter(dataset))
    inputs = batch[0]
    outputs = np.asarray(model.predict_on_batch(inputs), np.float32)
    gap = 0.0
    for row in range(rows):
        n = int(np.asarray(inputs["padding_mask"][row]).sum())
        alone = {
            key: np.asarray(value[row : row + 1, :n])
            for key, value in inputs.items()
            if key in ("token_ids", "padding_mask", "segment_ids")
        }
        single = np.asarray(model.predict_on_batch(alone), np.float32)[0]
        mine = outputs[row, :n] if outputs.ndim == 3 else outputs[row]
        single = single[:n] if single.ndim == 2 and outputs.ndim == 3 else single
        gap = max(gap, float(np.abs(mine - single).max()))
    return gap


def main():
    args = _arguments()
    keras.config.set_dtype_policy(args.dtype_policy)
    rng = np.random.default_rng(0)
    x = workloads.draw_lognormal_sequences(
        rng, args.elements, vocab=VOCAB, max_length=args.max_length
    )
    x = [s for s in x if len(s) >= 2]  # a causal LM needs a next token
    labels = rng.integers(0, 2, len(x))
    report = {
        "backend": keras.backend.backend(),
        "devices": [str(d) for d in _devices()],
        "keras": keras.__version__,
        "keras_hub": keras_hub.__version__,
        "python": platform.python_version(),
        "tensorflow_imported": "tensorflow" in sys.modules,
        "args": vars(args),
        "rows": [],
    }
    started = time.perf_counter()
    for name in args.models.split(","):
        first = _model(name, args)  # ModelInputs.keras_hub reads its inputs
        for batching, builder in _builders(name, first, args).items():
            if args.time_budget and time.perf_counter() - started > args.time_budget:
                report["skipped"] = report.get("skipped", []) + [f"{name} {batching}"]
                continue
            model = _model(name, args)
            y = labels if name == "bert" else None
            dataset = builder.build(x, y, engine=args.engine)
            epoch_seconds, losses = [], []
            for _ in range(args.epochs):
                start = time.perf_counter()
                history = model.fit(dataset, epochs=1, verbose=0)
                epoch_seconds.append(time.perf_counter() - start)
                losses += history.history["loss"]
            stats = builder.statistics()
            steps = stats.num_batches
            row = {
                "model": name,
                "batching": batching,
                "epoch_seconds": epoch_seconds,
                "losses": losses,
                "finite": bool(np.isfinite(losses).all()),
                "batches": steps,
                "distinct_shapes": stats.distinct_shapes,
                "padding_efficiency": stats.padding_efficiency,
                "steps_per_second": steps / epoch_seconds[-1],
                "pipeline_batches_per_second": _pipeline_rate(dataset),
            }
            if batching != "packed":
                row["max_gap_to_alone"] = _alone_gap(model, dataset)
            report["rows"].append(row)
            print(json.dumps(row), flush=True)
            _write(report, args.output)
    _write(report, args.output)


def _write(report, path):
    if path:
        with open(path, "w") as file:
            json.dump(report, file, indent=1)


def _devices():
    if keras.backend.backend() == "jax":
        import jax

        return jax.devices()
    return []


if __name__ == "__main__":
    main()
