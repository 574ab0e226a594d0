"""What a build resolves is one frozen value (`kerasbatch.planning.prepared`).

Plans read nothing else, so a value that cannot change means plans that
cannot drift from the data of their build.
"""

import dataclasses

import numpy as np
import pytest

import kerasbatch
from kerasbatch.builders.bucket_builder import BucketPrepared
from kerasbatch.builders.chunk_builder import ChunkPrepared
from kerasbatch.builders.window_builder import WindowPrepared
from kerasbatch.data.padding import Padding
from kerasbatch.planning.prepared import Prepared

LENGTHS = np.random.default_rng(0).integers(1, 30, 50)


def sequences(lengths=LENGTHS):
    return [np.arange(1, n + 1, dtype="int32") for n in lengths]


def prepared(**changes):
    lengths = np.array([3, 1, 4], np.int64)
    fields = dict(
        data=None,
        lengths=lengths,
        cut_lengths=lengths,
        candidates=np.arange(3),
        policy_dropped=0,
        paddings={"x": Padding()},
        component_lengths={"x": lengths},
        element_limits=np.full(3, 10),
    )
    return Prepared(**{**fields, **changes})


def test_arrays_and_mappings_of_a_prepared_value_cannot_change():
    value = prepared()
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.candidates = np.arange(2)
    with pytest.raises(ValueError, match="read-only"):
        value.candidates[0] = 2
    with pytest.raises(ValueError, match="read-only"):
        value.component_lengths["x"][0] = 9
    with pytest.raises(TypeError):
        value.paddings["y"] = Padding()


def test_the_arrays_given_stay_writable_and_are_not_copied():
    limits = np.full(3, 10)
    value = prepared(element_limits=limits)
    assert np.shares_memory(value.element_limits, limits)
    limits[0] = 11  # the caller's array is still its own
    assert limits.flags.writeable


def test_replace_and_extended_leave_the_original_as_it_was():
    value = prepared()
    fewer = value.replace(candidates=np.array([0, 2]), policy_dropped=1)
    assert value.candidates.tolist() == [0, 1, 2] and value.policy_dropped == 0
    assert fewer.candidates.tolist() == [0, 2] and fewer.policy_dropped == 1
    buckets = value.extended(BucketPrepared, bucket_of=np.array([0, 0, 1]))
    assert isinstance(buckets, BucketPrepared)
    assert buckets.lengths is value.lengths
    assert not buckets.bucket_of.flags.writeable
    with pytest.raises(TypeError, match="bucket_of"):
        value.extended(BucketPrepared)


@pytest.mark.parametrize(
    "make, prepared_type",
    [
        (lambda: kerasbatch.PaddedBuilder(batch_size=8), Prepared),
        (lambda: kerasbatch.SortedBuilder(batch_size=8), Prepared),
        (lambda: kerasbatch.BucketBuilder(num_buckets=3, batch_size=8), BucketPrepared),
        (lambda: kerasbatch.ChunkBuilder(6, batch_size=8), ChunkPrepared),
        (lambda: kerasbatch.WindowBuilder(4, 4), WindowPrepared),
        (lambda: kerasbatch.PackedBuilder(32, batch_size=4), Prepared),
    ],
)
def test_every_builder_plans_from_a_frozen_value_of_its_build(make, prepared_type):
    builder = make()
    dataset = builder.build(sequences())
    served = kerasbatch.builders.builder_of(dataset).built.prepared
    assert type(served) is prepared_type
    for field in dataclasses.fields(served):
        value = getattr(served, field.name)
        if isinstance(value, np.ndarray):
            assert not value.flags.writeable, field.name
    builder.build(sequences(LENGTHS[:20]))  # binds a new value, not this one
    assert kerasbatch.builders.builder_of(dataset).built.prepared is served
    assert builder.built.prepared is not served


def test_chunks_too_short_are_counted_in_the_value_not_in_the_builder():
    builder = kerasbatch.ChunkBuilder(4, min_chunk_size=3, batch_size=8)
    dataset = builder.build(sequences([4, 5, 9]))  # chunks 4 | 4 1 | 4 4 1
    value = kerasbatch.builders.builder_of(dataset).built.prepared  # the build's
    assert value.policy_dropped == 2  # the two chunks of 1 frame
    assert len(value.candidates) == 4
    assert value.paddings["x"].length == 4
    assert builder.statistics().dropped == 2


def test_a_failed_adapt_leaves_no_data_behind():
    builder = kerasbatch.SortedBuilder(batch_size=2, padding=Padding(length=2))
    builder.adapt(np.array([1, 2, 2]))
    with pytest.raises(ValueError, match="element 1 is 5 long"):
        builder.adapt(np.array([1, 5]))
    with pytest.raises(RuntimeError, match="no data yet"):
        builder.statistics()
