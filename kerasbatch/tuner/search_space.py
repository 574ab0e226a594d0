"""The bucket settings a tuner searches, as keras-tuner hyperparameters."""

import numbers

import numpy as np

from kerasbatch.builders import BucketBuilder
from kerasbatch.config import Configurable
from kerasbatch.planning import boundaries as boundaries_lib

#: The hyperparameter names the search space declares.
HYPERPARAMETERS = (
    "boundaries",
    "num_buckets",
    "batching",
    "batch_size",
    "max_tokens",
    "quadratic_length",
    "pad_to_bucket",
    "truncate",
)
#: BucketBuilder arguments the search space sets; a template's are replaced.
_SIZING = ("batch_size", "bucket_batch_sizes", "max_tokens", "quadratic_length")


class BucketSearchSpace(Configurable):
    """Which `BucketBuilder` settings to search, and over which values.

    Every argument is a sequence of choices. One choice is a fixed setting
    (`hp.Fixed`), several are searched (`hp.Choice`, or `hp.Boolean` for
    `(False, True)`). Boundaries are encoded by a strategy name and a number
    of buckets, never as lists, so every oracle of keras-tuner (random,
    Bayesian, grid, Hyperband) can search them.

    With both `batch_size` and `max_tokens` choices, the hyperparameter
    `"batching"` picks one of the two, and the other's hyperparameters are
    inactive (keras-tuner conditional scopes), so grid search does not repeat
    configurations.

    The hyperparameter names are those of `BucketBuilder`: `"boundaries"`,
    `"num_buckets"`, `"batching"`, `"batch_size"`, `"max_tokens"`,
    `"quadratic_length"`, `"pad_to_bucket"` and `"truncate"`; a model's own
    hyperparameters must use other names.

    Args:
        num_buckets: numbers of buckets.
        boundaries: boundary strategies of `kerasbatch.planning.boundaries`
            (`"uniform"`, `"quantile"`, `"equal_tokens"`, `"optimal"`).
        batch_size: fixed batch sizes (the same for every bucket). Empty to
            search token budgets only.
        max_tokens: token budgets: each bucket's batch size is the largest
            whose cost stays within the budget. Empty for none.
        quadratic_length: with `max_tokens`, the cost of a length: 0 for
            linear (`L`), or Lhotse's `quadratic_duration` q for
            `L + L**2 / q`.
        pad_to_bucket: whether batches pad to their bucket's bound (at most
            one shape per bucket and batch size).
        truncate: whether to use truncation buckets: elements are
            cut to their bucket's lower bound, which loses data, so only a
            model metric can judge it. The default does not search it.

    Example:

    >>> import keras_tuner
    >>> import numpy as np
    >>> import kerasbatch
    >>> space = kerasbatch.tuner.BucketSearchSpace(
    ...     num_buckets=(4, 8), boundaries=("quantile",), pad_to_bucket=(False,))
    >>> hp = keras_tuner.HyperParameters()
    >>> space.declare(hp)
    >>> hp.values
    {'boundaries': 'quantile', 'num_buckets': 4, 'batch_size': 32, 'pad_to_bucket': False, 'truncate': False}
    >>> builder = space.make_builder(hp, kerasbatch.BucketBuilder(seed=1))
    >>> builder.boundaries, builder.num_buckets, builder.batch_size
    ('quantile', 4, 32)
    >>> space.size()
    2
    """

    def __init__(
        self,
        num_buckets=(4, 8, 16, 32, 64),
        boundaries=("uniform", "quantile", "equal_tokens", "optimal"),
        batch_size=(32,),
        max_tokens=(),
        quadratic_length=(0,),
        pad_to_bucket=(False, True),
        truncate=(False,),
    ):
        self.num_buckets = _ints(num_buckets, "num_buckets", minimum=1)
        self.boundaries = _choices(boundaries, "boundaries")
        for strategy in self.boundaries:
            boundaries_lib.get(strategy)
        self.batch_size = _ints(batch_size, "batch_size", minimum=1, allow_empty=True)
        self.max_tokens = _ints(max_tokens, "max_tokens", minimum=1, allow_empty=True)
        self.quadratic_length = _ints(quadratic_length, "quadratic_length", minimum=0)
        self.pad_to_bucket = _bools(pad_to_bucket, "pad_to_bucket")
        self.truncate = _bools(truncate, "truncate")
        if not self.batch_size and not self.max_tokens:
            raise ValueError(
                "The search space admits no configuration: batch_size and "
                "max_tokens are both empty. Give batch sizes or token budgets."
            )
        if not self.max_tokens and any(self.quadratic_length):
            raise ValueError(
                "quadratic_length only applies with max_tokens, but max_tokens "
                "is empty. Add token budgets or set quadratic_length=(0,)."
            )

    def get_config(self):
        """The search space's choices, a JSON-serialisable dict."""
        return {
            "num_buckets": list(self.num_buckets),
            "boundaries": list(self.boundaries),
            "batch_size": list(self.batch_size),
            "max_tokens": list(self.max_tokens),
            "quadratic_length": list(self.quadratic_length),
            "pad_to_bucket": list(self.pad_to_bucket),
            "truncate": list(self.truncate),
        }

    def size(self):
        """The number of distinct configurations in the space."""
        sizings = len(self.batch_size) + len(self.max_tokens) * len(
            self.quadratic_length
        )
        return (
            len(self.num_buckets)
            * len(self.boundaries)
            * sizings
            * len(self.pad_to_bucket)
            * len(self.truncate)
        )

    def declare(self, hp):
        """Declares the space's hyperparameters on `hp` (a no-op if declared)."""
        _declare(hp, "boundaries", self.boundaries)
        _declare(hp, "num_buckets", self.num_buckets)
        if self.batch_size and self.max_tokens:
            hp.Choice("batching", ["batch_size", "max_tokens"])
            with hp.conditional_scope("batching", "batch_size"):
                _declare(hp, "batch_size", self.batch_size)
            with hp.conditional_scope("batching", "max_tokens"):
                self._declare_budget(hp)
        elif self.batch_size:
            _declare(hp, "batch_size", self.batch_size)
        else:
            self._declare_budget(hp)
        _declare(hp, "pad_to_bucket", self.pad_to_bucket)
        _declare(hp, "truncate", self.truncate)

    def _declare_budget(self, hp):
        _declare(hp, "max_tokens", self.max_tokens)
        _declare(hp, "quadratic_length", self.quadratic_length)

    def make_builder(self, hp, template=None):
        """The `BucketBuilder` of `hp`'s values, other settings from `template`.

        Args:
            hp: `keras_tuner.HyperParameters` holding this space's values.
            template: a `BucketBuilder` whose other settings (`padding`,
                `max_length`, `output_mask`, `seed`, ...) the result keeps.
        """
        self.declare(hp)
        config = (template or BucketBuilder()).get_config()
        for key in _SIZING:
            config.pop(key)
        config["boundaries"] = hp.get("boundaries")
        config["num_buckets"] = hp.get("num_buckets")
        if self._uses_tokens(hp):
            config["max_tokens"] = hp.get("max_tokens")
            config["quadratic_length"] = hp.get("quadratic_length") or None
        else:
            config["batch_size"] = hp.get("batch_size")
        config["pad_to_bucket"] = hp.get("pad_to_bucket")
        config["truncate"] = hp.get("truncate")
        return BucketBuilder.from_config(config)

    def _uses_tokens(self, hp):
        if self.batch_size and self.max_tokens:
            return hp.get("batching") == "max_tokens"
        return not self.batch_size

    def check_lengths(self, lengths, template=None):
        """Raises ValueError when no configuration can batch elements this long.

        Two things rule out every configuration: the template's `max_length`
        policy (`overflow="error"` with a longer element, or `"drop"` with
        none left), and a token budget too small for the longest element
        (after that policy) when no fixed batch size is in the space.
        """
        template = template or BucketBuilder()
        _check_overflow(lengths, template)
        if self.batch_size or any(self.truncate):
            return
        longest = int(np.max(lengths))
        if template.max_length is not None and template.overflow != "error":
            longest = min(longest, template.max_length)
        costs = [longest + (longest**2 / q if q else 0) for q in self.quadratic_length]
        if max(self.max_tokens) < min(costs):
            raise ValueError(
                "The search space admits no configuration: the longest element "
                f"is {longest} long, costing at least {min(costs):g}, more than "
                f"every max_tokens choice {list(self.max_tokens)}. Add a larger "
                "budget or a batch_size, or set max_length with "
                "overflow='truncate' on the builder template."
            )


def _check_overflow(lengths, template):
    if template.max_length is None:
        return
    too_long = np.flatnonzero(np.asarray(lengths) > template.max_length)
    if not len(too_long) or template.overflow == "truncate":
        return
    if template.overflow == "error":
        first = int(too_long[0])
        raise ValueError(
            f"The builder template admits no element longer than max_length="
            f"{template.max_length} (overflow='error'), but element {first} has "
            f"length {lengths[first]} ({len(too_long)} elements are longer): "
            "every trial would fail. Set overflow='truncate' or 'drop', or "
            "raise max_length."
        )
    if len(too_long) == len(lengths):
        raise ValueError(
            f"Every element is longer than the builder template's max_length="
            f"{template.max_length} and overflow='drop' would drop them all: "
            "every trial would fail. Raise max_length or set overflow='truncate'."
        )


def _declare(hp, name, values):
    if len(values) == 1:
        return hp.Fixed(name, values[0])
    if set(values) == {False, True}:
        return hp.Boolean(name)
    return hp.Choice(name, list(values))


def _choices(values, name):
    if isinstance(values, str) or not isinstance(values, list | tuple):
        raise TypeError(f"{name} must be a list or tuple of choices, got {values!r}.")
    if not values:
        raise ValueError(f"The search space admits no configuration: {name} is empty.")
    if len(set(values)) != len(values):
        raise ValueError(f"{name} has repeated choices: {list(values)}.")
    return tuple(values)


def _ints(values, name, minimum, allow_empty=False):
    if allow_empty and isinstance(values, list | tuple) and not values:
        return ()
    values = _choices(values, name)
    for value in values:
        if (
            not isinstance(value, numbers.Integral)
            or isinstance(value, bool)
            or value < minimum
        ):
            raise ValueError(
                f"{name} choices must be ints >= {minimum}, got {value!r}."
            )
    return tuple(int(v) for v in values)


def _bools(values, name):
    values = _choices(values, name)
    for value in values:
        if not isinstance(value, bool):
            raise TypeError(f"{name} choices must be True or False, got {value!r}.")
    return values
