"""`kerasbatch.predict` without TensorFlow: per-frame outputs of buckets,
packed rows and chunks, in input order, on the `grain` and `python` engines
(Keras' `model.predict` cannot join them on JAX)."""

import keras
import numpy as np
import pytest

import kerasbatch

ENGINES = ["grain", "python"]


@pytest.mark.parametrize("engine", ENGINES)
def test_predict_gives_every_element_its_frames(engine):
    rng = np.random.default_rng(0)
    x = [rng.normal(size=(n, 2)).astype("float32") for n in rng.integers(1, 15, 21)]
    model = keras.Sequential([keras.Input((None, 2)), keras.layers.Dense(3)])
    alone = [np.asarray(model.predict_on_batch(e[None]))[0] for e in x]
    tokens = keras.Input((None, 2), name="x")
    ids = keras.Input((None,), dtype="int32", name="packed_segment_ids")
    positions = keras.Input((None,), dtype="int32", name="positions")
    packed_model = keras.Model(
        {"x": tokens, "packed_segment_ids": ids, "positions": positions},
        model(tokens),
    )
    cases = {
        "bucket": (kerasbatch.BucketBuilder([4, 8], batch_size=3), model),
        "packed": (kerasbatch.PackedBuilder(16, batch_size=2), packed_model),
        "chunk": (kerasbatch.ChunkBuilder(4, batch_size=3), model),
    }
    for name, (builder, case_model) in cases.items():
        dataset = builder.build(x, engine=engine)
        outputs = kerasbatch.predict(case_model, dataset, per_frame=True, verbose=0)
        assert len(outputs) == len(x), name
        for output, expected in zip(outputs, alone, strict=True):
            np.testing.assert_allclose(output, expected, atol=1e-6, err_msg=name)
