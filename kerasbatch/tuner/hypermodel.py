"""Joint tuning of a model and its bucketing, as a keras-tuner HyperModel."""

import keras_tuner

from kerasbatch import engines
from kerasbatch.builders import BucketBuilder
from kerasbatch.callbacks import EpochReshuffle, PaddingEfficiency, Throughput
from kerasbatch.data import sources
from kerasbatch.tuner.search_space import BucketSearchSpace


class BucketHyperModel(keras_tuner.HyperModel):
    """A user's `build_model(hp)` plus a bucketed dataset built from `hp`.

    keras-tuner's "tune data preprocessing" pattern: `build` makes the model,
    and `fit` builds the trial's `BucketBuilder` from the same `hp` and trains
    on its dataset, with the tuner's callbacks and the builder's
    `EpochReshuffle`, `PaddingEfficiency` and `Throughput`, so every epoch's
    logs (and the trial's metrics) hold `padding_efficiency` and `throughput`
    beside the model's metrics. Any keras-tuner tuner can search it.

    Args:
        build_model: `build_model(hp)` returning a compiled `keras.Model`, or
            a `keras_tuner.HyperModel` (its `build` is used; training always
            uses the bucketed dataset). None declares only the bucket space
            (for searches that never train).
        search_space: a `BucketSearchSpace`; defaults to its defaults.
        builder: a `BucketBuilder` template for the settings the space does
            not search (`padding`, `max_length`, `output_mask`, `seed`, ...).
        name: the HyperModel's name.
        engine: the engine of the trials' datasets (`"tf.data"`, `"grain"`
            or `"python"`; see `kerasbatch.engines`).

    Example:

    >>> import keras
    >>> import keras_tuner
    >>> import numpy as np
    >>> import kerasbatch
    >>> rng = np.random.default_rng(0)
    >>> x = [rng.integers(1, 20, n) for n in rng.integers(1, 40, 64)]
    >>> y = rng.integers(0, 2, 64)
    >>> def build_model(hp):
    ...     model = keras.Sequential([
    ...         keras.layers.Embedding(20, hp.Choice("units", [4, 8])),
    ...         keras.layers.GlobalAveragePooling1D(),
    ...         keras.layers.Dense(1),
    ...     ])
    ...     model.compile("adam", "mse")
    ...     return model
    >>> hypermodel = kerasbatch.tuner.BucketHyperModel(
    ...     build_model,
    ...     kerasbatch.tuner.BucketSearchSpace(
    ...         num_buckets=(2, 4), boundaries=("quantile",), batch_size=(16,),
    ...         pad_to_bucket=(False,)))
    >>> hp = keras_tuner.HyperParameters()
    >>> model = hypermodel.build(hp)
    >>> history = hypermodel.fit(hp, model, x, y, epochs=1, verbose=0)
    >>> sorted(history.history)
    ['loss', 'padding_efficiency', 'throughput']
    """

    def __init__(
        self,
        build_model=None,
        search_space=None,
        builder=None,
        name=None,
        engine="tf.data",
    ):
        super().__init__(name=name)
        self.engine = engines.check_engine(engine)
        if build_model is not None and not (
            callable(build_model) or isinstance(build_model, keras_tuner.HyperModel)
        ):
            raise TypeError(
                "build_model must be a function build_model(hp) or a "
                f"keras_tuner.HyperModel, got {build_model!r}."
            )
        if search_space is not None and not isinstance(search_space, BucketSearchSpace):
            raise TypeError(
                f"search_space must be a BucketSearchSpace, got {search_space!r}."
            )
        if builder is not None and not isinstance(builder, BucketBuilder):
            raise TypeError(
                "builder must be a BucketBuilder template (the tuner searches "
                f"bucket settings), got {type(builder).__name__}."
            )
        self.build_model = build_model
        self.search_space = search_space or BucketSearchSpace()
        self.builder = builder or BucketBuilder()

    def declare_hyperparameters(self, hp):
        """Declares the search space's hyperparameters on `hp`."""
        self.search_space.declare(hp)

    def build(self, hp):
        """Declares the bucket space on `hp` and builds the user's model."""
        self.search_space.declare(hp)
        if self.build_model is None:
            return None
        if isinstance(self.build_model, keras_tuner.HyperModel):
            return self.build_model.build(hp)
        return self.build_model(hp)

    def make_builder(self, hp):
        """The trial's `BucketBuilder` (not yet built) from `hp`."""
        return self.search_space.make_builder(hp, self.builder)

    def fit(
        self,
        hp,
        model,
        x,
        y=None,
        sample_weight=None,
        validation_data=None,
        callbacks=None,
        **kwargs,
    ):
        """Trains `model` on the bucketed dataset of `hp`.

        Args:
            hp: the trial's `keras_tuner.HyperParameters`.
            model: the model `build` returned.
            x, y, sample_weight: training data, in any form builders take.
            validation_data: `(x, y)` or `(x, y, sample_weight)` sequences
                (batched by the trial's builder settings, unshuffled), or a
                `tf.data.Dataset`.
            callbacks: the tuner's callbacks, run after the builder's.
            **kwargs: further `model.fit` arguments (`epochs`, ...).

        Returns:
            The `History` of `model.fit`.
        """
        if "validation_split" in kwargs:
            raise ValueError(
                "validation_split cannot split a bucketed dataset; pass "
                "validation_data=(x_val, y_val) instead."
            )
        kwargs.pop("shuffle", None)  # builders shuffle; Keras ignores it here
        builder = self.make_builder(hp)
        dataset = builder.build(x, y, sample_weight, engine=self.engine)
        validation = validation_dataset(builder, validation_data, self.engine)
        built_here = validation is not validation_data
        return model.fit(
            dataset,
            validation_data=validation,
            callbacks=[
                EpochReshuffle(builder),
                PaddingEfficiency(
                    builder,
                    dataset=dataset,
                    validation_data=validation if built_here else None,
                ),
                Throughput(builder, dataset=dataset),
                *(callbacks or []),
            ],
            shuffle=False,
            **kwargs,
        )


def validation_dataset(builder, validation_data, engine="tf.data"):
    """`validation_data` batched like `builder` does, without shuffling, by
    `engine`; a dataset (any other value) is used as it is."""
    if isinstance(validation_data, sources.SequenceData):
        validation_data = (validation_data,)
    if validation_data is None or not isinstance(validation_data, tuple | list):
        return validation_data
    if isinstance(validation_data, list) or not 1 <= len(validation_data) <= 3:
        raise ValueError(
            "validation_data must be (x, y) or (x, y, sample_weight), or a "
            f"dataset; got a {type(validation_data).__name__} of "
            f"{len(validation_data)}."
        )
    config = dict(builder.get_config(), shuffle=False)
    return type(builder).from_config(config).build(*validation_data, engine=engine)
