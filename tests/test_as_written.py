"""kerasbatch's own tf.data functions are traced as written: AutoGraph
converts none of them when a TFRecord loader measures and builds its data, a
user maps `make_parser`'s function, or a stream is built. A user's functions
are still converted, as tf.data converts them."""

import collections
import glob
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.autograph.impl import api as autograph_api
from test_built_datasets import BUILDERS, build_from_loader, records_loader

import kerasbatch
from kerasbatch.io import load_manifest, make_parser, read_file_records


@pytest.fixture
def converted(monkeypatch):
    """A Counter of the functions AutoGraph converts while the test runs,
    by module."""
    counts = collections.Counter()
    convert = autograph_api._convert_actual

    def counting(entity, program_ctx):
        counts[getattr(entity, "__module__", "?")] += 1
        return convert(entity, program_ctx)

    monkeypatch.setattr(autograph_api, "_convert_actual", counting)
    return counts


def library(counts):
    return {
        module: n for module, n in counts.items() if module.startswith("kerasbatch")
    }


def test_a_loader_measures_and_builds_with_no_conversion(tmp_path, converted):
    lengths = np.random.default_rng(0).integers(1, 21, 40)
    loader = records_loader(tmp_path / "records", lengths, 1)
    dataset = build_from_loader(BUILDERS["stream"](), loader)
    rows = [tf.nest.flatten(batch)[0].shape[0] for batch in dataset]
    assert sum(rows) == len(lengths)
    assert loader.check(verbose=0).ok
    assert library(converted) == {}


def test_make_parser_is_not_converted_where_a_user_maps_it(tmp_path, converted):
    records_loader(tmp_path / "records", [3, 1, 2], 1, num_shards=1)
    (file,) = glob.glob(os.path.join(tmp_path, "records", "*.tfrecords"))
    manifest = load_manifest(str(tmp_path / "records"))
    parsed = read_file_records(file, None).map(make_parser(manifest))
    assert sorted(len(element["tokens"]) for element in parsed) == [1, 2, 3]
    assert library(converted) == {}


def test_a_users_function_in_a_stream_is_still_converted(converted):
    def user_function(x):
        if tf.reduce_sum(x) > 0:  # needs AutoGraph: a Python `if` on a tensor
            return x + 1
        return x

    values = tf.ragged.constant([[1, 2], [3], [4, 5, 6]])
    stream = tf.data.Dataset.from_tensor_slices(values).map(user_function)
    builder = kerasbatch.StreamBucketBuilder(boundaries=[2], batch_size=2)
    batches = list(builder.build(stream, lengths=[2, 1, 3]))
    assert sum(len(batch) for batch in batches) == 3
    assert converted[__name__] >= 1
    assert library(converted) == {}
