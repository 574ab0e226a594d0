"""Bad input at public entry points found by an audit: each is a clear
ValueError/TypeError that says what is wrong, never a raw stack trace."""

import numpy as np
import pytest
import tensorflow as tf

import kerasbatch
from kerasbatch import layers

IDS = np.array([[1, 1, 2, 0]], "int32")


@pytest.mark.backend
@pytest.mark.parametrize(
    "layer",
    [layers.SegmentAttentionMask(), layers.SegmentLossWeights()],
    ids=["attention_mask", "loss_weights"],
)
@pytest.mark.parametrize(
    ("segment_ids", "error", "match"),
    [
        (IDS.astype("float32"), TypeError, "integer segment_ids.*float32"),
        (IDS[0], ValueError, r"shape \(batch, length\), got shape \(4,\)"),
        (IDS[..., None], ValueError, r"got shape \(1, 4, 1\)"),
    ],
    ids=["float", "rank 1", "rank 3"],
)
def test_segment_layers_name_bad_segment_ids(layer, segment_ids, error, match):
    with pytest.raises(error, match=match):
        layer(segment_ids)


@pytest.mark.backend
@pytest.mark.parametrize(
    ("features", "segment_ids", "error", "match"),
    [
        (np.ones((1, 4), "float32"), IDS, ValueError, r"features of shape \(1, 4\)"),
        (np.ones((1, 5, 2), "float32"), IDS, ValueError, r"shape \(1, 5, 2\)"),
        (np.ones((1, 4, 2), "float32"), IDS.astype("float32"), TypeError, "integer"),
    ],
    ids=["rank 2 features", "other length", "float ids"],
)
def test_segment_pooling_names_bad_inputs(features, segment_ids, error, match):
    with pytest.raises(error, match=match):
        layers.SegmentPooling(2)(features, segment_ids)


def built_bucket_builder():
    builder = kerasbatch.BucketBuilder(num_buckets=2, batch_size=4)
    dataset = builder.build([np.ones(n, "int32") for n in range(1, 20)])
    return builder, dataset


@pytest.mark.parametrize("epoch", [-1, 1.5, True, "2", 2**70])
@pytest.mark.parametrize("method", ["set_epoch", "plan", "statistics", "batch_shapes"])
def test_a_bad_epoch_is_named_by_every_method_that_takes_one(method, epoch):
    builder, _ = built_bucket_builder()
    with pytest.raises(ValueError, match=r"epoch must be an int in \[0, 2\*\*62\)"):
        getattr(builder, method)(epoch)


def test_distribute_needs_a_strategy():
    builder, _ = built_bucket_builder()
    with pytest.raises(TypeError, match="tf.distribute.Strategy.*got str"):
        builder.distribute("mirrored")


@pytest.mark.parametrize(
    "callback",
    [
        kerasbatch.callbacks.EpochReshuffle,
        kerasbatch.callbacks.PaddingEfficiency,
        kerasbatch.callbacks.Throughput,
        kerasbatch.callbacks.WarmUp,
    ],
)
@pytest.mark.parametrize("builder", [None, "bucket", tf.data.Dataset.range(2)])
def test_callbacks_need_a_builder(callback, builder):
    with pytest.raises(TypeError, match=f"{callback.__name__} needs the kerasbatch"):
        callback(builder)


@pytest.mark.parametrize("config", [{"name": "nope"}, {"class_name": "X"}, {}])
def test_a_dict_that_is_no_reducer_config_is_named(config):
    with pytest.raises(ValueError, match=r"reducers\['x'\]: .* is not the config"):
        kerasbatch.WindowBuilder(2, reducers={"x": config})
