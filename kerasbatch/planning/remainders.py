"""The remainder rule: what happens to a group's last, smaller batch.

A group (a bucket, or all the data) of `count` elements at batch size
`size` has `count // size` full batches and, unless `size` divides
`count`, a smaller last batch of `rest` elements. The `remainder` setting
decides it, for every builder (planned or streaming) and every engine:

- `"keep"`: fed as it is, `rest` rows;
- `"drop"`: left out (its elements counted as dropped);
- `"pad"`: fed with `size` rows, the rows past its elements filler (copies
  of its first element with `sample_weight` 0);
- `"even"`: the group is cut into its number of batches (as `"keep"`) of
  one size, at most `size`, so fewer than one filler row per batch is
  needed.

Then every batch is fed with a multiple of `batch_multiple` rows (more
filler rows). The functions take ints; `rows_fed` also arrays and tensors.
"""

REMAINDERS = ("keep", "drop", "pad", "even")


def group_batches(count, size, remainder):
    """`(sizes, capacities)`: the elements of every batch of the group, and
    the rows every batch is fed before `batch_multiple`.

    >>> group_batches(10, 4, "keep"), group_batches(10, 4, "pad")
    (([4, 4, 2], [4, 4, 2]), ([4, 4, 2], [4, 4, 4]))
    >>> group_batches(10, 4, "drop"), group_batches(10, 4, "even")
    (([4, 4], [4, 4]), ([4, 3, 3], [4, 4, 4]))
    """
    full, rest = divmod(count, size)
    if not rest or remainder == "drop":
        return [size] * full, [size] * full
    if remainder == "even":
        num_batches = full + 1
        capacity = -(-count // num_batches)
        smaller = num_batches * capacity - count  # batches one element short
        sizes = [capacity] * (num_batches - smaller) + [capacity - 1] * smaller
        return sizes, [capacity] * num_batches
    return [size] * full + [rest], [size] * full + [
        size if remainder == "pad" else rest
    ]


def num_batches(count, size, remainder):
    """The number of batches of the group (`len(group_batches(...)[0])`)."""
    full, rest = divmod(count, size)
    return full + bool(rest and remainder != "drop")


def rows_fed(elements, size, remainder, batch_multiple):
    """The rows a batch of `elements` elements of a group of batch size
    `size` is fed with, filler rows included (`"pad"`: the group's size);
    ints, arrays or tensors alike. (`"even"` sizes its batches itself: see
    `group_batches`.)"""
    rows = size if remainder == "pad" else elements
    return -(-rows // batch_multiple) * batch_multiple


def checked(remainder, drop_remainder, builder_type):
    """The `remainder` setting, `"drop"` for `drop_remainder=True`."""
    if remainder is None:
        return "drop" if drop_remainder else "keep"
    if remainder not in REMAINDERS:
        raise ValueError(f"remainder must be one of {REMAINDERS}, got {remainder!r}.")
    if remainder not in builder_type.remainders:
        raise ValueError(
            f"{builder_type.__name__} takes remainder in "
            f"{builder_type.remainders}, not {remainder!r}: "
            f"{builder_type.remainders_reason}"
        )
    if drop_remainder and remainder != "drop":
        raise ValueError(
            f"drop_remainder=True and remainder={remainder!r} contradict each "
            "other: give remainder alone."
        )
    return remainder
