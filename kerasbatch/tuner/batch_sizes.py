"""The largest batch size per bucket that trains without running out of memory."""

import dataclasses
import numbers
import os
import time

import keras
import numpy as np

from kerasbatch import checks, optional
from kerasbatch.builders.bucket_builder import BucketBuilder

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"
_OUT_OF_MEMORY_MESSAGES = ("resource_exhausted", "out of memory")


class MemoryLimit:
    """Decides whether a training step fits in memory; subclass to make one.

    `find_bucket_batch_sizes` calls `start()` once before its first probe,
    then `fits(step, batch_size, length)` for every probe. `fits` runs the
    step (a function of no arguments: one training step on a worst-case batch
    of the bucket) or decides without it, and returns True if the step fits
    and False if it runs out of memory. Any other exception of the step
    propagates. `str(limit)` names the limit in error messages.

    Example:

    >>> from kerasbatch.tuner import MemoryLimit
    >>> class MaxBatchSize(MemoryLimit):
    ...     def __init__(self, limit):
    ...         self.limit = limit
    ...     def fits(self, step, batch_size, length):
    ...         return batch_size <= self.limit
    >>> MaxBatchSize(8).fits(None, batch_size=4, length=100)
    True
    """

    def start(self):
        """Called once, after the model is made and before the first probe."""

    def fits(self, step, batch_size, length):
        """Whether a training step on `batch_size` elements of `length` fits.

        Args:
            step: runs the training step (forward, backward, optimizer update).
            batch_size: elements in the probed batch.
            length: the padded length of the batch (the bucket's longest).

        Returns:
            True if the step fits, False if it runs out of memory.
        """
        raise NotImplementedError


class PositionBudget(MemoryLimit):
    """A synthetic cap: a batch fits if `batch_size × cost(length)` is within budget.

    The cost is BucketBuilder's for `max_tokens`: `L`, or `L + L**2 /
    quadratic_length`. Batches that fit still run their training step, so a
    model that fails at any size is caught; batches that do not fit do not
    run. The answer is known in advance, which makes it the limit for tests
    and examples, and a quick way to check a model against a token budget.

    Args:
        max_positions: the budget, in (cost-weighted) padded positions.
        quadratic_length: makes the cost of a length L `L + L**2 /
            quadratic_length`. None: the cost is L.

    Example:

    >>> from kerasbatch.tuner import PositionBudget
    >>> budget = PositionBudget(1000, quadratic_length=100)
    >>> budget.fits(lambda: None, batch_size=5, length=100)  # 5 × 200
    True
    >>> budget.fits(lambda: None, batch_size=6, length=100)
    False
    """

    def __init__(self, max_positions, quadratic_length=None):
        self.max_positions = _positive_int(max_positions, "max_positions")
        self.quadratic_length = checks.optional_positive_int(
            quadratic_length, "quadratic_length"
        )

    def fits(self, step, batch_size, length):
        if batch_size * self.cost(length) > self.max_positions:
            return False
        step()
        return True

    def cost(self, length):
        """The cost of one element of padded length `length`."""
        if self.quadratic_length is None:
            return float(length)
        return length + length**2 / self.quadratic_length

    def __repr__(self):
        quadratic = (
            "" if self.quadratic_length is None else f", {self.quadratic_length}"
        )
        return f"PositionBudget({self.max_positions}{quadratic})"


class ProcessMemoryLimit(MemoryLimit):
    """A cap on the process's resident memory, for training on CPU (Linux).

    A batch fits if the process's peak resident memory during its training
    step stays within `max_bytes`. The probe really allocates that memory:
    nothing stops the process at the cap, so leave room above it.

    How the peak is measured depends on TensorFlow's CPU allocator:

    - With oneDNN (TensorFlow's default on x86 Linux), the allocator pools
      memory and never gives it back: a probe of 2.5 GB leaves the process
      2.5 GB larger for good, and smaller steps then reuse that memory
      without growing it, so the process's memory would put every later
      probe over the cap. But this allocator counts its own peak, which
      `tf.config.experimental.get_memory_info("CPU:0")` reads and
      `reset_memory_stats` resets, and that peak does not depend on what ran
      before (a batch of 64 measured 50.6 MB before and after a batch of
      4096). The estimate is then the process's resident memory at
      `start()` plus the allocator's peak during the step. It errs high
      where earlier work in the process left memory in the pool, and low by
      what the first steps add outside the allocator for good (traced
      functions: tens of MB).
    - Without it (`TF_ENABLE_ONEDNN_OPTS=0`, platforms without oneDNN, or a
      backend other than TensorFlow, such as JAX, whose steps never touch
      TensorFlow's allocator),
      freed tensors go back to the system (resident memory falls back to
      within tens of MB of its value before a step of 2 GB), so the peak
      resident memory itself is honest: `VmHWM` of `/proc/self/status`,
      after resetting it by writing `5` to `/proc/self/clear_refs` (Linux
      4.0+).

    Args:
        max_bytes: the cap, in bytes.

    Raises:
        RuntimeError: at `start()`, where `/proc/self/status` cannot be read
            (not Linux), or, without allocator statistics, where the peak
            cannot be reset: the lifetime peak (`VmHWM` unreset, or
            `ru_maxrss`) only grows, so after one probe over the cap every
            later probe would look over it too.

    Example:

    >>> from kerasbatch.tuner import ProcessMemoryLimit
    >>> ProcessMemoryLimit(8 * 2**30)
    ProcessMemoryLimit(max_bytes=8589934592)
    """

    def __init__(self, max_bytes):
        self.max_bytes = _positive_int(max_bytes, "max_bytes")
        self._baseline = self._pooled = None

    def start(self):
        if not os.path.exists(_STATUS):
            raise RuntimeError(
                f"ProcessMemoryLimit reads {_STATUS}, which this system has not "
                "(it works on Linux). Use PositionBudget instead."
            )
        self._baseline = _process_memory("VmRSS")
        self._pooled = _reset_allocator_peak()
        if not self._pooled:
            try:
                _reset_resident_peak()
            except OSError as error:
                raise RuntimeError(
                    f"ProcessMemoryLimit cannot reset the peak resident memory "
                    f"({_CLEAR_REFS}: {error}). Use PositionBudget instead."
                ) from error

    def fits(self, step, batch_size, length):
        if self._pooled:
            if not _reset_allocator_peak():
                raise RuntimeError(
                    "ProcessMemoryLimit measured with TensorFlow's CPU allocator "
                    "statistics at start(), but this process keeps them no "
                    "longer: call start() again, or use PositionBudget."
                )
            step()
            peak = self._baseline + _allocator_peak()
        else:
            _reset_resident_peak()
            step()
            peak = _process_memory("VmHWM")
        return peak <= self.max_bytes

    def __repr__(self):
        return f"ProcessMemoryLimit(max_bytes={self.max_bytes})"


class _DeviceMemory(MemoryLimit):
    """The accelerator's own memory: a step fits unless it raises out-of-memory."""

    def start(self):
        if not _gpu_visible():
            raise ValueError(
                "No GPU is visible, so running out of memory cannot be detected: "
                "give a memory_limit (ProcessMemoryLimit for a cap on this "
                "process's memory, or PositionBudget for a synthetic one)."
            )

    def fits(self, step, batch_size, length):
        try:
            step()
        except Exception as error:
            if not _is_out_of_memory(error):
                raise
            return False
        return True

    def __str__(self):
        return "the GPU's memory"


@dataclasses.dataclass(frozen=True)
class BucketBatchSizes:
    """The result of `find_bucket_batch_sizes`: boundaries and a batch size each.

    Attributes:
        boundaries: the bucket boundaries the sizes are for (the builder's
            resolved boundaries, fewer where buckets were merged).
        batch_sizes: one batch size per bucket, `len(boundaries) + 1`.
    """

    boundaries: tuple
    batch_sizes: tuple

    def builder(self, base):
        """A copy of the `BucketBuilder` `base` that uses these sizes.

        Args:
            base: the builder the sizes were found for (or one with its
                padding and `max_length`); its other settings are kept, its
                batch sizing (`batch_size`, `max_tokens`, ...) is replaced.

        Returns:
            A new builder of `base`'s class, not built yet.
        """
        if not isinstance(base, BucketBuilder):
            raise TypeError(f"base must be a BucketBuilder, got {base!r}.")
        config = base.get_config()
        config.update(
            boundaries=list(self.boundaries),
            bucket_batch_sizes=list(self.batch_sizes),
            batch_size=None,
            max_tokens=None,
            quadratic_length=None,
        )
        return type(base).from_config(config)


def find_bucket_batch_sizes(
    model_fn,
    builder,
    x,
    y=None,
    sample_weight=None,
    *,
    memory_limit=None,
    safety_factor=0.9,
    tolerance=0.05,
    max_batch_size=4096,
    merge=False,
    verbose=1,
):
    """The largest batch size per bucket whose training step fits in memory.

    A copy of `builder` is built on the data (the builder itself is left as
    it is). For each bucket, from the longest down, training steps (forward,
    backward, optimizer update) run on the bucket's worst-case batch: copies
    of its longest element, cut and padded like a real batch of the bucket.
    The batch size starts at the size found for the next longer bucket (1
    for the longest), doubles while the step fits, then bisects between the
    largest size that fits and the smallest that does not until they are
    within `tolerance` of each other, as NeMo's OOMptimizer does. The bucket
    gets `floor(safety_factor × largest fitting size)`, at least 1.

    Empty buckets (nothing to measure) get the size of the nearest longer
    non-empty bucket, or above the longest non-empty bucket, its size.

    Args:
        model_fn: a function of no arguments returning a compiled
            `keras.Model`. Called once; every probe trains that model.
        builder: a `kerasbatch.BucketBuilder`: its boundaries, padding,
            truncation and `max_length` decide the buckets and their lengths.
        x, y, sample_weight: the data, as for `builder.build`.
        memory_limit: what "fits" means, a `MemoryLimit`. None: the GPU's
            memory (a step fits unless it raises `ResourceExhaustedError`, or
            another error reporting `RESOURCE_EXHAUSTED` or "out of memory",
            as XLA does); it needs a visible GPU. On CPU give
            `ProcessMemoryLimit` (measured process memory) or `PositionBudget`
            (a synthetic budget of padded positions).
        safety_factor: in (0, 1]: the share of the largest fitting batch size
            to use, a margin for memory the probe does not see (fragmentation,
            other processes, longer real batches with `max_length=None`).
        tolerance: in (0, 1): bisection stops when the smallest failing size
            is within `tolerance × largest fitting size` of the largest.
        max_batch_size: the largest size tried; a bucket where it fits gets
            it (times `safety_factor`).
        merge: merge adjacent buckets that end with the same batch size (the
            merged bucket keeps the longer bucket's upper boundary, where the
            size was measured).
        verbose: 0 silent, otherwise a line per bucket as it is done.

    Returns:
        A `BucketBatchSizes`: `batch_sizes` (one per bucket), `boundaries`
        (the resolved boundaries, merged with `merge=True`), and
        `builder(base)`, which makes the `BucketBuilder` that uses them.

    Raises:
        TypeError: `builder` is not a `BucketBuilder`, `model_fn` does not
            return a compiled `keras.Model`, or `memory_limit` is not a
            `MemoryLimit`.
        ValueError: a bad argument; no GPU is visible and `memory_limit` is
            None; or a training step of batch size 1 does not fit for a
            bucket.
        RuntimeError: the training step failed for another reason than
            memory; the message names the bucket, its length and batch size.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> import kerasbatch
    >>> from kerasbatch.tuner import PositionBudget, find_bucket_batch_sizes
    >>> x = [np.ones(n, "int32") for n in (5, 10, 20, 40)] * 4
    >>> def model_fn():
    ...     model = keras.Sequential([
    ...         keras.layers.Embedding(10, 4),
    ...         keras.layers.GlobalAveragePooling1D(),
    ...         keras.layers.Dense(1),
    ...     ])
    ...     model.compile("sgd", "mse")
    ...     return model
    >>> builder = kerasbatch.BucketBuilder(boundaries=[8, 16, 32])
    >>> result = find_bucket_batch_sizes(model_fn, builder, x, np.zeros(16),
    ...     memory_limit=PositionBudget(1000), verbose=0)
    >>> result  # 1000 // 40 = 25 fits, times 0.9; 1000 // 20 = 50; ...
    BucketBatchSizes(boundaries=(8, 16, 32), batch_sizes=(180, 90, 45, 22))
    >>> result.builder(builder).bucket_batch_sizes == list(result.batch_sizes)
    True
    """
    if not callable(model_fn):
        raise TypeError(f"model_fn must be a function, got {model_fn!r}.")
    if not isinstance(builder, BucketBuilder):
        raise TypeError(
            f"find_bucket_batch_sizes needs a BucketBuilder, got {builder!r}."
        )
    if x is None:
        raise ValueError("x is None: give the data the builder batches.")
    if memory_limit is None:
        memory_limit = _DeviceMemory()
    elif not isinstance(memory_limit, MemoryLimit):
        raise TypeError(
            "memory_limit must be a MemoryLimit (ProcessMemoryLimit, "
            f"PositionBudget, ...) or None, got {memory_limit!r}."
        )
    if not (isinstance(safety_factor, numbers.Real) and 0 < safety_factor <= 1):
        raise ValueError(f"safety_factor must be in (0, 1], got {safety_factor!r}.")
    if not (isinstance(tolerance, numbers.Real) and 0 < tolerance < 1):
        raise ValueError(f"tolerance must be in (0, 1), got {tolerance!r}.")
    max_batch_size = _positive_int(max_batch_size, "max_batch_size")
    merge = checks.checked_bool(merge, "merge")

    builder = type(builder).from_config(builder.get_config())
    builder.build(x, y, sample_weight)
    model = model_fn()
    if not isinstance(model, keras.Model) or not model.compiled:
        raise TypeError(f"model_fn must return a compiled keras.Model, got {model!r}.")
    memory_limit.start()

    num_buckets = len(builder.bucket_counts)
    sizes = [None] * num_buckets
    largest = 1
    for done, bucket in enumerate(reversed(range(num_buckets)), start=1):
        index = builder.longest_element(bucket)
        if index is None:
            continue
        started = time.perf_counter()
        length = builder.bucket_lengths[bucket]
        fits = _Probe(model, builder, memory_limit, bucket, index, length)
        largest = _largest_fitting(fits, largest, max_batch_size, tolerance)
        if largest == 0:
            raise ValueError(
                f"Bucket {bucket} (padded length {length}): a training step of "
                f"batch size 1 does not fit in {memory_limit}. Lower max_length "
                "(with overflow='truncate' or 'drop'), use a smaller model, or "
                "raise the limit."
            )
        sizes[bucket] = max(1, int(largest * safety_factor))
        if verbose:
            print(
                f"Bucket {bucket} ({done}/{num_buckets}, padded length {length}): "
                f"batch size {sizes[bucket]} (largest fitting {largest}, "
                f"{fits.probes} probes, {time.perf_counter() - started:.1f}s)"
            )

    filled = next(size for size in reversed(sizes) if size is not None)
    for bucket in reversed(range(num_buckets)):
        if sizes[bucket] is None:
            sizes[bucket] = filled
        filled = sizes[bucket]
    boundaries = builder.resolved_boundaries
    if merge:
        boundaries, sizes = _merge_equal(boundaries, sizes)
    return BucketBatchSizes(tuple(boundaries), tuple(sizes))


class _Probe:
    """`fits(batch_size)` for one bucket: a training step on its worst batch."""

    def __init__(self, model, builder, memory_limit, bucket, index, length):
        self.model = model
        self.builder = builder
        self.memory_limit = memory_limit
        self.bucket = bucket
        self.index = index
        self.length = length
        self.probes = 0

    def __call__(self, batch_size):
        self.probes += 1

        def step():
            batch = self.builder.element_batch(self.index, batch_size)
            if keras.backend.backend() != "tensorflow":  # e.g. JAX: numpy in
                batch = keras.tree.map_structure(np.asarray, batch)
            if isinstance(batch, tuple):
                self.model.train_on_batch(*batch)
            else:
                self.model.train_on_batch(batch)

        try:
            return self.memory_limit.fits(step, batch_size, self.length)
        except Exception as error:
            raise RuntimeError(
                f"The training step failed for bucket {self.bucket} (padded "
                f"length {self.length}) at batch size {batch_size}: "
                f"{type(error).__name__}: {error}"
            ) from error


def _largest_fitting(fits, start, max_batch_size, tolerance):
    """The largest size that fits (0 if 1 does not), to within `tolerance`.

    Doubles from `start` while it fits (up to `max_batch_size`), or, if
    `start` does not fit, bisects below it.
    """
    fit, fail = 0, None
    size = min(start, max_batch_size)
    while fail is None:
        if not fits(size):
            fail = size
        elif size == max_batch_size:
            return size
        else:
            fit, size = size, min(2 * size, max_batch_size)
    while fail - fit > max(1, tolerance * fit):
        middle = (fit + fail) // 2
        if fits(middle):
            fit = middle
        else:
            fail = middle
    return fit


def _merge_equal(boundaries, sizes):
    """Merges adjacent buckets of equal size, keeping the upper boundary."""
    merged_boundaries, merged_sizes = [], [sizes[0]]
    for boundary, size in zip(boundaries, sizes[1:], strict=True):
        if size != merged_sizes[-1]:
            merged_boundaries.append(boundary)
            merged_sizes.append(size)
    return merged_boundaries, merged_sizes


def _positive_int(value, name):
    if not checks.is_int(value) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return int(value)


def _is_out_of_memory(error):
    if any(kind.__name__ == "ResourceExhaustedError" for kind in type(error).__mro__):
        return True  # TensorFlow's
    message = str(error).lower()
    return any(text in message for text in _OUT_OF_MEMORY_MESSAGES)


def _gpu_visible():
    """Whether the Keras backend sees a GPU (asking the backend's own
    package, which Keras imported)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        return bool(_backend_tensorflow().config.list_physical_devices("GPU"))
    if backend == "jax":
        import jax

        return any(device.platform == "gpu" for device in jax.devices())
    if backend == "torch":
        import torch

        return torch.cuda.is_available()
    return False


def _backend_tensorflow():
    """TensorFlow, as the TensorFlow backend of Keras imported it."""
    return optional.imported("tensorflow")


def _process_memory(field):
    """A memory field of /proc/self/status (`VmRSS`, `VmHWM`), in bytes."""
    with open(_STATUS) as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"{_STATUS} has no {field}.")


def _reset_resident_peak():
    with open(_CLEAR_REFS, "w") as clear_refs:
        clear_refs.write("5")


def _allocator_peak():
    return _backend_tensorflow().config.experimental.get_memory_info("CPU:0")["peak"]


def _reset_allocator_peak():
    """Resets the CPU allocator's peak; False if it keeps no statistics.

    Only TensorFlow's backend trains with that allocator: on JAX the steps
    allocate through XLA's own client, which the statistics never see (every
    probe would measure a peak of nothing), so there are none to use.
    """
    if keras.backend.backend() != "tensorflow":
        return False
    try:
        _backend_tensorflow().config.experimental.reset_memory_stats("CPU:0")
    except ValueError:
        return False
    return True
