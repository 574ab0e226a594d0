"""Logs the exact padding efficiency of the batches `model.fit` sees."""

from kerasbatch.callbacks import compile_shapes
from kerasbatch.callbacks.base import BuilderCallback
from kerasbatch.callbacks.fit_datasets import fit_sources


class PaddingEfficiency(BuilderCallback):
    """Writes the padding efficiency of the epoch's batches into `logs`.

    The value comes from the builder's `statistics()` and
    `running_positions()`: for in-memory builders the plan of the running
    epoch (numpy, computed before the epoch runs), for
    `kerasbatch.StreamBucketBuilder` counters its pipeline keeps on the CPU.
    Either way it is exact for a completed epoch and costs no device
    synchronisation: the callback never reads a model tensor. It shows in
    the progress bar, `History` and `keras.callbacks.TensorBoard` (list this
    callback before TensorBoard).

    One builder often builds both the training and the validation data. The
    callback reports on the dataset `model.fit` trains on: the one given as
    `dataset`, else the only dataset the builder built that is still in use
    (besides the one `validation_data` is or is made from); if there are
    several, training starts with an error that asks which. With
    `validation_data`, it also writes `"val_<name>"`: the exact padding
    efficiency of the validation pass.

    Datasets mapped after `build` are followed: `dataset` and
    `validation_data` may be made from built datasets by per-batch
    transformations (tf.data's `map`, `prefetch`, `with_options`; Grain's
    `map`, `random_map`, `map_with_index`), which keep every batch and its
    padding; other transformations (`filter`, `unbatch`, `repeat`, `take`,
    ...) are an error that names them (`kerasbatch.engines.derived`).

    With `EpochReshuffle`, it warns at the first epoch's start when the
    model compiles per shape (XLA: `jit_compile`, the JAX backend) and the
    batches of the epochs the fit runs have many distinct shapes, once per
    `fit` (`kerasbatch.callbacks.compile_shapes`).

    Args:
        builder: the `kerasbatch` builder whose dataset `model.fit` iterates.
        per_batch: also write the running efficiency (over the epoch's
            batches so far) after every training batch (for a streaming
            builder, exact unless its pipeline runs 4096 batches ahead).
        per_component: also write `"<name>_padding_efficiency"` for every
            sequence component (x, y, sample weights or dict keys).
        name: the log key. Defaults to `"padding_efficiency"`.
        dataset: the dataset `model.fit` trains on: as `builder.build`
            returned it, or made from it by per-batch transformations
            (`map`, ...). Needed only when the builder built several
            datasets still in use.
        validation_data: the validation dataset given to `model.fit` (as a
            builder's `build` returned it, this builder's or another's, or
            mapped from it), for `"val_<name>"` (and
            `"val_<component>_<name>"` with `per_component`).

    Example:

    >>> import numpy as np
    >>> import keras
    >>> import kerasbatch
    >>> x = [np.ones(n, "int32") for n in (1, 2, 3, 4)]
    >>> builder = kerasbatch.SortedBuilder(batch_size=2, shuffle=False)
    >>> train = builder.build(x, y=np.zeros(4))
    >>> val = builder.build(x[:3], y=np.zeros(3))
    >>> model = keras.Sequential([
    ...     keras.layers.Embedding(10, 2),
    ...     keras.layers.GlobalAveragePooling1D(),
    ...     keras.layers.Dense(1),
    ... ])
    >>> model.compile("sgd", "mse")
    >>> callback = kerasbatch.callbacks.PaddingEfficiency(
    ...     builder, validation_data=val)
    >>> history = model.fit(train, validation_data=val, epochs=1, verbose=0,
    ...     shuffle=False, callbacks=[callback])
    >>> history.history["padding_efficiency"], history.history["val_padding_efficiency"]
    ([0.8333333333333334], [0.8571428571428571])

    Mapped datasets (here to keras-hub's input name) report the same:

    >>> inputs = keras.Input((None,), dtype="int32", name="token_ids")
    >>> hub_model = keras.Model({"token_ids": inputs}, model(inputs))
    >>> hub_model.compile("sgd", "mse")
    >>> def rename(x, y):
    ...     return {"token_ids": x}, y
    >>> mapped_train, mapped_val = train.map(rename), val.map(rename)
    >>> callback = kerasbatch.callbacks.PaddingEfficiency(
    ...     builder, validation_data=mapped_val)
    >>> history = hub_model.fit(mapped_train, validation_data=mapped_val,
    ...     epochs=1, verbose=0, shuffle=False, callbacks=[callback])
    >>> history.history["padding_efficiency"], history.history["val_padding_efficiency"]
    ([0.8333333333333334], [0.8571428571428571])
    """

    # Only numpy plans and CPU counters: safe for asynchronous dispatch.
    async_safe = True

    def __init__(
        self,
        builder,
        per_batch=False,
        per_component=False,
        name="padding_efficiency",
        dataset=None,
        validation_data=None,
    ):
        super().__init__(builder)
        self.per_batch = per_batch
        self.per_component = per_component
        self.name = name
        self.dataset = dataset
        self.validation_data = validation_data
        self._training = self._validation = None
        self._validated = False
        self._data_epoch = None

    def on_train_begin(self, logs=None):
        self._training, self._validation = fit_sources(
            self.builder, self.dataset, self.validation_data, type(self).__name__
        )
        compile_shapes.register(self, self.builder, self._training, self._validation)

    def on_train_end(self, logs=None):
        self._training = self._validation = None

    def on_epoch_begin(self, epoch, logs=None):
        self._validated = False
        self._data_epoch = None
        compile_shapes.warn_once(self, epoch)

    def on_test_end(self, logs=None):
        self._validated = True

    def on_train_batch_end(self, batch, logs=None):
        if self._data_epoch is None:
            # The epoch the data of this fit epoch comes from. Read now, not
            # at the epoch's end: by then Keras may have started the next
            # iterator (under a strategy it does).
            self._data_epoch = self._training_source().last_started_epoch
        if not self.per_batch or logs is None:
            return
        real, padded = self._training_source().running_positions(batch + 1)
        logs[self.name] = real / max(padded, 1)

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        self._write(
            logs, "", self._training_source().statistics(epoch=self._data_epoch)
        )
        if self._validation is not None and self._validated:
            self._write(logs, "val_", self._validation.statistics())

    def _training_source(self):
        if self._training is None:  # used outside model.fit
            self.on_train_begin()
        return self._training

    def _write(self, logs, prefix, statistics):
        logs[f"{prefix}{self.name}"] = statistics.padding_efficiency
        if self.per_component:
            for component, value in statistics.component_efficiency.items():
                logs[f"{prefix}{component}_{self.name}"] = value
