"""Bad input at public entry points found by an audit: each is a clear
ValueError/TypeError that says what is wrong, never a raw stack trace."""

import numpy as np
import pytest

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
