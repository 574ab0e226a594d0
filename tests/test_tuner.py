"""BucketTuner, BucketHyperModel and BucketSearchSpace on keras-tuner."""

import keras
import keras_tuner
import matplotlib
import numpy as np
import pytest

import kerasbatch
from kerasbatch.tuner import (
    BucketHyperModel,
    BucketSearchSpace,
    BucketTuner,
    objectives,
)
from kerasbatch.tuner import bucket_tuner as bucket_tuner_module

matplotlib.use("Agg")

SMALL_SPACE = BucketSearchSpace(
    num_buckets=(2, 4), boundaries=("uniform", "optimal"), pad_to_bucket=(False,)
)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    lengths = rng.lognormal(2.5, 0.6, 160).astype(int) + 1
    x = [rng.integers(1, 20, n) for n in lengths]
    y = rng.integers(0, 2, len(x)).astype("float32")
    return x, y


def build_model(hp):
    model = keras.Sequential(
        [
            keras.layers.Embedding(20, hp.Choice("units", [2, 4])),
            keras.layers.GlobalAveragePooling1D(),
            keras.layers.Dense(1),
        ]
    )
    # Eager on TensorFlow: the trials run a few steps each, too few to pay for
    # a trace (on JAX, eager steps cost more than the per-shape compiles).
    model.compile("adam", "mse", run_eagerly=keras.backend.backend() == "tensorflow")
    return model


def tuner_for(tmp_path, **kwargs):
    kwargs.setdefault("search_space", SMALL_SPACE)
    kwargs.setdefault("seed", 1)
    return BucketTuner(directory=tmp_path, project_name="search", **kwargs)


def completed(tuner):
    return [t for t in tuner.oracle.trials.values() if t.status == "COMPLETED"]


def value(trial, name):
    return trial.metrics.get_last_value(name)


# ------------------------------------------------------------- search space
def test_space_declares_fixed_boolean_and_choices():
    space = BucketSearchSpace(num_buckets=(4, 8), boundaries=("quantile",))
    hp = keras_tuner.HyperParameters()
    space.declare(hp)
    kinds = {p.name: type(p).__name__ for p in hp.space}
    assert kinds == {
        "boundaries": "Fixed",
        "num_buckets": "Choice",
        "batch_size": "Fixed",
        "pad_to_bucket": "Boolean",
        "truncate": "Fixed",
    }
    assert space.size() == 4


def test_space_with_batch_sizes_and_budgets_uses_conditional_scopes():
    space = BucketSearchSpace(
        num_buckets=(4,),
        boundaries=("optimal",),
        batch_size=(16, 32),
        max_tokens=(1000,),
        quadratic_length=(0, 64),
        pad_to_bucket=(False,),
    )
    hp = keras_tuner.HyperParameters()
    hp.values.update(batching="max_tokens", max_tokens=1000, quadratic_length=64)
    builder = space.make_builder(hp, kerasbatch.BucketBuilder(seed=7, max_length=90))
    assert (builder.max_tokens, builder.quadratic_length) == (1000, 64)
    assert builder.batch_size is None
    assert (builder.seed, builder.max_length) == (7, 90)
    builder = space.make_builder(keras_tuner.HyperParameters())
    assert (builder.batch_size, builder.max_tokens) == (16, None)
    assert space.size() == 4  # 2 batch sizes + 1 budget x 2 costs


def test_linear_cost_is_quadratic_length_zero():
    space = BucketSearchSpace(batch_size=(), max_tokens=(512,), pad_to_bucket=(False,))
    builder = space.make_builder(keras_tuner.HyperParameters())
    assert builder.quadratic_length is None and builder.max_tokens == 512


def test_space_config_round_trip():
    space = BucketSearchSpace(num_buckets=(3,), truncate=(False, True))
    assert BucketSearchSpace.from_config(space.get_config()) == space
    assert "truncate=[False, True]" in repr(space)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"num_buckets": ()}, ValueError, "num_buckets is empty"),
        ({"num_buckets": (0,)}, ValueError, "num_buckets choices must be ints >= 1"),
        ({"num_buckets": 8}, TypeError, "list or tuple"),
        ({"boundaries": ("fancy",)}, ValueError, "fancy"),
        ({"boundaries": ("optimal", "optimal")}, ValueError, "repeated"),
        ({"batch_size": (), "max_tokens": ()}, ValueError, "admits no configuration"),
        ({"quadratic_length": (0, 64)}, ValueError, "only applies with max_tokens"),
        ({"pad_to_bucket": (0, 1)}, TypeError, "True or False"),
    ],
)
def test_space_rejects_bad_choices(kwargs, error, match):
    with pytest.raises(error, match=match):
        BucketSearchSpace(**kwargs)


def test_space_with_no_valid_configuration_fails_before_any_trial(tmp_path):
    space = BucketSearchSpace(batch_size=(), max_tokens=(50, 80))
    tuner = tuner_for(tmp_path, search_space=space, max_trials=3)
    with pytest.raises(ValueError, match="longest element is 300 long"):
        tuner.search(lengths=np.array([10, 300, 20]))
    assert not tuner.oracle.trials


# -------------------------------------------------------------- objectives
def test_objectives_by_name():
    assert objectives.get("padding_efficiency").direction == "max"
    assert objectives.get("val_accuracy").direction == "max"
    assert objectives.get(keras_tuner.Objective("mine", "min")).name == "mine"
    with pytest.raises(ValueError, match="Unknown objective 'padding_eficiency'"):
        objectives.get("padding_eficiency")
    with pytest.raises(TypeError, match="one objective"):
        objectives.get(["loss", "val_loss"])


def test_unknown_objective_name_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="Unknown objective 'speed'"):
        tuner_for(tmp_path, objective="speed")


@pytest.mark.parametrize("objective", ["throughput", "val_loss"])
def test_objectives_that_train_need_a_model(tmp_path, objective):
    with pytest.raises(ValueError, match="trains a model: pass hypermodel"):
        tuner_for(tmp_path, objective=objective)


def test_validation_metric_without_validation_data_is_an_error(tmp_path, data):
    tuner = tuner_for(tmp_path, hypermodel=build_model, objective="val_loss")
    with pytest.raises(ValueError, match="no validation_data"):
        tuner.search(*data, epochs=1)


def test_metric_the_model_does_not_log_ends_the_search(tmp_path, data):
    tuner = tuner_for(tmp_path, hypermodel=build_model, objective="val_accuracy")
    x, y = data[0][:32], data[1][:32]  # the check follows the first fit
    with pytest.raises(keras_tuner.errors.FatalError, match="not a metric the model"):
        tuner.search(x, y, validation_data=(x, y), epochs=1, verbose=0)


def test_throughput_needs_data_not_lengths(tmp_path):
    tuner = tuner_for(tmp_path, hypermodel=build_model, objective="throughput")
    with pytest.raises(ValueError, match="needs data"):
        tuner.search(lengths=np.array([3, 4]))


# -------------------------------------------------- padding_efficiency objective
@pytest.mark.backend
def test_padding_efficiency_matches_the_builder_exactly(tmp_path, data):
    x, y = data
    tuner = tuner_for(tmp_path, max_trials=4)
    tuner.search(x, y, verbose=0)
    trials = completed(tuner)
    assert len(trials) == 4
    for trial in trials:
        builder = SMALL_SPACE.make_builder(trial.hyperparameters)
        builder.build(x, y, engine="python")  # plans as tf.data does, untraced
        statistics = builder.statistics(epoch=0)
        assert value(trial, "padding_efficiency") == statistics.padding_efficiency
        assert value(trial, "distinct_shapes") == statistics.distinct_shapes
        assert value(trial, "truncated_fraction") == 0.0
        assert not trial.metrics.exists("throughput")  # no model given


def test_padding_efficiency_search_on_a_million_lengths(tmp_path):
    lengths = np.random.default_rng(0).lognormal(4, 0.7, 1_000_000).astype(int)
    tuner = tuner_for(tmp_path, search_space=BucketSearchSpace(), max_trials=8)
    tuner.search(lengths=lengths, verbose=0)
    assert len(completed(tuner)) == 8
    best = tuner.oracle.get_best_trials(1)[0]
    assert best.score == max(t.score for t in completed(tuner))


def test_truncation_records_the_fraction_of_positions_cut(tmp_path, data):
    space = BucketSearchSpace(
        num_buckets=(4,),
        boundaries=("uniform",),
        pad_to_bucket=(False,),
        truncate=(True,),
    )
    tuner = tuner_for(tmp_path, search_space=space, max_trials=1)
    tuner.search(*data, verbose=0)
    builder = tuner.get_best_builder()
    builder.build(*data, engine="python")
    statistics = builder.statistics(0)
    kept = builder.plan(0).real_positions.sum()
    expected = statistics.truncated_positions / (statistics.truncated_positions + kept)
    trial = completed(tuner)[0]
    assert value(trial, "truncated_fraction") == pytest.approx(expected)
    assert 0 < expected < 1


def test_efficiency_with_a_model_also_records_throughput(tmp_path, data):
    tuner = tuner_for(
        tmp_path, hypermodel=build_model, max_trials=1, throughput_steps=2
    )
    tuner.search(*data, verbose=0)
    assert value(completed(tuner)[0], "throughput") > 0


# ---------------------------------------------------------- throughput objective
def test_throughput_counts_real_positions_of_the_timed_steps(
    tmp_path, data, monkeypatch
):
    clock = iter([10.0, 12.0])
    monkeypatch.setattr(bucket_tuner_module.time, "perf_counter", lambda: next(clock))
    space = BucketSearchSpace(
        num_buckets=(2,),
        boundaries=("uniform",),
        batch_size=(64,),
        pad_to_bucket=(False,),
    )
    steps = 7  # more than one epoch's batches: crosses into the next epoch
    tuner = tuner_for(
        tmp_path,
        hypermodel=build_model,
        objective="throughput",
        search_space=space,
        max_trials=1,
        throughput_steps=steps,
    )
    tuner.search(*data, verbose=0)
    builder = space.make_builder(keras_tuner.HyperParameters())
    builder.build(*data, engine="python")
    per_batch = np.concatenate(
        [builder.plan(epoch).real_positions.sum(axis=1) for epoch in range(3)]
    )
    assert builder.plan(0).num_batches < steps
    trial = completed(tuner)[0]
    assert value(trial, "throughput") == per_batch[:steps].sum() / 2.0
    assert (
        value(trial, "padding_efficiency") == builder.statistics(0).padding_efficiency
    )


@pytest.mark.backend
def test_throughput_search_finds_a_best_builder(tmp_path, data):
    tuner = tuner_for(
        tmp_path,
        hypermodel=build_model,
        objective="throughput",
        max_trials=2,  # a best of two: each trial builds and trains a model
        throughput_steps=3,
    )
    tuner.search(*data, verbose=0)
    trials = completed(tuner)
    best = max(trials, key=lambda t: value(t, "throughput"))
    assert tuner.get_best_builder() == SMALL_SPACE.make_builder(best.hyperparameters)


# -------------------------------------------------------------- metric objective
@pytest.mark.backend
def test_val_loss_search_records_all_three_figures(tmp_path, data):
    callback_epochs = []

    class Recorder(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            callback_epochs.append(epoch)

    tuner = tuner_for(
        tmp_path, hypermodel=build_model, objective="val_loss", max_trials=2
    )
    # A fifth of the data: which figures a trial records is under test.
    x, y = data[0][:32], data[1][:32]
    tuner.search(
        x, y, validation_data=(x, y), epochs=2, verbose=0, callbacks=[Recorder()]
    )
    for trial in completed(tuner):
        for name in ("val_loss", "loss", "padding_efficiency", "throughput"):
            assert trial.metrics.exists(name), name
        assert 0 < value(trial, "padding_efficiency") <= 1
    assert callback_epochs == [0, 1, 0, 1]  # the tuner's callbacks are forwarded
    assert len(tuner.get_best_models(1)) == 1


def test_hyperband_gives_trials_an_epoch_budget(tmp_path, data):
    tuner = tuner_for(
        tmp_path,
        hypermodel=build_model,
        objective="val_loss",
        oracle="hyperband",
        # The smallest Hyperband that continues a trial: 5 trials (2 of 1
        # epoch, one of them continued to 2, and 2 of 2), where 3 epochs and
        # a factor of 3 ran 6.
        oracle_kwargs={"max_epochs": 2, "factor": 2},
    )
    # A fifth of the data: the epoch budgets, not the steps, are under test.
    x, y = data[0][:32], data[1][:32]
    tuner.search(x, y, validation_data=(x, y), verbose=0)
    epochs = [t.hyperparameters.get("tuner/epochs") for t in completed(tuner)]
    assert max(epochs) == 2 and min(epochs) == 1
    continued = [
        t for t in completed(tuner) if "tuner/trial_id" in t.hyperparameters.values
    ]
    assert continued  # later rounds load the weights of earlier trials


def test_hyperband_needs_a_metric_and_max_epochs(tmp_path):
    with pytest.raises(ValueError, match="Hyperband allocates training epochs"):
        tuner_for(tmp_path, oracle="hyperband", oracle_kwargs={"max_epochs": 3})
    with pytest.raises(ValueError, match="max_epochs"):
        tuner_for(
            tmp_path, hypermodel=build_model, objective="val_loss", oracle="hyperband"
        )


# ------------------------------------------------------------------- oracles
@pytest.mark.parametrize(
    "oracle", ["random", "bayesian", keras_tuner.oracles.RandomSearchOracle]
)
def test_oracles_by_name_and_class(tmp_path, oracle):
    tuner = tuner_for(tmp_path, oracle=oracle, max_trials=3)
    tuner.search(lengths=np.arange(1, 500), verbose=0)
    assert len(completed(tuner)) == 3


def test_grid_search_covers_the_space_once(tmp_path):
    space = BucketSearchSpace(
        num_buckets=(2, 4),
        boundaries=("uniform", "optimal"),
        batch_size=(8,),
        max_tokens=(400,),
        pad_to_bucket=(False,),
    )
    tuner = tuner_for(tmp_path, oracle="grid", search_space=space, max_trials=50)
    tuner.search(lengths=np.arange(1, 300), verbose=0)
    configs = {
        tuple(sorted(t.hyperparameters.values.items())) for t in completed(tuner)
    }
    assert len(completed(tuner)) == len(configs) == space.size() == 8


def test_oracle_instance(tmp_path):
    oracle = keras_tuner.oracles.BayesianOptimizationOracle(
        objective=objectives.get("padding_efficiency"), max_trials=2, seed=3
    )
    tuner = tuner_for(tmp_path, oracle=oracle, seed=None)
    tuner.search(lengths=np.arange(1, 100), verbose=0)
    assert len(completed(tuner)) == 2


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"oracle": "annealing"}, "Unknown oracle 'annealing'"),
        ({"oracle": 3}, "oracle must be a name"),
        ({"seed": 0}, "positive int"),
        ({"throughput_steps": 0}, "throughput_steps"),
    ],
)
def test_bad_tuner_arguments(tmp_path, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        tuner_for(tmp_path, **kwargs)


# ----------------------------------------------------- failures and resumption
def test_rejected_configuration_fails_its_trial_and_the_search_goes_on(tmp_path):
    space = BucketSearchSpace(
        num_buckets=(1,),
        boundaries=("uniform",),
        batch_size=(),
        max_tokens=(150, 10_000),
        pad_to_bucket=(False,),
    )
    tuner = tuner_for(tmp_path, oracle="grid", search_space=space, max_trials=5)
    tuner.search(lengths=np.array([5, 100, 200]), verbose=0)
    statuses = {
        t.hyperparameters.get("max_tokens"): t for t in tuner.oracle.trials.values()
    }
    assert statuses[150].status == "FAILED"
    assert "exceeds max_tokens=150" in statuses[150].message
    assert statuses[10_000].status == "COMPLETED"
    assert tuner.get_best_builder().max_tokens == 10_000


def test_interrupted_search_resumes(tmp_path, monkeypatch):
    lengths = np.random.default_rng(0).integers(1, 300, 2000)
    runs = []
    make_builder = BucketSearchSpace.make_builder

    def interrupt_third(self, hp, template=None):
        runs.append(hp.values["num_buckets"])
        if len(runs) == 3:
            raise KeyboardInterrupt
        return make_builder(self, hp, template)

    monkeypatch.setattr(BucketSearchSpace, "make_builder", interrupt_third)
    tuner = tuner_for(tmp_path, search_space=BucketSearchSpace(), max_trials=5)
    with pytest.raises(KeyboardInterrupt):
        tuner.search(lengths=lengths, verbose=0)
    done = {t.trial_id: t.score for t in completed(tuner)}
    assert len(done) == 2
    monkeypatch.setattr(BucketSearchSpace, "make_builder", make_builder)

    resumed = tuner_for(tmp_path, search_space=BucketSearchSpace(), max_trials=5)
    resumed.search(lengths=lengths, verbose=0)
    trials = completed(resumed)
    assert len(trials) == 5  # the interrupted trial ran again, then two more
    assert {t.trial_id: t.score for t in trials if t.trial_id in done} == done

    overwritten = tuner_for(tmp_path, max_trials=5, overwrite=True)
    assert not overwritten.oracle.trials


# ----------------------------------------------------------------- results
def test_best_builder_round_trip(tmp_path, data):
    template = kerasbatch.BucketBuilder(
        seed=5, output_lengths=True, max_length=60, overflow="truncate"
    )
    tuner = tuner_for(tmp_path, builder=template, max_trials=3)
    tuner.search(*data, verbose=0)
    best = tuner.get_best_builder()
    config = best.get_config()
    assert (config["seed"], config["output_lengths"], config["max_length"]) == (
        5,
        True,
        60,
    )
    restored = kerasbatch.BucketBuilder.from_config(config)
    assert restored == best
    restored_from_keras = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(best)
    )
    assert restored_from_keras == best
    restored.build(*data, engine="python")
    assert (
        restored.statistics(0).padding_efficiency
        == tuner.oracle.get_best_trials()[0].score
    )
    assert len(tuner.get_best_builder(num_builders=2)) == 2


def test_best_builder_before_search(tmp_path):
    with pytest.raises(RuntimeError, match="run search"):
        tuner_for(tmp_path).get_best_builder()


def test_best_builder_trains(tmp_path, data):
    tuner = tuner_for(tmp_path, max_trials=2)
    tuner.search(*data, verbose=0)
    builder = tuner.get_best_builder()
    model = build_model(keras_tuner.HyperParameters())
    history = model.fit(builder.build(*data), epochs=1, verbose=0, shuffle=False)
    assert np.isfinite(history.history["loss"][0])


def test_results_summary_lists_the_bucket_settings(tmp_path, capsys):
    tuner = tuner_for(tmp_path, max_trials=2)
    tuner.search(lengths=np.arange(1, 200), verbose=0)
    tuner.results_summary(1)
    out = capsys.readouterr().out
    assert "num_buckets" in out and "padding_efficiency" in out


def test_plot_trials(tmp_path, data):
    tuner = tuner_for(
        tmp_path, hypermodel=build_model, max_trials=2, throughput_steps=2
    )
    tuner.search(*data, verbose=0)
    figure = kerasbatch.tuner.plot_trials(tuner)
    titles = [ax.get_title() for ax in figure.axes]
    assert titles[:2] == ["padding_efficiency per trial", "throughput per trial"]
    assert titles[2].startswith("Best boundaries")
    assert len(figure.axes[0].patches) == 2
    reloaded = tuner_for(tmp_path, hypermodel=build_model)
    with pytest.raises(RuntimeError, match="pass lengths"):
        kerasbatch.tuner.plot_trials(reloaded)
    assert kerasbatch.tuner.plot_trials(reloaded, lengths=[len(s) for s in data[0]])
    matplotlib.pyplot.close("all")


# ------------------------------------------------------------ BucketHyperModel
def test_hypermodel_with_a_keras_tuner_tuner(tmp_path, data):
    hypermodel = BucketHyperModel(build_model, SMALL_SPACE)
    tuner = keras_tuner.RandomSearch(
        hypermodel,
        objective="val_loss",
        max_trials=2,  # each trial builds two datasets and a model
        seed=2,
        directory=tmp_path,
        project_name="joint",
    )
    tuner.search(*data, validation_data=data, epochs=1, verbose=0)
    names = {p.name for p in tuner.oracle.get_space().space}
    assert {"units", "num_buckets", "boundaries"} <= names
    trials = completed(tuner)
    assert len(trials) == 2
    assert all(t.metrics.exists("padding_efficiency") for t in trials)
    best_hp = tuner.get_best_hyperparameters()[0]
    assert hypermodel.make_builder(best_hp).num_buckets == best_hp.get("num_buckets")


def test_hypermodel_trains_with_the_trial_builder(data):
    hp = keras_tuner.HyperParameters()
    hypermodel = BucketHyperModel(build_model, SMALL_SPACE)
    model = hypermodel.build(hp)
    history = hypermodel.fit(
        hp, model, *data, validation_data=data, epochs=2, verbose=0
    )
    builder = hypermodel.make_builder(hp)
    builder.build(*data, engine="python")
    assert history.history["padding_efficiency"] == [
        builder.statistics(0).padding_efficiency,
        builder.statistics(1).padding_efficiency,
    ]
    assert "val_loss" in history.history


def test_bucket_hypermodel_in_bucket_tuner(tmp_path, data):
    hypermodel = BucketHyperModel(build_model, SMALL_SPACE)
    tuner = BucketTuner(
        hypermodel, max_trials=1, seed=1, directory=tmp_path, throughput_steps=2
    )
    tuner.search(*data, verbose=0)
    assert tuner.hypermodel is hypermodel
    with pytest.raises(ValueError, match="brings its own"):
        BucketTuner(hypermodel, search_space=SMALL_SPACE, directory=tmp_path)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"build_model": 3}, TypeError, "build_model must be"),
        ({"search_space": {"num_buckets": (2,)}}, TypeError, "BucketSearchSpace"),
        ({"builder": kerasbatch.SortedBuilder(4)}, TypeError, "BucketBuilder template"),
    ],
)
def test_hypermodel_rejects_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        BucketHyperModel(**kwargs)


def test_hypermodel_rejects_validation_split(data):
    hp = keras_tuner.HyperParameters()
    hypermodel = BucketHyperModel(build_model, SMALL_SPACE)
    with pytest.raises(ValueError, match="validation_split"):
        hypermodel.fit(hp, hypermodel.build(hp), *data, validation_split=0.2)
    with pytest.raises(ValueError, match="validation_data must be"):
        hypermodel.fit(hp, hypermodel.build(hp), *data, validation_data=[1, 2, 3, 4])


# ------------------------------------------- settings that would hang or lie
@pytest.mark.parametrize(
    ("oracle", "max_trials"),
    [("bayesian", 0), ("random", None), ("bayesian", -1), ("random", 2.5)],
)
def test_a_search_without_end_is_rejected(tmp_path, oracle, max_trials):
    with pytest.raises(ValueError, match="max_trials must be a positive int"):
        tuner_for(tmp_path, oracle=oracle, max_trials=max_trials)


def test_a_grid_may_run_until_it_is_exhausted(tmp_path):
    tuner = tuner_for(tmp_path, oracle="grid", max_trials=None)
    tuner.search(lengths=np.arange(1, 50), verbose=0)
    assert len(completed(tuner)) == 4  # the whole grid of SMALL_SPACE


@pytest.mark.parametrize(
    ("overflow", "match"),
    [
        (
            "error",
            r"admits no element longer than max_length=3.*element 0 has length 5",
        ),
        ("drop", r"overflow='drop' would drop them all"),
    ],
)
def test_a_template_that_rejects_every_element_fails_before_any_trial(
    tmp_path, overflow, match
):
    template = kerasbatch.BucketBuilder(max_length=3, overflow=overflow)
    tuner = tuner_for(tmp_path, builder=template, max_trials=2)
    with pytest.raises(ValueError, match=match):
        tuner.search(lengths=np.arange(5, 40), verbose=0)
    assert not tuner.oracle.trials


def test_a_search_whose_every_trial_failed_reports_no_best_builder(
    tmp_path, monkeypatch
):
    def reject(self, hp, template=None):
        raise ValueError("rejected for the test")

    monkeypatch.setattr(BucketSearchSpace, "make_builder", reject)
    tuner = tuner_for(tmp_path, max_trials=2)
    with pytest.raises(ValueError, match=r"None of the 2 trials completed.*rejected"):
        tuner.search(lengths=np.arange(1, 50), verbose=0)
    with pytest.raises(ValueError, match="no best builder"):
        tuner.get_best_builder()
