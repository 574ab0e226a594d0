"""Logs the real (non-padding) positions trained per second."""

import time

from kerasbatch.callbacks.base import BuilderCallback
from kerasbatch.callbacks.fit_datasets import fit_sources


class Throughput(BuilderCallback):
    """Writes the epoch's training throughput, in real positions/s, into `logs`.

    Real positions are the non-padding positions of the epoch's batches (over
    all sequence components), read from the builder (`running_positions`:
    its plan, or a streaming builder's counters); padding does not
    count, so a builder that pads less and trains as fast scores higher. The
    time runs from the start of the epoch to its end, without the validation
    pass, and includes tracing and compilation in the first epoch, so a
    dataset that feeds many distinct shapes pays for them.

    Args:
        builder: the `kerasbatch` builder whose dataset `model.fit` iterates.
        name: the log key. Defaults to `"throughput"`.
        dataset: the dataset `model.fit` trains on, as `builder.build`
            returned it or mapped from it. Needed only when the builder
            built several datasets still in use (as
            `kerasbatch.callbacks.PaddingEfficiency`).

    Example:

    >>> import numpy as np
    >>> import keras
    >>> import kerasbatch
    >>> tokens = [np.full(n, 3, "int32") for n in (5, 2, 7, 4)]
    >>> builder = kerasbatch.BucketBuilder(boundaries=[4], batch_size=2)
    >>> dataset = builder.build(tokens, y=np.ones(4))
    >>> model = keras.Sequential(
    ...     [keras.layers.Embedding(8, 4), keras.layers.GlobalMaxPooling1D(),
    ...      keras.layers.Dense(1)])
    >>> model.compile("adam", "mse")
    >>> history = model.fit(dataset, epochs=1, verbose=0, shuffle=False,
    ...     callbacks=[kerasbatch.callbacks.Throughput(builder)])
    >>> history.history["throughput"][0] > 0
    True
    """

    # Counts batches, reads numpy plans or CPU counters: async-safe.
    async_safe = True

    def __init__(self, builder, name="throughput", dataset=None):
        super().__init__(builder)
        self.name = name
        self.dataset = dataset
        self._training = None
        self._batches = 0
        self._started = None
        self._validation_started = None
        self._validation_seconds = 0.0

    def on_train_begin(self, logs=None):
        self._training, _ = fit_sources(
            self.builder, self.dataset, None, type(self).__name__
        )

    def on_train_end(self, logs=None):
        self._training = None

    def on_epoch_begin(self, epoch, logs=None):
        self._batches = 0
        self._validation_seconds = 0.0
        self._started = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self._batches += 1

    def on_test_begin(self, logs=None):
        self._validation_started = time.perf_counter()

    def on_test_end(self, logs=None):
        if self._started is not None and self._validation_started is not None:
            self._validation_seconds += time.perf_counter() - self._validation_started

    def on_epoch_end(self, epoch, logs=None):
        if logs is None or self._started is None:
            return
        seconds = time.perf_counter() - self._started - self._validation_seconds
        if self._training is None:  # used outside model.fit
            self.on_train_begin()
        positions, _ = self._training.running_positions(self._batches)
        logs[self.name] = float(positions) / max(seconds, 1e-9)
