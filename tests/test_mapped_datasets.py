"""Datasets mapped after `build`.

Users map a built dataset (keras-hub's input names, a padding mask, a cast):
`builder_of` and the callbacks follow per-batch transformations to the
built dataset, and name any other transformation. The compile warning
comes once per `fit`, with the distinct shapes of the epochs the fit runs.
"""

import json
import os
import textwrap
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf
from backend_process import run_on_backend

import kerasbatch
from kerasbatch.builders import builder_of
from kerasbatch.callbacks import EpochReshuffle, PaddingEfficiency, compile_shapes
from kerasbatch.callbacks.compile_shapes import MEASURED_SECONDS_PER_SHAPE

LENGTHS = np.random.default_rng(3).integers(1, 60, 60)
VAL_LENGTHS = np.random.default_rng(4).integers(1, 30, 20)
ON_JAX = keras.backend.backend() == "jax"


def sequences(lengths=LENGTHS, first=1):
    return [np.full(n, (first + i) % 49 + 1, "int32") for i, n in enumerate(lengths)]


def targets(lengths=LENGTHS):
    return (
        np.random.default_rng(len(lengths)).normal(size=len(lengths)).astype("float32")
    )


def built(builder, engine="tf.data"):
    """Training and validation datasets of one builder."""
    train = builder.build(sequences(), targets(), engine=engine)
    val = builder.build(
        sequences(VAL_LENGTHS, 100), targets(VAL_LENGTHS), engine=engine
    )
    return train, val


def keras_hub_inputs(dataset):
    """`dataset` with keras-hub's input names and a padding mask, as users
    map it (the batches stay one for one)."""
    if isinstance(dataset, tf.data.Dataset):
        return dataset.map(
            lambda x, *rest: ({"token_ids": x, "padding_mask": x != 0}, *rest)
        ).prefetch(2)
    return dataset.map(
        lambda batch: (
            ({"token_ids": batch[0], "padding_mask": batch[0] != 0},) + tuple(batch[1:])
        )
    )


def mapped_model(jit_compile="auto" if ON_JAX else False):
    keras.utils.set_random_seed(1)
    token_ids = keras.Input((None,), dtype="int32", name="token_ids")
    padding_mask = keras.Input((None,), dtype="bool", name="padding_mask")
    hidden = keras.layers.Embedding(50, 4)(token_ids)
    pooled = keras.layers.GlobalAveragePooling1D()(hidden, mask=padding_mask)
    model = keras.Model(
        {"token_ids": token_ids, "padding_mask": padding_mask},
        keras.layers.Dense(1)(pooled),
    )
    model.compile("sgd", "mse", jit_compile=jit_compile)
    return model


def engines():
    """tf.data everywhere; Grain where Keras takes its varying shapes (JAX)."""
    return ["tf.data", "grain"] if ON_JAX else ["tf.data"]


# ------------------------------------------------------------- builder_of
TF_PER_BATCH = {
    "map": lambda d: d.map(lambda x, y: (x + 1, y)),
    "parallel map": lambda d: d.map(
        lambda x, y: (x, y), num_parallel_calls=2, deterministic=False
    ),
    "prefetch": lambda d: d.prefetch(tf.data.AUTOTUNE),
    "with_options": lambda d: d.with_options(tf.data.Options()),
    "apply": lambda d: d.apply(tf.data.experimental.assert_cardinality(len(d))),
    "chain": lambda d: (
        d.map(lambda x, y: ({"token_ids": x}, y))
        .prefetch(1)
        .map(lambda x, y: (x, y * 2))
    ),
}


@pytest.mark.parametrize("transform", TF_PER_BATCH)
def test_builder_of_follows_per_batch_tf_data_transformations(transform):
    builder = kerasbatch.BucketBuilder(num_buckets=3, batch_size=8, seed=2)
    train, val = built(builder)
    derived = TF_PER_BATCH[transform](train)
    assert builder_of(derived) is builder_of(train)
    assert builder_of(derived) is not builder_of(val)
    assert builder.statistics(dataset=derived) == builder.statistics(dataset=train)
    assert builder.running_positions(3, dataset=derived) == builder.running_positions(
        3, dataset=train
    )


def test_builder_of_follows_per_batch_grain_transformations():
    grain = pytest.importorskip("grain")
    builder = kerasbatch.BucketBuilder(num_buckets=3, batch_size=8, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Keras on TensorFlow and Grain's shapes
        train, val = built(builder, engine="grain")
    served = builder_of(train)
    for derived in (
        train.map(lambda batch: batch[0]),
        train.random_map(lambda batch, rng: batch, seed=1),
        train.map_with_index(lambda k, batch: batch),
        train.seed(3).map(lambda batch: batch),
        grain.experimental.ThreadPrefetchIterDataset(train, prefetch_buffer_size=2),
        grain.experimental.WithOptionsIterDataset(
            train.map(lambda batch: batch), grain.experimental.DatasetOptions()
        ),
    ):
        assert builder_of(derived) is served
    assert builder_of(val.map(lambda batch: batch)) is builder_of(val)
    # A mapped Grain dataset yields the built batches, mapped.
    twin = kerasbatch.BucketBuilder(num_buckets=3, batch_size=8, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        twin_train, _ = built(twin, engine="grain")
    first = next(iter(train.map(lambda batch: batch[0] * 2)))
    np.testing.assert_array_equal(first, next(iter(twin_train))[0] * 2)


TF_OTHER = {
    "repeat": lambda d: d.repeat(),
    "take": lambda d: d.take(2),
    "skip": lambda d: d.skip(1),
    "filter": lambda d: d.filter(lambda x, y: True),
    "unbatch": lambda d: d.map(lambda x, y: (x, y)).unbatch(),
    "batch": lambda d: d.batch(2),
    "shuffle": lambda d: d.prefetch(1).shuffle(4),
    "cache": lambda d: d.cache(),
    "zip": lambda d: tf.data.Dataset.zip((d, d)),
}


@pytest.mark.parametrize("transform", TF_OTHER)
def test_a_transformation_that_changes_the_batches_is_named(transform):
    builder = kerasbatch.BucketBuilder(num_buckets=3, batch_size=8, seed=2)
    train, _ = built(builder)
    derived = TF_OTHER[transform](train)
    with pytest.raises(ValueError, match=rf"made by {transform}\(\).*per-batch"):
        builder_of(derived)
    with pytest.raises(ValueError, match=rf"made by {transform}\(\)"):
        builder.statistics(dataset=derived)


def test_grain_transformations_that_change_the_batches_are_named():
    pytest.importorskip("grain")
    builder = kerasbatch.BucketBuilder(num_buckets=3, batch_size=8, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train, _ = built(builder, engine="grain")
    for derived, name in [
        (train.batch(2), "batch"),
        (train.map(lambda b: b).filter(lambda b: True), "filter"),
        (train.mp_prefetch(), "mp_prefetch"),
    ]:
        with pytest.raises(ValueError, match=rf"made by {name}\(\)"):
            builder_of(derived)


def test_the_callbacks_name_a_transformation_that_changes_the_batches():
    builder = kerasbatch.BucketBuilder(num_buckets=3, batch_size=8, seed=2)
    train, val = built(builder)
    model = mapped_model()
    mapped = keras_hub_inputs(train)
    for callback in (
        PaddingEfficiency(builder, dataset=mapped.repeat()),
        PaddingEfficiency(builder, validation_data=keras_hub_inputs(val).take(1)),
        kerasbatch.callbacks.WarmUp(builder, dataset=mapped.take(3)),
    ):
        with pytest.raises(ValueError, match=r"made by (repeat|take)\(\)"):
            model.fit(mapped, epochs=1, verbose=0, callbacks=[callback])


def test_backup_and_restore_resumes_a_mapped_grain_dataset_mid_epoch(tmp_path):
    pytest.importorskip("grain")

    def grain_dataset():
        builder = kerasbatch.BucketBuilder(num_buckets=3, batch_size=8, seed=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return builder.build(sequences(), targets(), engine="grain")

    def double(batch):
        return (batch[0] * 2, *batch[1:])

    mapped = grain_dataset().map(double)
    backup = kerasbatch.callbacks.BackupAndRestore(str(tmp_path), dataset=mapped)
    backup.set_model(mapped_model())  # a functional model: built
    (tmp_path / "data_position.json").write_text(json.dumps({"epoch": 3, "batch": 2}))
    backup.on_train_begin()
    # The mapped dataset's next pass continues at batch 2 of epoch 3.
    twin = grain_dataset()
    builder_of(twin).set_epoch(3)
    epoch_3 = [double(batch) for batch in twin]
    resumed = list(mapped)
    assert len(resumed) == len(epoch_3) - 2
    for got, want in zip(resumed, epoch_3[2:], strict=True):
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match=r"made by batch\(\)"):
        kerasbatch.callbacks.BackupAndRestore(str(tmp_path), dataset=mapped.batch(2))


# --------------------------------------------------------- fit on mapped data
@pytest.mark.backend
@pytest.mark.parametrize("engine", engines())
def test_fit_on_mapped_training_and_validation_data_logs_both_efficiencies(engine):
    builder = kerasbatch.BucketBuilder(num_buckets=3, batch_size=8, seed=2)
    train, val = built(builder, engine)
    mapped_train, mapped_val = keras_hub_inputs(train), keras_hub_inputs(val)
    # One fit, two callbacks that log apart: one is told the training
    # dataset, the other finds it.
    efficiencies = [
        PaddingEfficiency(builder, validation_data=mapped_val),
        PaddingEfficiency(
            builder, name="named", dataset=mapped_train, validation_data=mapped_val
        ),
    ]
    history = mapped_model().fit(
        mapped_train,
        validation_data=mapped_val,
        epochs=2,
        verbose=0,
        callbacks=[EpochReshuffle(builder), *efficiencies],
    )
    for name in ("padding_efficiency", "named"):
        assert history.history[name] == [
            builder.statistics(epoch=k, dataset=train).padding_efficiency
            for k in (0, 1)
        ], name
        assert history.history[f"val_{name}"] == [
            builder.statistics(epoch=k, dataset=val).padding_efficiency for k in (0, 1)
        ], name
    assert builder_of(mapped_train).last_started_epoch == 1


# ------------------------------------------------------------ compile warning
def compile_warnings(caught):
    return [str(w.message) for w in caught if "compiles once per" in str(w.message)]


def distinct_shapes(builder, dataset, epochs):
    return len(
        {
            tuple(sorted(shape.items()))
            for epoch in epochs
            for shape in builder.batch_shapes(epoch, dataset=dataset)
        }
    )


def padded_builder():
    """Batch padding: 15 distinct shapes in epoch 0 (no warning for one
    epoch), 22 over epochs 0 and 1."""
    return kerasbatch.PaddedBuilder(batch_size=3, seed=1)


@pytest.mark.backend
def test_the_compile_warning_comes_once_per_fit_for_the_epochs_it_runs(monkeypatch):
    # Every shape of the fit compiles: a threshold of 4 shapes instead of 16
    # lets 12 elements cross it in the second epoch, with 5 compiles, not 22.
    monkeypatch.setattr(compile_shapes, "MANY_SHAPES", 4)
    builder = padded_builder()
    train = builder.build(sequences(LENGTHS[:12]), targets(LENGTHS[:12]))
    mapped = keras_hub_inputs(train)
    assert distinct_shapes(builder, train, [0]) <= 4
    expected = distinct_shapes(builder, train, [0, 1])
    assert expected > 4
    model = mapped_model(jit_compile=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.fit(
            mapped,
            epochs=2,
            verbose=0,
            callbacks=[
                EpochReshuffle(builder),
                PaddingEfficiency(builder, dataset=mapped),
                PaddingEfficiency(builder, name="again", dataset=mapped),
            ],
        )
    (message,) = compile_warnings(caught)
    assert (
        f"{expected} distinct shapes over the 2 epochs this fit runs (epochs 0 to 1)"
        in message
    )
    assert (
        f"about {expected * MEASURED_SECONDS_PER_SHAPE:.0f} s of compiles"
        not in message
    )
    assert f"{expected * MEASURED_SECONDS_PER_SHAPE:.0f} s of compiles" in message


def fit_begin(model, callbacks, epochs, initial_epoch=0):
    """What model.fit calls before its first batch, on a CallbackList as
    Keras makes one per fit."""
    callback_list = keras.callbacks.CallbackList(
        callbacks, model=model, epochs=epochs, steps=None, verbose=0
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        callback_list.on_train_begin()
        callback_list.on_epoch_begin(initial_epoch)
    callback_list.on_train_end()
    return compile_warnings(caught)


def test_the_warning_counts_the_epochs_each_dataset_will_feed():
    builder = padded_builder()
    train = builder.build(sequences(), targets())
    model = mapped_model(jit_compile=True)
    # One epoch of 15 shapes: no warning.
    assert fit_begin(model, [EpochReshuffle(builder)], epochs=1) == []
    # initial_epoch=2 of 5 under EpochReshuffle: Keras' epochs 2, 3, 4.
    (message,) = fit_begin(model, [EpochReshuffle(builder)], 5, initial_epoch=2)
    count = distinct_shapes(builder, train, [2, 3, 4])
    assert (
        f"{count} distinct shapes over the 3 epochs this fit runs (epochs 2 to 4)"
        in (message)
    )
    # Without it, the dataset's own next epochs (here 7 and 8).
    builder.set_epoch(7)
    (message,) = fit_begin(model, [PaddingEfficiency(builder)], epochs=2)
    assert f"{distinct_shapes(builder, train, [7, 8])} distinct shapes" in message
    # Each fit warns once (a new CallbackList is a new fit).
    assert len(fit_begin(model, [PaddingEfficiency(builder)], epochs=2)) == 1


def test_the_warning_adds_the_validation_shapes():
    builder = padded_builder()
    train, val = built(builder)
    model = mapped_model(jit_compile=True)
    mapped_val = keras_hub_inputs(val)
    callbacks = [
        EpochReshuffle(builder),
        PaddingEfficiency(builder, validation_data=mapped_val),
    ]
    (message,) = fit_begin(model, callbacks, epochs=2)
    shapes = distinct_shapes(builder, train, [0, 1])
    val_shapes = distinct_shapes(builder, val, [0, 1])
    assert f"{shapes} distinct shapes over the 2 epochs" in message
    assert f"its validation batches {val_shapes} more" in message
    assert (
        f"{(shapes + val_shapes) * MEASURED_SECONDS_PER_SHAPE:.0f} s of compiles"
        in message
    )


def test_a_long_fit_extrapolates_past_the_planned_epochs():
    builder = padded_builder()
    train = builder.build(sequences(), targets())
    (message,) = fit_begin(
        mapped_model(jit_compile=True), [EpochReshuffle(builder)], epochs=50
    )
    planned = distinct_shapes(builder, train, range(20))
    counted = int(message.split("have about ")[1].split(" distinct")[0])
    assert counted >= planned
    assert "over the 50 epochs this fit runs (epochs 0 to 49)" in message


# ------------------------------------------------------------------- on JAX
ON_JAX_SCRIPT = textwrap.dedent(
    """
    import json, sys, warnings
    sys.path.insert(0, TESTS)  # where test_mapped_datasets is
    import test_mapped_datasets as t
    import kerasbatch

    results = {}
    # One model for both engines: both feed the same shapes, so the second
    # fit (and its WarmUp) reuses the first one's compiles.
    model = t.mapped_model()
    for engine in ("tf.data", "grain"):
        builder = t.padded_builder()
        train, val = t.built(builder, engine)
        mapped_train, mapped_val = t.keras_hub_inputs(train), t.keras_hub_inputs(val)
        callbacks = [
            kerasbatch.callbacks.EpochReshuffle(builder),
            kerasbatch.callbacks.PaddingEfficiency(
                builder, validation_data=mapped_val),
            kerasbatch.callbacks.WarmUp(
                builder, dataset=mapped_train, validation_data=mapped_val),
        ]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            history = model.fit(
                mapped_train, validation_data=mapped_val, epochs=2, verbose=0,
                callbacks=callbacks)
        results[engine] = {
            "history": {k: history.history[k] for k in (
                "padding_efficiency", "val_padding_efficiency")},
            "expected": [
                [builder.statistics(epoch=k, dataset=d).padding_efficiency
                 for k in (0, 1)] for d in (train, val)],
            "warnings": t.compile_warnings(caught),
            "shapes": [t.distinct_shapes(builder, d, [0, 1]) for d in (train, val)],
            # The shapes of the epoch WarmUp warmed: the dataset's next one at
            # train begin (on JAX, Keras' look at a tf.data batch starts one).
            "warmed": any(
                callbacks[2].shapes == builder.batch_shapes(k, dataset=train)
                for k in (0, 1)),
        }
    print(json.dumps(results))
    """
).replace("TESTS", repr(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.skipif(ON_JAX, reason="runs JAX in a process of its own from TensorFlow")
def test_mapped_tf_data_and_grain_datasets_on_jax():
    # In the process of JAX that the other tests' JAX scripts run in.
    results = run_on_backend(ON_JAX_SCRIPT, "jax", timeout=600, needs=("grain",))
    for engine, result in results.items():
        history = result["history"]
        assert [
            history["padding_efficiency"],
            history["val_padding_efficiency"],
        ] == result["expected"], engine
        shapes, val_shapes = result["shapes"]
        # JAX compiles per shape: one warning, the fit's shapes, validation's.
        (message,) = result["warnings"]
        assert f"{shapes} distinct shapes over the 2 epochs" in message, engine
        assert f"its validation batches {val_shapes} more" in message, engine
        # WarmUp compiled the mapped batches of every shape of an epoch.
        assert result["warmed"], engine
