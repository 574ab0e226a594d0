"""Bad input on the `grain` and `python` engines: the same clear errors as
on `tf.data` (they come from the inputs and the plan, before any engine),
and bad iterator states named by what is wrong."""

import numpy as np
import pytest

import kerasbatch

ENGINES = ["grain", "python"]
X = [np.ones(n, "int32") for n in (1, 2, 3, 4, 5)]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("make", "inputs", "error", "match"),
    [
        (
            lambda: kerasbatch.PaddedBuilder(batch_size=2),
            (X, np.zeros(4)),
            ValueError,
            "element",
        ),
        (
            lambda: kerasbatch.PaddedBuilder(batch_size=2),
            ([np.ones(2), np.ones((2, 3))],),
            ValueError,
            r"x element 1 has shape \(2, 3\)",
        ),
        (
            lambda: kerasbatch.PaddedBuilder(batch_size=2),
            ([],),
            ValueError,
            "x is empty",
        ),
        (
            lambda: kerasbatch.PaddedBuilder(batch_size=2, max_length=3),
            (X,),
            ValueError,
            r"Element 3 has length 4, longer than max_length=3 \(2 elements are\)",
        ),
        (
            lambda: kerasbatch.BucketBuilder(
                num_buckets=2, batch_size=2, padding={"length": 2}
            ),
            (X,),
            ValueError,
            "fixed length 2, but element 4 is 5 long",
        ),
        (
            lambda: kerasbatch.PaddedBuilder(batch_size=2, remainder="pad"),
            (X,),
            ValueError,
            "remainder='pad' fills smaller batches",
        ),
        (
            lambda: kerasbatch.PackedBuilder(4, batch_size=2),
            (X, np.zeros(5)),
            ValueError,
            "sequence_length=4",
        ),
        (
            lambda: kerasbatch.PaddedBuilder(batch_size=8, drop_remainder=True),
            (X,),
            ValueError,
            "No batch left",
        ),
    ],
    ids=[
        "counts",
        "trailing shape",
        "empty",
        "too long",
        "fixed length",
        "filler without targets",
        "packed too long",
        "no batch",
    ],
)
def test_bad_input_gets_the_same_clear_error(engine, make, inputs, error, match):
    with pytest.raises(error, match=match):
        make().build(*inputs, engine=engine)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    ("state", "match"),
    [
        ({"epoch": 0}, "keys 'epoch' and 'batch'"),
        ({"epoch": -1, "batch": 0}, "epoch must be a non-negative int"),
        ({"epoch": 0, "batch": 1.5}, "batch must be a non-negative int"),
        ({"epoch": 0, "batch": 99}, "past the epoch's 3 batches"),
    ],
    ids=["keys", "negative epoch", "float batch", "past the end"],
)
def test_a_bad_iterator_state_is_named(engine, state, match):
    dataset = kerasbatch.PaddedBuilder(batch_size=2).build(X, engine=engine)
    with pytest.raises(ValueError, match=match):
        dataset.set_state(state)


def test_a_grain_iterator_resumes_from_its_state():
    builder = kerasbatch.BucketBuilder(num_buckets=2, batch_size=2, seed=3)
    dataset = builder.build(X, engine="grain")
    iterator = iter(dataset)
    first = next(iterator)
    state = iterator.get_state()
    rest = [batch.tolist() for batch in iterator]
    again = iter(dataset)
    again.set_state(state)
    assert [batch.tolist() for batch in again] == rest
    assert state == {"epoch": 0, "batch": 1} and first.shape[0] == 2


def test_a_stream_names_a_wrong_element_of_a_grain_source_by_its_index():
    import grain

    elements = [(x, np.int32(0)) for x in X] + [(X[0], np.int32(1), 2.0)]
    source = grain.MapDataset.source(elements).to_iter_dataset()
    builder = kerasbatch.StreamBucketBuilder(boundaries=[3], batch_size=2)
    with pytest.raises(ValueError, match=r"Element 5 of the source is a tuple of 3"):
        list(builder.build(source, engine="grain"))


def test_a_stream_on_tf_data_needs_tensorflow_and_names_the_other_engines(
    monkeypatch,
):
    # As where TensorFlow is not installed (also when it is, in the main run).
    optional = kerasbatch.optional
    monkeypatch.setattr(optional, "imported", lambda name: None)
    monkeypatch.setattr(type(optional.tensorflow), "available", False)
    builder = kerasbatch.StreamBucketBuilder(boundaries=[3], batch_size=2)
    with pytest.raises(ImportError, match=r"needs TensorFlow.*engine='grain'"):
        builder.build(X)
