"""The length-index pass: every element's length, read once and cached by the data.

Streaming builders cannot see lengths ahead of the data. One pass that reads
only what the lengths need gives them: "auto" boundaries, and the exact
number of batches of a finite dataset. The result is cached in a
`__lengths__` folder next to the manifest, keyed by the data files (paths,
sizes, modification times) and the loader settings that shape the elements,
so a second run reads nothing.
"""

import hashlib
import json
import os
import warnings

import keras
import numpy as np

from kerasbatch.engines.tf_data.as_written import traced_as_written
from kerasbatch.optional import tensorflow as tf

CACHE_DIRECTORY = "__lengths__"
_BATCH = 4096


def cache_path(manifest_path, files, settings):
    """Where the lengths of `files` under `settings` are cached."""
    stamp = [settings]
    for file in files:
        status = os.stat(file) if os.path.exists(file) else None
        stamp.append([file, status and status.st_size, status and status.st_mtime_ns])
    key = hashlib.sha256(json.dumps(stamp, sort_keys=True).encode()).hexdigest()[:20]
    return os.path.join(
        os.path.dirname(os.path.abspath(manifest_path)), CACHE_DIRECTORY, f"{key}.npy"
    )


@traced_as_written
def element_lengths(elements, verbose=1):
    """The length of every element of a finite dataset of dicts of tensors.

    An element's length is the longest first dimension among its tensors
    whose first dimension varies (`None` in `element_spec`), as the
    streaming builders measure it.
    """
    sequences = _sequence_names(elements.element_spec, first_axis=0)

    def length(element):
        return tf.reduce_max(
            tf.stack(
                [tf.shape(element[name], out_type=tf.int64)[0] for name in sequences]
            )
        )

    return _gather(
        elements.map(length, num_parallel_calls=tf.data.AUTOTUNE).batch(_BATCH), verbose
    )


@traced_as_written
def batch_lengths(batches, verbose=1):
    """`element_lengths` of the elements of a dataset of parsed batches.

    The batches hold a `tf.RaggedTensor` (records, None, ...) for each
    variable-length feature; no per-element work, so several times faster.
    """
    sequences = _sequence_names(batches.element_spec, first_axis=1)

    def lengths(batch):
        rows = [batch[name].row_lengths() for name in sequences]
        return tf.reduce_max(tf.stack(rows), axis=0)

    return _gather(batches.map(lengths, num_parallel_calls=tf.data.AUTOTUNE), verbose)


def _sequence_names(element_spec, first_axis):
    names = [
        name
        for name, spec in element_spec.items()
        if spec.shape.rank
        and spec.shape.rank > first_axis
        and spec.shape[first_axis] is None
    ]
    if not names:
        raise ValueError(
            "No tensor has a variable first dimension, so elements have no "
            f"length to index (element_spec: {element_spec})."
        )
    return names


def _gather(length_batches, verbose):
    """Concatenates batches of lengths, with a progress bar over elements."""
    progress = keras.utils.Progbar(None, unit_name="element", verbose=verbose)
    pieces, count = [], 0
    for batch in length_batches:
        pieces.append(batch.numpy())
        count += len(pieces[-1])
        progress.update(count)
    progress.update(count, finalize=True)
    return np.concatenate(pieces) if pieces else np.zeros(0, np.int64)


def cached_lengths(path, compute, cache=True):
    """The lengths at `path` if cached, else `compute()` (saved when possible)."""
    if cache and os.path.exists(path):
        return np.load(path)
    lengths = compute()
    if cache:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            np.save(path, lengths)
        except OSError as error:
            warnings.warn(
                f"Could not cache the length index at {path}: {error}", stacklevel=3
            )
    return lengths
