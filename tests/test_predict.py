"""`kerasbatch.predict`: per-element outputs in input order, per frame, on
every builder whose batches differ in length, every engine and backend.

Keras' `model.predict` joins the batches' outputs with `np.concatenate` on
JAX and torch, which fails for per-frame outputs of batches of different
padded lengths. Each backend runs the script on its own Keras
(`backend_process`).
"""

import numpy as np
import pytest
from backend_process import run_on_backend

import kerasbatch

BACKENDS = ("tensorflow", "jax", "torch")
# The python engine's batches are fed here, not by Keras on TensorFlow.
pytestmark = pytest.mark.filterwarnings("ignore:On the TensorFlow backend")

SCRIPT = """
import importlib.util
import json

import keras
import numpy as np

import kerasbatch

engines = ["grain", "python"]
if importlib.util.find_spec("tensorflow") is not None:
    engines.append("tf.data")
rng = np.random.default_rng(0)
x = [rng.normal(size=(n, 2)).astype("float32") for n in rng.integers(1, 20, 30)]
frames = keras.Sequential([keras.Input((None, 2)), keras.layers.Dense(3)])
# Each element's frames alone, as the Dense layer maps each frame (in NumPy:
# one call of the model per element length would compile a shape each).
kernel, bias = frames.get_weights()
alone = [e @ kernel + bias for e in x]
tokens = keras.Input((None, 2), name="x")
segment_ids = keras.Input((None,), dtype="int32", name="packed_segment_ids")
positions = keras.Input((None,), dtype="int32", name="positions")
per_token = frames(tokens)
packed_frames = keras.Model(
    {"x": tokens, "packed_segment_ids": segment_ids, "positions": positions},
    per_token,
)
pooled = kerasbatch.layers.SegmentPooling(8)(per_token, segment_ids)
packed_pooled = keras.Model(
    {"x": tokens, "packed_segment_ids": segment_ids, "positions": positions},
    pooled,
)


def worst(outputs, expected):
    assert len(outputs) == len(expected)
    return max(float(np.abs(o - e).max()) for o, e in zip(outputs, expected))


chunks = kerasbatch.ChunkBuilder(chunk_size=4, batch_size=3)
builders = {
    "bucket": (kerasbatch.BucketBuilder([5, 10], batch_size=4), frames),
    "sorted": (kerasbatch.SortedBuilder(batch_size=4), frames),
    "packed": (kerasbatch.PackedBuilder(24, batch_size=3), packed_frames),
    "chunk": (chunks, frames),
    "chunk for inference": (chunks.for_inference(batch_size=4), frames),
}
errors = {}
for engine in engines:
    for name, (builder, model) in builders.items():
        dataset = builder.build(x, engine=engine)
        outputs = kerasbatch.predict(model, dataset, per_frame=True, verbose=0)
        errors[f"{name} {engine}"] = worst(outputs, alone)
    dataset = kerasbatch.PackedBuilder(24, batch_size=3).build(x, engine=engine)
    slots = kerasbatch.predict(packed_pooled, dataset, per_segment=True, verbose=0)
    errors[f"packed per segment {engine}"] = worst(
        slots, [a.mean(axis=0) for a in alone]
    )
print(json.dumps(errors))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_predict_gives_each_element_its_frames_on_every_backend(backend):
    errors = run_on_backend(SCRIPT, backend)
    assert len(errors) == 18
    for case, error in errors.items():
        assert error < 1e-5, case


def _data():
    return [np.full((n, 1), n, "float32") for n in (5, 1, 4, 2, 7)]


def test_outputs_that_differ_in_length_need_per_frame():
    import keras

    dataset = kerasbatch.BucketBuilder([3], batch_size=2).build(
        _data(), engine="python"
    )
    model = keras.Sequential([keras.Input((None, 1)), keras.layers.Dense(1)])
    with pytest.raises(ValueError, match="pass per_frame=True"):
        kerasbatch.predict(model, dataset, verbose=0)


def test_what_cannot_be_restored_is_refused_before_the_model_runs():
    class Refuses:
        def predict_on_batch(self, x):
            raise AssertionError("the model ran")

    packed = kerasbatch.PackedBuilder(8, batch_size=2).build(_data(), engine="python")
    with pytest.raises(ValueError, match="per_frame=True for outputs per position"):
        kerasbatch.predict(Refuses(), packed)
    bucket = kerasbatch.BucketBuilder([3], batch_size=2).build(_data(), engine="python")
    with pytest.raises(ValueError, match="per_segment=True is for PackedBuilder"):
        kerasbatch.predict(Refuses(), bucket, per_segment=True)
    dropped = kerasbatch.BucketBuilder([3], batch_size=2, drop_remainder=True).build(
        _data(), engine="python"
    )
    with pytest.raises(ValueError, match="left 1 elements out"):
        kerasbatch.predict(Refuses(), dropped)


def test_the_outputs_of_a_multi_output_model_are_restored_alike():
    import keras

    inputs = keras.Input((None, 1))
    model = keras.Model(
        inputs, {"double": inputs * 2.0, "negative": keras.layers.Dense(1)(inputs)}
    )
    x = _data()
    dataset = kerasbatch.BucketBuilder([3], batch_size=2).build(x, engine="python")
    outputs = kerasbatch.predict(model, dataset, per_frame=True, verbose=0)
    assert sorted(outputs) == ["double", "negative"]
    for element, frames in zip(x, outputs["double"], strict=True):
        np.testing.assert_array_equal(frames, element * 2)
    assert [len(frames) for frames in outputs["negative"]] == [5, 1, 4, 2, 7]
