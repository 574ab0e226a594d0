"""Keras takes the number of batches of a kerasbatch Grain dataset from `len`.

Keras' `GrainDatasetAdapter.num_batches` is None for every Grain dataset
(Keras 3.15): its `EpochIterator` then learns an epoch's length from the
first epoch of each `fit`, `evaluate` or `predict`, by running the dataset
until it raises `StopIteration`, and warns at every such end that the input
"ran out of data ... use the `.repeat()` function", although nothing ran
out. Worse, the length it learns is that of the first epoch: a first epoch
resumed mid-way (`kerasbatch.callbacks.BackupAndRestore`) would shorten
every later epoch of that `fit`.

A kerasbatch Grain dataset knows its length exactly: `len(dataset)` is the
number of batches every epoch yields (for a `StreamBucketBuilder`, where
`build` was given the lengths). `install()` makes Keras read it: it wraps
the adapter's `num_batches` so that, where Keras' own answer is None, it is
`len()` of the dataset a kerasbatch builder returned (also through the
per-batch transformations of `kerasbatch.engines.derived`: `map`,
`random_map`, `map_with_index`, ...). Keras then runs exactly that many
steps per epoch and starts a new iteration for each, on every backend
(JAX, torch, and TensorFlow, whose `tf.data` pipeline over the Grain
dataset runs under the same epoch iterator): no `StopIteration`, no
warning, a progress bar with its total from the first epoch. A shorter
first epoch (a resumed one) ends by `StopIteration` once, and Keras keeps
the length for the epochs after it, so one `fit` trains to its last epoch.

Since Keras asks for no batch after the last, a kerasbatch Grain dataset's
epoch moves on when an iteration yields its last batch. Keras' adapter
also looks at a dataset's first 2 batches when it is made (for their
shapes), which for a dataset of 1 or 2 batches would be all of an epoch:
`install()` wraps that look too (`_get_dataset_info`), and no iteration
during it moves the epoch on.

The trade-off: this replaces two members of a private Keras class
(`keras.src.trainers.data_adapters.GrainDatasetAdapter`) for the whole
process, once a Grain dataset is built. It is kept narrow: every dataset
that is not a kerasbatch one gets Keras' own answer and look, unchanged;
where Keras answers itself (a later Keras that reads `len()`), its answer
is taken; and where the class or its members are not as expected, nothing
is replaced (the dataset works as before, with Keras' warning). The
alternatives do less: `fit(steps_per_epoch=len(dataset))` makes Keras 3.15
keep one iterator across epochs for a dataset whose length it does not
know, so the second epoch finds it spent and trains no batch; passing
Keras a `DataAdapter` of our own (`get_data_adapter` takes one as is) also
subclasses a private class, and users would have to wrap their datasets; a
warnings filter hides the message but leaves Keras learning lengths from
first epochs.

Example:

>>> import numpy as np
>>> import kerasbatch
>>> from keras.src.trainers.data_adapters import grain_dataset_adapter
>>> builder = kerasbatch.SortedBuilder(batch_size=2, shuffle=False)
>>> dataset = builder.build([np.ones(n) for n in (1, 2, 3)], engine="grain")
>>> adapter = grain_dataset_adapter.GrainDatasetAdapter(dataset.map(lambda b: b))
>>> adapter.num_batches == len(dataset) == 2
True
"""

import contextlib
import functools

#: Marks the wrapped members, so that they are installed once.
_MARK = "_kerasbatch_lengths"


def built_dataset(dataset):
    """The dataset a kerasbatch builder returned that `dataset` is, or is
    made from by per-batch transformations; else None."""
    from kerasbatch.engines import served

    try:
        return served.built_dataset(dataset)
    except ValueError:  # not kerasbatch's, or made by another transformation
        return None


def num_batches(dataset):
    """The number of batches of every epoch of `dataset`, if it is a Grain
    dataset a kerasbatch builder returned (or one made from it by
    per-batch transformations) and knows it; else None."""
    built = built_dataset(dataset)
    if built is None:
        return None
    try:
        return int(len(built))
    except TypeError:  # a stream built without its lengths
        return None


@contextlib.contextmanager
def keras_look(dataset):
    """Marks the kerasbatch dataset under `dataset` (if any) as looked at by
    Keras, not iterated for an epoch, while the block runs."""
    built = built_dataset(dataset)
    if built is None or not hasattr(built, "keras_looks"):
        yield
        return
    built.keras_looks += 1
    try:
        yield
    finally:
        built.keras_looks -= 1


def install(adapter=None):
    """Makes Keras' Grain adapter take the length of kerasbatch datasets, and
    its look at their first batches leave their epoch alone (see the module
    docstring).

    Does nothing where it is installed already, or where the adapter is not
    the one this was written for (a `num_batches` property and a
    `_get_dataset_info` method of its own).

    Args:
        adapter: the adapter class; None: Keras'
            `keras.src.trainers.data_adapters.GrainDatasetAdapter`.

    Returns:
        Whether it is installed.
    """
    if adapter is None:
        try:
            from keras.src.trainers.data_adapters import grain_dataset_adapter
        except ImportError:
            return False
        adapter = getattr(grain_dataset_adapter, "GrainDatasetAdapter", None)
    members = getattr(adapter, "__dict__", {})
    keras_property = members.get("num_batches")
    keras_look_at = members.get("_get_dataset_info")
    if (
        not isinstance(keras_property, property)
        or keras_property.fget is None
        or not callable(keras_look_at)
    ):
        return False
    if getattr(keras_property.fget, _MARK, False):
        return True
    keras_num_batches = keras_property.fget

    @functools.wraps(keras_num_batches)
    def with_kerasbatch_lengths(self):
        value = keras_num_batches(self)
        if value is None:
            value = num_batches(getattr(self, "_dataset", None))
        return value

    @functools.wraps(keras_look_at)
    def look_at_first_batches(self, dataset, *arguments, **options):
        with keras_look(dataset):
            return keras_look_at(self, dataset, *arguments, **options)

    for function in (with_kerasbatch_lengths, look_at_first_batches):
        setattr(function, _MARK, True)
    adapter._get_dataset_info = look_at_first_batches
    adapter.num_batches = property(with_kerasbatch_lengths)
    return True
