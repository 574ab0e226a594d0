"""kerasbatch.io's messages read as plain sentences.

A check that fails inside a pipeline raises TensorFlow's Assert error, which
prints each of its data in brackets and escapes quotes and backslashes: each
message is one string, and `error_message` gives it back as it was written.
Warnings print as written too.
"""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from test_io_integrity import EXAMPLE_MANIFEST, NAME, write_examples
from test_io_loader import config

from kerasbatch.io import (
    Manifest,
    TFRecordLoader,
    error_message,
    parse_batches,
    read_file_records,
    write_dataset,
)


@pytest.fixture
def quoted_dir(tmp_path):
    """A directory whose name holds a quote, which TensorFlow escapes."""
    path = tmp_path / "it's data"
    path.mkdir()
    return str(path)


def token_model():
    tokens = keras.Input((None,), dtype="int64", name="x")
    hidden = keras.layers.GlobalAveragePooling1D()(
        keras.layers.Embedding(999, 2)(tokens)
    )
    model = keras.Model(tokens, keras.layers.Dense(1, name="y")(hidden))
    model.compile("sgd", "mse")
    return model


def write_tokens(path, count=12, **options):
    records = [
        {"tokens": np.arange(1 + i % 5), "label": np.int64(i)} for i in range(count)
    ]
    return write_dataset(path, records, **options)


def test_a_damaged_file_stops_fit_with_one_plain_sentence(quoted_dir):
    write_tokens(quoted_dir)
    file = os.path.join(quoted_dir, "part-00000-of-00001.tfrecords")
    with open(file, "r+b") as handle:
        handle.truncate(os.path.getsize(file) - 20)
    model = token_model()
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        model.fit(TFRecordLoader(**config(quoted_dir)).build(model), verbose=0)
    message = error_message(raised.value)
    assert message.startswith(
        f"TFRecord file {file} is corrupt or truncated at record 11 (11 records "
        "read, filling "
    )
    assert message.endswith(
        "; record_counts in the manifest gives it 12): TFRecordLoader("
        "on_error=skip) counts such files and keeps their intact records, and "
        "TFRecordLoader.check() lists every problem"
    )
    assert "\\" not in message and "] [" not in message
    assert error_message(str(raised.value)) == message  # or its text


def test_the_damage_message_is_exact(quoted_dir):
    write_tokens(quoted_dir, count=2)
    file = os.path.join(quoted_dir, "part-00000-of-00001.tfrecords")
    size = os.path.getsize(file)
    first = len(next(iter(tf.data.TFRecordDataset(file))).numpy()) + 16
    with open(file, "r+b") as handle:
        handle.truncate(size - 4)
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        list(read_file_records(file, None, file_size=size - 4, num_records=2))
    assert error_message(raised.value) == (
        f"TFRecord file {file} is corrupt or truncated at record 1 (1 records "
        f"read, filling {first} of its {size - 4} bytes; record_counts in the "
        "manifest gives it 2): TFRecordLoader(on_error=skip) counts such files "
        "and keeps their intact records, and TFRecordLoader.check() lists every "
        "problem"
    )


def test_bad_records_and_their_features_are_named_plainly(quoted_dir):
    """A feature name and a path with quotes, in the pipeline and in check()."""
    manifest = Manifest.from_dict(
        {
            "compression": None,
            "allow_var_len": False,
            "features": [
                {
                    "name": "it's",
                    "dtype": "int64",
                    "shape": [2],
                    "deserialize_type": "int",
                }
            ],
        }
    )
    manifest.save(quoted_dir)
    file = os.path.join(quoted_dir, NAME)
    with tf.io.TFRecordWriter(file) as writer:
        for values in ([1, 2], [3], [4, 5]):
            feature = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
            features = tf.train.Features(feature={"it's": feature})
            writer.write(tf.train.Example(features=features).SerializeToString())
    problem = "feature `it's` has 1 values, the shape [2] in the manifest needs 2"
    loader = TFRecordLoader(
        **config(
            quoted_dir,
            padding=False,
            primary_features=[{"from_name": "it's", "to_name": "x"}],
        )
    )
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        list(loader.build(inputs=["x"]))
    assert error_message(raised.value) == f"record 1 of file {file}: {problem}"
    assert loader.check(verbose=0).errors == ((file, 1, problem),)


@pytest.mark.parametrize(
    "kind, problem",
    [
        (
            "float for int",
            "feature `x` is stored as another type than the manifest says "
            "(TensorFlow expected int64)",
        ),
        (
            "unparsable bytes",
            "Invalid protocol message input: the bytes are no Example (or "
            "SequenceExample)",
        ),
    ],
)
def test_parse_op_errors_come_in_the_words_of_the_checks(tmp_path, kind, problem):
    file = write_examples(str(tmp_path), {13: kind})
    records = read_file_records(file, None).batch(8)
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        list(parse_batches(records, Manifest.from_dict(EXAMPLE_MANIFEST)))
    assert error_message(raised.value) == f"record 13 of file {file}: {problem}"


def test_window_checks_read_as_one_sentence(quoted_dir):
    records = [
        {"a": np.arange(4), "b": np.arange(3 if i == 1 else 4)} for i in range(3)
    ]
    write_dataset(quoted_dir, records, features={"a": {"var_len": True}})
    file = os.path.join(quoted_dir, "part-00000-of-00001.tfrecords")
    windows = {"min_window": 2, "max_window": 3, "stride": None}
    primaries = [
        {"from_name": "a", "to_name": "a"},
        {"from_name": "b", "to_name": "b"},
    ]
    loader = TFRecordLoader(
        **config(
            quoted_dir,
            type="continuous_sequence",
            primary_features=primaries,
            **windows,
        )
    )
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        list(loader.build(inputs=["a", "b"]))
    assert error_message(raised.value) == (
        f"continuous_sequence: in file {file}, feature `b` has 11 positions but "
        "`a` has 12, and all selected features must be equally long on axis 0"
    )
    short = TFRecordLoader(
        **config(
            quoted_dir,
            type="continuous_sequence",
            primary_features=primaries[:1],
            **dict(windows, min_window=13, max_window=14),
        )
    )
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        list(short.build(inputs=["a"]))
    assert error_message(raised.value) == (
        f"file {file} has 12 positions, fewer than min_window=13, so no window "
        "fits in it"
    )


def test_a_file_deleted_after_build_is_named_in_one_sentence(quoted_dir):
    write_tokens(quoted_dir)
    dataset = TFRecordLoader(**config(quoted_dir)).build(inputs=["x"], outputs=["y"])
    file = os.path.join(quoted_dir, "part-00000-of-00001.tfrecords")
    os.remove(file)
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        list(dataset)
    assert error_message(raised.value) == (
        f"TFRecord file {file} does not exist: it was deleted or moved after the "
        "dataset was built"
    )


def test_other_errors_give_their_first_line():
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        tf.reshape(tf.range(3), [2])
    assert error_message(raised.value).startswith("Input to reshape is a tensor")
    assert error_message(ValueError("plain")) == "plain"
