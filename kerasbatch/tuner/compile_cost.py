"""What a training run costs in steps and compiles, for the tuner to trade off.

XLA (`jit_compile=True`, the JAX backend) compiles once for every distinct
batch shape. Fewer shapes (fewer buckets, `pad_to_bucket`, `remainder="pad"`)
cost padding in every step of every epoch; more shapes cost compiles, once.
Which wins depends on how long the run is: `CompileCost` estimates the
seconds of a whole run of a builder's batches so that `BucketTuner`
(`objective="training_time"`) can find the best setting for it.
"""

import dataclasses
import math
import numbers
import time
import warnings

import numpy as np

from kerasbatch.config import Configurable
from kerasbatch.planning.costs import extrapolate_shapes


@dataclasses.dataclass(frozen=True)
class TrainingTime:
    """The estimated seconds of a training run, and what they are made of.

    Attributes:
        training_time: `step_time + compile_time`, in seconds.
        step_time: seconds of the training steps of every epoch.
        compile_time: seconds of compiling every distinct shape once.
        compiled_shapes: distinct batch shapes over all the epochs.
        padded_positions: positions fed over all the epochs (padding included).
        batches: training steps over all the epochs.
    """

    training_time: float
    step_time: float
    compile_time: float
    compiled_shapes: float
    padded_positions: float
    batches: float

    def figures(self):
        """The figures as a dict of floats (what a tuner trial records)."""
        return {k: float(v) for k, v in dataclasses.asdict(self).items()}


class CompileCost(Configurable):
    """Seconds per padded position, per step and per compiled shape.

    The estimated seconds of training a builder's batches for `epochs`
    epochs are

        epochs' padded positions × seconds_per_position
        + epochs' batches × seconds_per_step
        + distinct shapes over the epochs × seconds_per_shape

    The positions, batches and shapes are exact, from the builder's plans of
    epochs `0 .. epochs - 1` (batch padding brings new shapes in later epochs;
    `pad_to_bucket` with `remainder="pad"` feeds the same shapes every
    epoch). Give the seconds (from a profile, or a guess), or measure them
    on the model with `CompileCost.measure`.

    Args:
        seconds_per_shape: seconds to compile one new shape (> 0).
        seconds_per_position: seconds of a training step per padded position
            fed (> 0).
        epochs: epochs of the training run (a positive int).
        seconds_per_step: fixed seconds per step beside the positions
            (>= 0).
        planned_epochs: plan at most this many epochs (None: all `epochs`).
            Planning a million elements takes about 0.2 s per epoch; the
            epochs beyond are extrapolated: positions and batches by the
            planned epochs' mean, distinct shapes by a power law through the
            counts after half and all of the planned epochs (new shapes
            grow ever more slowly).

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> lengths = np.random.default_rng(0).integers(1, 100, 1000)
    >>> cost = kerasbatch.tuner.CompileCost(
    ...     seconds_per_shape=2.0, seconds_per_position=1e-6, epochs=3)
    >>> cost
    CompileCost(seconds_per_shape=2.0, seconds_per_position=1e-06, epochs=3, seconds_per_step=0.0, planned_epochs=None)
    >>> for pad_to_bucket in (False, True):
    ...     builder = kerasbatch.BucketBuilder(
    ...         num_buckets=4, batch_size=32, pad_to_bucket=pad_to_bucket,
    ...         remainder="pad")
    ...     builder.adapt(lengths)
    ...     estimate = cost.estimate(builder)
    ...     print(estimate.compiled_shapes, round(estimate.training_time, 3))
    12.0 24.204
    4.0 8.206
    """

    def __init__(
        self,
        seconds_per_shape,
        seconds_per_position,
        epochs=1,
        seconds_per_step=0.0,
        planned_epochs=None,
    ):
        self.seconds_per_shape = _seconds(seconds_per_shape, "seconds_per_shape")
        self.seconds_per_position = _seconds(
            seconds_per_position, "seconds_per_position"
        )
        self.seconds_per_step = _seconds(
            seconds_per_step, "seconds_per_step", allow_zero=True
        )
        self.epochs = _positive_int(epochs, "epochs")
        self.planned_epochs = (
            None
            if planned_epochs is None
            else _positive_int(planned_epochs, "planned_epochs")
        )

    def get_config(self):
        """The costs and epochs, a JSON-serialisable dict."""
        return {
            "seconds_per_shape": self.seconds_per_shape,
            "seconds_per_position": self.seconds_per_position,
            "epochs": self.epochs,
            "seconds_per_step": self.seconds_per_step,
            "planned_epochs": self.planned_epochs,
        }

    def estimate(self, builder):
        """The `TrainingTime` of `epochs` epochs of `builder`'s batches.

        Args:
            builder: a builder after `build` or `adapt` (one that plans its
                epochs: every builder but `StreamBucketBuilder`).
        """
        if not hasattr(builder, "plan"):
            raise TypeError(
                "builder must plan its epochs (a BucketBuilder, ...), got "
                f"{type(builder).__name__}."
            )
        planned = min(self.epochs, self.planned_epochs or self.epochs)
        shapes, counts, positions, batches = set(), [], 0, 0
        for epoch in range(planned):
            plan = builder.plan(epoch)
            shapes.update(map(tuple, plan.shapes().tolist()))
            counts.append(len(shapes))
            positions += int(plan.padded_positions().sum())
            batches += plan.num_batches
        scale = self.epochs / planned
        positions, batches = positions * scale, batches * scale
        compiled = float(extrapolate_shapes(counts, self.epochs))
        step_time = (
            positions * self.seconds_per_position + batches * self.seconds_per_step
        )
        compile_time = compiled * self.seconds_per_shape
        return TrainingTime(
            training_time=step_time + compile_time,
            step_time=step_time,
            compile_time=compile_time,
            compiled_shapes=compiled,
            padded_positions=positions,
            batches=batches,
        )

    @classmethod
    def measure(
        cls,
        model,
        x,
        y=None,
        sample_weight=None,
        *,
        builder=None,
        epochs=1,
        num_shapes=3,
        repeats=3,
        planned_epochs=None,
    ):
        """A `CompileCost` measured on the user's model.

        Feeds `num_shapes` batches of different shapes from the builder's
        first epoch (the smallest, the largest and ones between, by padded
        positions), each once (compile and step) and then `repeats` more
        times (step). The first shape's first call also builds the train
        function and optimizer, so compiles are timed on the other shapes
        (their first call less their median step); seconds per position and
        per step are a line fitted through the median steps. This trains the
        model for `num_shapes × (1 + repeats)` steps: pass a throwaway one.

        Args:
            model: a compiled `keras.Model`, or a function of no arguments
                returning one.
            x, y, sample_weight: training data, in any form builders take.
            builder: the builder whose batches to time (default: a
                `BucketBuilder()`); its settings are copied, it is not built.
            epochs: the `epochs` of the result.
            num_shapes: shapes to time (2 or more; fewer if the epoch has
                fewer).
            repeats: timed repeated steps per shape.
            planned_epochs: the `planned_epochs` of the result.

        Example:

        >>> import keras
        >>> import numpy as np
        >>> import kerasbatch
        >>> rng = np.random.default_rng(0)
        >>> x = [rng.integers(1, 20, n) for n in rng.integers(1, 60, 128)]
        >>> y = rng.integers(0, 2, 128).astype("float32")
        >>> model = keras.Sequential([
        ...     keras.layers.Embedding(20, 4),
        ...     keras.layers.GlobalAveragePooling1D(),
        ...     keras.layers.Dense(1)])
        >>> model.compile("adam", "mse", jit_compile=True)
        >>> cost = kerasbatch.tuner.CompileCost.measure(
        ...     model, x, y, builder=kerasbatch.BucketBuilder(
        ...         num_buckets=4, batch_size=16), epochs=10)
        >>> cost.seconds_per_shape > 0, cost.seconds_per_position > 0
        (True, True)
        """
        import keras

        from kerasbatch.builders import BucketBuilder

        if callable(model) and not isinstance(model, keras.Model):
            model = model()
        if not isinstance(model, keras.Model):
            raise TypeError(
                "model must be a compiled keras.Model or a function returning "
                f"one, got {type(model).__name__}."
            )
        if not model.compiled:
            raise ValueError("model must be compiled (model.compile(...)) first.")
        num_shapes = _positive_int(num_shapes, "num_shapes")
        if num_shapes < 2:
            raise ValueError(f"num_shapes must be at least 2, got {num_shapes}.")
        repeats = _positive_int(repeats, "repeats")
        epochs = _positive_int(epochs, "epochs")
        builder = type(builder or BucketBuilder()).from_config(
            (builder or BucketBuilder()).get_config()
        )
        dataset = builder.build(x, y, sample_weight)
        plan = builder.plan(0)
        table = np.column_stack([plan.batch_rows, plan.padded_lengths])
        shapes, first = np.unique(table, axis=0, return_index=True)
        if len(shapes) < 2:
            raise ValueError(
                "measure needs batches of at least 2 shapes, but the builder's "
                f"epoch feeds {len(shapes)}; use more buckets, or batch padding."
            )
        positions = shapes[:, 0] * shapes[:, 1:].sum(axis=1)
        order = np.argsort(positions, kind="stable")
        chosen = order[
            np.unique(np.linspace(0, len(order) - 1, min(num_shapes, len(order))))
            .round()
            .astype(int)
        ]
        wanted = {int(first[c]): int(c) for c in chosen}
        batches = {}
        for index, batch in enumerate(dataset.take(max(wanted) + 1)):
            if index in wanted:
                batches[wanted[index]] = keras.tree.map_structure(np.asarray, batch)
        firsts, steps = [], []
        for shape in chosen:
            inputs, targets, weights = keras.utils.unpack_x_y_sample_weight(
                batches[int(shape)]
            )
            times = []
            for _ in range(1 + repeats):
                start = time.perf_counter()
                model.train_on_batch(inputs, targets, sample_weight=weights)
                times.append(time.perf_counter() - start)
            firsts.append(times[0])
            steps.append(float(np.median(times[1:])))
        firsts, steps = np.array(firsts), np.array(steps)
        seconds_per_shape = float(np.mean(firsts[1:] - steps[1:]))
        if seconds_per_shape <= 0:
            warnings.warn(
                "The model's first steps of new shapes were no slower than "
                "repeated steps: it compiles no shape measurably (not "
                "XLA-compiled?). Compile cost set to 1 microsecond.",
                stacklevel=2,
            )
            seconds_per_shape = 1e-6
        per_position, per_step = _fit_line(positions[chosen].astype(float), steps)
        return cls(
            seconds_per_shape=seconds_per_shape,
            seconds_per_position=per_position,
            epochs=epochs,
            seconds_per_step=per_step,
            planned_epochs=planned_epochs,
        )


def _fit_line(positions, steps):
    """`(slope, intercept)` of steps over positions, both positive (or a zero
    intercept): noise can tilt a line through two or three points."""
    if np.ptp(positions) > 0:
        slope, intercept = np.polyfit(positions, steps, 1)
        if slope > 0 and intercept >= 0:
            return float(slope), float(intercept)
    return float(steps.sum() / positions.sum()), 0.0


def _seconds(value, name, allow_zero=False):
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{name} must be a number of seconds, got {value!r}.")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}.")
    return value


def _positive_int(value, name):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return int(value)
