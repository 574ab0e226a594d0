"""What `output_lengths`, `output_mask` and filler rows add to a padded batch.

The rules, and their values in numpy; the `tf.data` engine computes the
same values as TensorFlow ops (`kerasbatch.engines.tf_data.outputs`). Shared
by the in-memory builders and `kerasbatch.StreamBucketBuilder`: both give a batch's `x`, `y` and `sample_weight` (each a tensor, a dict, or None)
and the kept length of every sequence component, by component name
(`kerasbatch.data.sources.component_name`).
"""

import numpy as np

from kerasbatch.data import sources


def fill_numpy_rows(array, rows):
    """`array` with filler rows appended up to `rows` rows: copies of its
    first row (zeros if it has none), which `finish(real_rows=...)` weighs
    0. Given a batch's element indices, the filler rows gather
    copies of its first element.

    A filler row of all padding would be a row that no model can normalise
    over: an average pooled over its mask is 0 / 0 (Keras'
    `GlobalAveragePooling1D` after `mask_zero=True`), a fully masked
    attention row is NaN in fused kernels, and NaN times a zero weight is
    still NaN in the loss. A copy of a real row gives finite outputs
    wherever the first row does, and its zero weight leaves it out.
    """
    missing = int(rows) - len(array)
    if missing <= 0:
        return array
    first = array[:1] if len(array) else np.zeros((1, *array.shape[1:]), array.dtype)
    return np.concatenate([array, np.repeat(first, missing, axis=0)])


def finish(
    ops,
    x,
    y,
    sample_weight,
    lengths,
    *,
    output_lengths,
    output_mask,
    real_rows=None,
    model_inputs=None,
):
    """The batch element: `x`, `(x, y)` or `(x, y, sample_weight)`.

    The rules are these, once; `ops` computes the values: `NumpyOps` (the
    numpy engines, `grain` and `python`) or the `tf.data` engine's
    `GraphOps` (TensorFlow ops), value for value the same.

    Args:
        ops: `NumpyOps`, or `kerasbatch.engines.tf_data.outputs.GraphOps`.
        x, y, sample_weight: the padded batch by role (y and sample_weight
            may be None).
        lengths: `{component name: int64 lengths (batch,)}` of the sequence
            components.
        output_lengths: add `"<name>_length"` (int32) to x for each of its
            sequence components; a single x becomes `{"x": x, ...}`.
        output_mask: the sample weights become the padding masks of the
            per-frame targets (1.0 real, 0.0 padding), times any weights
            given; per-example targets keep their weights (or ones).
        real_rows: the rows before the filler rows (None: no filler rows).
        model_inputs: a `kerasbatch.ModelInputs` applied to the batch, or
            None.

    Example:

    >>> import numpy as np
    >>> from kerasbatch.data.outputs import NumpyOps, finish
    >>> x, y = np.ones([2, 3]), np.ones([2, 3])
    >>> lengths = {"x": np.array([3, 1]), "y": np.array([3, 1])}
    >>> x, y, weights = finish(NumpyOps, x, y, None, lengths,
    ...                        output_lengths=True, output_mask=True)
    >>> sorted(x), x["x_length"].tolist(), weights.tolist()
    (['x', 'x_length'], [3, 1], [[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    """
    if output_lengths:
        x = _with_lengths(x, lengths, ops.int32)
    if model_inputs is not None:
        x, y, sample_weight = model_inputs.apply(ops, x, y, sample_weight, lengths)
        output_mask = output_mask and not model_inputs.shift_targets
    if y is None:
        return x
    if output_mask:
        sample_weight = _mask_weights(y, sample_weight, lengths, ops.mask_weight)
    if real_rows is not None:
        sample_weight = _without_filler(sample_weight, y, real_rows, ops)
    if sample_weight is None:
        return x, y
    return x, y, sample_weight


def check_length_names(x_keys, sequence_names):
    """Raises if `output_lengths` would overwrite a component of x: its
    `"<name>_length"` entries must be new keys. `x_keys`: x's dict keys
    (None for one array); `sequence_names`: x's sequence components."""
    taken = sorted(set(x_keys or ()) & {f"{name}_length" for name in sequence_names})
    if taken:
        raise ValueError(
            f"output_lengths=True adds the entry {taken[0]!r} to x, but x already "
            f"has a component {taken[0]!r}: rename it, or set output_lengths="
            "False and keep your own."
        )


def _with_lengths(x, lengths, int32):
    """x with an `"<name>_length"` entry (`int32(lengths)`) for each of its
    sequence components."""
    entries = dict(x) if isinstance(x, dict) else {"x": x}
    keys = list(x) if isinstance(x, dict) else [None]
    for key in keys:
        name = sources.component_name("x", key)
        if name in lengths:
            entries[f"{name}_length"] = int32(lengths[name])
    return entries


def _mask_weights(y, sample_weight, lengths, mask_weight):
    """Padding masks of the per-frame targets, times any given weights
    (`mask_weight(target, given, length)` of each target)."""
    if not isinstance(y, dict):
        return mask_weight(y, sample_weight, lengths.get("y"))
    weights = {}
    for key, target in y.items():
        given = sample_weight
        if isinstance(sample_weight, dict):
            given = sample_weight.get(key)
        name = sources.component_name("y", key)
        weights[key] = mask_weight(target, given, lengths.get(name))
    return weights


def _without_filler(sample_weight, y, real_rows, ops):
    """`sample_weight` (None: ones) times 1 for the first `real_rows` rows
    and 0 for the filler rows after them."""
    real = ops.real_rows(_first_leaf(y), real_rows)
    if sample_weight is None:
        return real
    if isinstance(sample_weight, dict):
        return {key: ops.weigh(w, real) for key, w in sample_weight.items()}
    return ops.weigh(sample_weight, real)


def _first_leaf(structure):
    while isinstance(structure, dict):
        structure = next(iter(structure.values()))
    return structure


class OperatorOps:
    """The values that Python's operators compute alike on numpy arrays and
    tensors (shared by `NumpyOps` and the `tf.data` engine's `GraphOps`)."""

    @staticmethod
    def same_segment(ids, next_ids):
        """Where a position's next one belongs to the same (real) segment."""
        return (ids == next_ids) & (ids > 0)

    @staticmethod
    def positive(ids):
        return ids > 0


class NumpyOps(OperatorOps):
    """The values of `finish` (and of `kerasbatch.ModelInputs`) in numpy;
    the `tf.data` engine's `GraphOps` computes them, bit for bit, as
    TensorFlow ops."""

    @staticmethod
    def sequence_mask(lengths, tokens, dtype):
        positions = np.arange(tokens.shape[1])
        return (positions < np.asarray(lengths)[:, None]).astype(dtype)

    @staticmethod
    def shift_left(tokens):
        return np.concatenate([tokens[:, 1:], np.zeros_like(tokens[:, :1])], axis=1)

    @staticmethod
    def full_like_rows(tokens, value):
        dtype = np.int32 if isinstance(value, int) else np.float32
        return np.full(tokens.shape[:2], value, dtype)

    @staticmethod
    def cast(array, dtype):
        return np.asarray(array).astype(dtype)

    @staticmethod
    def int32(lengths):
        return np.asarray(lengths).astype(np.int32)

    @staticmethod
    def real_rows(target, real_rows):
        return (np.arange(len(target)) < real_rows).astype(np.float32)

    @staticmethod
    def weigh(weight, real):
        weight = np.asarray(weight, np.float32)
        return weight * real.reshape([-1] + [1] * (weight.ndim - 1))

    @staticmethod
    def mask_weight(target, given, length):
        if given is not None:
            given = np.asarray(given, np.float32)
        if length is None:  # a per-example target
            return np.ones(len(target), np.float32) if given is None else given
        positions = np.arange(target.shape[1])
        mask = (positions < np.asarray(length)[:, None]).astype(np.float32)
        if given is None:
            return mask
        return mask * (given if given.ndim == 2 else given[:, None])
