"""The settings every builder shares, validated; no data, no run state."""

import keras
import numpy as np

from kerasbatch import checks
from kerasbatch.config import Configurable
from kerasbatch.data import model_inputs as model_inputs_lib
from kerasbatch.data import padding as padding_lib
from kerasbatch.planning import built as built_lib
from kerasbatch.planning import orders, sorting
from kerasbatch.planning import plan as plan_lib
from kerasbatch.planning import remainders as remainders_lib

OVERFLOW_POLICIES = ("error", "truncate", "drop")


class Settings(Configurable):
    """What every builder shares, in memory or streaming: its settings.

    Validates and keeps the arguments below; gives `from_config`, equality
    and `repr` (from the subclass's `get_config`); pickles and deep-copies
    as those arguments; checks them against the data (filler rows, devices,
    fixed lengths) and applies the `max_length` overflow policy to known
    lengths.

    Args:
        shuffle: reshuffle every epoch.
        seed: int seed; None draws one at construction.
        drop_remainder: drop smaller remainder batches (`remainder="drop"`).
        remainder: what happens to smaller remainder batches: `"keep"`,
            `"drop"`, `"pad"` or `"even"`; see `kerasbatch.builders.Builder`.
            None: from `drop_remainder`.
        padding: see `kerasbatch.builders.Builder`.
        max_length: the longest element allowed, or None.
        overflow: `"error"`, `"truncate"` or `"drop"`.
        batch_multiple: feed every batch with a multiple of this many rows;
            see `kerasbatch.builders.Builder`.
        pad_to_multiple: pad every sequence component to a multiple of this
            length; see `kerasbatch.builders.Builder`.
        prefetch: `"auto"`, an int, or 0 / None.
        model_inputs: a `kerasbatch.ModelInputs` (or its config): the
            inputs x gives the model (renamed components, a computed padding
            mask, constants) and next-token targets; None keeps x as built.
    """

    #: The `remainder` settings this builder takes, and why not others.
    remainders = remainders_lib.REMAINDERS
    remainders_reason = ""

    #: The shared settings this builder does not take: given one, it raises
    #: a TypeError as Python does for an unknown keyword (`take_settings`).
    settings_not_taken = ()

    def __init__(
        self,
        *,
        shuffle=True,
        seed=0,
        drop_remainder=False,
        remainder=None,
        padding=None,
        max_length=None,
        overflow="error",
        batch_multiple=1,
        pad_to_multiple=1,
        prefetch="auto",
        model_inputs=None,
        **unknown,
    ):
        if unknown:
            self._unexpected(sorted(unknown)[0])
        self.shuffle = checks.checked_bool(shuffle, "shuffle")
        if seed is None:
            seed = int(np.random.SeedSequence().entropy % (2**31))
        if not checks.is_int(seed) or not 0 <= seed < 2**63:
            raise ValueError(
                f"seed must be an int in [0, 2**63) (an int64) or None, got {seed!r}."
            )
        self.seed = int(seed)
        self.remainder = remainders_lib.checked(
            remainder, checks.checked_bool(drop_remainder, "drop_remainder"), type(self)
        )
        self.drop_remainder = self.remainder == "drop"
        self._parsed_padding = padding_lib.parse_padding(padding)
        self.padding = padding
        self.max_length = checks.optional_positive_int(max_length, "max_length")
        if overflow not in OVERFLOW_POLICIES:
            raise ValueError(
                f"overflow must be one of {OVERFLOW_POLICIES}, got {overflow!r}."
            )
        self.overflow = overflow
        if not checks.is_int(batch_multiple) or batch_multiple <= 0:
            raise ValueError(
                f"batch_multiple must be a positive int, got {batch_multiple!r}."
            )
        self.batch_multiple = int(batch_multiple)
        if not checks.is_int(pad_to_multiple) or pad_to_multiple <= 0:
            raise ValueError(
                f"pad_to_multiple must be a positive int, got {pad_to_multiple!r}."
            )
        self.pad_to_multiple = int(pad_to_multiple)
        if not (
            prefetch in ("auto", None) or (checks.is_int(prefetch) and prefetch >= 0)
        ):
            raise ValueError(
                f"prefetch must be 'auto', None or an int >= 0, got {prefetch!r}."
            )
        self.prefetch = prefetch
        self.model_inputs = _model_inputs(model_inputs)

    def take_settings(self, settings):
        """`settings` (the shared settings given to a builder's constructor),
        or a TypeError naming one of `settings_not_taken`."""
        refused = sorted(set(settings) & set(self.settings_not_taken))
        if refused:
            self._unexpected(refused[0])
        return settings

    def _unexpected(self, name):
        raise TypeError(
            f"{type(self).__name__} got an unexpected keyword argument "
            f"{name!r}: see help({type(self).__name__}) for its arguments."
        )

    def _shared_config(self):
        return {
            "shuffle": self.shuffle,
            "seed": self.seed,
            "drop_remainder": self.drop_remainder,
            "remainder": self.remainder,
            "padding": padding_lib.padding_config(self.padding),
            "max_length": self.max_length,
            "overflow": self.overflow,
            "batch_multiple": self.batch_multiple,
            "pad_to_multiple": self.pad_to_multiple,
            "prefetch": self.prefetch,
            "model_inputs": (
                None if self.model_inputs is None else self.model_inputs.get_config()
            ),
        }

    def __copy__(self):
        """A shallow copy that shares this one's data: what serves a built
        dataset (`_serve`)."""
        copied = object.__new__(type(self))
        copied.__dict__.update(self.__dict__)
        return copied

    def __getstate__(self):
        """A builder pickles and deep-copies as its settings (a fresh
        builder of the same arguments): its built datasets, their data and
        run state stay with the datasets."""
        return {"arguments": self._arguments()}

    def __setstate__(self, state):
        self.__init__(**state["arguments"])

    def _snapshot(self):
        """A frozen snapshot of the public attributes, for a built value:
        the arguments and what `build` resolved from the data."""
        return built_lib.Settings(
            **{k: v for k, v in vars(self).items() if not k.startswith("_")}
        )

    def _arguments(self):
        """The constructor arguments (`get_config()`, unless a subclass
        keeps objects there that its config serialises)."""
        return self.get_config()

    @property
    def _fills(self):
        """Whether batches may get filler rows (`batch_multiple`, or
        `remainder="pad"` or `"even"`)."""
        return self.batch_multiple > 1 or self.remainder in ("pad", "even")

    @property
    def _filler_setting(self):
        """The setting that asks for filler rows, for messages."""
        if self.remainder in ("pad", "even"):
            return f"remainder={self.remainder!r}"
        return f"batch_multiple={self.batch_multiple}"

    @property
    def _makes_targets(self):
        """Whether the batches' targets are made here (next tokens)."""
        return self.model_inputs is not None and self.model_inputs.shift_targets

    def _check_model_inputs(self, x_keys, sequence_names, has_targets, lengths=None):
        """Raises if `model_inputs` cannot be made for an x of dict keys
        `x_keys` (None: one array) and sequence components
        `sequence_names`; `lengths` (`{name: lengths}` of data in memory)
        also finds elements too short for them. Returns the sequence
        component they follow (None if none)."""
        if self.model_inputs is None:
            return None
        name = self.model_inputs.check(x_keys, sequence_names, has_targets)
        if name is not None and lengths is not None:
            self.model_inputs.check_lengths(name, lengths[name])
        return name

    def _check_filler_weights(self, has_targets, lengths_only=False):
        """Filler rows are kept out of training by a zero `sample_weight`,
        which needs targets."""
        if self._fills and not has_targets and not lengths_only:
            raise ValueError(
                f"{self._filler_setting} fills smaller batches with rows that a zero "
                "sample_weight keeps out of the loss, but the data has no "
                "targets y to weigh. Give y, or keep or drop the smaller "
                "batches (remainder='keep' or 'drop', batch_multiple=1)."
            )

    @staticmethod
    def _check_data_parallel(built):
        """Raises if a Keras distribution is set (JAX `DataParallel`) whose
        devices cannot share the batches of `built` (a built value)
        evenly."""
        devices = data_parallel_devices()
        if devices > 1:
            built.check_even_split(
                devices,
                f"The Keras distribution splits every batch across {devices} devices",
            )

    def _resolve_paddings(self, data, names, default_length):
        """`{name: Padding}` for the components `names` of `data`.

        Planning from lengths alone (`adapt`) knows only the `"x"`
        component, so a per-component padding dict is cut to the names known.
        """
        parsed = self._parsed_padding
        dtypes = None
        if data.lengths_only and isinstance(parsed, dict):
            parsed = {name: p for name, p in parsed.items() if name in names}
        if not data.lengths_only:  # padding values are checked against them
            dtypes = {c.name: c.values.dtype for c in data.components}
        paddings = padding_lib.resolve_padding(
            parsed, names, default_length, dtypes=dtypes
        )
        self._check_multiple_of_fixed(paddings)
        return paddings

    def _check_multiple_of_fixed(self, paddings):
        """A fixed padding length must be a multiple of `pad_to_multiple`."""
        for name, padding in paddings.items():
            fixed = padding.fixed_length
            if fixed is not None and fixed % self.pad_to_multiple:
                raise ValueError(
                    f"Component {name!r} is padded to the fixed length {fixed}, "
                    f"which is not a multiple of pad_to_multiple="
                    f"{self.pad_to_multiple}. Give a fixed length that is, or "
                    "leave the length to the batch or bucket."
                )

    def _apply_overflow(self, lengths):
        """Returns `(candidate indices, cut limit, number dropped)`."""
        # int32 where the indices fit: 4 bytes an element less.
        everything = orders.compact(
            np.arange(len(lengths), dtype=sorting.index_dtype(len(lengths)))
        )
        if self.max_length is None:
            return everything, plan_lib.NO_LIMIT, 0
        too_long = np.flatnonzero(lengths > self.max_length)
        if self.overflow == "truncate" or not len(too_long):
            return everything, self.max_length, 0
        if self.overflow == "drop":
            if len(too_long) == len(lengths):
                raise ValueError(
                    f"max_length={self.max_length} with overflow='drop' drops "
                    f"every element: all {len(lengths)} are longer (the "
                    f"shortest is {lengths.min()}). Raise max_length, or set "
                    "overflow='truncate' to cut them."
                )
            return np.setdiff1d(everything, too_long), plan_lib.NO_LIMIT, len(too_long)
        first = too_long[0]
        raise ValueError(
            f"Element {first} has length {lengths[first]}, longer than "
            f"max_length={self.max_length} ({len(too_long)} elements are). Set "
            "overflow='truncate' or overflow='drop', or raise max_length."
        )


def _model_inputs(value):
    """A `ModelInputs` from one or its config; None stays None."""
    if value is None or isinstance(value, model_inputs_lib.ModelInputs):
        return value
    if isinstance(value, dict):
        return model_inputs_lib.ModelInputs.from_config(value)
    raise ValueError(
        "model_inputs must be a kerasbatch.ModelInputs, its config dict or "
        f"None, got {value!r}."
    )


def data_parallel_devices():
    """The number of devices the global Keras distribution (e.g. JAX
    `keras.distribution.DataParallel`) splits every batch across; 1 when none
    is set."""
    distribution = keras.distribution.distribution()
    mesh = getattr(distribution, "device_mesh", None)
    name = getattr(distribution, "batch_dim_name", None)
    if mesh is None or name not in mesh.axis_names:
        return 1
    return int(mesh.shape[list(mesh.axis_names).index(name)])


class BatchedSettings(Settings):
    """The settings of builders whose batches are rows of padded elements:
    `batch_size`, `output_lengths` and `output_mask`, and the shared
    settings (`Settings`).

    Args:
        batch_size: elements per batch; None only where the builder sizes
            its batches itself (`sizes_batches_itself`).
        output_lengths: add `"<name>_length"` entries to x; see
            `kerasbatch.builders.Builder`.
        output_mask: the sample weights become padding masks; see
            `kerasbatch.builders.Builder`.
        **settings: the shared settings (`Settings`).
    """

    #: Whether the builder can size batches without `batch_size`.
    sizes_batches_itself = False

    def __init__(
        self, batch_size=32, *, output_lengths=False, output_mask=False, **settings
    ):
        self.batch_size = checks.optional_positive_int(batch_size, "batch_size")
        if batch_size is None and not self.sizes_batches_itself:
            raise ValueError(f"{type(self).__name__} needs a batch_size.")
        super().__init__(**settings)
        self.output_lengths = checks.checked_bool(output_lengths, "output_lengths")
        self.output_mask = checks.checked_bool(output_mask, "output_mask")
