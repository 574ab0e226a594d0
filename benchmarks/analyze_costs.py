"""What a training step costs on each Keras backend on this CPU: the CPU
figures of `kerasbatch.planning.costs.BACKEND_COSTS`.

The model is a small Transformer encoder, the kind of model the GPU figures
were measured on, scaled down for a CPU: `Embedding(1000, 64,
mask_zero=True)`, 2 blocks of `MultiHeadAttention` (2 heads of 32) and a
feed-forward layer of 128, each with a residual and `LayerNormalization`,
mean pooling and `Dense(1, sigmoid)`; Adam, binary cross-entropy, Keras'
default `jit_compile`. It is trained with `model.fit`
on a `keras.utils.PyDataset` of batches of one shape. For every shape
`(rows, length)` of `SHAPES`, a first `fit` of `--steps` steps compiles the
shape (JAX's XLA; TensorFlow and torch run it as it comes); then `--repeats`
rounds time one more `fit` of every shape, and the fastest of each shape is
its time (load on the machine only ever slows a round down). A fit of least
relative error through the step times (`fit_costs`) gives the seconds per
step, per padded position and per pair of padded positions in a row (`rows
× length²`: attention compares every position of a row with every other);
the seconds per shape are the first fit's time less the fastest, averaged
over every shape but the first (whose first fit also builds the model and
its train function).

Usage (one process per backend; each prints one line of JSON):

    for backend in tensorflow jax torch; do
        KERAS_BACKEND=$backend python benchmarks/analyze_costs.py
    done
"""

import argparse
import json
import os
import platform
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

#: `(rows, padded length)` of the timed batches: fixed batch sizes and
#: token budgets alike, from 1 024 to 16 384 positions.
SHAPES = (
    (64, 16),
    (64, 64),
    (64, 256),
    (16, 256),
    (256, 16),
    (32, 128),
    (128, 32),
    (8, 512),
)
VOCAB = 1000
WIDTH = 64


class Batches(keras.utils.PyDataset):
    """`steps` batches of `(rows, length)` token ids and binary labels."""

    def __init__(self, rows, length, steps, seed):
        super().__init__()
        rng = np.random.default_rng(seed)
        self.x = rng.integers(1, VOCAB, (steps, rows, length)).astype("int32")
        self.y = rng.integers(0, 2, (steps, rows, 1)).astype("float32")

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        return self.x[index], self.y[index]


def make_model():
    keras.utils.set_random_seed(0)
    tokens = keras.Input((None,), dtype="int32")
    x = keras.layers.Embedding(VOCAB, WIDTH, mask_zero=True)(tokens)
    for _ in range(2):
        attended = keras.layers.MultiHeadAttention(2, WIDTH // 2)(x, x)
        x = keras.layers.LayerNormalization()(x + attended)
        hidden = keras.layers.Dense(2 * WIDTH, activation="relu")(x)
        x = keras.layers.LayerNormalization()(x + keras.layers.Dense(WIDTH)(hidden))
    x = keras.layers.GlobalAveragePooling1D()(x)
    outputs = keras.layers.Dense(1, activation="sigmoid")(x)
    model = keras.Model(tokens, outputs)
    model.compile(optimizer="adam", loss="binary_crossentropy")
    return model


def fit_seconds(model, batches):
    start = time.perf_counter()
    model.fit(batches, epochs=1, verbose=0, shuffle=False)
    return time.perf_counter() - start


def measure(steps, repeats):
    model = make_model()
    datasets = [
        Batches(rows, length, steps, seed=index)
        for index, (rows, length) in enumerate(SHAPES)
    ]
    firsts = [fit_seconds(model, batches) for batches in datasets]
    # Rounds over every shape, so that a spell of load on this machine hits
    # them alike; the fastest round of each is its figure.
    rounds = [
        [fit_seconds(model, batches) for batches in datasets] for _ in range(repeats)
    ]
    fastest = np.min(rounds, axis=0)
    rows = [
        {
            "rows": batch_rows,
            "length": length,
            "positions": batch_rows * length,
            "first_fit_s": first,
            "step_s": float(best) / steps,
            "first_extra_s": first - float(best),
        }
        for (batch_rows, length), first, best in zip(
            SHAPES, firsts, fastest, strict=True
        )
    ]
    per_step, per_position, per_pair = fit_costs(
        [row["positions"] for row in rows],
        [row["positions"] * row["length"] for row in rows],
        [row["step_s"] for row in rows],
    )
    for row in rows:
        row["fitted_step_s"] = (
            per_step
            + per_position * row["positions"]
            + per_pair * row["positions"] * row["length"]
        )
    return {
        "backend": keras.config.backend(),
        "keras": keras.__version__,
        "machine": f"{os.cpu_count()} CPU cores, {platform.machine()}",
        "steps": steps,
        "repeats": repeats,
        "seconds_per_step": per_step,
        "seconds_per_position": per_position,
        "seconds_per_position_pair": per_pair,
        "seconds_per_shape": float(np.mean([r["first_extra_s"] for r in rows[1:]])),
        "largest_fit_error": max(
            abs(r["fitted_step_s"] / r["step_s"] - 1) for r in rows
        ),
        "shapes": rows,
    }


def fit_costs(positions, pairs, step_seconds):
    """`(seconds per step, per position, per position pair)`, none negative,
    of least relative error: the best of the lines through every subset of
    the three terms whose coefficients are all >= 0."""
    terms = np.column_stack([np.ones(len(positions)), positions, pairs])
    times = np.asarray(step_seconds, float)
    weighted = terms / times[:, None]  # relative errors
    best, best_error = None, np.inf
    for subset in ([0, 1, 2], [0, 1], [1, 2], [0, 2], [1], [2], [0]):
        solution, *_ = np.linalg.lstsq(weighted[:, subset], np.ones(len(times)))
        if (solution < 0).any():
            continue
        error = np.sum((weighted[:, subset] @ solution - 1) ** 2)
        if error < best_error:
            best, best_error = dict(zip(subset, solution, strict=True)), error
    return tuple(float(best.get(term, 0.0)) for term in range(3))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10, help="steps per fit")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds")
    arguments = parser.parse_args()
    print(json.dumps(measure(arguments.steps, arguments.repeats)))


if __name__ == "__main__":
    main()
