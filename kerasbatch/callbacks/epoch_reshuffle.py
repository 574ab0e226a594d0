"""Pins a builder's epoch to Keras' epoch, for exact resumption."""

from kerasbatch.callbacks import compile_shapes
from kerasbatch.callbacks.base import BuilderCallback


class EpochReshuffle(BuilderCallback):
    """Sets the builder's epoch at the start of every `model.fit` epoch.

    A built dataset plans (or, streaming, shuffles) epoch k's batches from
    `(seed, k)`. Without this callback every new iteration simply takes the
    next epoch; with it, epoch k of `model.fit` always gets the batches of
    epoch k, so resuming with
    `initial_epoch=k` or `keras.callbacks.BackupAndRestore` feeds exactly the
    batches of an uninterrupted run.

    The callback survives keras-tuner's deep copy of callbacks: a copy keeps
    driving the same builder (and so the datasets it built, and those made
    from them by `map` and other per-batch transformations).

    When the model compiles once per batch shape (XLA: `jit_compile`, the
    JAX backend), it warns at the first epoch's start if the batches of the
    epochs the fit runs (`initial_epoch` to `epochs - 1`) have more distinct
    shapes than 16 (or the buckets), with the fix: once per `fit`, with
    `PaddingEfficiency` in it or not (`kerasbatch.callbacks.compile_shapes`).

    Args:
        builder: the `kerasbatch` builder whose dataset `model.fit` iterates.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> import kerasbatch
    >>> x = [np.ones(n, "int32") for n in range(1, 9)]
    >>> builder = kerasbatch.PaddedBuilder(batch_size=4, seed=1)
    >>> dataset = builder.build(x, y=np.zeros(8))
    >>> model = keras.Sequential([
    ...     keras.layers.Embedding(10, 2),
    ...     keras.layers.GlobalAveragePooling1D(),
    ...     keras.layers.Dense(1),
    ... ])
    >>> model.compile("sgd", "mse")
    >>> callback = kerasbatch.callbacks.EpochReshuffle(builder)
    >>> _ = model.fit(dataset, epochs=3, initial_epoch=1, verbose=0,
    ...               shuffle=False, callbacks=[callback])
    >>> builder.last_started_epoch
    2
    """

    def __init__(self, builder):
        super().__init__(builder)

    def on_train_begin(self, logs=None):
        compile_shapes.register(self, self.builder, pins=True)

    def on_epoch_begin(self, epoch, logs=None):
        self.builder.set_epoch(epoch)
        compile_shapes.warn_once(self, epoch)
