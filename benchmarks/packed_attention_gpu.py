"""Does a packed row attend on this machine as its sequences would alone?

Keras' `MultiHeadAttention` given the block-diagonal mask of packed rows (the
`SegmentAttentionMask` rule, built here in NumPy so that only Keras and a
backend are needed, no TensorFlow) must give every sequence of a row the
outputs it gets alone. On CPU the difference is below 1e-6; this prints it
for the machine's own attention kernel, in float32 and in bfloat16, and the
largest output at real tokens, so a kernel that mishandles multi-segment
masks shows.

Usage:

    KERAS_BACKEND=jax .venv/bin/python benchmarks/packed_attention_gpu.py
"""

import json

import keras
import numpy as np

DIM, HEADS, LENGTH, ROWS = 256, 4, 512, 4


def packed_rows(seed=0):
    """Segment ids 1..k of sequences packed into rows of LENGTH, 0 after."""
    rng = np.random.default_rng(seed)
    segment_ids = np.zeros((ROWS, LENGTH), "int32")
    for row in range(ROWS):
        start, segment = 0, 1
        while True:
            length = int(rng.integers(5, 120))
            if start + length > LENGTH - 7:
                break
            segment_ids[row, start : start + length] = segment
            start, segment = start + length, segment + 1
    return segment_ids


def mask_of(segment_ids):
    same = segment_ids[:, :, None] == segment_ids[:, None, :]
    real = segment_ids[:, :, None] != 0
    itself = np.eye(segment_ids.shape[1], dtype=bool)[None]
    return (same & real) | itself


def check(policy):
    keras.mixed_precision.set_global_policy(policy)
    keras.utils.set_random_seed(0)
    attention = keras.layers.MultiHeadAttention(HEADS, DIM // HEADS)
    segment_ids = packed_rows()
    hidden = np.random.default_rng(1).normal(size=(ROWS, LENGTH, DIM))
    hidden = hidden.astype("float32")
    packed = np.asarray(
        attention(hidden, hidden, attention_mask=mask_of(segment_ids)), "float32"
    )
    worst = 0.0
    for row in range(ROWS):
        for segment in range(1, segment_ids[row].max() + 1):
            where = segment_ids[row] == segment
            alone = hidden[row, where][None]
            ones = np.ones((1, where.sum(), where.sum()), bool)
            out = np.asarray(attention(alone, alone, attention_mask=ones), "float32")
            worst = max(worst, float(np.abs(packed[row, where] - out[0]).max()))
    real = segment_ids != 0
    return {
        "policy": policy,
        "max_abs_packed_minus_alone": worst,
        "max_abs_output": float(np.abs(packed[real]).max()),
        "finite": bool(np.isfinite(packed).all()),
    }


def main():
    results = {
        "backend": keras.backend.backend(),
        "devices": [str(d) for d in keras.distribution.list_devices()],
        "checks": [check("float32"), check("mixed_bfloat16")],
    }
    print(json.dumps(results, indent=1), flush=True)


if __name__ == "__main__":
    main()
