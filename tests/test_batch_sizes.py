"""find_bucket_batch_sizes: known answers under a synthetic cap, probes, errors."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import kerasbatch
from kerasbatch.tuner import (
    BucketBatchSizes,
    MemoryLimit,
    PositionBudget,
    ProcessMemoryLimit,
    find_bucket_batch_sizes,
)
from kerasbatch.tuner import batch_sizes as batch_sizes_lib

LENGTHS = [3, 9, 12, 19, 25, 29, 33, 40] * 3
BOUNDARIES = [10, 20, 30]
BUCKET_LENGTHS = [9, 19, 29, 40]


def data(lengths=LENGTHS):
    return [np.ones(n, "int32") for n in lengths], np.zeros(len(lengths))


class TinyModel(keras.Model):
    """Embedding and pooling; records the shape of every batch it trains on.

    With `out_of_memory_above`, `train_on_batch` raises `error` for larger
    batches, as a GPU that runs out of memory would.
    """

    def __init__(self, out_of_memory_above=None, error=None):
        super().__init__()
        self.embed = keras.layers.Embedding(10, 4)
        self.pool = keras.layers.GlobalAveragePooling1D()
        self.out = keras.layers.Dense(1)
        self.out_of_memory_above = out_of_memory_above
        self.error = error
        self.shapes = []

    def call(self, x):
        return self.out(self.pool(self.embed(x)))

    # The data is the last argument on every backend (JAX passes the state
    # first).
    def train_step(self, *arguments):
        self.shapes.append(tuple(arguments[-1][0].shape))
        return super().train_step(*arguments)

    def train_on_batch(self, x, y=None, **kwargs):
        if self.out_of_memory_above is not None and len(x) > self.out_of_memory_above:
            raise self.error
        return super().train_on_batch(x, y, **kwargs)


def tiny_model(**kwargs):
    model = TinyModel(**kwargs)
    model.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    return model


class RecordingBudget(PositionBudget):
    """A PositionBudget that records every probe as `(batch_size, length, fits)`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.probes = []

    def fits(self, step, batch_size, length):
        fits = super().fits(step, batch_size, length)
        self.probes.append((batch_size, length, fits))
        return fits

    def largest_fitting(self, length):
        return max(n for n, probed, fits in self.probes if probed == length and fits)


def search(memory_limit, lengths=LENGTHS, boundaries=BOUNDARIES, **kwargs):
    x, y = data(lengths)
    builder = kerasbatch.BucketBuilder(boundaries=boundaries)
    kwargs.setdefault("verbose", 0)
    return find_bucket_batch_sizes(
        tiny_model, builder, x, y, memory_limit=memory_limit, **kwargs
    )


# ------------------------------------------------------------- known answers
@pytest.mark.parametrize("quadratic_length", [None, 20])
def test_position_budget_finds_the_largest_size_within_tolerance(quadratic_length):
    budget = RecordingBudget(3000, quadratic_length)
    result = search(budget)
    assert result.boundaries == tuple(BOUNDARIES)
    for length, size in zip(BUCKET_LENGTHS, result.batch_sizes, strict=True):
        known = math.floor(3000 / budget.cost(length))
        found = budget.largest_fitting(length)
        assert known / 1.05 <= found <= known
        assert size == max(1, math.floor(found * 0.9))
    assert list(result.batch_sizes) == sorted(result.batch_sizes, reverse=True)


def test_position_budget_with_exact_bisection_and_no_safety_margin():
    result = search(PositionBudget(3000), tolerance=0.001, safety_factor=1.0)
    assert list(result.batch_sizes) == [3000 // n for n in BUCKET_LENGTHS]


def test_max_batch_size_caps_every_bucket_and_is_never_exceeded():
    budget = RecordingBudget(10**6)
    result = search(budget, max_batch_size=50)
    assert result.batch_sizes == (45, 45, 45, 45)
    assert max(n for n, _, _ in budget.probes) == 50


def test_empty_buckets_take_the_size_of_the_nearest_longer_bucket():
    result = search(
        PositionBudget(1000),
        lengths=[5, 25, 40] * 2,
        boundaries=[10, 20, 30, 100],
        tolerance=0.001,
        safety_factor=1.0,
    )
    # Buckets [10, 20) and [100, inf) are empty.
    assert result.batch_sizes == (200, 40, 40, 25, 25)


# -------------------------------------------------------------------- probes
def test_probes_train_on_worst_case_batches_in_logarithmically_many_steps():
    models = []

    def model_fn():
        models.append(tiny_model())
        return models[0]

    x, y = data()
    builder = kerasbatch.BucketBuilder(boundaries=BOUNDARIES)
    budget = RecordingBudget(20000)
    find_bucket_batch_sizes(
        model_fn, builder, x, y, memory_limit=budget, max_batch_size=10**6, verbose=0
    )
    assert len(models) == 1
    model = models[0]
    fitted = [(n, length) for n, length, fits in budget.probes if fits]
    assert model.shapes == fitted  # each fitting probe trained on (n, length)
    assert int(model.optimizer.iterations) == len(fitted)
    assert [length for _, length, _ in budget.probes] == sorted(
        (length for _, length, _ in budget.probes), reverse=True
    )
    for length in BUCKET_LENGTHS:
        probes = sum(probed == length for _, probed, _ in budget.probes)
        assert probes <= math.log2(20000 // length) + 8
    assert builder.resolved_boundaries is None  # the search built a copy


def test_strategy_boundaries_are_resolved_from_the_data():
    x, y = data()
    builder = kerasbatch.BucketBuilder(boundaries="uniform", num_buckets=3)
    result = find_bucket_batch_sizes(
        tiny_model, builder, x, y, memory_limit=PositionBudget(3000), verbose=0
    )
    resolved = kerasbatch.BucketBuilder.from_config(builder.get_config())
    resolved.build(x, y)
    assert result.boundaries == tuple(resolved.resolved_boundaries)
    assert len(result.batch_sizes) == 3


class Autoencoder(keras.Model):
    """Trains without targets: its loss is added in `call`."""

    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(10, 4)
        self.out = keras.layers.Dense(4)

    def call(self, x):
        hidden = self.embed(x["x"])
        self.add_loss(keras.ops.mean((self.out(hidden) - hidden) ** 2))
        return hidden


def test_batches_of_x_alone_with_lengths_train_too():
    def model_fn():
        model = Autoencoder()
        model.compile("sgd")
        return model

    x, _ = data()
    builder = kerasbatch.BucketBuilder(boundaries=BOUNDARIES, output_lengths=True)
    result = find_bucket_batch_sizes(
        model_fn,
        builder,
        x,
        memory_limit=PositionBudget(3000),
        tolerance=0.001,
        safety_factor=1.0,
        verbose=0,
    )
    assert list(result.batch_sizes) == [3000 // n for n in BUCKET_LENGTHS]


# --------------------------------------------------------- merge and builder
def test_merge_joins_equal_adjacent_buckets_under_the_longer_boundary():
    unmerged = search(PositionBudget(2000), max_batch_size=60)
    merged = search(PositionBudget(2000), max_batch_size=60, merge=True)
    # Lengths 9, 19, 29 all fit the cap of 60; 40 fits 2000 // 40 = 50 at most.
    assert unmerged.batch_sizes[:3] == (54, 54, 54)
    assert unmerged.batch_sizes[3] < 54
    assert merged == BucketBatchSizes((30,), (54, unmerged.batch_sizes[3]))


def test_merge_of_equal_sizes_leaves_one_bucket():
    result = search(PositionBudget(10**6), max_batch_size=8, merge=True)
    assert result == BucketBatchSizes((), (7,))
    assert result.builder(kerasbatch.BucketBuilder()).boundaries == []


@pytest.mark.backend
def test_result_builder_keeps_the_base_settings_and_trains():
    x, y = data()
    base = kerasbatch.BucketBuilder(
        boundaries=BOUNDARIES, max_tokens=500, pad_to_bucket=True, seed=7
    )
    result = find_bucket_batch_sizes(
        tiny_model, base, x, y, memory_limit=PositionBudget(100), verbose=0
    )
    builder = result.builder(base)
    assert builder.bucket_batch_sizes == list(result.batch_sizes)
    assert builder.max_tokens is None
    assert (builder.pad_to_bucket, builder.seed) == (True, 7)
    dataset = builder.build(x, y)
    assert builder.resolved_batch_sizes == list(result.batch_sizes)
    model = tiny_model()
    model.fit(dataset, epochs=1, verbose=0)
    # Six elements per bucket, padded to the bucket's bound.
    size_of = dict(zip(BUCKET_LENGTHS, result.batch_sizes, strict=True))
    assert all(n <= size_of[length] for n, length in model.shapes)
    num_batches = sum(math.ceil(6 / size) for size in result.batch_sizes)
    assert len(model.shapes) == num_batches == builder.statistics().num_batches


def test_result_builder_needs_a_bucket_builder():
    with pytest.raises(TypeError, match="BucketBuilder"):
        BucketBatchSizes((), (4,)).builder(kerasbatch.PaddedBuilder(4))


# ---------------------------------------------------------- GPU (simulated)
@pytest.mark.parametrize(
    "error",
    [
        tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor"),
        tf.errors.InternalError(None, None, "RESOURCE_EXHAUSTED: while allocating"),
        RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    ],
)
def test_device_mode_treats_out_of_memory_errors_as_not_fitting(monkeypatch, error):
    monkeypatch.setattr(batch_sizes_lib, "_gpu_visible", lambda: True)
    x, y = data()
    result = find_bucket_batch_sizes(
        lambda: tiny_model(out_of_memory_above=37, error=error),
        kerasbatch.BucketBuilder(boundaries=BOUNDARIES),
        x,
        y,
        tolerance=0.01,
        safety_factor=1.0,
        verbose=0,
    )
    assert result.batch_sizes == (37, 37, 37, 37)


def test_device_mode_passes_other_errors_on_with_the_bucket(monkeypatch):
    monkeypatch.setattr(batch_sizes_lib, "_gpu_visible", lambda: True)
    error = tf.errors.InvalidArgumentError(None, None, "indices out of range")
    x, y = data()
    with pytest.raises(RuntimeError, match="bucket 3 .*length 40.* batch size 16"):
        find_bucket_batch_sizes(
            lambda: tiny_model(out_of_memory_above=8, error=error),
            kerasbatch.BucketBuilder(boundaries=BOUNDARIES),
            x,
            y,
            verbose=0,
        )


def test_device_mode_without_a_gpu_asks_for_a_memory_limit(monkeypatch):
    monkeypatch.setattr(batch_sizes_lib, "_gpu_visible", lambda: False)
    with pytest.raises(ValueError, match="No GPU is visible.*memory_limit"):
        search(None)


# -------------------------------------------------------------- process memory
class _StandInAllocator:
    """Allocator statistics that do not depend on the machine or the process.

    Whether TensorFlow's CPU allocator counts its peak depends on the machine
    (oneDNN's allocator does; others do not) and on the process, so the
    `[allocator]` cases never ask it: the stand-in reports the growth of
    resident memory since its last reset, as the allocator's peak would,
    and `ProcessMemoryLimit` takes its allocator path on every machine. The
    real allocator is checked on its own below.
    """

    def __init__(self):
        self.reset()

    def reset(self):
        self._start = batch_sizes_lib._process_memory("VmRSS")
        return True

    def peak(self):
        return max(0, batch_sizes_lib._process_memory("VmRSS") - self._start)


@pytest.fixture(params=[True, False], ids=["allocator", "resident"])
def measurement(request, monkeypatch):
    """Allocator statistics (a stand-in), or the resident-memory fallback."""
    if request.param:
        allocator = _StandInAllocator()
        monkeypatch.setattr(batch_sizes_lib, "_reset_allocator_peak", allocator.reset)
        monkeypatch.setattr(batch_sizes_lib, "_allocator_peak", allocator.peak)
    else:
        monkeypatch.setattr(batch_sizes_lib, "_reset_allocator_peak", lambda: False)
    return request.param


def test_the_allocator_case_measures_with_allocator_statistics(measurement):
    # Whatever the machine's allocator, the [allocator] cases must take the
    # allocator path and the [resident] cases the resident-peak path.
    limit = ProcessMemoryLimit(2**40)
    limit.start()
    assert limit._pooled is measurement


def test_the_machines_own_allocator_decides_the_path():
    # No stand-in: where this process's allocator keeps statistics, a search
    # measures with them; where it keeps none, it falls back to the resident
    # peak. Either way a cap far above the process fits every probe.
    limit = ProcessMemoryLimit(batch_sizes_lib._process_memory("VmRSS") + 2**31)
    keeps_statistics = batch_sizes_lib._reset_allocator_peak()
    limit.start()
    assert limit._pooled is keeps_statistics
    if keeps_statistics:
        assert batch_sizes_lib._allocator_peak() >= 0
    assert search(limit, max_batch_size=8).batch_sizes == (7, 7, 7, 7)


def test_allocator_statistics_that_vanish_after_start_are_a_clear_error(monkeypatch):
    allocator = _StandInAllocator()
    monkeypatch.setattr(batch_sizes_lib, "_reset_allocator_peak", allocator.reset)
    monkeypatch.setattr(batch_sizes_lib, "_allocator_peak", allocator.peak)
    limit = ProcessMemoryLimit(2**40)
    limit.start()
    monkeypatch.setattr(batch_sizes_lib, "_reset_allocator_peak", lambda: False)
    with pytest.raises(RuntimeError, match="allocator statistics.*no longer"):
        limit.fits(lambda: None, 1, 10)


def test_process_memory_limit_with_room_fits_every_probe(measurement):
    limit = ProcessMemoryLimit(batch_sizes_lib._process_memory("VmRSS") + 2**31)
    assert search(limit, max_batch_size=64).batch_sizes == (57, 57, 57, 57)


def test_process_memory_limit_below_the_process_fits_nothing(measurement):
    with pytest.raises(ValueError, match="batch size 1 does not fit in ProcessMem"):
        search(ProcessMemoryLimit(2**20))


@pytest.mark.skipif(
    bool(tf.config.list_physical_devices("GPU")), reason="measures CPU training"
)
def test_process_memory_limit_stops_a_huge_batch_and_lets_a_small_one_through():
    # 3 MB of activations per element of length 400 (Dense(1024) in float32,
    # several copies for the backward pass): 4096 of them need 12 GB or more.
    def model_fn():
        model = keras.Sequential(
            [
                keras.layers.Embedding(10, 16),
                keras.layers.Dense(1024),
                keras.layers.GlobalAveragePooling1D(),
                keras.layers.Dense(1),
            ]
        )
        model.compile("sgd", "mse")
        return model

    x, y = data([400])
    limit = ProcessMemoryLimit(batch_sizes_lib._process_memory("VmRSS") + 2**28)
    result = find_bucket_batch_sizes(
        model_fn, kerasbatch.BucketBuilder(boundaries=[]), x, y, memory_limit=limit
    )
    assert 1 <= result.batch_sizes[0] < 0.9 * 4096 / 16


def test_process_memory_limit_needs_a_resettable_peak(monkeypatch, measurement):
    monkeypatch.setattr(batch_sizes_lib, "_CLEAR_REFS", "/nonexistent/clear_refs")
    if measurement:  # allocator statistics need no resident peak
        assert search(ProcessMemoryLimit(2**40), max_batch_size=2).batch_sizes
    else:
        with pytest.raises(RuntimeError, match="cannot reset the peak"):
            search(ProcessMemoryLimit(2**40))


# -------------------------------------------------------------------- errors
def test_a_bucket_where_one_element_does_not_fit_is_named():
    with pytest.raises(ValueError, match=r"Bucket 3 \(padded length 40\).*size 1"):
        search(PositionBudget(39))


def test_a_model_that_fails_is_reported_with_the_bucket():
    def model_fn():
        model = keras.Sequential([keras.Input((7,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
        return model

    x, y = data()
    with pytest.raises(RuntimeError, match="bucket 3 .*length 40.* batch size 1:") as e:
        find_bucket_batch_sizes(
            model_fn,
            kerasbatch.BucketBuilder(boundaries=BOUNDARIES),
            x,
            y,
            memory_limit=PositionBudget(1000),
            verbose=0,
        )
    assert e.value.__cause__ is not None


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ({"safety_factor": 0}, ValueError, "safety_factor"),
        ({"safety_factor": 1.5}, ValueError, "safety_factor"),
        ({"tolerance": 0}, ValueError, "tolerance"),
        ({"tolerance": 1}, ValueError, "tolerance"),
        ({"max_batch_size": 0}, ValueError, "max_batch_size"),
        ({"max_batch_size": 2.5}, ValueError, "max_batch_size"),
        ({"memory_limit": 2**30}, TypeError, "MemoryLimit"),
        ({"merge": "yes"}, TypeError, "merge"),
        ({"builder": kerasbatch.PaddedBuilder(4)}, TypeError, "BucketBuilder"),
        ({"x": None}, ValueError, "x is None"),
        ({"model_fn": "model"}, TypeError, "model_fn"),
        ({"model_fn": lambda: keras.Sequential()}, TypeError, "compiled"),
    ],
)
def test_bad_arguments(arguments, error, match):
    x, y = data()
    arguments = {
        "model_fn": tiny_model,
        "builder": kerasbatch.BucketBuilder(boundaries=BOUNDARIES),
        "x": x,
        "y": y,
        "memory_limit": PositionBudget(1000),
        **arguments,
    }
    with pytest.raises(error, match=match):
        find_bucket_batch_sizes(**arguments)


@pytest.mark.parametrize(
    "make",
    [
        lambda: PositionBudget(0),
        lambda: PositionBudget(100, quadratic_length=-1),
        lambda: ProcessMemoryLimit(None),
        lambda: ProcessMemoryLimit(1.5e9),
    ],
)
def test_bad_limits(make):
    with pytest.raises(ValueError, match="positive int"):
        make()


def test_a_custom_memory_limit_decides():
    class MaxBatchSize(MemoryLimit):
        def fits(self, step, batch_size, length):
            step()
            return batch_size <= 10

    result = search(MaxBatchSize(), tolerance=0.01, safety_factor=1.0)
    assert result.batch_sizes == (10, 10, 10, 10)


# ------------------------------------------------------------------ progress
def test_verbose_prints_a_line_per_bucket(capsys):
    search(PositionBudget(1000), verbose=1)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("Bucket 3 (1/4, padded length 40): batch size 22 ")
    assert lines[3].startswith("Bucket 0 (4/4, padded length 9): batch size 99 ")


def test_verbose_zero_is_silent(capsys):
    search(PositionBudget(1000), verbose=0)
    assert capsys.readouterr().out == ""
