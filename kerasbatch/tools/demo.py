"""`python -m kerasbatch demo`: padded vs bucketed batches on built-in data."""

import time

import keras
import numpy as np

from kerasbatch import engines
from kerasbatch.builders import BucketBuilder, PaddedBuilder
from kerasbatch.callbacks import EpochReshuffle, PaddingEfficiency

VOCABULARY = 1000
MARKER = 1


def make_demo_data(num_sequences=3000, seed=0):
    """Token sequences with lognormal lengths; label 1 when token 1 occurs.

    Returns:
        `(x, y)`: a list of int32 arrays of lengths in [1, 512], and float32
        labels of shape `(num_sequences,)`.
    """
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(3.5, 0.7, num_sequences).astype(int), 1, 512)
    labels = rng.integers(0, 2, num_sequences)
    x = []
    for length, label in zip(lengths, labels, strict=True):
        tokens = rng.integers(MARKER + 1, VOCABULARY, length)
        if label:
            tokens[rng.integers(0, length)] = MARKER
        x.append(tokens.astype(np.int32))
    return x, labels.astype(np.float32)


def make_demo_model():
    """Embedding (masking zeros) → GRU(16) → sigmoid."""
    model = keras.Sequential(
        [
            keras.layers.Embedding(VOCABULARY, 16, mask_zero=True),
            keras.layers.GRU(16),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile("adam", "binary_crossentropy", metrics=["accuracy"])
    return model


class _EpochTimer(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self._start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        logs["epoch_time"] = time.perf_counter() - self._start


def run_demo(num_sequences=3000, epochs=3, batch_size=64, verbose=1, engine=None):
    """Trains the same model on padded and on bucketed batches.

    Args:
        num_sequences: synthetic sequences to generate.
        epochs: epochs per builder (the first includes tracing, so the
            reported epoch time is the median of the later ones).
        batch_size: elements per batch for both builders.
        verbose: 1 prints progress and the comparison table.
        engine: the engine of the batches (`kerasbatch.engines`); None:
            `"tf.data"` where TensorFlow is installed, else `"python"`.

    Returns:
        `{name: {"padding_efficiency", "distinct_shapes", "epoch_time",
        "accuracy"}}` for `"padded"` and `"bucketed"`.
    """
    x, y = make_demo_data(num_sequences)
    if engine is None:
        engine = "tf.data" if engines.available("tf.data") else "python"
    builders = {
        "padded": PaddedBuilder(batch_size),
        "bucketed": BucketBuilder(num_buckets=16, batch_size=batch_size),
    }
    results = {}
    for name, builder in builders.items():
        if verbose:
            print(f"Training on {name} batches ({type(builder).__name__})")
        dataset = builder.build(x, y, engine=engine)
        history = make_demo_model().fit(
            dataset,
            epochs=epochs,
            shuffle=False,  # the builder shuffles; this silences Keras' warning
            verbose=2 if verbose else 0,
            callbacks=[
                EpochReshuffle(builder),
                PaddingEfficiency(builder),
                _EpochTimer(),
            ],
        )
        times = history.history["epoch_time"]
        results[name] = {
            "padding_efficiency": history.history["padding_efficiency"][-1],
            "distinct_shapes": builder.statistics().distinct_shapes,
            "epoch_time": float(np.median(times[1:] if len(times) > 1 else times)),
            "accuracy": history.history["accuracy"][-1],
        }
    if verbose:
        print(format_results(results))
    return results


def format_results(results):
    """A plain-text table of `run_demo`'s results."""
    lines = [
        f"{'batches':<10} {'padding eff.':>12} {'shapes':>7} {'epoch (s)':>10} {'accuracy':>9}"
    ]
    for name, row in results.items():
        lines.append(
            f"{name:<10} {row['padding_efficiency']:>12.3f} {row['distinct_shapes']:>7d} "
            f"{row['epoch_time']:>10.2f} {row['accuracy']:>9.3f}"
        )
    padded, bucketed = results.get("padded"), results.get("bucketed")
    if padded and bucketed:
        speedup = padded["epoch_time"] / bucketed["epoch_time"]
        lines.append(f"bucketed epochs are {speedup:.1f}x faster than padded epochs")
    return "\n".join(lines)
