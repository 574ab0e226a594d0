"""Model outputs back in input order: `restore_order`.

A built dataset feeds its elements in the plan's order (buckets, sorting,
shuffling, packing), so `model.predict(dataset)` returns one row per fed row
in that order, filler rows included. `restore_order` puts them back in the
order of the data given to `build`: for a `PackedBuilder`, whose rows hold
several elements, it takes each element's positions (`per_frame`) or segment
slot (`per_segment`) out of its row.
"""

import typing

import numpy as np

from kerasbatch import optional
from kerasbatch.builders import ChunkBuilder, PackedBuilder, StreamBucketBuilder
from kerasbatch.builders.datasets import builder_of


def restore_order(outputs, dataset, *, per_frame=False, per_segment=False, epoch=None):
    """`model.predict(dataset)`'s outputs, in the order of the built data.

    Works for every builder whose batches hold whole elements
    (`PaddedBuilder`, `SortedBuilder`, `BucketBuilder`, `WindowBuilder`) and
    for `PackedBuilder` on every engine; for a `ChunkBuilder` it reassembles
    the chunks' outputs into sequences (`ChunkBuilder.reassemble`). Filler
    rows (`remainder="pad"`, `batch_multiple`) are left out.

    A packed row holds several elements, so its outputs go back to them in
    one of two ways, said explicitly: `per_frame=True` for outputs per
    position, `(rows, sequence_length, ...)`, cut into each element's
    positions; `per_segment=True` for outputs per segment slot, `(rows,
    slots, ...)` (e.g. `kerasbatch.layers.SegmentPooling`), where slot k of
    a row is the element of segment id k + 1 (at least
    `resolved_max_segments` slots).

    Args:
        outputs: what `model.predict(dataset)` returned: an array (one row
            per fed row, batch after batch), a `tf.RaggedTensor` (TensorFlow
            joins per-frame outputs of batches of different lengths into
            one), or a dict, list or tuple of them (a model with several
            outputs; all are restored alike).
        dataset: the dataset the outputs are of (returned by `build`).
        per_frame: the outputs have a time axis that follows the padded (or
            packed) inputs: each element's frames are cut out, and a list of
            arrays is returned. Default: one output per element, an array
            `(elements, ...)`.
        per_segment: the outputs of a `PackedBuilder`'s dataset have a
            segment axis after the rows: slot k of a row is returned for
            the row's k-th element, an array `(elements, ...)`.
        epoch: the epoch the outputs are of (default: the one the dataset
            last started, i.e. the one `model.predict` just ran).

    Returns:
        For each output: an array with the output of element `i` at `i`, or
        (with `per_frame`) a list whose item `i` is element `i`'s frames.

    Raises:
        ValueError: the outputs do not have the rows the epoch fed (or, for
            packed rows, the positions or segment slots); the epoch left
            elements out (`overflow="drop"`, dropped remainders) or, for
            packed rows, cut them short (`overflow="truncate"`); both
            `per_frame` and `per_segment` are given, or a `PackedBuilder`'s
            outputs come with neither, or `per_segment` with another
            builder; the builder is a `StreamBucketBuilder` (a stream
            planned as it runs).

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

    Packed rows, with outputs per position and per segment slot:

    >>> packed = kerasbatch.PackedBuilder(6, batch_size=2, shuffle=False)
    >>> dataset = packed.build(x, engine="python")
    >>> rows = np.concatenate([batch["x"] for batch in dataset])
    >>> rows.tolist()
    [[5.0, 5.0, 5.0, 5.0, 5.0, 1.0], [4.0, 4.0, 4.0, 4.0, 2.0, 2.0]]
    >>> [frames.tolist() for frames in kerasbatch.restore_order(
    ...     rows, dataset, per_frame=True)]
    [[5.0, 5.0, 5.0, 5.0, 5.0], [1.0], [4.0, 4.0, 4.0, 4.0], [2.0, 2.0]]
    >>> slots = np.array([[50.0, 10.0], [40.0, 20.0]])  # one per segment
    >>> kerasbatch.restore_order(slots, dataset, per_segment=True).tolist()
    [50.0, 10.0, 40.0, 20.0]
    """
    served = check_restorable(dataset, per_frame, per_segment)
    if isinstance(served, ChunkBuilder):
        return served.reassemble(outputs, epoch)
    packed = isinstance(served, PackedBuilder)
    if epoch is None:
        epoch = served.last_started_epoch
        if epoch is None:
            raise ValueError(
                "The dataset has not been iterated yet: call model.predict("
                "dataset) first, or pass the epoch the outputs are of."
            )
    plan = served.plan(epoch)
    lengths = served.lengths
    _check_complete(plan, lengths, packed)
    places = _packed_places(plan) if packed else _whole_places(plan, lengths)
    fed_rows = int(plan.batch_rows.sum())

    def restore(output):
        if isinstance(output, dict):
            return {key: restore(value) for key, value in output.items()}
        if isinstance(output, list | tuple):
            return type(output)(restore(value) for value in output)
        output = _as_rows(output)
        if len(output) != fed_rows:
            raise ValueError(
                f"The outputs have {len(output)} rows, but epoch {epoch} of the "
                f"dataset fed {fed_rows} in {plan.num_batches} batches: pass "
                "what model.predict returned for this dataset."
            )
        if packed:
            output = np.asarray(output)  # rows of one shape: sequence_length
            _check_packed_axis(output, plan, per_frame, places)
        if per_frame:
            ordered = [None] * len(lengths)
            for element, row, start, stop in zip(
                plan.indices, places.rows, places.starts, places.stops, strict=True
            ):
                ordered[element] = np.asarray(output[row][start:stop])
            return ordered
        if per_segment:
            picked = output[places.rows, places.slots]
        elif isinstance(output, np.ndarray):
            picked = output[places.rows]
        else:
            picked = np.stack([output[row] for row in places.rows])
        ordered = np.empty_like(picked)
        ordered[plan.indices] = picked
        return ordered

    return restore(outputs)


def check_restorable(dataset, per_frame, per_segment, epoch=None):
    """The builder copy serving `dataset`, if `restore_order` can put its
    outputs (of `epoch`, if given) back in input order with these options;
    else raises, saying why (before a model runs on it)."""
    served = builder_of(dataset)
    packed = isinstance(served, PackedBuilder)
    if per_frame and per_segment:
        raise ValueError(
            "Give per_frame=True (outputs per position) or per_segment=True "
            "(outputs per segment slot), not both: restore each output alone."
        )
    if per_segment and not packed:
        raise ValueError(
            f"per_segment=True is for PackedBuilder's packed rows; "
            f"{type(served).__name__}'s rows hold one element each."
        )
    if isinstance(served, StreamBucketBuilder):
        raise ValueError(
            "restore_order needs batches planned ahead; StreamBucketBuilder's "
            "stream is planned as it runs. For inference, build the data with "
            "BucketBuilder, whose batches restore_order puts back in input order."
        )
    if packed and not (per_frame or per_segment):
        raise ValueError(
            "PackedBuilder's rows hold several elements each, so one output per "
            "row is no element's: pass per_frame=True for outputs per position "
            "(rows, sequence_length, ...) or per_segment=True for outputs per "
            "segment slot (rows, slots, ...), e.g. of SegmentPooling."
        )
    if epoch is not None and not isinstance(served, ChunkBuilder):
        _check_complete(served.plan(epoch), served.lengths, packed)
    return served


class _Places(typing.NamedTuple):
    """Where the output of every element of `plan.indices` is: its row, its
    frames `[starts, stops)` on the time axis and (packed) its segment slot."""

    rows: np.ndarray
    starts: np.ndarray
    stops: np.ndarray
    slots: np.ndarray | None = None


def _whole_places(plan, lengths):
    """Batches take `batch_rows` rows each, their elements first, then filler
    rows; an element's frames are its kept length."""
    starts = np.cumsum(plan.batch_rows) - plan.batch_rows
    first = np.repeat(starts - plan.batch_splits[:-1], plan.batch_sizes)
    rows = first + np.arange(len(plan.indices))
    kept = np.minimum(lengths[plan.indices], np.repeat(plan.limits, plan.batch_sizes))
    return _Places(rows, np.zeros_like(kept), kept)


def _packed_places(plan):
    """Batches take `batch_rows` rows each, their packed rows first, then
    filler rows; a row's k-th element is segment k + 1, and its tokens follow
    those of the elements before it in the row."""
    starts = np.cumsum(plan.batch_rows) - plan.batch_rows
    first = np.repeat(starts - plan.batch_splits[:-1], plan.rows_per_batch)
    output_row = first + np.arange(plan.num_rows)
    row_of = np.repeat(np.arange(plan.num_rows), plan.segments_per_row)
    slots = np.arange(len(plan.indices)) - plan.row_splits[row_of]
    tokens_before = np.concatenate([[0], np.cumsum(plan.token_lengths)])
    offsets = tokens_before[:-1] - tokens_before[plan.row_splits[row_of]]
    return _Places(output_row[row_of], offsets, offsets + plan.token_lengths, slots)


def _check_packed_axis(output, plan, per_frame, places):
    """The axis after the rows has the positions (`per_frame`) or enough
    segment slots for the packed rows."""
    shape = np.shape(output)
    if per_frame:
        if len(shape) < 2 or shape[1] != plan.sequence_length:
            raise ValueError(
                f"per_frame=True takes outputs of shape (rows, sequence_length="
                f"{plan.sequence_length}, ...), one per packed position; got "
                f"shape {shape}."
            )
        return
    needed = int(places.slots.max()) + 1 if len(places.slots) else 0
    if len(shape) < 2 or shape[1] < needed:
        raise ValueError(
            f"per_segment=True takes outputs of shape (rows, slots, ...) with a "
            f"slot per segment: epoch {plan.epoch} packs up to {needed} elements "
            f"in a row, but the outputs have shape {shape} (give the model as "
            "many slots as the builder's resolved_max_segments)."
        )


def _check_complete(plan, lengths, packed):
    """Raises if the plan leaves elements out (or feeds one twice), or cuts
    packed elements short."""
    counts = np.bincount(plan.indices, minlength=len(lengths))
    missing = np.flatnonzero(counts == 0)
    if len(missing):
        keep = "overflow='error'" if packed else "overflow='truncate' or 'error'"
        raise ValueError(
            f"Epoch {plan.epoch} of the dataset left {len(missing)} elements out "
            f"(the first is element {missing[0]}), so they have no output: for "
            f"inference, keep every element ({keep}, remainder='keep' or 'pad')."
        )
    if counts.max() > 1:
        raise ValueError(
            f"Epoch {plan.epoch} of the dataset feeds element "
            f"{int(np.argmax(counts))} more than once; restore_order needs "
            "each element once."
        )
    if packed and plan.truncated:
        cut = plan.indices[plan.token_lengths < lengths[plan.indices]]
        raise ValueError(
            f"Epoch {plan.epoch} of the dataset packed {plan.truncated} elements "
            f"cut short (the first is element {int(cut.min())}; "
            "overflow='truncate'), so their outputs are not of the whole "
            "elements: for inference, pack every element whole (overflow="
            "'error', a sequence_length as long as the longest)."
        )


def _as_rows(output):
    """Indexable rows of one output: a numpy array, or a list of the rows
    of a `tf.RaggedTensor`."""
    tf = optional.imported("tensorflow")
    if tf is not None and isinstance(output, tf.RaggedTensor):
        return list(output.numpy())
    return np.asarray(output)
