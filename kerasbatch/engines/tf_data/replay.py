"""Batches made again, apart from the dataset that made them: in a `tf.data`
pipeline of the same `element_spec`, through the maps of a derived dataset
(`kerasbatch.engines.derived`), for `kerasbatch.callbacks.WarmUp`."""

from kerasbatch.optional import tensorflow as tf


def dataset_of(batches, element_spec):
    """A `tf.data.Dataset` of `batches` (a list) whose `element_spec` is
    exactly `element_spec`: a `tf.function` given its iterator is traced as
    for the dataset the batches came from."""
    return tf.data.Dataset.from_generator(
        lambda: iter(batches), output_signature=element_spec
    )


def replay_maps(chain, batches, element_spec):
    """`batches` of a built `tf.data` dataset through the maps of `chain`
    (the derived dataset first, as `kerasbatch.engines.derived.trace`
    returns it), and the derived dataset's `element_spec`."""
    dataset = dataset_of(batches, element_spec)
    for node in reversed(chain):
        if type(node).__name__ in ("_MapDataset", "_ParallelMapDataset"):
            function = getattr(getattr(node, "_map_func", None), "_func", None)
            if function is None:
                raise ValueError(
                    "Cannot read the function of a tf.data map in this "
                    "TensorFlow version: pass the dataset build() returned."
                )
            dataset = dataset.map(function)
    expected = chain[0].element_spec
    if dataset.element_spec != expected:
        raise ValueError(
            f"The maps of the dataset, run again on its batches, give "
            f"{dataset.element_spec}, not its element_spec {expected}."
        )
    return list(dataset), expected


def run_until_exhausted(function, iterator):
    """Calls `function(iterator)` until the iterator is exhausted (a Keras
    train or test function, as `fit` calls it)."""
    while True:
        try:
            function(iterator)
        except (StopIteration, tf.errors.OutOfRangeError):
            break
