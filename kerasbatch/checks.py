"""One set of validators for settings: ints, bools, epochs.

Each returns the value in its plain Python type, or raises an error that
names the setting and the value given.
"""

import numbers

import numpy as np


def is_int(value):
    """Whether `value` is an int (numpy's too), and not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def checked_bool(value, name):
    """`value` as a bool, or a TypeError naming the setting `name`."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {value!r}.")
    return bool(value)


#: Every count and length a setting gives is computed with in int64 arrays
#: and tensors (sums of lengths, products of rows and lengths): settings
#: stay below this, where none of that overflows.
LARGEST = 2**62


def optional_positive_int(value, name):
    """`value` as a positive int or None, or a ValueError naming `name`."""
    if value is None:
        return None
    if not is_int(value) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    if value >= LARGEST:
        raise ValueError(
            f"{name} must be a positive int below 2**62, got {value!r}: "
            "lengths and counts are int64."
        )
    return int(value)


def checked_epoch(epoch):
    """`epoch` as an int, or a ValueError if it is not one in `[0, 2**62)`."""
    if not is_int(epoch) or not 0 <= epoch < 2**62:
        raise ValueError(f"epoch must be an int in [0, 2**62), got {epoch!r}.")
    return int(epoch)
