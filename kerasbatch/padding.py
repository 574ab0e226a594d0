"""How one component is padded: the value, and the length it is padded to."""

import numbers

import keras

BATCH = "batch"
BUCKET = "bucket"


@keras.saving.register_keras_serializable(package="kerasbatch")
class Padding:
    """Padding of one component along its variable (first) axis.

    Args:
        value: the value written into padded positions. Defaults to 0, which
            Keras' `mask_zero=True` layers treat as padding.
        length: where each batch is padded to. `-1` or `"batch"` (default):
            the longest element of the batch, as seed 001's padding spec;
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
        if not isinstance(value, numbers.Number) or isinstance(value, bool):
            raise TypeError(f"Padding value must be a number, got {value!r}.")
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
        return {"value": self.value, "length": self.length}

    @classmethod
    def from_config(cls, config):
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


def resolve_padding(parsed, names, default_length):
    """`{name: Padding}` for the sequence components `names`.

    Args:
        parsed: what `parse_padding` returned.
        names: the names of the sequence components.
        default_length: the length of components `parsed` leaves out.

    Raises:
        ValueError: `parsed` names a component the data does not have.
    """
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
