"""The bucket tuner on the `grain` and `python` engines (no TensorFlow)."""

import keras
import numpy as np
import pytest

from kerasbatch.tuner import BucketSearchSpace, BucketTuner

SPACE = BucketSearchSpace(
    num_buckets=(2, 4),
    boundaries=("uniform",),
    batch_size=(16,),
    pad_to_bucket=(False,),
)


def build_model(hp):
    model = keras.Sequential(
        [
            keras.layers.Embedding(20, hp.Choice("units", [2, 4])),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dense(1),
        ]
    )
    model.compile("adam", "mse")
    return model


@pytest.mark.parametrize("engine", ["grain", "python"])
def test_a_search_trains_every_trial_on_the_engine(engine, tmp_path):
    # Every distinct batch shape of a trial compiles its model's step: 32
    # elements are two to four training batches a trial (96 were up to
    # eight), and 8 validation elements one.
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 40, 32)
    x = [rng.integers(1, 20, n) for n in lengths]
    y = rng.normal(size=32).astype("float32")
    tuner = BucketTuner(
        build_model,
        objective="val_loss",
        oracle="random",
        max_trials=2,
        search_space=SPACE,
        seed=1,
        engine=engine,
        directory=tmp_path,
        project_name="search",
    )
    tuner.search(x, y, validation_data=(x[:8], y[:8]), epochs=1, verbose=0)
    trials = [t for t in tuner.oracle.trials.values() if t.status == "COMPLETED"]
    assert len(trials) == 2
    for trial in trials:
        metrics = trial.metrics.metrics
        assert "padding_efficiency" in metrics and "val_loss" in metrics
    assert tuner.get_best_builder().num_buckets in (2, 4)
