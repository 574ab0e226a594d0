"""A keras-tuner Tuner that searches bucket boundaries and batch sizes."""

import json
import time
import warnings

import keras_tuner
from sklearn.exceptions import ConvergenceWarning

from kerasbatch import engines
from kerasbatch.data import sources
from kerasbatch.tuner import objectives
from kerasbatch.tuner.compile_cost import CompileCost
from kerasbatch.tuner.hypermodel import BucketHyperModel

#: Oracles by name; any other keras-tuner Oracle class or instance works too.
ORACLES = {
    "random": keras_tuner.oracles.RandomSearchOracle,
    "bayesian": keras_tuner.oracles.BayesianOptimizationOracle,
    "grid": keras_tuner.oracles.GridSearchOracle,
    "hyperband": keras_tuner.oracles.HyperbandOracle,
}


class BucketTuner(keras_tuner.Tuner):
    """Searches `BucketBuilder` settings with keras-tuner; the result is a builder.

    Each trial makes a `BucketBuilder` from the trial's hyperparameters (a
    `BucketSearchSpace`) and scores it by the objective:

    - `"padding_efficiency"` (max): the exact efficiency of the planned epoch,
      from the lengths alone. No training: a 20-trial search over a million
      lengths takes seconds.
    - `"throughput"` (max): real (non-padding) positions per second of
      `throughput_steps` training steps of a fresh model from `hypermodel` on
      the candidate's batches, timed with tracing and compilation, so
      candidates that feed many distinct shapes pay for them.
    - `"training_time"` (min): the seconds a training run of the candidate's
      batches is estimated to take by `cost`, a `CompileCost`: its epochs'
      padded positions and steps, plus a compile for every distinct shape
      they feed. No training: the trade-off of padding against compiles
      moves with the run's length (few epochs favour few shapes).
    - any metric of a full `model.fit` (`"val_loss"`, `"accuracy"`, or a
      `keras_tuner.Objective`): trains with the `fit` arguments given to
      `search` (Hyperband sets the epochs).

    Every trial records every figure it has, whatever the objective:
    `padding_efficiency` always, `throughput` whenever it trains (also with
    the efficiency objective when a `hypermodel` is given), the model's
    metrics with a metric objective, and with a plan objective also
    `distinct_shapes` and `truncated_fraction` (positions cut by truncation),
    and, when a `cost` is given, the figures of its estimate
    (`training_time`, `step_time`, `compile_time`, `compiled_shapes`,
    `padded_positions`, `batches`; with a metric objective, as constant
    per-epoch values beside the model's metrics).
    A configuration the builder rejects (e.g. a token budget too small for a
    bucket) is recorded as a failed trial and the search goes on; keras-tuner
    stops after `max_consecutive_failed_trials` failures in a row.

    The standard keras-tuner API applies: `search`, `get_best_hyperparameters`,
    `results_summary`, `directory`/`project_name`, and resuming an interrupted
    search with `overwrite=False` (the default).

    Args:
        hypermodel: `build_model(hp)` returning a compiled `keras.Model`, a
            `keras_tuner.HyperModel`, or a `BucketHyperModel` (which then
            brings its own `search_space` and `builder`). Needed by every
            objective but `"padding_efficiency"`.
        objective: `"padding_efficiency"`, `"throughput"`, `"training_time"`,
            a metric name, or a `keras_tuner.Objective`. Ignored when `oracle`
            is an instance.
        oracle: `"bayesian"` (the default: on the reference workloads its
            20-trial searches came within 1 % of the grid's best in 20 of
            20 runs, random search in 16), `"random"`, `"grid"`,
            `"hyperband"`, a keras-tuner Oracle class, or an Oracle instance.
        max_trials: trials to run (not for Hyperband, which takes
            `oracle_kwargs={"max_epochs": ...}`).
        search_space: the `BucketSearchSpace` to search.
        builder: a `BucketBuilder` template for the settings not searched
            (`padding`, `max_length`, `overflow`, `output_mask`, `seed`, ...).
        throughput_steps: training steps timed per trial for `throughput`.
        cost: a `CompileCost` (seconds per padded position, per step and per
            compiled shape, and the run's epochs): needed by
            `"training_time"`; with another objective its figures are
            recorded too.
        seed: the oracle's random seed, a positive int (keras-tuner's
            oracles take 0 for "no seed"), or None for a random one.
        engine: the engine of the trials' datasets (`"tf.data"`, `"grain"`
            or `"python"`; see `kerasbatch.engines`).
        oracle_kwargs: further arguments of the oracle class
            (`max_retries_per_trial`, `max_consecutive_failed_trials`,
            Hyperband's `max_epochs` and `factor`, ...).
        **kwargs: arguments of `keras_tuner.Tuner`: `directory`,
            `project_name`, `overwrite`, `executions_per_trial`, ...

    Example:

    >>> import tempfile
    >>> import numpy as np
    >>> import kerasbatch
    >>> lengths = np.random.default_rng(0).lognormal(4, 0.6, 10_000).astype(int)
    >>> tuner = kerasbatch.tuner.BucketTuner(
    ...     max_trials=6, seed=1, overwrite=True,
    ...     directory=tempfile.mkdtemp(), project_name="buckets")
    >>> tuner.search(lengths=lengths, verbose=0)
    >>> best = tuner.get_best_builder()
    >>> best.boundaries, best.num_buckets
    ('uniform', 64)
    >>> round(float(tuner.oracle.get_best_trials()[0].score), 3)
    0.957

    With `"training_time"`, a 3-epoch fine-tune and a 100-epoch run at one
    second per compiled shape pick different numbers of buckets:

    >>> space = kerasbatch.tuner.BucketSearchSpace(
    ...     num_buckets=(2, 4, 8, 16), boundaries=("optimal",),
    ...     pad_to_bucket=(True,))
    >>> for epochs in (3, 100):
    ...     cost = kerasbatch.tuner.CompileCost(
    ...         seconds_per_shape=1.0, seconds_per_position=1e-6, epochs=epochs)
    ...     tuner = kerasbatch.tuner.BucketTuner(
    ...         objective="training_time", cost=cost, oracle="grid",
    ...         max_trials=None, search_space=space,
    ...         builder=kerasbatch.BucketBuilder(remainder="pad"),
    ...         overwrite=True, directory=tempfile.mkdtemp(), project_name="cost")
    ...     tuner.search(lengths=lengths, verbose=0)
    ...     best = tuner.oracle.get_best_trials()[0]
    ...     print(epochs, tuner.get_best_builder().num_buckets, round(best.score, 2))
    3 2 6.48
    100 8 87.71
    """

    def __init__(
        self,
        hypermodel=None,
        objective=objectives.PADDING_EFFICIENCY,
        oracle="bayesian",
        max_trials=20,
        search_space=None,
        builder=None,
        throughput_steps=32,
        seed=None,
        oracle_kwargs=None,
        cost=None,
        engine="tf.data",
        **kwargs,
    ):
        if isinstance(hypermodel, BucketHyperModel):
            if search_space is not None or builder is not None:
                raise ValueError(
                    "A BucketHyperModel brings its own search_space and builder; "
                    "do not pass them to BucketTuner as well."
                )
            engine = hypermodel.engine
        else:
            hypermodel = BucketHyperModel(
                hypermodel, search_space, builder, engine=engine
            )
        oracle = _make_oracle(oracle, objective, max_trials, seed, oracle_kwargs)
        objective = oracle.objective
        if type(objective) is not keras_tuner.Objective:  # not Multi/Default
            raise ValueError(f"BucketTuner needs one objective, got {objective!r}.")
        if objectives.needs_model(objective) and hypermodel.build_model is None:
            raise ValueError(
                f"The objective {objective.name!r} trains a model: pass "
                "hypermodel=build_model (a function of hp returning a compiled "
                "keras.Model)."
            )
        if isinstance(oracle, keras_tuner.oracles.HyperbandOracle) and not (
            objectives.is_metric(objective)
        ):
            raise ValueError(
                f"Hyperband allocates training epochs, but {objective.name!r} "
                "trains no epochs; use a metric objective such as 'val_loss', "
                "or another oracle."
            )
        if cost is not None and not isinstance(cost, CompileCost):
            raise TypeError(
                "cost must be a kerasbatch.tuner.CompileCost, got "
                f"{type(cost).__name__}."
            )
        if objective.name == objectives.TRAINING_TIME and cost is None:
            raise ValueError(
                "The objective 'training_time' is estimated from a cost: pass "
                "cost=kerasbatch.tuner.CompileCost(seconds_per_shape=..., "
                "seconds_per_position=..., epochs=...), or one measured by "
                "CompileCost.measure(model, x, y, ...)."
            )
        if not isinstance(throughput_steps, int) or throughput_steps < 1:
            raise ValueError(
                f"throughput_steps must be a positive int, got {throughput_steps!r}."
            )
        self.throughput_steps = throughput_steps
        #: The `CompileCost` of `"training_time"`, or None.
        self.cost = cost
        #: Element lengths of the last `search` (for `plot_trials`).
        self.lengths = None
        super().__init__(oracle=oracle, hypermodel=hypermodel, **kwargs)

    # ----------------------------------------------------------------- search
    def search(
        self,
        x=None,
        y=None,
        sample_weight=None,
        *,
        lengths=None,
        validation_data=None,
        **fit_kwargs,
    ):
        """Runs the trials.

        Args:
            x, y, sample_weight: the training data, in any form builders take.
                Converted once; every trial plans (and trains) on it.
            lengths: instead of data, the element lengths alone (1-D ints);
                enough for `"padding_efficiency"`.
            validation_data: `(x, y)` or `(x, y, sample_weight)`, or a
                `tf.data.Dataset`, for metric objectives such as `"val_loss"`.
            **fit_kwargs: `model.fit` arguments for metric objectives
                (`epochs`, `callbacks`, `verbose`, ...); `verbose` also sets
                keras-tuner's own output.
        """
        objective = self.oracle.objective
        if lengths is not None:
            if x is not None or y is not None or sample_weight is not None:
                raise ValueError("Pass either lengths or data (x, y, ...), not both.")
            if objectives.needs_model(objective):
                raise ValueError(
                    f"The objective {objective.name!r} trains the model, which "
                    "needs data: pass x (and y), not lengths."
                )
            data = sources.from_lengths(lengths)
        else:
            if x is None:
                raise ValueError("search() needs data (x, y, ...) or lengths=.")
            data = sources.from_inputs(x, y, sample_weight)
        if objective.name.startswith("val_") and validation_data is None:
            raise ValueError(
                f"The objective {objective.name!r} is a validation metric, but "
                "no validation_data was given to search()."
            )
        self.lengths = data.element_lengths()
        self.hypermodel.search_space.check_lengths(
            self.lengths, self.hypermodel.builder
        )
        if isinstance(validation_data, tuple):
            validation_data = sources.from_inputs(*validation_data)
        with warnings.catch_warnings():
            # The Bayesian oracle's Gaussian process warns when a length scale
            # hits its bound, as it does on plateaus of equal scores.
            warnings.filterwarnings("ignore", category=ConvergenceWarning)
            super().search(data, validation_data=validation_data, **fit_kwargs)
        self._completed_trials()  # a search whose every trial failed is an error

    def _completed_trials(self):
        """The completed trials; raises naming the first failure if none is."""
        trials = list(self.oracle.trials.values())
        completed = [t for t in trials if t.status == "COMPLETED"]
        if completed:
            return completed
        if not trials:
            raise RuntimeError("No completed trial yet: run search() first.")
        failed = next((t for t in trials if t.message), trials[0])
        reason = (failed.message or "no message").strip().splitlines()[-1]
        raise ValueError(
            f"None of the {len(trials)} trials completed, so there is no best "
            f"builder. Trial {failed.trial_id} ended {failed.status}: {reason}"
        )

    def run_trial(self, trial, data, validation_data=None, **fit_kwargs):
        hp = trial.hyperparameters
        objective = self.oracle.objective
        if objectives.is_metric(objective):
            if "tuner/epochs" in hp.values:  # Hyperband's budget for this trial
                fit_kwargs["epochs"] = hp.values["tuner/epochs"]
                fit_kwargs["initial_epoch"] = hp.values["tuner/initial_epoch"]
            figures = {}
            if self.cost is not None:
                figures = self.cost.estimate(self._trial_builder(hp, data)).figures()
            histories = super().run_trial(
                trial, data, validation_data=validation_data, **fit_kwargs
            )
            _check_logged(objective, histories)
            for history in histories:  # recorded beside the model's metrics
                epochs = len(history.history[objective.name])
                for name, value in figures.items():
                    history.history[name] = [value] * epochs
            return histories
        builder = self._trial_builder(hp, data)
        statistics = builder.statistics(epoch=0)
        total = statistics.truncated_positions + builder.plan(0).real_positions.sum()
        results = {
            objectives.PADDING_EFFICIENCY: float(statistics.padding_efficiency),
            "distinct_shapes": float(statistics.distinct_shapes),
            "truncated_fraction": float(statistics.truncated_positions / max(total, 1)),
        }
        if self.cost is not None:
            results.update(self.cost.estimate(builder).figures())
        if self.hypermodel.build_model is not None:
            results[objectives.THROUGHPUT] = self._measure_throughput(hp, builder, data)
        return results

    def _trial_builder(self, hp, data):
        """The trial's builder, planned on `data`; a rejected config fails the trial."""
        try:
            builder = self.hypermodel.make_builder(hp)
            builder.adapt(data)
        except ValueError as error:
            raise keras_tuner.errors.FailedTrialError(
                f"The builder rejects {hp.values}: {error}"
            ) from error
        return builder

    def _measure_throughput(self, hp, builder, data):
        """Real positions per second of `throughput_steps` fresh training steps."""
        model = self._try_build(hp)
        engine = self.hypermodel.engine
        dataset = builder.build(data, engine=engine)
        steps = self.throughput_steps
        if engines.in_graph(engine):
            dataset = dataset.repeat()
        else:  # one epoch at most: its length is what Keras knows
            steps = min(steps, len(dataset))
        first_epoch = builder.epoch
        start = time.perf_counter()
        model.fit(dataset, steps_per_epoch=steps, epochs=1, verbose=0, shuffle=False)
        seconds = time.perf_counter() - start
        positions, epoch = 0, first_epoch
        while steps > 0:
            real = builder.plan(epoch).real_positions.sum(axis=1)
            positions += int(real[:steps].sum())
            steps -= len(real)
            epoch += 1
        return positions / seconds

    def _build_hypermodel(self, hp):
        model = super()._build_hypermodel(hp)
        if "tuner/trial_id" in hp.values:  # Hyperband continues a trial
            trial_id = hp.values["tuner/trial_id"]
            with open(self._get_build_config_fname(trial_id)) as file:
                model.build_from_config(json.load(file))
            model.load_weights(self._get_checkpoint_fname(trial_id))
        return model

    # ---------------------------------------------------------------- results
    def get_best_builder(self, num_builders=None):
        """The best trial's `BucketBuilder`, ready to `build` (not yet built).

        Its `get_config()` is what to save. Boundaries stay a strategy name
        and a number of buckets, resolved from the data `build` receives.

        Args:
            num_builders: None for the best builder, or an int for a list of
                the best `num_builders`, best first.
        """
        completed = len(self._completed_trials())
        hps = self.get_best_hyperparameters(min(num_builders or 1, completed))
        builders = [self.hypermodel.make_builder(hp) for hp in hps]
        return builders if num_builders else builders[0]


def _make_oracle(oracle, objective, max_trials, seed, oracle_kwargs):
    if isinstance(oracle, keras_tuner.Oracle):
        if oracle_kwargs:
            raise ValueError(
                "oracle_kwargs only apply when BucketTuner makes the oracle."
            )
        return oracle
    if isinstance(oracle, str):
        if oracle not in ORACLES:
            raise ValueError(
                f"Unknown oracle {oracle!r}; choose one of {list(ORACLES)}."
            )
        oracle = ORACLES[oracle]
    if not (isinstance(oracle, type) and issubclass(oracle, keras_tuner.Oracle)):
        raise TypeError(
            f"oracle must be a name, a keras-tuner Oracle class or instance, got {oracle!r}."
        )
    if seed is not None and (not isinstance(seed, int) or seed < 1):
        raise ValueError(
            f"seed must be a positive int or None, got {seed!r} (keras-tuner's "
            "oracles treat 0 as no seed)."
        )
    arguments = {"objective": objectives.get(objective), "seed": seed}
    if not issubclass(oracle, keras_tuner.oracles.HyperbandOracle):
        _check_max_trials(max_trials, oracle)
        arguments["max_trials"] = max_trials
    elif "max_epochs" not in (oracle_kwargs or {}):
        raise ValueError("Hyperband needs oracle_kwargs={'max_epochs': ...}.")
    return oracle(**arguments, **(oracle_kwargs or {}))


def _check_max_trials(max_trials, oracle):
    """keras-tuner searches without end for a `max_trials` of 0 or None
    (except a grid, which ends when it is exhausted)."""
    if max_trials is None and issubclass(oracle, keras_tuner.oracles.GridSearchOracle):
        return
    if (
        not isinstance(max_trials, int)
        or isinstance(max_trials, bool)
        or (max_trials < 1)
    ):
        raise ValueError(
            f"max_trials must be a positive int, got {max_trials!r} (keras-tuner "
            "would search without end); None is allowed for oracle='grid' only."
        )


def _check_logged(objective, histories):
    for history in histories:
        if objective.name not in history.history:
            raise keras_tuner.errors.FatalValueError(
                f"The objective {objective.name!r} is not a metric the model "
                f"logs; model.fit logs {sorted(history.history)}."
            )
