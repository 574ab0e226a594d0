"""The settings of `kerasbatch.analyze`, checked, and the defaults they take.

Each check returns the setting in its plain Python type, or raises an error
of one sentence that names the setting and the value given. The defaults
that follow from the lengths (the token budget, the packed row lengths) are
worked out here too, from the lengths' percentiles.
"""

import numbers

import numpy as np

from kerasbatch.planning import plan as plan_lib

__all__ = [
    "NUM_BUCKETS",
    "PACKED_SEQUENCES",
    "ROW_MULTIPLE",
    "bucket_counts",
    "integer",
    "packed_row_lengths",
    "positive_int",
    "quantile",
    "token_budget",
]

#: The number of buckets of the bucket rows (besides one bucket: every
#: batch padded to the longest length, one fixed shape).
NUM_BUCKETS = (4, 8, 16, 32, 64)
#: Packed rows hold about this many sequences of the 90th percentile length
#: (at least the longest, rounded up to a multiple of `ROW_MULTIPLE`).
PACKED_SEQUENCES = (1, 2, 4, 8)
#: Packed row lengths are multiples of this.
ROW_MULTIPLE = 64


def positive_int(value, name):
    """`value` as an int >= 1, or an error naming the setting `name`.

    Args:
        value: the setting's value (a bool is not an int here).
        name: the setting's name, as the error shows it.

    Example:

    >>> import numpy as np
    >>> positive_int(np.int64(3), "epochs")
    3
    >>> positive_int(0, "epochs")
    Traceback (most recent call last):
    ...
    ValueError: epochs must be a positive int, got 0.
    """
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name} must be a positive int, got {value!r}.")
    if value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return int(value)


def integer(value, name):
    """`value` as an int, or a `TypeError` naming the setting `name`.

    Example:

    >>> integer(-2, "seed")
    -2
    >>> integer(1.5, "seed")
    Traceback (most recent call last):
    ...
    TypeError: seed must be an int, got 1.5.
    """
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {value!r}.")
    return int(value)


def bucket_counts(values):
    """The bucket counts of `num_buckets` (an int or a sequence of ints) as
    a tuple of positive ints.

    Example:

    >>> bucket_counts(8), bucket_counts([4, 16])
    ((8,), (4, 16))
    """
    if isinstance(values, numbers.Integral):
        values = (values,)
    values = tuple(
        positive_int(value, f"num_buckets[{i}]") for i, value in enumerate(values)
    )
    if not values:
        raise ValueError("num_buckets must hold at least one bucket count.")
    return values


def quantile(lengths, q):
    """The `q` quantile of `lengths`, a length that occurs in them (the
    next higher one where it falls between two).

    Example:

    >>> import numpy as np
    >>> quantile(np.array([1, 2, 3, 10]), 0.5)
    3
    """
    return int(np.quantile(lengths, q, method="higher"))


def token_budget(max_tokens, lengths, batch_size):
    """The token budget of the budget and packed rows: `max_tokens`, or by
    default `batch_size` × the 90th percentile length (at least the longest
    length); an error where no batch could hold the longest sequence.

    Args:
        max_tokens: the budget asked for, or None.
        lengths: the sequences' lengths (not all 0).
        batch_size: elements per batch of the fixed-size rows.

    Example:

    >>> import numpy as np
    >>> lengths = np.array([3, 5, 8, 13, 2, 9, 4, 6])
    >>> token_budget(None, lengths, 2), token_budget(100, lengths, 2)
    (26, 100)
    >>> token_budget(10, lengths, 2)
    Traceback (most recent call last):
    ...
    ValueError: max_tokens=10 is less than the longest sequence (13): no batch could hold it; give max_tokens >= 13.
    """
    longest = int(lengths.max())
    if max_tokens is None:
        max_tokens = max(batch_size * quantile(lengths, 0.9), longest)
    max_tokens = positive_int(max_tokens, "max_tokens")
    if max_tokens < longest:
        raise ValueError(
            f"max_tokens={max_tokens} is less than the longest sequence "
            f"({longest}): no batch could hold it; give max_tokens >= {longest}."
        )
    return max_tokens


def packed_row_lengths(sequence_length, lengths, max_tokens):
    """The packed rows' lengths, sorted: `sequence_length` (a length or a
    list of them), or by default rows that hold about `PACKED_SEQUENCES`
    sequences of the 90th percentile length (at least the longest, rounded
    up to a multiple of `ROW_MULTIPLE`), those beyond `max_tokens` left out
    (but the shortest).

    Args:
        sequence_length: None, a length, or a list or tuple of lengths.
        lengths: the sequences' lengths.
        max_tokens: the token budget (see `token_budget`).

    Example:

    >>> import numpy as np
    >>> lengths = np.array([30, 50, 80, 130, 20, 90, 40, 60])
    >>> packed_row_lengths(None, lengths, 640)
    (192, 320, 576)
    >>> packed_row_lengths([512, 256, 512], lengths, 640)
    (256, 512)
    """
    longest = int(lengths.max())
    if sequence_length is None:
        p90 = quantile(lengths, 0.9)
        candidates = {
            plan_lib.round_up(max(longest, count * p90), ROW_MULTIPLE)
            for count in PACKED_SEQUENCES
        }
        shortest = min(candidates)
        return tuple(sorted(c for c in candidates if c == shortest or c <= max_tokens))
    given = (
        sequence_length
        if isinstance(sequence_length, list | tuple)
        else [sequence_length]
    )
    if not given:
        raise ValueError("sequence_length must hold at least one length.")
    checked = sorted({positive_int(value, "sequence_length") for value in given})
    if checked[0] < longest:
        raise ValueError(
            f"sequence_length={checked[0]} is shorter than the longest "
            f"sequence ({longest}): packed rows must hold every sequence; give "
            f"sequence_length >= {longest}."
        )
    return tuple(checked)
