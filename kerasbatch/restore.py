"""Model outputs back in input order: `restore_order`.

A built dataset feeds its elements in the plan's order (buckets, sorting,
shuffling), so `model.predict(dataset)` returns one row per fed row in that
order, filler rows included. `restore_order` puts them back in the order
of the data given to `build`.
"""

import numpy as np

from kerasbatch import optional
from kerasbatch.builders import ChunkBuilder, PackedBuilder, StreamBucketBuilder
from kerasbatch.builders.serving import builder_of


def restore_order(outputs, dataset, *, per_frame=False, epoch=None):
    """`model.predict(dataset)`'s outputs, in the order of the built data.

    Works for every builder whose batches hold whole elements
    (`PaddedBuilder`, `SortedBuilder`, `BucketBuilder`, `WindowBuilder`) on
    every engine; for a `ChunkBuilder` it reassembles the chunks' outputs
    into sequences (`ChunkBuilder.reassemble`). Filler rows (`remainder=
    "pad"`, `batch_multiple`) are left out.

    Args:
        outputs: what `model.predict(dataset)` returned: an array (one row
            per fed row, batch after batch), a `tf.RaggedTensor` (TensorFlow
            joins per-frame outputs of batches of different lengths into
            one), or a dict, list or tuple of them (a model with several
            outputs).
        dataset: the dataset the outputs are of (returned by `build`).
        per_frame: the outputs have a time axis that follows the padded
            inputs: each element's output is cut to its (kept) length, and
            a list of arrays is returned. Default: one output per element,
            an array `(elements, ...)`.
        epoch: the epoch the outputs are of (default: the one the dataset
            last started, i.e. the one `model.predict` just ran).

    Returns:
        For each output: an array with the row of element `i` at `i`, or
        (with `per_frame`) a list whose item `i` is element `i`'s frames.

    Raises:
        ValueError: the outputs do not have the rows the epoch fed, the
            epoch left elements out (`overflow="drop"`, dropped
            remainders), or the builder's batches do not hold whole
            elements (`PackedBuilder`, `StreamBucketBuilder`).

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> x = [np.full(n, n, "float32") for n in (5, 1, 4, 2)]
    >>> builder = kerasbatch.BucketBuilder([3], batch_size=2, shuffle=False)
    >>> dataset = builder.build(x, engine="python")
    >>> fed = np.concatenate([batch.max(axis=1) for batch in dataset])
    >>> fed.tolist()
    [1.0, 2.0, 5.0, 4.0]
    >>> kerasbatch.restore_order(fed, dataset).tolist()
    [5.0, 1.0, 4.0, 2.0]
    """
    served = builder_of(dataset)
    if isinstance(served, ChunkBuilder):
        return served.reassemble(outputs, epoch)
    if isinstance(served, PackedBuilder | StreamBucketBuilder):
        raise ValueError(
            f"restore_order needs batches of whole elements in a plan; "
            f"{type(served).__name__}'s are not (packed rows of several "
            "elements, or a stream planned as it runs). For inference, build "
            "the data with BucketBuilder, whose batches restore_order puts "
            "back in input order."
        )
    if epoch is None:
        epoch = served.last_started_epoch
        if epoch is None:
            raise ValueError(
                "The dataset has not been iterated yet: call model.predict("
                "dataset) first, or pass the epoch the outputs are of."
            )
    plan = served.plan(epoch)
    lengths = served.lengths
    rows = _fed_rows(plan)
    _check_complete(plan, len(lengths))
    kept = np.minimum(lengths[plan.indices], np.repeat(plan.limits, plan.batch_sizes))

    def restore(output):
        if isinstance(output, dict):
            return {key: restore(value) for key, value in output.items()}
        if isinstance(output, list | tuple):
            return type(output)(restore(value) for value in output)
        output = _as_rows(output)
        if len(output) != plan.batch_rows.sum():
            raise ValueError(
                f"The outputs have {len(output)} rows, but epoch {epoch} of the "
                f"dataset fed {plan.batch_rows.sum()} in {plan.num_batches} "
                "batches: pass what model.predict returned for this dataset."
            )
        if per_frame:
            ordered = [None] * len(lengths)
            for element, row, length in zip(plan.indices, rows, kept, strict=True):
                ordered[element] = np.asarray(output[row][:length])
            return ordered
        if isinstance(output, np.ndarray):
            picked = output[rows]
        else:
            picked = np.stack([output[row] for row in rows])
        ordered = np.empty_like(picked)
        ordered[plan.indices] = picked
        return ordered

    return restore(outputs)


def _fed_rows(plan):
    """The output row of every element of `plan.indices`: batches take
    `batch_rows` rows each, their elements first, then filler rows."""
    starts = np.cumsum(plan.batch_rows) - plan.batch_rows
    sizes = plan.batch_sizes
    first = np.repeat(starts - plan.batch_splits[:-1], sizes)
    return first + np.arange(len(plan.indices))


def _check_complete(plan, num_elements):
    """Raises if the plan leaves elements out (or feeds one twice)."""
    counts = np.bincount(plan.indices, minlength=num_elements)
    missing = np.flatnonzero(counts == 0)
    if len(missing):
        raise ValueError(
            f"Epoch {plan.epoch} of the dataset left {len(missing)} elements out "
            f"(the first is element {missing[0]}), so they have no output: for "
            "inference, keep every element (overflow='truncate' or 'error', "
            "remainder='keep' or 'pad')."
        )
    if counts.max() > 1:
        raise ValueError(
            f"Epoch {plan.epoch} of the dataset feeds element "
            f"{int(np.argmax(counts))} more than once; restore_order needs "
            "each element once."
        )


def _as_rows(output):
    """Indexable rows of one output: a numpy array, or a list of the rows
    of a `tf.RaggedTensor`."""
    tf = optional.imported("tensorflow")
    if tf is not None and isinstance(output, tf.RaggedTensor):
        return list(output.numpy())
    return np.asarray(output)
