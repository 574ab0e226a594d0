"""A `fit` stopped part-way, as a preemption stops it: `StopAt`."""

import keras


class StopAt(keras.callbacks.Callback):
    """Raises `RuntimeError("stopped")` after the `step`-th batch of the fit
    (counted over epochs), after the callbacks before it (a backup) ran."""

    def __init__(self, step):
        super().__init__()
        self.step, self.seen = step, 0

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.step:
            raise RuntimeError("stopped")
