"""Every input form a builder takes, and a clear error for every bad one."""

import numpy as np
import pytest
import tensorflow as tf

import kerasbatch

BUILDERS = [
    kerasbatch.PaddedBuilder,
    kerasbatch.SortedBuilder,
    kerasbatch.BucketBuilder,
]


def first_batch(dataset):
    return next(iter(dataset))


@pytest.mark.parametrize("builder_class", BUILDERS)
def test_list_ragged_and_dict_inputs_give_the_same_batches(builder_class):
    x = [np.arange(1, n + 1, dtype=np.int32) for n in (3, 0, 5, 2, 4, 1)]
    labels = np.arange(6)
    from_list = builder_class(batch_size=3, shuffle=False).build(x, labels)
    from_ragged = builder_class(batch_size=3, shuffle=False).build(
        tf.ragged.constant(x, dtype=tf.int32), tf.constant(labels)
    )
    for (a, ya), (b, yb) in zip(from_list, from_ragged, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(ya, yb)
    from_dict = builder_class(batch_size=3, shuffle=False).build({"tokens": x}, labels)
    for (a, _), (b, _) in zip(from_list, from_dict, strict=True):
        np.testing.assert_array_equal(a, b["tokens"])


def test_trailing_axes_are_kept():
    x = [np.full((n, 3), float(n), dtype=np.float32) for n in (2, 5, 1)]
    batch = first_batch(kerasbatch.PaddedBuilder(3, shuffle=False).build(x))
    assert batch.shape == (3, 5, 3)
    assert batch.dtype == tf.float32
    np.testing.assert_array_equal(batch[0, :2], np.full((2, 3), 2.0))
    np.testing.assert_array_equal(batch[0, 2:], np.zeros((3, 3)))


def test_multi_input_components_have_their_own_lengths():
    x = {
        "source": [np.ones(n, np.int32) for n in (4, 2)],
        "target": [np.ones(n, np.int32) for n in (1, 7)],
    }
    builder = kerasbatch.PaddedBuilder(2, shuffle=False)
    batch = first_batch(builder.build(x))
    assert batch["source"].shape == (2, 4)
    assert batch["target"].shape == (2, 7)
    efficiency = builder.statistics().component_efficiency
    assert efficiency == {"source": 6 / 8, "target": 8 / 14}


def test_per_frame_targets_and_weights_are_padded_consistently():
    x = [np.ones((n, 2), np.float32) for n in (3, 1)]
    y = [np.arange(n, dtype=np.float32) + 1 for n in (3, 1)]
    sample_weight = [np.full(n, 2.0, np.float32) for n in (3, 1)]
    dataset = kerasbatch.PaddedBuilder(2, shuffle=False).build(x, y, sample_weight)
    bx, by, bw = first_batch(dataset)
    assert bx.shape == (2, 3, 2)
    np.testing.assert_array_equal(by, [[1, 2, 3], [1, 0, 0]])
    np.testing.assert_array_equal(bw, [[2, 2, 2], [2, 0, 0]])


def test_dense_arrays_are_per_example_components():
    x = [np.ones(n) for n in (1, 2, 3)]
    y = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    bx, by = first_batch(kerasbatch.PaddedBuilder(3, shuffle=False).build(x, y))
    np.testing.assert_array_equal(by, y)


def test_zero_length_elements_are_allowed():
    x = [np.zeros(0, np.int32), np.ones(2, np.int32), np.zeros(0, np.int32)]
    padded = kerasbatch.PaddedBuilder(batch_size=4)
    assert first_batch(padded.build(x)).shape == (3, 2)
    assert padded.statistics().padding_efficiency == pytest.approx(2 / 6)
    bucketed = kerasbatch.BucketBuilder(batch_size=4)
    shapes = {tuple(batch.shape) for batch in bucketed.build(x)}
    assert shapes == {(2, 0), (1, 2)}
    assert bucketed.statistics().padding_efficiency == 1.0


@pytest.mark.parametrize(
    ("x", "y", "sample_weight", "error", "match"),
    [
        ([], None, None, ValueError, r"x is empty"),
        (np.zeros(0), None, None, ValueError, r"x is empty"),
        (None, None, None, ValueError, r"x is None"),
        ({}, None, None, ValueError, r"x is an empty dict"),
        ({1: [np.ones(2)]}, None, None, TypeError, r"non-string key 1"),
        ("abc", None, None, TypeError, r"x has unsupported type str"),
        (
            [np.ones(2), np.ones((2, 3))],
            None,
            None,
            ValueError,
            r"x element 1 has shape \(2, 3\)",
        ),
        (
            [np.ones((2, 3)), np.ones((4, 2))],
            None,
            None,
            ValueError,
            r"x element 1 .*trailing shape \(3,\)",
        ),
        (
            [np.ones(2), np.float32(3.0)],
            None,
            None,
            ValueError,
            r"x element 1 is a scalar",
        ),
        (
            [{"tokens": np.ones(2)}, {"tokens": np.ones(3)}],
            None,
            None,
            TypeError,
            r"x element 0 is a dict \(keys \['tokens'\]\); give x as a dict of lists",
        ),
        (
            [np.ones(2), np.array(["a", "b"])],
            None,
            None,
            TypeError,
            r"x element 1 has dtype string but element 0 has float64",
        ),
        (
            [np.ones(2), np.array([{}, {}])],
            None,
            None,
            TypeError,
            r"x element 1 holds Python objects of type dict",
        ),
        (
            [[1, 2], [[1], [2, 3]]],
            None,
            None,
            ValueError,
            r"x element 1 is not a regular array",
        ),
        (
            [np.ones(2)] * 3,
            np.zeros(2),
            None,
            ValueError,
            r"x has 3 elements but y has 2",
        ),
        (
            [np.ones(2)] * 2,
            np.zeros(2),
            np.ones(3),
            ValueError,
            r"x has 2 elements but sample_weight has 3",
        ),
        (
            [np.ones(2)] * 2,
            None,
            np.ones(2),
            ValueError,
            r"sample_weight was given without y",
        ),
        (
            [np.ones(2), np.ones(3)],
            [np.ones(2), np.ones(4)],
            None,
            ValueError,
            r"y element 1 has length 4 but x element 1 has length 3",
        ),
        (
            [np.ones(2), np.ones(3)],
            [np.ones(2), np.ones(3)],
            [np.ones(2), np.ones(1)],
            ValueError,
            r"sample_weight element 1 has length 1 but y element 1 has length 3",
        ),
        (
            np.ones((3, 4)),
            None,
            None,
            ValueError,
            r"None of x, y or sample_weight has a variable-length component",
        ),
        ([np.ones(2)], np.float32(1.0), None, ValueError, r"y is a scalar"),
        ({"y": [np.ones(2)]}, [np.ones(2)], None, ValueError, r"share the name 'y'"),
        (tf.ragged.constant([[[1], [2, 3]]]), None, None, ValueError, r"ragged_rank 2"),
    ],
)
def test_bad_inputs_name_what_is_wrong_and_where(x, y, sample_weight, error, match):
    with pytest.raises(error, match=match):
        kerasbatch.PaddedBuilder(2).build(x, y, sample_weight)


def test_long_lists_show_progress(monkeypatch, capsys):
    from kerasbatch.data import sources

    monkeypatch.setattr(sources, "PROGRESS_THRESHOLD", 10)
    builder = kerasbatch.PaddedBuilder(4)
    builder.build([np.ones(n % 3) for n in range(30)])
    output = capsys.readouterr().out
    assert "Reading 30 sequences of x" in output
    assert "30/30" in output
