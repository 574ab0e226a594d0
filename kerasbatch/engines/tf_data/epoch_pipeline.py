"""What every `tf.data` pipeline of a built dataset shares: its epoch state,
when the epoch advances, and its prefetch."""

import keras

from kerasbatch.engines.tf_data import batch as batch_lib
from kerasbatch.optional import tensorflow as tf


class EpochPipeline:
    """What every pipeline of a built dataset shares: the dataset's epoch
    state, and its prefetch.

    Args:
        served: the dataset's `kerasbatch.engines.served.Served`.
    """

    def __init__(self, served):
        self.served = served
        self.state = served.state
        self.prefetch = served.built.settings.prefetch

    def advanced_at_end(self, dataset):
        """`dataset`, which moves the epoch counter to the epoch it read + 1
        when its last element is taken.

        Under a strategy, Keras makes an iterator at the end of every epoch
        that it never uses, and the prefetch to the devices starts it at
        once. So iterators of distributed datasets read the epoch without
        advancing it, and one taken to its end advances it: an unused
        iterator holds one element per device and never gets there (unless
        the epoch is that short; `EpochReshuffle` sets the epoch then).
        Idempotent: every iterator of epoch e sets e + 1.
        """

        def advance(_):
            with tf.control_dependencies([self.state.advance_past_started()]):
                return tf.nest.map_structure(batch_lib.empty_like, dataset.element_spec)

        end = tf.data.Dataset.range(1).map(advance)
        return dataset.concatenate(end.filter(lambda *_: False))

    def prefetched(self, dataset):
        """`dataset`, prefetched as the `prefetch` setting says."""
        if not self.prefetch:
            return dataset
        buffer = tf.data.AUTOTUNE if self.prefetch == "auto" else self.prefetch
        return dataset.prefetch(buffer)


def advances_when_taken():
    """Whether a pipeline moves the epoch counter past its epoch when the
    consumer takes the last batch (exact, whoever looks at a first batch),
    rather than when an iteration starts (free).

    Keras on JAX and torch takes the first batch of a fresh iterator to
    build an unbuilt model, then starts again: that look must not take an
    epoch. Knowing when the last batch is taken costs a stateful call per
    batch in the consumer's thread (0.6-0.7x the batches/s of a pipeline
    iterated alone), so it is paid there only; TensorFlow builds the model
    in its traced step and never looks.
    """
    return keras.backend.backend() != "tensorflow"
