"""Keras' `BackupAndRestore`, with the data position: resume mid-epoch."""

import json
import os
import warnings

import keras

from kerasbatch.builders.datasets import builder_of
from kerasbatch.callbacks.base import FreshCopies
from kerasbatch.engines.derived import DerivedDatasetError
from kerasbatch.engines.served import built_dataset

POSITION_FILE = "data_position.json"

#: The warning of Keras' epoch iterator (`keras.src.trainers.epoch_iterator`)
#: when a dataset ends before the number of batches Keras expects.
RAN_OUT_OF_DATA = "Your input ran out of data"
EPOCH_ITERATOR = r"keras\.src\.trainers\.epoch_iterator"


class BackupAndRestore(FreshCopies, keras.callbacks.BackupAndRestore):
    """`keras.callbacks.BackupAndRestore` that also saves where the data is.

    Keras' callback saves the weights (and optimizer) every `save_freq`
    batches, and after a restart begins the interrupted epoch again from
    its first batch: the batches before the backup are trained twice. This
    one saves, with every backup, the built dataset's position (its epoch
    and the batches of it trained), and after a restart the dataset
    continues at the next batch: the resumed run trains on exactly the
    batches the uninterrupted run would have, with the weights it had.

    - `engine="python"` and `engine="grain"` datasets resume in the same
      `fit`: the interrupted epoch runs its remaining batches, the next
      ones run whole, up to `epochs`. (Keras ends the shorter epoch when
      the dataset has no more batches; this callback keeps Keras from
      warning then that the input "ran out of data", which it did not.)
    - `tf.data` datasets resume at epoch boundaries only (as Keras'
      callback does); a `tf.train.Checkpoint` of the iterator keeps the
      position of a custom loop.

    Epochs follow Keras' epochs, as with `kerasbatch.callbacks.EpochReshuffle`
    (which this callback does not need).

    Args:
        backup_dir: where the backup is kept (as Keras' callback).
        dataset: the dataset `model.fit` trains on, built with
            `engine="python"` or `engine="grain"` (or a Grain dataset made
            from one by `map` and the other per-batch transformations of
            `kerasbatch.engines.derived`).
        save_freq: `"epoch"` or a number of batches (as Keras' callback).
        double_checkpoint: keep the previous backup too (as Keras').
        delete_checkpoint: delete the backup when `fit` ends (as Keras').

    Example:

    >>> import tempfile
    >>> import numpy as np
    >>> import keras
    >>> import kerasbatch
    >>> builder = kerasbatch.BucketBuilder(num_buckets=2, batch_size=2, seed=1)
    >>> train = builder.build([np.ones(n, "int32") for n in range(1, 9)],
    ...                       np.zeros(8), engine="python")
    >>> model = keras.Sequential([keras.layers.Embedding(10, 2),
    ...                           keras.layers.GlobalAveragePooling1D(),
    ...                           keras.layers.Dense(1)])
    >>> _ = model(np.zeros((1, 1), "int32"))  # built, as Keras' callback needs
    >>> model.compile("sgd", "mse")
    >>> backup = kerasbatch.callbacks.BackupAndRestore(
    ...     tempfile.mkdtemp(), dataset=train, save_freq=2)
    >>> class Preempted(keras.callbacks.Callback):  # after 6 batches
    ...     def on_train_batch_end(self, batch, logs=None):
    ...         self.seen = getattr(self, "seen", 0) + 1
    ...         if self.seen == 6:
    ...             raise RuntimeError("preempted")
    >>> try:
    ...     model.fit(train, epochs=3, callbacks=[backup, Preempted()], verbose=0)
    ... except RuntimeError:
    ...     pass
    >>> len(train)  # batches an epoch
    4

    The same `fit` again (as a restarted script runs it) restores the backup
    of batch 6, trains batches 3 and 4 of epoch 1, then epoch 2 whole:

    >>> trained = []
    >>> count = keras.callbacks.LambdaCallback(
    ...     on_train_batch_end=lambda batch, logs: trained.append(batch))
    >>> history = model.fit(train, epochs=3, callbacks=[backup, count], verbose=0)
    >>> history.epoch, len(trained)
    ([1, 2], 6)
    """

    def __init__(
        self,
        backup_dir,
        dataset,
        save_freq="epoch",
        double_checkpoint=False,
        delete_checkpoint=True,
    ):
        super().__init__(
            backup_dir,
            save_freq=save_freq,
            double_checkpoint=double_checkpoint,
            delete_checkpoint=delete_checkpoint,
        )
        try:  # a Grain dataset mapped from a built one resumes through it
            built = built_dataset(dataset)
        except DerivedDatasetError:
            raise
        except ValueError:
            built = dataset
        if not hasattr(built, "set_state"):
            raise ValueError(
                "BackupAndRestore resumes the data of datasets built with "
                "engine='python' or engine='grain' (their position is saved "
                f"with the weights), got {type(dataset).__name__}. Build with "
                "one of those, or use keras.callbacks.BackupAndRestore, which "
                "resumes at the start of the interrupted epoch."
            )
        self.dataset = dataset
        self._built = built  # the dataset build() returned
        self._served = builder_of(built)
        self._position_path = os.path.join(backup_dir, POSITION_FILE)
        self._trained = 0  # batches of the running epoch trained
        self._resumed_at = 0  # the batch the running epoch resumed at
        self._running_epoch = 0  # fit's epoch now running
        self._quiet = None  # the warnings filter of a resumed epoch

    def on_train_begin(self, logs=None):
        self._loud_again()  # of a fit an exception stopped mid-epoch
        super().on_train_begin(logs)
        self._resumed_at = 0
        if not os.path.exists(self._position_path):
            return
        with open(self._position_path) as file:
            position = json.load(file)
        epoch, batch = position["epoch"], position["batch"]
        if batch >= len(self._built):  # the backup ended an epoch
            epoch, batch = epoch + 1, 0
        self._served.set_epoch(epoch)
        if batch:
            self._built.set_state({"epoch": epoch, "batch": batch})
            self._resumed_at = batch

    def on_epoch_begin(self, epoch, logs=None):
        # Keras' callback counts epochs from its own end-of-epoch calls,
        # which a resumed run has not made yet: keep its count with fit's.
        self._current_epoch = self._running_epoch = epoch
        self._trained = self._resumed_at
        if self._resumed_at:
            self._quiet_ran_out_of_data()
        super().on_epoch_begin(epoch, logs)

    def on_train_batch_end(self, batch, logs=None):
        self._trained = self._resumed_at + batch + 1
        if self._trained >= len(self._built):
            # A backup of the epoch's last batch ends the epoch: Keras' own
            # record must say so too (it moves on at its `on_epoch_end`), or
            # a restart would run this epoch's number again.
            self._current_epoch = self._running_epoch + 1
        super().on_train_batch_end(batch, logs)

    def on_test_begin(self, logs=None):
        self._loud_again()  # the resumed epoch's training ended
        super().on_test_begin(logs)

    def on_epoch_end(self, epoch, logs=None):
        self._loud_again()
        self._trained = len(self._built)
        self._resumed_at = 0
        super().on_epoch_end(epoch, logs)

    def _quiet_ran_out_of_data(self):
        """Keeps Keras from warning, at the end of the resumed epoch, that
        the input "ran out of data; interrupting training": Keras ends an
        epoch when the dataset has no more batches (and keeps the length it
        knows for the next epochs), and the resumed epoch has no more. The
        filter holds that one message of Keras' epoch iterator, from the
        resumed epoch's first batch to its last."""
        if self._quiet is not None:
            return
        filters = warnings.filters
        before = list(filters)
        warnings.filterwarnings(
            "ignore",
            message=RAN_OUT_OF_DATA,
            category=UserWarning,
            module=EPOCH_ITERATOR,
        )
        if filters[0] in before:  # the same filter of the user's: theirs
            filters[:] = before
            return
        self._quiet = (filters, filters[0])

    def _loud_again(self):
        """Removes the filter of `_quiet_ran_out_of_data`, if it is set."""
        if self._quiet is None:
            return
        (filters, quiet), self._quiet = self._quiet, None
        # From the list it was put in, and the one in use now (another, in
        # a `warnings.catch_warnings()` block).
        for in_use in (filters, warnings.filters):
            in_use[:] = [item for item in in_use if item is not quiet]

    def _save_model(self):
        super()._save_model()
        position = {
            "epoch": self._served.last_started_epoch,
            "batch": self._trained,
        }
        with open(self._position_path, "w") as file:
            json.dump(position, file)

    def on_train_end(self, logs=None):
        self._loud_again()
        if self.delete_checkpoint and os.path.exists(self._position_path):
            os.remove(self._position_path)
        super().on_train_end(logs)
