"""Multi-host JAX: the part of every batch this process feeds.

Under `jax.distributed` (Keras' `keras.distribution.initialize()`), every
process runs the same `fit` and feeds its own rows of every global batch
(Keras assembles them with `jax.make_array_from_process_local_data`). The
numpy engines give process `i` of `n` rows `[i * rows / n, (i + 1) * rows /
n)` of every planned batch, padded to the global batch's length: every
process trains on the same bucket and shape at every step (lock-step), and
the processes together feed every element of an epoch exactly once.
"""

import keras

from kerasbatch import optional


def jax_processes():
    """`(process index, process count)` of a multi-process JAX run, or
    `(0, 1)`."""
    jax = optional.imported("jax")
    if jax is None or keras.backend.backend() != "jax":
        return 0, 1
    return int(jax.process_index()), int(jax.process_count())


def part_of(batch, index, count):
    """Process `index`'s rows of every array of `batch` (of `count` equal
    parts)."""
    if count == 1:
        return batch
    if isinstance(batch, list):  # a list of rows
        return _rows(batch, index, count)
    return keras.tree.map_structure(lambda array: _rows(array, index, count), batch)


def _rows(array, index, count):
    """Part `index` of `count` of `array` (or a list) along its first axis."""
    part = len(array) // count
    return array[index * part : (index + 1) * part]
