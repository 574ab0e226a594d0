"""CompileCost and the tuner's "training_time" objective: padding against compiles."""

import math

import keras
import keras_tuner
import numpy as np
import pytest

import kerasbatch
from kerasbatch.tuner import (
    BucketSearchSpace,
    BucketTuner,
    CompileCost,
    TrainingTime,
    objectives,
)

LENGTHS = np.random.default_rng(0).lognormal(4, 0.6, 2000).astype(int) + 1
#: One boundary strategy; few or many buckets, batch or bucket padding.
SPACE = BucketSearchSpace(
    num_buckets=(1, 2, 4, 8, 16, 32),
    boundaries=("optimal",),
    batch_size=(32,),
    pad_to_bucket=(False, True),
)
TEMPLATE = kerasbatch.BucketBuilder(remainder="pad", seed=0)


def builder_of(lengths=LENGTHS, **kwargs):
    kwargs = {"num_buckets": 4, "batch_size": 32, "seed": 0, **kwargs}
    builder = kerasbatch.BucketBuilder(**kwargs)
    builder.adapt(lengths)
    return builder


def by_hand(builder, cost):
    """The estimate from the plans of every epoch, computed here."""
    shapes, positions, batches = set(), 0, 0
    for epoch in range(cost.epochs):
        plan = builder.plan(epoch)
        rows = plan.batch_rows
        for b in range(plan.num_batches):
            shapes.add((int(rows[b]), *map(int, plan.padded_lengths[b])))
            positions += int(rows[b] * plan.padded_lengths[b].sum())
        batches += plan.num_batches
    step = positions * cost.seconds_per_position + batches * cost.seconds_per_step
    return step + len(shapes) * cost.seconds_per_shape, len(shapes), positions


def grid_tuner(tmp_path, cost, **kwargs):
    kwargs.setdefault("objective", "training_time")
    return BucketTuner(
        objective=kwargs.pop("objective"),
        oracle="grid",
        max_trials=None,
        search_space=SPACE,
        builder=TEMPLATE,
        cost=cost,
        directory=tmp_path,
        project_name="cost",
        **kwargs,
    )


def completed(tuner):
    return [t for t in tuner.oracle.trials.values() if t.status == "COMPLETED"]


# ------------------------------------------------------------------ estimate
def test_estimate_of_packed_rows_counts_their_one_shape():
    """Packed rows plan as every other builder does (a `PackedPlan` has the
    `padded_positions()` of a `BatchPlan`)."""
    cost = CompileCost(seconds_per_shape=6.5, seconds_per_position=1e-7, epochs=3)
    builder = kerasbatch.PackedBuilder(1024, batch_size=8, remainder="even")
    builder.adapt(LENGTHS)
    estimate = cost.estimate(builder)
    plans = [builder.plan(epoch) for epoch in range(3)]
    assert estimate.compiled_shapes == 1
    assert estimate.padded_positions == sum(
        int((p.batch_rows * 1024).sum()) for p in plans
    )
    assert estimate.batches == sum(p.num_batches for p in plans)
    assert estimate.compile_time == 6.5


@pytest.mark.parametrize("pad_to_bucket", [False, True])
@pytest.mark.parametrize("epochs", [1, 3, 7])
def test_estimate_matches_the_plans_exactly(pad_to_bucket, epochs):
    cost = CompileCost(
        seconds_per_shape=0.5,
        seconds_per_position=2e-6,
        epochs=epochs,
        seconds_per_step=1e-3,
    )
    builder = builder_of(pad_to_bucket=pad_to_bucket, remainder="pad")
    estimate = cost.estimate(builder)
    seconds, shapes, positions = by_hand(builder, cost)
    assert estimate.compiled_shapes == shapes
    assert estimate.padded_positions == positions
    assert estimate.training_time == pytest.approx(seconds, rel=1e-12)
    assert estimate.compile_time == shapes * 0.5
    assert estimate.training_time == pytest.approx(
        estimate.step_time + estimate.compile_time, rel=1e-12
    )
    assert set(estimate.figures()) == {
        "training_time",
        "step_time",
        "compile_time",
        "compiled_shapes",
        "padded_positions",
        "batches",
    }


def test_batch_padding_brings_new_shapes_in_later_epochs():
    one = CompileCost(1.0, 1e-6, epochs=1)
    ten = CompileCost(1.0, 1e-6, epochs=10)
    batch_padded = builder_of(pad_to_bucket=False)
    assert one.estimate(batch_padded).compiled_shapes == (
        batch_padded.statistics(epoch=0).distinct_shapes
    )
    assert ten.estimate(batch_padded).compiled_shapes > (
        one.estimate(batch_padded).compiled_shapes
    )
    # One shape per bucket, the same every epoch.
    bucket_padded = builder_of(pad_to_bucket=True, remainder="pad")
    assert ten.estimate(bucket_padded).compiled_shapes == 4
    assert one.estimate(bucket_padded).compiled_shapes == 4


def test_planned_epochs_extrapolates_the_later_epochs():
    exact = CompileCost(1.0, 1e-6, epochs=40)
    capped = CompileCost(1.0, 1e-6, epochs=40, planned_epochs=8)
    bucket_padded = builder_of(pad_to_bucket=True, remainder="pad")
    assert capped.estimate(bucket_padded) == exact.estimate(bucket_padded)
    batch_padded = builder_of(pad_to_bucket=False)
    counted = CompileCost(1.0, 1e-6, epochs=8).estimate(batch_padded)
    estimate = capped.estimate(batch_padded)
    # Positions and batches: the planned epochs' mean, times 40 epochs.
    assert estimate.padded_positions == counted.padded_positions * 5
    assert estimate.batches == counted.batches * 5
    # Shapes: more than after 8 epochs, fewer than 5 times as many; and
    # within a third of the exact count.
    truth = exact.estimate(batch_padded).compiled_shapes
    assert counted.compiled_shapes < estimate.compiled_shapes
    assert estimate.compiled_shapes < 5 * counted.compiled_shapes
    assert abs(estimate.compiled_shapes - truth) < truth / 3


def test_config_round_trip_and_repr():
    cost = CompileCost(2.5, 1e-6, epochs=3, seconds_per_step=0.01, planned_epochs=2)
    assert CompileCost.from_config(cost.get_config()) == cost
    assert repr(cost) == (
        "CompileCost(seconds_per_shape=2.5, seconds_per_position=1e-06, "
        "epochs=3, seconds_per_step=0.01, planned_epochs=2)"
    )
    assert cost != CompileCost(2.5, 1e-6, epochs=4)
    assert kerasbatch.tuner.TrainingTime is TrainingTime


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"seconds_per_shape": 0}, ValueError, "seconds_per_shape must be a finite"),
        ({"seconds_per_shape": -1.0}, ValueError, "seconds_per_shape must be"),
        ({"seconds_per_shape": "1s"}, TypeError, "seconds_per_shape must be a number"),
        ({"seconds_per_position": 0.0}, ValueError, "seconds_per_position must be"),
        ({"seconds_per_position": math.inf}, ValueError, "seconds_per_position"),
        ({"seconds_per_step": -0.1}, ValueError, "seconds_per_step must be .* >= 0"),
        ({"epochs": 0}, ValueError, "epochs must be a positive int, got 0"),
        ({"epochs": 2.5}, ValueError, "epochs must be a positive int"),
        ({"epochs": True}, ValueError, "epochs must be a positive int"),
        ({"planned_epochs": 0}, ValueError, "planned_epochs must be a positive int"),
    ],
)
def test_bad_costs_name_the_argument(kwargs, error, match):
    arguments = {"seconds_per_shape": 1.0, "seconds_per_position": 1e-6, **kwargs}
    with pytest.raises(error, match=match):
        CompileCost(**arguments)


def test_a_zero_step_overhead_is_allowed():
    assert CompileCost(1.0, 1e-6, seconds_per_step=0).seconds_per_step == 0.0


# --------------------------------------------------------------------- tuner
def test_training_time_is_minimised():
    assert objectives.get("training_time").direction == "min"
    assert not objectives.needs_model(objectives.get("training_time"))


def best_of(tmp_path, epochs):
    cost = CompileCost(seconds_per_shape=1.0, seconds_per_position=3e-6, epochs=epochs)
    tuner = grid_tuner(tmp_path / str(epochs), cost)
    tuner.search(lengths=LENGTHS, verbose=0)
    trials = completed(tuner)
    assert len(trials) == SPACE.size() == 12
    # Every trial records the estimate's figures and the plan's, exactly.
    for trial in trials:
        builder = SPACE.make_builder(trial.hyperparameters, TEMPLATE)
        builder.adapt(LENGTHS)
        seconds, shapes, _ = by_hand(builder, cost)
        assert trial.score == pytest.approx(seconds, rel=1e-12)
        assert trial.metrics.get_last_value("compiled_shapes") == shapes
        assert trial.metrics.get_last_value("padding_efficiency") == (
            builder.statistics(epoch=0).padding_efficiency
        )
        assert trial.metrics.exists("distinct_shapes")
    best = tuner.oracle.get_best_trials(1)[0]
    assert best.score == min(t.score for t in trials)
    builder = tuner.get_best_builder()
    return builder, best


def test_the_optimum_moves_with_the_length_of_the_run(tmp_path):
    short, short_trial = best_of(tmp_path, epochs=3)
    long, long_trial = best_of(tmp_path, epochs=100)
    # A 3-epoch fine-tune: 2 buckets, 2 compiles, 4.57 s; 100 epochs: 8
    # buckets, 8 compiles, 60.14 s (their padding saves more than 6 compiles).
    assert (short.num_buckets, short.pad_to_bucket) == (2, True)
    assert (long.num_buckets, long.pad_to_bucket) == (8, True)
    assert short_trial.score == pytest.approx(4.5704, rel=1e-9)
    assert long_trial.score == pytest.approx(60.1376, rel=1e-9)
    assert short_trial.metrics.get_last_value("compiled_shapes") == 2
    assert long_trial.metrics.get_last_value("compiled_shapes") == 8
    # Each run's optimum is the worse choice for the other run.
    for builder in (short, long):
        builder.adapt(LENGTHS)
    seconds = {
        (name, epochs): CompileCost(1.0, 3e-6, epochs=epochs)
        .estimate(builder)
        .training_time
        for name, builder in (("short", short), ("long", long))
        for epochs in (3, 100)
    }
    assert seconds["long", 3] == pytest.approx(9.564128, rel=1e-9)
    assert seconds["short", 100] == pytest.approx(87.68, rel=1e-9)


def test_other_objectives_record_the_estimate_too(tmp_path):
    cost = CompileCost(1.0, 3e-6, epochs=3)
    tuner = grid_tuner(tmp_path, cost, objective="padding_efficiency")
    tuner.search(lengths=LENGTHS, verbose=0)
    for trial in completed(tuner):
        builder = SPACE.make_builder(trial.hyperparameters, TEMPLATE)
        builder.adapt(LENGTHS)
        assert trial.metrics.get_last_value("training_time") == pytest.approx(
            by_hand(builder, cost)[0], rel=1e-12
        )


def test_a_metric_objective_records_the_estimate_beside_the_model_metrics(tmp_path):
    rng = np.random.default_rng(0)
    x = [rng.integers(1, 20, n) for n in LENGTHS[:96] % 50 + 1]
    y = rng.integers(0, 2, len(x)).astype("float32")

    def build_model(hp):
        model = keras.Sequential(
            [
                keras.layers.Embedding(20, 2),
                keras.layers.GlobalAveragePooling1D(),
                keras.layers.Dense(1),
            ]
        )
        model.compile("adam", "mse")
        return model

    cost = CompileCost(1.0, 3e-6, epochs=5)
    tuner = BucketTuner(
        build_model,
        objective="loss",
        max_trials=1,
        seed=1,
        search_space=SPACE,
        builder=TEMPLATE,
        cost=cost,
        directory=tmp_path,
        project_name="metric",
    )
    tuner.search(x, y, epochs=2, verbose=0)
    (trial,) = completed(tuner)
    builder = SPACE.make_builder(trial.hyperparameters, TEMPLATE)
    builder.build(x, y)
    assert trial.metrics.exists("loss")
    assert trial.metrics.get_last_value("training_time") == pytest.approx(
        by_hand(builder, cost)[0], rel=1e-12
    )


def test_training_time_needs_a_cost(tmp_path):
    with pytest.raises(ValueError, match="'training_time' is estimated from a cost"):
        grid_tuner(tmp_path, None)
    with pytest.raises(TypeError, match="cost must be a kerasbatch.tuner.CompileCost"):
        grid_tuner(tmp_path, {"seconds_per_shape": 1.0})
    with pytest.raises(ValueError, match="Unknown objective 'training_tme'"):
        grid_tuner(tmp_path, CompileCost(1.0, 1e-6), objective="training_tme")


def test_training_time_is_not_for_hyperband(tmp_path):
    with pytest.raises(ValueError, match="'training_time' trains no epochs"):
        BucketTuner(
            objective="training_time",
            oracle="hyperband",
            oracle_kwargs={"max_epochs": 4},
            cost=CompileCost(1.0, 1e-6),
            directory=tmp_path,
        )


def test_the_oracle_instance_objective_also_needs_a_cost(tmp_path):
    oracle = keras_tuner.oracles.RandomSearchOracle(
        objective=objectives.get("training_time"), max_trials=2
    )
    with pytest.raises(ValueError, match="cost=kerasbatch.tuner.CompileCost"):
        BucketTuner(oracle=oracle, directory=tmp_path)


# ------------------------------------------------------------------- measure
def tiny_model(jit_compile=True):
    model = keras.Sequential(
        [
            keras.layers.Embedding(20, 4),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dense(1),
        ]
    )
    model.compile("sgd", "mse", jit_compile=jit_compile)
    return model


@pytest.fixture(scope="module")
def tokens():
    rng = np.random.default_rng(1)
    x = [rng.integers(1, 20, n) for n in rng.integers(1, 200, 192)]
    return x, rng.integers(0, 2, len(x)).astype("float32")


@pytest.mark.backend  # trains a model
def test_measure_a_jit_compiled_model(tokens):
    builder = kerasbatch.BucketBuilder(num_buckets=4, batch_size=16, pad_to_bucket=True)
    cost = CompileCost.measure(tiny_model, *tokens, builder=builder, epochs=7)
    assert isinstance(cost, CompileCost)
    assert cost.epochs == 7
    for seconds in (cost.seconds_per_shape, cost.seconds_per_position):
        assert math.isfinite(seconds) and seconds > 0
    assert math.isfinite(cost.seconds_per_step) and cost.seconds_per_step >= 0
    # A compile of this model takes milliseconds, a step far less than a
    # second: each figure within its order of magnitude, loosely.
    assert 1e-5 < cost.seconds_per_shape < 60
    assert cost.seconds_per_position * 16 * 200 < 1.0
    # The measured cost estimates like a given one; the builder was copied.
    with pytest.raises(RuntimeError, match="no data yet"):
        builder.plan()
    builder.adapt(LENGTHS)
    assert cost.estimate(builder).training_time > 0


@pytest.mark.backend  # trains a model
def test_measure_rejects_what_it_cannot_time(tokens):
    with pytest.raises(TypeError, match="model must be a compiled keras.Model"):
        CompileCost.measure("model", *tokens)
    with pytest.raises(ValueError, match="must be compiled"):
        CompileCost.measure(keras.Sequential([keras.layers.Dense(1)]), *tokens)
    with pytest.raises(ValueError, match="num_shapes must be at least 2"):
        CompileCost.measure(tiny_model(), *tokens, num_shapes=1)
    one_shape = kerasbatch.BucketBuilder(
        num_buckets=1, batch_size=16, pad_to_bucket=True, remainder="pad"
    )
    with pytest.raises(ValueError, match="at least 2 shapes"):
        CompileCost.measure(tiny_model(), *tokens, builder=one_shape)
