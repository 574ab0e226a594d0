"""Random-length windows over one file's records (the sequence loaders).

Both sequence loaders read a whole file, then cut it into windows:

- `continuous_sequence`: the records of a file, concatenated along their first
  axis, are one long sequence; windows of a random length in `[min_window,
  max_window]` slide over it every `stride` positions (or back to back when
  `stride` is None). Every selected feature must be equally long.
- `discrete_sequence`: windows hold a random number in `[min_window,
  max_window]` of whole records, back to back, so they start and end at record
  boundaries; each feature is the concatenation of its records.

A tail shorter than `min_window` starts no window. A file shorter than
`min_window` is an error naming the file: no window could come from it.
"""

from kerasbatch.optional import tensorflow as tf


def continuous_windows(records, file, seed, min_window, max_window, stride):
    """The windows of one file: a dataset of dicts of tensors.

    Args:
        records: the file's parsed records, a dataset of dicts of batched
            tensors (`tf.RaggedTensor` for a feature list).
        file: the file's path (a string tensor), for error messages.
        seed: int64 tensor of shape `(2,)` for the window lengths.
        min_window, max_window: the window length range (positions).
        stride: positions between window starts, or None: back to back.
    """
    sequence = {name: rows.values for name, rows in _collect(records).items()}
    names = list(sequence)
    total = tf.shape(sequence[names[0]], out_type=tf.int64)[0]
    checks = [_check_long_enough(total, min_window, file, "positions")]
    for name in names[1:]:
        other = tf.shape(sequence[name], out_type=tf.int64)[0]
        checks.append(
            tf.debugging.Assert(
                tf.equal(other, total),
                [
                    _text(
                        "continuous_sequence: in file ",
                        file,
                        f", feature `{name}` has ",
                        other,
                        f" positions but `{names[0]}` has ",
                        total,
                        ", and all selected features must be equally long on axis 0",
                    )
                ],
            )
        )
    windows = _windows(total, seed, min_window, max_window, stride, checks)
    return windows.map(
        lambda start, length: {
            name: tensor[start : start + length] for name, tensor in sequence.items()
        }
    )


def discrete_windows(records, file, seed, min_window, max_window):
    """The windows of whole records of one file (arguments as above, in records)."""
    rows = _collect(records)
    names = list(rows)
    total = rows[names[0]].nrows()
    check = _check_long_enough(total, min_window, file, "records")
    windows = _windows(total, seed, min_window, max_window, None, [check])
    return windows.map(
        lambda start, count: {
            name: feature[start : start + count].values
            for name, feature in rows.items()
        }
    )


def _windows(total, seed, min_window, max_window, stride, checks):
    """`(start, length)` of each window over `total` positions (or records),
    after `checks`: lengths drawn in `[min_window, max_window]`, windows every
    `stride` or back to back (None); a tail shorter than `min_window` starts
    none."""
    with tf.control_dependencies(checks):
        step = min_window if stride is None else stride
        count = total // step + 1
        lengths = tf.random.stateless_uniform(
            [count], seed, minval=min_window, maxval=max_window + 1, dtype=tf.int64
        )
        if stride is None:
            starts = tf.cumsum(lengths, exclusive=True)
        else:
            starts = tf.range(count, dtype=tf.int64) * stride
        lengths = tf.minimum(lengths, total - starts)
        keep = lengths >= min_window
    return tf.data.Dataset.from_tensor_slices(
        (tf.boolean_mask(starts, keep), tf.boolean_mask(lengths, keep))
    )


def _collect(batches):
    """Every record of a (finite) dataset of parsed batches: `{name: RaggedTensor}`.

    A row per record: its tensor along axis 0 (a scalar is a row of one), so
    `rows[a:b].values` concatenates records `a..b-1` along axis 0.
    """
    arrays = {
        name: tf.TensorArray(
            spec.dtype,
            size=0,
            dynamic_size=True,
            infer_shape=False,
            element_shape=tf.TensorShape([None]).concatenate(spec.shape[2:]),
        )
        for name, spec in batches.element_spec.items()
    }
    sizes = {
        name: tf.TensorArray(tf.int64, size=0, dynamic_size=True, infer_shape=False)
        for name in arrays
    }

    def add(state, batch):
        count, arrays, sizes = state
        for name, tensor in batch.items():
            values, lengths = _rows(tensor)
            arrays[name] = arrays[name].write(count, values)
            sizes[name] = sizes[name].write(count, lengths)
        return count + 1, arrays, sizes

    _, arrays, sizes = batches.reduce((tf.constant(0), arrays, sizes), add)
    return {
        name: tf.RaggedTensor.from_row_lengths(
            arrays[name].concat(), sizes[name].concat(), validate=False
        )
        for name in arrays
    }


def _rows(batch):
    """`(values, row lengths)` of a batch of records, a row per record."""
    if isinstance(batch, tf.RaggedTensor):
        return batch.values, batch.row_lengths()
    records = tf.shape(batch, out_type=tf.int64)[0]
    if batch.shape.rank == 1:  # scalars: rows of one
        return batch, tf.ones([records], tf.int64)
    values = tf.reshape(batch, [-1, *batch.shape[2:]])
    return values, tf.fill([records], tf.shape(batch, out_type=tf.int64)[1])


def _check_long_enough(total, min_window, file, unit):
    return tf.debugging.Assert(
        total >= min_window,
        [
            _text(
                "file ",
                file,
                " has ",
                total,
                f" {unit}, fewer than min_window={min_window}, so no window fits in it",
            )
        ],
    )


def _text(*parts):
    """One string tensor of strings and tensors: an Assert prints it as one
    sentence (a list of parts prints each in brackets)."""
    return tf.strings.join(
        [
            part
            if isinstance(part, str) or part.dtype == tf.string
            else tf.strings.as_string(part)
            for part in parts
        ]
    )
