"""Per-example targets of packed rows, one per segment slot, in Keras' own
losses on every backend; and one per-segment width for every dataset of a
builder, so that train and validation data fit one model.

Each backend runs the script on its own Keras (`backend_process`).
"""

import numpy as np
import pytest
from backend_process import run_on_backend

import kerasbatch

BACKENDS = ("tensorflow", "jax", "torch")

SCRIPT = """
import json

import keras
import numpy as np

import kerasbatch

SLOTS = 4
rng = np.random.default_rng(0)
x = [rng.integers(1, 50, n) for n in rng.integers(1, 6, 40)]
values = rng.normal(size=len(x)).astype("float32")
LOSSES = {
    "mse": (keras.losses.MeanSquaredError(), values, 1),
    "mae": (keras.losses.MeanAbsoluteError(), values, 1),
    "huber": (keras.losses.Huber(), values, 1),
    "bce": (keras.losses.BinaryCrossentropy(from_logits=True), values > 0, 1),
    "sparse_ce": (
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        rng.integers(0, 3, len(x)),
        3,
    ),
}


def pooled_model(slots, units):
    tokens = keras.Input((None,), dtype="int32", name="x")
    ids = keras.Input((None,), dtype="int32", name="packed_segment_ids")
    positions = keras.Input((None,), dtype="int32", name="positions")
    features = keras.layers.Embedding(50, 4)(tokens)
    pooled = kerasbatch.layers.SegmentPooling(slots)(features, ids)
    outputs = keras.layers.Dense(units)(pooled)
    inputs = {"x": tokens, "packed_segment_ids": ids, "positions": positions}
    return keras.Model(inputs, outputs)


def per_slot(name, targets, predictions):
    # What each slot's loss is, in numpy.
    targets = targets[..., 0]
    if name == "sparse_ce":
        shifted = predictions - predictions.max(-1, keepdims=True)
        log_p = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        return -np.take_along_axis(log_p, targets[..., None].astype(int), -1)[..., 0]
    predictions = predictions[..., 0]
    error = predictions - targets
    if name == "mse":
        return error**2
    if name == "mae":
        return np.abs(error)
    if name == "huber":
        return np.where(np.abs(error) <= 1, 0.5 * error**2, np.abs(error) - 0.5)
    p = 1 / (1 + np.exp(-predictions))
    p = np.clip(p, 1e-7, 1 - 1e-7)
    return -(targets * np.log(p) + (1 - targets) * np.log(1 - p))


gaps = {}
for name, (loss, targets, units) in LOSSES.items():
    # As many rows as slots: a loss that averaged the slot axis would
    # broadcast without an error there.
    builder = kerasbatch.PackedBuilder(
        16, batch_size=SLOTS, max_segments_per_row=SLOTS, shuffle=False
    )
    dataset = builder.build(x, targets.astype("float32"), engine="python")
    model = pooled_model(SLOTS, units)
    model.compile("sgd", loss)
    inputs, y, weights = dataset[0]
    assert y.shape == (SLOTS, SLOTS, 1), y.shape
    # Called eagerly: a compiled predict function per model costs more here.
    predictions = keras.ops.convert_to_numpy(model(inputs))
    expected = (per_slot(name, y, predictions) * weights).sum() / (
        SLOTS * SLOTS
    )
    got = model.evaluate(inputs, y, sample_weight=weights, verbose=0)
    gaps[name] = abs(float(got) - float(expected))
    history = model.fit(dataset, epochs=1, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"]).all(), name

# One builder, two splits whose packings put different numbers in a row.
short = [rng.integers(1, 50, n) for n in rng.integers(1, 4, 60)]
long = [rng.integers(1, 50, n) for n in rng.integers(3, 9, 30)]
widths = {}
for first, second in (("short", "long"), ("long", "short")):
    data = {"short": short, "long": long}
    builder = kerasbatch.PackedBuilder(24, batch_size=4, seed=1)
    built = {
        split: builder.build(
            data[split], rng.normal(size=len(data[split])), engine="grain"
        )
        for split in (first, second)
    }
    width = builder.resolved_max_segments
    model = pooled_model(width, 1)
    model.compile("adam", "mse")
    history = model.fit(
        built[first], validation_data=built[second], epochs=2, verbose=0
    )
    assert np.isfinite(history.history["val_loss"]).all()
    alone = kerasbatch.PackedBuilder(24, batch_size=4, seed=1)
    alone.build(data[second], np.zeros(len(data[second])), engine="grain")
    widths[first + " first"] = {
        "width": width,
        "batch widths": sorted({b[1].shape[1] for b in built[second]}),
        "alone": alone.resolved_max_segments,
    }
print(json.dumps({"gaps": gaps, "widths": widths}))
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_keras_losses_and_validation_take_per_segment_targets(backend):
    report = run_on_backend(SCRIPT, backend)
    for name, gap in report["gaps"].items():
        assert gap < 1e-5, name
    short_first = report["widths"]["short first"]
    long_first = report["widths"]["long first"]
    # The short texts pack more to a row than the long ones.
    assert short_first["width"] > long_first["width"]
    for widths in (short_first, long_first):
        assert widths["batch widths"] == [widths["width"]]
    # Alone, the long texts would need fewer slots, the short ones more.
    assert long_first["alone"] > long_first["width"]
    assert short_first["alone"] < short_first["width"]


def test_a_later_build_packs_within_the_first_builds_width():
    short = [np.ones(n, "int32") for n in [1, 2, 1, 1, 2, 1] * 5]
    long = [np.ones(n, "int32") for n in [3, 5, 4, 6] * 5]
    builder = kerasbatch.PackedBuilder(12, batch_size=2, seed=0)
    builder.build(long, np.zeros(len(long)), engine="python")
    width = builder.resolved_max_segments
    later = builder.build(short, np.zeros(len(short)), engine="python")
    assert builder.resolved_max_segments == width
    assert kerasbatch.builders.builder_of(later).plan(0).segments_per_row.max() <= width
    assert {batch[1].shape[1] for batch in later} == {width}
    # Every element is still fed once.
    plan = kerasbatch.builders.builder_of(later).plan(0)
    assert sorted(plan.indices.tolist()) == list(range(len(short)))
    # A new builder resolves it anew; a setting fixes it for every build.
    fresh = kerasbatch.PackedBuilder(12, batch_size=2, seed=0)
    fresh.build(short, np.zeros(len(short)), engine="python")
    assert fresh.resolved_max_segments > width
