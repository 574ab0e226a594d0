"""How one component is padded: the value, and the length it is padded to."""

import math
import numbers

import keras
import ml_dtypes
import numpy as np

from kerasbatch.data import sources

BATCH = "batch"
BUCKET = "bucket"


@keras.saving.register_keras_serializable(package="kerasbatch")
class Padding:
    """Padding of one component along its variable (first) axis.

    Args:
        value: the value written into padded positions: a number, a bool or
            a str. Defaults to 0, which Keras' `mask_zero=True` layers treat
            as padding, and which pads string components with `""`. When a
            builder meets its data, the value must fit each component's dtype
            (`check_value`): an integer within the range of an int dtype
            (so neither 0.5 nor, for uint8, 300), 0, 1 or a bool for bool,
            a number within a float dtype's range (inf and nan too) for
            floats, and a str for strings.
        length: where each batch is padded to. `-1` or `"batch"` (default):
            the longest element of the batch, as a loader's `padding`;
            `"bucket"`: the upper bound of the batch's bucket (bucket builders
            only), so an epoch feeds at most one shape per bucket; a positive
            int: that fixed length (an element longer than it is an error,
            unless the builder's `max_length` policy already shortens it).

    Example:

    >>> Padding(value=-1, length="bucket")
    Padding(value=-1, length='bucket')
    >>> Padding.from_config(Padding(length=128).get_config())
    Padding(value=0, length=128)
    """

    def __init__(self, value=0, length=-1):
        if not isinstance(value, numbers.Number | bool | np.bool_ | str):
            raise TypeError(
                f"Padding value must be a number, a bool or a str, got {value!r}."
            )
        if isinstance(value, np.generic):
            value = value.item()  # JSON-serialisable in get_config
        if length == -1:
            length = BATCH
        valid_int = isinstance(length, numbers.Integral) and not isinstance(
            length, bool
        )
        if not (length in (BATCH, BUCKET) or (valid_int and length > 0)):
            raise ValueError(
                "Padding length must be -1 or 'batch' (batch maximum), 'bucket' "
                f"(bucket bound) or a positive int; got {length!r}."
            )
        self.value = value
        self.length = int(length) if valid_int else length

    @property
    def fixed_length(self):
        """The fixed length, or None when the length depends on the batch."""
        return self.length if isinstance(self.length, int) else None

    def get_config(self):
        """`{"value": ..., "length": ...}`."""
        return {"value": self.value, "length": self.length}

    @classmethod
    def from_config(cls, config):
        """A new `Padding` from the dict of `get_config()`."""
        return cls(**config)

    def __eq__(self, other):
        return isinstance(other, Padding) and self.get_config() == other.get_config()

    def __repr__(self):
        return f"Padding(value={self.value!r}, length={self.length!r})"


def parse_padding(padding):
    """Validates a builder's `padding` argument.

    Args:
        padding: None, a `Padding`, a config dict (`{"value": ..., "length":
            ...}`) for every component, or a dict mapping component names to
            either.

    Returns:
        None, one `Padding` for every component, or `{name: Padding}`.
    """
    if padding is None:
        return None
    if isinstance(padding, Padding) or _is_spec(padding):
        return _as_padding(padding, "padding")
    if not isinstance(padding, dict):
        raise TypeError(
            "padding must be None, a Padding, a dict like "
            "{'value': 0, 'length': -1}, or a dict of those keyed by component "
            f"name; got {type(padding).__name__}."
        )
    return {
        name: _as_padding(spec, f"padding[{name!r}]") for name, spec in padding.items()
    }


def resolve_padding(parsed, names, default_length, dtypes=None):
    """`{name: Padding}` for the sequence components `names`.

    Args:
        parsed: what `parse_padding` returned.
        names: the names of the sequence components.
        default_length: the length of components `parsed` leaves out.
        dtypes: optional `{name: dtype}` (numpy or TensorFlow dtypes) of the
            components; each value is then checked against its component's
            dtype (`check_value`), and the default 0 of a string component
            becomes `""`.

    Raises:
        ValueError: `parsed` names a component the data does not have, or a
            value does not fit its component's dtype.
        TypeError: a str value for a numeric component or a number for a
            string one.
    """
    paddings = _resolve_names(parsed, names, default_length)
    for name, dtype in (dtypes or {}).items():
        if name in paddings:
            padding = paddings[name]
            value = check_value(padding.value, dtype, name)
            if value is not padding.value:
                paddings[name] = Padding(value, padding.length)
    return paddings


def check_value(value, dtype, name):
    """Checks that the padding `value` fits component `name` of `dtype`.

    Args:
        value: a `Padding` value.
        dtype: the component's numpy or TensorFlow dtype.
        name: the component's name, for messages.

    Returns:
        The value to pad with: `value`, or `""` for the default 0 of a string
        component.

    Raises:
        TypeError: a str for a numeric dtype, a number for a string dtype,
            or a complex number for a real one. (A bool pads numbers as 0
            or 1.)
        ValueError: a value the dtype cannot hold: not an integer or outside
            the range of an int dtype (0.5 or -1 for uint8), other than 0 and
            1 for bool, finite but beyond the largest value of a float dtype.

    Example:

    >>> check_value(0, "int32", "x"), check_value(0, np.str_, "text")
    (0, '')
    >>> check_value(300, "uint8", "tokens")
    Traceback (most recent call last):
    ...
    ValueError: Padding value 300 for component 'tokens' does not fit its dtype uint8 (0 to 255).
    """
    kind = sources.dtype_kind(dtype)
    dtype_name = sources.dtype_name(dtype)
    where = f"Padding value {value!r} for component {name!r}"
    if kind in sources.STRING_KINDS:
        if isinstance(value, str):
            return value
        if type(value) is int and value == 0:
            return ""
        raise TypeError(
            f"{where}: the component holds strings, so its padding value must "
            "be a str, e.g. Padding(value='')."
        )
    if isinstance(value, str):
        raise TypeError(
            f"{where}: a str cannot pad its dtype {dtype_name}; give a number."
        )
    if kind == "b":
        if value in (0, 1):
            return value
        raise ValueError(f"{where} does not fit its dtype bool: give 0, 1 or a bool.")
    if isinstance(value, complex) and kind != "c":
        raise TypeError(f"{where}: a complex number cannot pad dtype {dtype_name}.")
    if kind in "iu":
        info = np.iinfo(sources.as_numpy_dtype(dtype))
        integral = isinstance(value, numbers.Integral) or (
            math.isfinite(value) and float(value).is_integer()
        )
        if not integral:
            raise ValueError(
                f"{where} does not fit its dtype {dtype_name}: it is not an integer."
            )
        if not info.min <= value <= info.max:
            raise ValueError(
                f"{where} does not fit its dtype {dtype_name} "
                f"({info.min} to {info.max})."
            )
    elif kind == "f" and math.isfinite(value):
        largest = float(ml_dtypes.finfo(sources.as_numpy_dtype(dtype)).max)
        if abs(value) > largest:
            raise ValueError(
                f"{where} does not fit its dtype {dtype_name}: it is beyond "
                f"its largest value {largest:g}."
            )
    return value


def _resolve_names(parsed, names, default_length):
    if isinstance(parsed, Padding):
        return dict.fromkeys(names, parsed)
    parsed = parsed or {}
    unknown = sorted(set(parsed) - set(names))
    if unknown:
        raise ValueError(
            f"padding names {unknown} but the sequence components are {sorted(names)}."
        )
    default = Padding(length=default_length)
    return {name: parsed.get(name, default) for name in names}


def padding_config(padding):
    """The JSON-serialisable form of a builder's `padding` argument."""
    if padding is None or _is_spec(padding):
        return padding
    if isinstance(padding, Padding):
        return padding.get_config()
    return {
        name: spec.get_config() if isinstance(spec, Padding) else spec
        for name, spec in padding.items()
    }


def _is_spec(padding):
    return (
        isinstance(padding, dict)
        and bool(padding)
        and set(padding) <= {"value", "length"}
        and not any(isinstance(v, dict | Padding) for v in padding.values())
    )


def _as_padding(spec, where):
    if isinstance(spec, Padding):
        return spec
    if isinstance(spec, dict):
        unknown = sorted(set(spec) - {"value", "length"})
        if unknown:
            raise ValueError(
                f"{where} has unknown keys {unknown}; use 'value' and 'length'."
            )
        return Padding(**spec)
    raise TypeError(f"{where} must be a Padding or a dict, got {spec!r}.")
