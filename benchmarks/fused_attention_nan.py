"""Whether padding gives a NaN loss under this machine's attention kernel:
the block-diagonal mask that kerasbatch used before, whose padding query rows are
all False, against `kerasbatch.layers.SegmentAttentionMask`, whose padding
tokens attend to themselves.

On a GPU, Keras' `MultiHeadAttention` on JAX runs cuDNN flash attention,
where a fully masked softmax row is 0 / 0; on CPU, Keras masks with a large
negative number and both masks give a finite loss. A Transformer block
(d=256, 4 heads, `mixed_bfloat16` on a GPU) is trained for `--steps` steps on
rows padded to a multiple of 64 with a per-token loss weighed by the padding
mask (`reduction="mean_with_sample_weight"`), once with each mask, from the
same initial weights and a fresh optimizer; the losses and whether the outputs at real tokens
agree are printed, and written to `--output` as JSON.

Usage:

    KERAS_BACKEND=jax .venv/bin/python benchmarks/fused_attention_nan.py
    # on a machine with a GPU (JAX installed with CUDA support)
    KERAS_BACKEND=jax python benchmarks/fused_attention_nan.py \\
        --output benchmarks/out/fused_attention_nan.json
"""

import argparse
import json

import keras
import numpy as np

from kerasbatch.layers import SegmentAttentionMask

DIM, HEADS, CLASSES, VOCAB = 256, 4, 16, 1000


def rows(batch, length, seed=0):
    """Token ids of `batch` rows padded to `length` (a multiple of 64), with
    every row at least one token short, and the last row filler (no token)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, length - 1, batch)
    lengths[-1] = 0
    tokens = rng.integers(1, VOCAB, (batch, length))
    tokens[np.arange(length)[None, :] >= lengths[:, None]] = 0
    return tokens.astype("int32")


def block_diagonal_only(segment_ids):
    """The mask kerasbatch used before: padding query rows all False."""
    same = segment_ids[:, :, None] == segment_ids[:, None, :]
    return same & (segment_ids[:, :, None] != 0)


def transformer(length):
    tokens = keras.Input((length,), dtype="int32")
    mask = keras.Input((length, length), dtype="bool")
    positions = keras.ops.arange(length)[None, :]
    hidden = keras.layers.Embedding(VOCAB, DIM)(tokens)
    hidden = hidden + keras.layers.Embedding(length, DIM)(positions)
    attended = keras.layers.MultiHeadAttention(HEADS, DIM // HEADS)(
        hidden, hidden, attention_mask=mask
    )
    hidden = keras.layers.LayerNormalization()(hidden + attended)
    logits = keras.layers.Dense(CLASSES, dtype="float32")(hidden)
    model = keras.Model([tokens, mask], logits)
    model.compile(
        keras.optimizers.Adam(1e-3),
        keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction="mean_with_sample_weight"
        ),
    )
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument(
        "--flash",
        action="store_true",
        help="keras.config.enable_flash_attention() (else Keras' default)",
    )
    parser.add_argument("--output")
    arguments = parser.parse_args(argv)
    if arguments.flash:
        keras.config.enable_flash_attention()
    devices = keras.distribution.list_devices()
    on_gpu = any("gpu" in str(d).lower() or "cuda" in str(d).lower() for d in devices)
    if on_gpu:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    tokens = rows(arguments.batch, arguments.length)
    segment_ids = (tokens != 0).astype("int32")
    targets = tokens % CLASSES
    weights = segment_ids.astype("float32")
    masks = {
        "all-False padding rows (before)": block_diagonal_only(segment_ids),
        "SegmentAttentionMask": np.asarray(SegmentAttentionMask()(segment_ids)),
    }
    keras.utils.set_random_seed(0)
    model = transformer(arguments.length)
    initial = model.get_weights()
    results = {
        "backend": keras.backend.backend(),
        "devices": [str(d) for d in devices],
        "flash_attention": keras.config.is_flash_attention_enabled(),
        "batch": arguments.batch,
        "length": arguments.length,
    }
    outputs = {}
    for name, mask in masks.items():
        model.set_weights(initial)  # the same model and weights for both
        model.optimizer = keras.optimizers.Adam(1e-3)
        outputs[name] = np.asarray(model.predict([tokens, mask], verbose=0), "float32")
        losses = [
            float(model.train_on_batch([tokens, mask], targets, sample_weight=weights))
            for _ in range(arguments.steps)
        ]
        results[name] = {
            "losses": losses,
            "finite": bool(np.isfinite(losses).all()),
            "outputs_finite": bool(np.isfinite(outputs[name]).all()),
        }
        print(f"{name}: losses {losses}", flush=True)
    real = segment_ids.astype(bool)
    before, after = outputs.values()
    results["max_abs_difference_at_real_tokens"] = float(
        np.abs(before[real] - after[real]).max()
    )
    print(json.dumps(results, indent=1))
    if arguments.output:
        with open(arguments.output, "w") as file:
            json.dump(results, file, indent=1)


if __name__ == "__main__":
    main()
