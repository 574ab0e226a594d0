"""WarmUp compiles every batch shape before epoch 1 and changes no state.

Every batch shape costs a compile of the train (or test) step per fit, the
most of what these tests cost: training batches come in 2 shapes and
validation batches in 2 more, enough to see that every one is warmed up.
"""

import json
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbatch
from kerasbatch.callbacks import WarmUp

LENGTHS = np.random.default_rng(5).integers(1, 40, 100)


def sequences(lengths=LENGTHS):
    return [np.full(n, i % 49 + 1, "int32") for i, n in enumerate(lengths)]


def targets(lengths=LENGTHS):
    return np.random.default_rng(6).normal(size=len(lengths)).astype("float32")


def bucket_builder(**kwargs):
    settings = dict(num_buckets=2, batch_size=16, pad_to_bucket=True, seed=3)
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


def fit(builder_factory, build, warm, steps_per_execution=1, epochs=1, traces=None):
    builder = builder_factory()
    train = build(builder)
    val_builder = bucket_builder(num_buckets=2, shuffle=False)
    val = val_builder.build(sequences()[:40], targets()[:40])
    model = tiny_model(steps_per_execution=steps_per_execution)
    callbacks = [WarmUp(builder, validation_data=val)] if warm else []
    if traces is not None:
        callbacks.append(traces)
    history = model.fit(
        train, validation_data=val, epochs=epochs, verbose=0, callbacks=callbacks
    )
    history.steps = len(train)
    return model, history, callbacks


class Traces(keras.callbacks.Callback):
    """How many times the model's `call` was traced when training began and
    when the last epoch ended."""

    def on_train_begin(self, logs=None):
        self.at_begin = len(self.model.traced)

    def on_epoch_end(self, epoch, logs=None):
        self.at_epoch_end = len(self.model.traced)


def with_and_without_warm_up(structure, steps_per_execution):
    """A fit with `WarmUp` (whose traces are counted) and one without, on
    `structure`'s batches (each fit compiles every shape)."""
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

    traces = Traces()
    warm = fit(factory, build, True, steps_per_execution, traces=traces)
    plain = fit(factory, build, False, steps_per_execution)
    return warm, plain, traces, _built_shapes(factory, build)


@pytest.mark.parametrize(
    "structure, steps_per_execution",
    [pytest.param("x_y", 1, marks=pytest.mark.backend), ("dict_x_y_weights", 2)],
)
def test_training_with_warm_up_is_exactly_training_without(
    structure, steps_per_execution
):
    warm_fit, plain_fit, traces, built_shapes = with_and_without_warm_up(
        structure, steps_per_execution
    )
    warm, warm_history, (callback, _) = warm_fit
    plain, plain_history, _ = plain_fit
    for after, expected in zip(state(warm), state(plain), strict=True):
        np.testing.assert_array_equal(after, expected)
    assert warm_history.history == plain_history.history
    assert (
        int(keras.ops.convert_to_numpy(warm.optimizer.iterations)) == warm_history.steps
    )
    assert callback.shapes == built_shapes
    assert len(callback.shapes) == 2
    assert len(callback.validation_shapes) == 2
    # Every trace of the fit with WarmUp happened before the first epoch.
    assert traces.at_begin > 0
    assert traces.at_epoch_end == traces.at_begin


def _built_shapes(factory, build):
    builder = factory()
    build(builder)
    return builder.batch_shapes()


#: Trains the tiny model with and without WarmUp in one process whose XLA
#: dumps every compiled module (XLA_FLAGS is read once per process), and
#: prints how many train and test steps were compiled by each point.
COUNT_COMPILES = textwrap.dedent(
    """
    import glob, json, sys
    import keras
    sys.path.insert(0, sys.argv[2])
    import test_warm_up as t

    def compiled():
        names = glob.glob(sys.argv[1] + "/*before_optimizations.txt")
        steps = ("one_step_on_data", "train_step", "test_step")
        return sum(any(step in name for step in steps) for name in names)

    class Count(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.counts = {"train_begin": compiled()}
        def on_epoch_end(self, epoch, logs=None):
            self.counts[f"epoch_{epoch}"] = compiled()

    results = {}
    for warm in (True, False):
        builder = t.bucket_builder()
        train = builder.build(t.sequences(), t.targets())
        val = t.bucket_builder(num_buckets=2, shuffle=False).build(
            t.sequences()[:40], t.targets()[:40])
        count = Count()
        callbacks = ([t.WarmUp(builder, validation_data=val)] if warm else [])
        before = compiled()
        t.tiny_model().fit(train, validation_data=val, epochs=2, verbose=0,
                           callbacks=callbacks + [count])
        results["warm" if warm else "plain"] = {
            k: v - before for k, v in count.counts.items()}
    print(json.dumps(results))
    """
)


@pytest.mark.backend
def test_xla_compiles_every_shape_at_train_begin_and_never_in_the_epochs(tmp_path):
    dump = tmp_path / "xla"
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_dump_to={dump}"
    env = dict(os.environ, XLA_FLAGS=flags)
    done = subprocess.run(
        [sys.executable, "-c", COUNT_COMPILES, str(dump), os.path.dirname(__file__)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    shapes = 2 + 2  # training buckets + validation buckets, one shape each
    assert counts["warm"] == {
        "train_begin": shapes,
        "epoch_0": shapes,
        "epoch_1": shapes,
    }
    assert counts["plain"] == {"train_begin": 0, "epoch_0": shapes, "epoch_1": shapes}


@pytest.mark.backend
def test_a_mapped_dataset_is_warmed_up_as_fit_gets_it():
    """The maps of `dataset=` run on the warm-up batches: the train and test
    steps see the mapped structure (a dict), and fit traces nothing new."""

    def as_dict(x, *rest):
        return ({"x": x, "twice": x * 2}, *rest)

    builder = bucket_builder()
    train = builder.build(sequences(), targets())
    val = bucket_builder(num_buckets=2, shuffle=False).build(
        sequences()[:40], targets()[:40]
    )
    mapped, mapped_val = train.map(as_dict).prefetch(1), val.map(as_dict)
    model = tiny_model()
    warm_up, traces = (
        WarmUp(builder, dataset=mapped, validation_data=mapped_val),
        Traces(),
    )
    model.fit(
        mapped,
        validation_data=mapped_val,
        epochs=2,
        verbose=0,
        callbacks=[warm_up, traces],
    )
    assert len(warm_up.shapes) == 2 and len(warm_up.validation_shapes) == 2
    assert traces.at_begin > 0
    assert traces.at_epoch_end == traces.at_begin


def test_a_model_not_compiled_per_shape_is_left_alone():
    builder = bucket_builder()
    train = builder.build(sequences(), targets())
    model = tiny_model(jit_compile=False)
    warm_up = WarmUp(builder)
    model.fit(train, epochs=1, verbose=0, callbacks=[warm_up])
    assert warm_up.shapes == [] and warm_up.seconds == 0.0


def test_warm_up_of_a_stream_with_lengths_leaves_its_statistics_alone():
    def stream_builder():
        return kerasbatch.StreamBucketBuilder(
            boundaries=[20],  # 2 shapes: 2 compiles per fit
            batch_size=16,
            pad_to_bucket=True,
            max_length=40,
            remainder="pad",
            buffer_size=32,
        )

    def run(warm):
        builder = stream_builder()
        ragged = tf.ragged.constant(sequences())
        source = tf.data.Dataset.from_tensor_slices((ragged, targets()))
        train = builder.build(source, lengths=LENGTHS)
        callbacks = [kerasbatch.callbacks.PaddingEfficiency(builder)]
        if warm:
            callbacks.insert(0, WarmUp(builder))
        history = tiny_model().fit(train, epochs=1, verbose=0, callbacks=callbacks)
        return builder, callbacks[0], history

    builder, warm_up, warm = run(True)
    _, _, plain = run(False)
    assert warm_up.shapes == builder.batch_shapes() and len(warm_up.shapes) == 2
    assert warm.history == plain.history


@pytest.mark.backend
def test_bad_input_is_named():
    with pytest.raises(TypeError, match="kerasbatch builder"):
        WarmUp(object())
    with pytest.raises(ValueError, match="epochs"):
        WarmUp(bucket_builder(), epochs=0)
    model = tiny_model()
    empty = bucket_builder()
    with pytest.raises(ValueError, match="no built dataset"):
        model.fit(
            bucket_builder().build(sequences(), targets()),
            epochs=1,
            verbose=0,
            callbacks=[WarmUp(empty)],
        )
    builder = bucket_builder()
    builder.build(sequences(), targets())
    other = bucket_builder().build(sequences(), targets())
    with pytest.raises(ValueError, match="WarmUp: the dataset given was not built"):
        model.fit(
            other, epochs=1, verbose=0, callbacks=[WarmUp(builder, dataset=other)]
        )


@pytest.mark.backend
def test_shapes_unknown_ahead_are_refused_naming_warm_up():
    builder = kerasbatch.StreamBucketBuilder(boundaries=[10, 20], batch_size=16)
    ragged = tf.ragged.constant(sequences())
    train = builder.build(tf.data.Dataset.from_tensor_slices((ragged, targets())))
    with pytest.raises(ValueError, match="WarmUp cannot know"):
        tiny_model().fit(
            train, epochs=1, verbose=0, callbacks=[WarmUp(builder)], steps_per_epoch=1
        )
