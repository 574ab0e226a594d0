"""Predictions per element, in input order, on every backend: `predict`.

`model.predict(dataset)` joins the outputs of all batches into one array.
Batches of different lengths (buckets, sorted or per-batch padding) give
per-frame outputs of different lengths, which Keras on JAX and torch cannot
join (`np.concatenate` fails); TensorFlow joins them into a ragged tensor.
`predict` runs the model batch by batch instead, and hands the outputs to
`kerasbatch.restore_order`, which puts them back in the order of the data
given to `build`.
"""

import keras
import numpy as np

from kerasbatch.builders import ChunkBuilder, builder_of
from kerasbatch.tools import restore


def predict(model, dataset, *, per_frame=False, per_segment=False, verbose="auto"):
    """The outputs of `model` for every element of `dataset`, in input order.

    Runs `model.predict_on_batch` on each batch of one pass over the
    dataset (one epoch of it), then restores the order of the data given to
    `build` with `kerasbatch.restore_order`: filler rows are left out, and
    outputs per frame are cut to each element's frames. Works for every
    planned builder (`PaddedBuilder`, `SortedBuilder`, `BucketBuilder`,
    `WindowBuilder`, `PackedBuilder`, `ChunkBuilder`), on every engine and
    Keras backend, whatever the batches' lengths.

    Args:
        model: a Keras model that takes the dataset's x.
        dataset: a dataset returned by a builder's `build` (or made from
            one by per-batch transformations such as `map`).
        per_frame: the outputs have a time axis that follows the padded (or
            packed) inputs: a list with each element's frames is returned.
        per_segment: the outputs of a `PackedBuilder`'s dataset have a
            segment-slot axis after the rows (e.g. of
            `kerasbatch.layers.SegmentPooling`): slot k of a row is
            returned for its k-th element.
        verbose: `"auto"`, 0 or 1 (a progress bar), as `model.predict`.

    Returns:
        As `kerasbatch.restore_order`: for each output of the model, an
        array with element `i`'s output at `i`, or (with `per_frame`) a
        list whose item `i` is element `i`'s frames. A `ChunkBuilder`'s
        chunk outputs are reassembled into one array per sequence.

    Raises:
        ValueError: the dataset cannot be put back in input order (a
            stream, elements left out or cut; see `restore_order`), or
            outputs differ in length from batch to batch without
            `per_frame=True`.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> import kerasbatch
    >>> x = [np.full((n, 1), n, "float32") for n in (5, 1, 4, 2, 7)]
    >>> builder = kerasbatch.BucketBuilder([3], batch_size=2)
    >>> dataset = builder.build(x, engine="python")
    >>> model = keras.Sequential([keras.layers.Dense(1, use_bias=False)])
    >>> _ = model(np.zeros((1, 1, 1)))
    >>> model.set_weights([np.full((1, 1), 10.0)])
    >>> frames = kerasbatch.predict(model, dataset, per_frame=True, verbose=0)
    >>> [f[:, 0].tolist() for f in frames[:2]]
    [[50.0, 50.0, 50.0, 50.0, 50.0], [10.0]]
    """
    served = builder_of(dataset)
    restore.check_restorable(dataset, per_frame, per_segment, epoch=served.epoch)
    frames = per_frame or isinstance(served, ChunkBuilder)
    # Only the backends whose tensors Keras takes as such get them as they come.
    to_model = (lambda x: x) if keras.backend.backend() == "tensorflow" else _numpy
    total = _length(dataset)
    progress = keras.utils.Progbar(total, verbose=1 if verbose == "auto" else verbose)
    batches = []
    for step, batch in enumerate(dataset):
        x, _, _ = keras.utils.unpack_x_y_sample_weight(
            tuple(batch) if isinstance(batch, list) else batch
        )
        batches.append(_numpy(model.predict_on_batch(to_model(x))))
        progress.update(step + 1)
    outputs = keras.tree.map_structure(lambda *parts: _joined(parts, frames), *batches)
    return restore.restore_order(
        outputs, dataset, per_frame=per_frame, per_segment=per_segment
    )


def _numpy(structure):
    return keras.tree.map_structure(np.asarray, structure)


def _length(dataset):
    try:
        return len(dataset)
    except TypeError:  # a derived dataset that does not say
        return None


def _joined(parts, per_frame):
    """One output's batches as one array: outputs per frame of batches of
    different padded lengths are padded with zeros to the longest, which
    `restore_order` cuts off again."""
    shapes = sorted({part.shape[1:] for part in parts})
    if len(shapes) == 1:
        return np.concatenate(parts)
    if not per_frame or len({shape[1:] for shape in shapes}) > 1:
        raise ValueError(
            f"The model's outputs differ in shape from batch to batch {shapes}. "
            "Outputs per frame of batches of different padded lengths differ "
            "on axis 1 only: pass per_frame=True to get each element's frames."
        )
    longest = max(shape[0] for shape in shapes)
    return np.concatenate([np.pad(part, _to_length(part, longest)) for part in parts])


def _to_length(part, length):
    """`np.pad`'s widths that pad axis 1 of `part` to `length`."""
    return [(0, 0), (0, length - part.shape[1])] + [(0, 0)] * (part.ndim - 2)
