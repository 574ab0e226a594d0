"""What `output_lengths` and `output_mask` add to a padded batch.

Shared by the in-memory builders and `kerasbatch.StreamBucketBuilder`: both
give a batch's `x`, `y` and `sample_weight` (each a tensor, a dict, or None)
and the kept length of every sequence component, by component name
(`kerasbatch.sources.component_name`).
"""

import tensorflow as tf

from kerasbatch import sources


def finish_batch(x, y, sample_weight, lengths, *, output_lengths, output_mask):
    """The batch element: `x`, `(x, y)` or `(x, y, sample_weight)`.

    Args:
        x, y, sample_weight: the padded batch by role (y and sample_weight
            may be None).
        lengths: `{component name: int64 lengths (batch,)}` of the sequence
            components.
        output_lengths: add `"<name>_length"` (int32) to x for each of its
            sequence components; a single x becomes `{"x": x, ...}`.
        output_mask: the sample weights become the padding masks of the
            per-frame targets (1.0 real, 0.0 padding), times any weights
            given; per-example targets keep their weights (or ones).

    Example:

    >>> import tensorflow as tf
    >>> from kerasbatch.outputs import finish_batch
    >>> x, y = tf.ones([2, 3]), tf.ones([2, 3])
    >>> lengths = {"x": tf.constant([3, 1], tf.int64),
    ...            "y": tf.constant([3, 1], tf.int64)}
    >>> x, y, weights = finish_batch(x, y, None, lengths,
    ...                              output_lengths=True, output_mask=True)
    >>> sorted(x), x["x_length"].numpy().tolist(), weights.numpy().tolist()
    (['x', 'x_length'], [3, 1], [[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    """
    if output_lengths:
        x = _with_lengths(x, lengths)
    if y is None:
        return x
    if output_mask:
        return x, y, _mask_weights(y, sample_weight, lengths)
    if sample_weight is None:
        return x, y
    return x, y, sample_weight


def _with_lengths(x, lengths):
    entries = dict(x) if isinstance(x, dict) else {"x": x}
    keys = list(x) if isinstance(x, dict) else [None]
    for key in keys:
        name = sources.component_name("x", key)
        if name in lengths:
            entries[f"{name}_length"] = tf.cast(lengths[name], tf.int32)
    return entries


def _mask_weights(y, sample_weight, lengths):
    """Padding masks of the per-frame targets, times any given weights."""
    if not isinstance(y, dict):
        return _mask_weight(y, sample_weight, lengths.get("y"))
    weights = {}
    for key, target in y.items():
        given = sample_weight
        if isinstance(sample_weight, dict):
            given = sample_weight.get(key)
        name = sources.component_name("y", key)
        weights[key] = _mask_weight(target, given, lengths.get(name))
    return weights


def _mask_weight(target, given, length):
    if given is not None:
        given = tf.cast(given, tf.float32)
    if length is None:  # a per-example target
        return tf.ones(tf.shape(target)[:1]) if given is None else given
    mask = tf.sequence_mask(length, tf.shape(target)[1], tf.float32)
    if given is None:
        return mask
    return mask * (given if given.shape.rank == 2 else given[:, None])
