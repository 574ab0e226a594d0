"""WarmUp compiles every batch shape before epoch 1 and changes no state."""

import keras
import numpy as np
import pytest

import kerasbatch
from kerasbatch.callbacks import WarmUp

pytestmark = pytest.mark.backend

LENGTHS = np.random.default_rng(5).integers(1, 40, 100)


def sequences(lengths=LENGTHS):
    return [np.full(n, i % 49 + 1, "int32") for i, n in enumerate(lengths)]


def targets(lengths=LENGTHS):
    return np.random.default_rng(6).normal(size=len(lengths)).astype("float32")


def bucket_builder(**kwargs):
    settings = dict(num_buckets=3, batch_size=16, pad_to_bucket=True, seed=3)
    settings.update(kwargs)
    settings.setdefault("remainder", "pad")
    return kerasbatch.BucketBuilder(**settings)


class TinyModel(keras.Model):
    """Embedding, dropout (a seed state), pooling, dense; takes x or a dict
    with "x"; records the input shape of every trace of `call`."""

    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(50, 4)
        self.drop = keras.layers.Dropout(0.3)
        self.pool = keras.layers.GlobalAveragePooling1D()
        self.out = keras.layers.Dense(1)
        self.traced = []

    def call(self, x, training=False):
        if isinstance(x, dict):
            x = x["x"]
        self.traced.append(tuple(x.shape))
        return self.out(self.pool(self.drop(self.embed(x), training=training)))


def tiny_model(jit_compile=True, steps_per_execution=1):
    keras.utils.set_random_seed(11)
    model = TinyModel()
    model.compile(
        optimizer="adam",
        loss="mse",
        metrics=["mae"],
        jit_compile=jit_compile,
        steps_per_execution=steps_per_execution,
    )
    return model


def state(model):
    return (
        [np.asarray(w) for w in model.get_weights()]
        + [keras.ops.convert_to_numpy(v) for v in model.optimizer.variables]
        + [keras.ops.convert_to_numpy(v) for v in model.metrics_variables]
    )


def fit(builder_factory, build, warm, steps_per_execution=1, epochs=1):
    builder = builder_factory()
    train = build(builder)
    val_builder = bucket_builder(num_buckets=2, shuffle=False)
    val = val_builder.build(sequences()[:40], targets()[:40])
    model = tiny_model(steps_per_execution=steps_per_execution)
    callbacks = [WarmUp(builder, validation_data=val)] if warm else []
    history = model.fit(
        train, validation_data=val, epochs=epochs, verbose=0, callbacks=callbacks
    )
    history.steps = len(train)
    return model, history, callbacks


@pytest.mark.parametrize(
    "structure, steps_per_execution",
    [("x_y", 1), ("dict_x_y_weights", 2)],
)
def test_training_with_warm_up_is_exactly_training_without(
    structure, steps_per_execution
):
    if structure == "x_y":

        def build(builder):
            return builder.build(sequences(), targets())

        factory = bucket_builder
    else:
        weights = np.linspace(0.5, 1.5, len(LENGTHS)).astype("float32")

        def build(builder):
            return builder.build({"x": sequences()}, targets(), weights)

        def factory():
            return bucket_builder(output_lengths=True)

    warm, warm_history, (callback,) = fit(factory, build, True, steps_per_execution)
    plain, plain_history, _ = fit(factory, build, False, steps_per_execution)
    for after, expected in zip(state(warm), state(plain), strict=True):
        np.testing.assert_array_equal(after, expected)
    assert warm_history.history == plain_history.history
    assert (
        int(keras.ops.convert_to_numpy(warm.optimizer.iterations)) == warm_history.steps
    )
    assert callback.shapes == _built_shapes(factory, build)
    assert len(callback.shapes) == 3
    assert len(callback.validation_shapes) == 2


def _built_shapes(factory, build):
    builder = factory()
    build(builder)
    return builder.batch_shapes()


def test_every_trace_happens_before_the_first_epoch():
    class Traces(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.at_begin = len(self.model.traced)

        def on_epoch_end(self, epoch, logs=None):
            self.at_epoch_end = len(self.model.traced)

    builder = bucket_builder()
    train = builder.build(sequences(), targets())
    model = tiny_model()
    traces = Traces()
    model.fit(train, epochs=1, verbose=0, callbacks=[WarmUp(builder), traces])
    assert traces.at_begin > 0
    assert traces.at_epoch_end == traces.at_begin
