"""Checks of parsed records against their manifest, and the assertion that
names the first record that fails one.

The parse op reads every value leniently, as stored, so the checks here find
what does not match the manifest. Each is an `(ok, message)` pair: `ok`,
whether the record passes (a bool per record of a batch), and
`message(row)`, the parts of the sentence that tells what is wrong with the
record (`row` of the batch, None for one record). `fixed_checks` checks a
fixed feature, `list_checks` a feature list (whose presence
`present_lists` finds); `assert_valid` fails naming the file and index of
the first invalid record and its first failed check.
"""

from kerasbatch.optional import tensorflow as tf


def fixed_checks(spec, stored):
    """`(ok, message)` pairs for a fixed feature's parsed values.

    `stored` holds one record's values (1-D) or a batch's, `[records,
    values]`; `ok` is then a bool per record. `message(row)` tells what is
    wrong with the record (`row` of the batch, None for one record).
    """
    counts = _lengths(stored)
    name = f"feature `{spec.name}`"
    if spec.deserialize_type == "raw":
        needed, noun = spec.raw_len, "raw byte strings"
        rule = f"deserialize_args len in the manifest is {needed}"
    else:
        needed, noun = spec.num_values, "values"
        rule = f"the shape {list(spec.shape)} in the manifest needs {needed}"

    def message(row):
        count = _record(counts, row)
        missing = tf.where(tf.equal(count, 0), " (missing or empty)", "")
        return [f"{name} has ", count, f" {noun}", missing, f", {rule}"]

    checks = [(tf.equal(counts, needed), message)]
    if spec.deserialize_type == "raw":
        checks.append(
            _raw_size_check(spec, stored, f"{name} raw byte string ", " has ")
        )
    return checks


def present_lists(specs, stored, serialized):
    """`{name: (present, has_lists)}` for each feature list of `specs`.

    `present`: whether the record holds the feature list (a bool per record
    of a batch); `has_lists`: whether it holds any feature list (a
    `tf.train.Example` holds none). The parse op reads a missing feature
    list as an empty one, so the records' keys are read (with
    `tf.io.decode_proto`) only when some feature list is empty.
    """
    names = [spec.name for spec in specs if spec.var_len]
    if not names:
        return {}
    empty = tf.stack([tf.equal(_num_elements(stored[name]), 0) for name in names])

    def read_keys():
        return _feature_list_keys(serialized, names)

    def all_present():
        return tf.ones_like(tf.concat([empty, empty[:1]], 0))

    flags = tf.cond(tf.reduce_any(empty), read_keys, all_present)
    return {name: (flags[k], flags[-1]) for k, name in enumerate(names)}


def _num_elements(stored):
    """A feature list's number of elements: one record's `[elements, values]`,
    or per record of a batch's `[records, elements, values]`."""
    return stored.row_lengths() if stored.ragged_rank == 2 else stored.nrows()


def _feature_list_keys(serialized, names):
    """A bool tensor `[len(names) + 1, ...]`: whether each record holds each
    feature list of `names`, then whether it holds any feature list."""
    sizes, (lists,) = tf.io.decode_proto(
        serialized, "tensorflow.SequenceExample", ["feature_lists"], [tf.string]
    )
    has_lists = sizes[..., 0] > 0
    lists = tf.strings.reduce_join(lists, axis=-1)  # at most one per record
    _, (entries,) = tf.io.decode_proto(
        lists, "tensorflow.FeatureLists", ["feature_list"], [tf.string]
    )
    _, (keys,) = tf.io.decode_proto(
        entries, "tensorflow.FeatureLists.FeatureListEntry", ["key"], [tf.string]
    )
    keys = tf.strings.reduce_join(keys, axis=-1)  # at most one per entry
    present = [tf.reduce_any(tf.equal(keys, name), axis=-1) for name in names]
    return tf.stack([*present, has_lists])


def list_checks(spec, stored, present):
    """`(ok, message)` pairs for a feature list's parsed `[elements, values]`
    (`[records, elements, values]` for a batch), as in `fixed_checks`;
    `present` is `present_lists`'s."""
    held, has_lists = present[spec.name]

    def missing(row):
        return [
            f"feature list `{spec.name}` is missing",
            tf.where(
                _record(has_lists, row),
                " from the record, which holds other feature lists",
                ": the record has no feature lists (a tf.train.Example has "
                "none), but the manifest sets allow_var_len true, so its records "
                "are SequenceExamples",
            ),
        ]

    counts = _lengths(stored)
    name = f"feature list `{spec.name}` element "
    needed = 1 if spec.deserialize_type == "raw" else spec.num_values
    wrong = tf.not_equal(counts, needed)

    def message(row):
        element = tf.argmax(_record(wrong, row))
        if spec.deserialize_type == "raw":
            text = " raw byte strings, the manifest needs 1 per element"
        else:
            text = (
                f" values, the shape {list(spec.shape)} in the manifest needs "
                f"{spec.num_values}"
            )
        return [name, element, " has ", _record(counts, row)[element], text]

    checks = [(held, missing), (_none(wrong), message)]
    if spec.deserialize_type == "raw":  # the strings of a record's elements
        strings = stored.merge_dims(-2, -1)
        checks.append(
            _raw_size_check(spec, strings, name, " has a raw byte string of ")
        )
    return checks


def _raw_size_check(spec, strings, before, after):
    """Every raw string holds one tensor of the feature's shape and dtype.

    The message reads `before`, the index of the record's first wrong string,
    `after`.
    """
    size = spec.num_values * spec.tf_dtype.size
    lengths = tf.strings.length(strings)
    wrong = tf.not_equal(lengths, size)

    def message(row):
        first = tf.argmax(_record(wrong, row))
        return [
            before,
            first,
            after,
            _record(lengths, row)[first],
            f" bytes, the shape {list(spec.shape)} of {spec.dtype} in the "
            f"manifest needs {size}",
        ]

    return _none(wrong), message


def _none(flags):
    """Whether no flag is set along the last axis: of one record's 1-D flags,
    or of each record's row of a batch's ragged `[records, flags]`."""
    if not isinstance(flags, tf.RaggedTensor):
        return tf.logical_not(tf.reduce_any(flags, axis=-1))
    # faster than tf.reduce_any on a ragged tensor: count the flags set before
    # each row's start; a row without any has the same count as the next
    set_before = tf.pad(tf.cumsum(tf.cast(flags.values, tf.int32)), [[1, 0]])
    at_splits = tf.gather(set_before, flags.row_splits)
    return tf.equal(at_splits[1:], at_splits[:-1])


def _lengths(values):
    """The number of values along the last axis: in one record's 1-D values,
    and in each innermost row of ragged ones (a record's, an element's)."""
    if isinstance(values, tf.RaggedTensor):
        return values.row_lengths(axis=values.ragged_rank)
    return tf.size(values, out_type=tf.int64)


def _record(values, row):
    """Record `row` of a batch's `values`; with `row` None, one record's."""
    return values if row is None else values[row]


def assert_valid(all_valid, valid, checks, file, index):
    """Asserts `all_valid`; the message (built only on failure) names the
    file and index of the first invalid record and its first failed check.

    `valid`, `file` and `index` are a batch's vectors, or one record's
    scalars.
    """
    text = _failure_text(all_valid, valid, checks, file, index)
    return tf.debugging.Assert(all_valid, [text])


def _failure_text(all_valid, valid, checks, file, index):
    """`assert_valid`'s message, "" when `all_valid`."""

    def failure():
        row = tf.argmax(tf.logical_not(valid)) if valid.shape.rank else None

        def first_failure(checks):
            (ok, message), rest = checks[0], checks[1:]
            if not rest:
                where = ["record ", _record(index, row), " of file "]
                return _join([*where, _record(file, row), ": ", *message(row)])
            return tf.cond(
                _record(ok, row),
                lambda: first_failure(rest),
                lambda: first_failure(checks[:1]),
            )

        return first_failure(checks)

    return tf.cond(all_valid, lambda: tf.constant(""), failure)


def _join(parts):
    return tf.strings.join([_as_text(part) for part in parts])


def _as_text(part):
    if isinstance(part, str):
        return part
    part = tf.convert_to_tensor(part)
    return part if part.dtype == tf.string else tf.strings.as_string(part)
