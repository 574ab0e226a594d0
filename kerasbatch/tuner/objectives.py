"""What a bucket search optimises: plan figures, throughput, estimated
training time, or a Keras metric."""

import keras_tuner
from keras_tuner.engine import metrics_tracking

PADDING_EFFICIENCY = "padding_efficiency"
THROUGHPUT = "throughput"
TRAINING_TIME = "training_time"
#: The objectives kerasbatch computes itself, and their directions.
DIRECTIONS = {PADDING_EFFICIENCY: "max", THROUGHPUT: "max", TRAINING_TIME: "min"}
BUILT_IN = tuple(DIRECTIONS)


def get(objective):
    """A `keras_tuner.Objective` from a name or an Objective.

    `"padding_efficiency"` and `"throughput"` are maximised,
    `"training_time"` (estimated by a `CompileCost`) is minimised; any other
    name is a metric of `model.fit` (`"val_loss"`, `"accuracy"`, ...) whose direction
    keras-tuner infers, or which must be given as a `keras_tuner.Objective`.

    Example:

    >>> from kerasbatch.tuner import objectives
    >>> objectives.get("throughput").direction
    'max'
    >>> objectives.get("training_time").direction
    'min'
    >>> objectives.get("val_loss").direction
    'min'
    >>> objectives.get("val_los")
    Traceback (most recent call last):
    ...
    ValueError: Unknown objective 'val_los'. kerasbatch computes ['padding_efficiency', 'throughput', 'training_time']; for another metric of model.fit pass keras_tuner.Objective('val_los', direction='min' or 'max').
    """
    if isinstance(objective, keras_tuner.Objective):
        return objective
    if not isinstance(objective, str):
        raise TypeError(
            "objective must be a name or a keras_tuner.Objective (one objective), "
            f"got {objective!r}."
        )
    if objective in BUILT_IN:
        return keras_tuner.Objective(objective, direction=DIRECTIONS[objective])
    direction = metrics_tracking.infer_metric_direction(objective)
    if direction is not None:
        return keras_tuner.Objective(objective, direction=direction)
    raise ValueError(
        f"Unknown objective {objective!r}. kerasbatch computes "
        f"{list(BUILT_IN)}; for another metric of model.fit pass "
        f"keras_tuner.Objective({objective!r}, direction='min' or 'max')."
    )


def is_metric(objective):
    """Whether `objective` is a metric of a full `model.fit`."""
    return objective.name not in BUILT_IN


def needs_model(objective):
    """Whether computing `objective` trains the user's model."""
    return objective.name not in (PADDING_EFFICIENCY, TRAINING_TIME)
