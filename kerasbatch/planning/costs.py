"""What training costs with each Keras backend on a CPU or a GPU, for `kerasbatch.analyze`.

`BACKEND_COSTS` holds the seconds per padded position, per pair of
positions in a row (attention), per step and per compiled shape, each
measured on the hardware it names; `resolve_backend` and `resolve_device`
find the backend and device an estimate is for without importing Keras
(Keras' backend setting; whether this machine shows an NVIDIA GPU), and
`resolve_costs` gives the figures, or your own. `extrapolate_shapes`
carries the count of distinct batch shapes of the epochs planned on to
those of a longer run (for `kerasbatch.tuner.CompileCost` and the
callbacks' compile warning). Imports neither Keras nor TensorFlow.
"""

import dataclasses
import json
import math
import numbers
import os
import sys

__all__ = [
    "BACKEND_COSTS",
    "DEVICES",
    "BackendCosts",
    "extrapolate_shapes",
    "resolve_backend",
    "resolve_costs",
    "resolve_device",
]

#: `"cpu"` or `"gpu"`: the hardware an estimate is for.
DEVICES = ("cpu", "gpu")


@dataclasses.dataclass(frozen=True)
class BackendCosts:
    """What training costs with a Keras backend on some hardware, for `analyze`.

    Attributes:
        seconds_per_position: seconds per padded position fed (padding
            included: it is computed as data is).
        seconds_per_position_pair: seconds per pair of padded positions in
            a row (a batch has rows × padded length² of them): what
            attention, which compares every position of a row with every
            other, adds; 0 where the figures leave it out.
        seconds_per_step: fixed seconds per step (optimizer update, dispatch,
            framework overhead), whatever the batch holds.
        seconds_per_shape: seconds to compile a batch shape the run has not
            fed before (XLA on JAX); 0 where shapes are not compiled.
        hardware: the hardware the figures were measured on.
        source: the model and how the figures were measured.

    Example:

    >>> from kerasbatch.planning.costs import BACKEND_COSTS
    >>> BACKEND_COSTS["torch"]["gpu"].seconds_per_step
    0.024
    >>> BACKEND_COSTS["jax"]["cpu"].compiles, BACKEND_COSTS["torch"]["cpu"].compiles
    (True, False)
    """

    seconds_per_position: float
    seconds_per_position_pair: float
    seconds_per_step: float
    seconds_per_shape: float
    hardware: str
    source: str

    @property
    def compiles(self):
        """Whether every new batch shape costs a compile."""
        return self.seconds_per_shape > 0

    def to_dict(self):
        """The costs as a JSON-serialisable dict."""
        return dataclasses.asdict(self)


def _on_this_cpu(**figures):
    """Costs measured by `benchmarks/analyze_costs.py` on 2 CPU cores."""
    return BackendCosts(
        **figures,
        hardware="2 x86-64 CPU cores",
        source="a 2-block Transformer encoder (width 64), "
        "benchmarks/analyze_costs.py (benchmarks/RESULTS.md)",
    )


#: Default costs per backend and device (`"cpu"`, `"gpu"`), each measured
#: on the hardware it names; only their ratios matter for the ranking. Give
#: a `CompileCost` measured on your model
#: (`kerasbatch.tuner.CompileCost.measure`) for your own figures. There are
#: no figures for TensorFlow on a GPU (where Keras' `jit_compile="auto"`
#: compiles every shape with XLA): measure yours.
#:
#: - CPU, every backend: a fit through the step times of a small
#:   Transformer encoder trained with `model.fit` on batches of 8 shapes
#:   (1 024 to 16 384 positions, rows of 16 to 512) on 2 CPU cores
#:   (`benchmarks/analyze_costs.py`, figures in `benchmarks/RESULTS.md`).
#:   JAX compiles every shape with XLA; TensorFlow (without XLA, Keras'
#:   `"auto"` on a CPU) and torch do not. Attention is a large part of a
#:   CPU's step, hence the pair term: 8 rows of 512 took 1.9 to 2.9 times as
#:   long as 64 rows of 64, the same positions.
#: - `jax` on a GPU: a 4-layer Transformer encoder (width 256) on an H200
#:   (`benchmarks/gpu_tradeoffs.py`; `benchmarks/RESULTS.md`, "GPU
#:   trade-offs"): a line through the steady epochs of 4 ways of batching
#:   16 384 lognormal sequences, and the mean compile of its shapes.
#: - `torch` on a GPU: the same model and GPU on Keras' torch backend, as
#:   reported by a user (not by this project's benchmarks): about 24 ms a
#:   step whatever the padding (padded to 512: 6.1 s, 8 buckets: 6.7 s, a
#:   token budget: 5.5 s an epoch), so fewer, larger steps help most.
BACKEND_COSTS = {
    "jax": {
        "cpu": _on_this_cpu(
            seconds_per_position=5.87e-06,
            seconds_per_position_pair=4.27e-08,
            seconds_per_step=5.06e-04,
            seconds_per_shape=1.83,
        ),
        "gpu": BackendCosts(
            seconds_per_position=1.55e-07,
            seconds_per_position_pair=0.0,
            seconds_per_step=4.67e-03,
            seconds_per_shape=7.7,
            hardware="an NVIDIA H200 GPU",
            source="a 4-layer Transformer encoder (width 256), "
            "benchmarks/gpu_tradeoffs.py (benchmarks/RESULTS.md)",
        ),
    },
    "tensorflow": {
        "cpu": _on_this_cpu(
            seconds_per_position=4.36e-06,
            seconds_per_position_pair=1.31e-08,
            seconds_per_step=8.00e-03,
            seconds_per_shape=0.0,
        ),
    },
    "torch": {
        "cpu": _on_this_cpu(
            seconds_per_position=3.68e-06,
            seconds_per_position_pair=1.31e-08,
            seconds_per_step=6.17e-03,
            seconds_per_shape=0.0,
        ),
        "gpu": BackendCosts(
            seconds_per_position=1e-08,
            seconds_per_position_pair=0.0,
            seconds_per_step=0.024,
            seconds_per_shape=0.0,
            hardware="an NVIDIA H200 GPU",
            source="a 4-layer Transformer encoder (width 256), as a user "
            "reported it (about 24 ms a step whatever the padding)",
        ),
    },
}


def resolve_backend(backend):
    """The backend given, or Keras', read without importing Keras.

    Keras' backend is Keras' own where Keras is imported, else
    `KERAS_BACKEND`, else the one in Keras' `keras.json` (in `KERAS_HOME`,
    by default `~/.keras`), else Keras' default, `"tensorflow"`.

    Example:

    >>> resolve_backend("jax")
    'jax'
    """
    if backend is None:
        keras = sys.modules.get("keras")
        if keras is not None and hasattr(keras, "config"):
            backend = keras.config.backend()
        else:
            backend = os.environ.get("KERAS_BACKEND") or _configured_backend()
    if backend not in BACKEND_COSTS:
        raise ValueError(
            f"backend must be one of {sorted(BACKEND_COSTS)}, got {backend!r}."
        )
    return backend


def _configured_backend():
    """The backend of Keras' `keras.json`, or Keras' default."""
    home = os.environ.get("KERAS_HOME") or os.path.join(
        os.path.expanduser("~"), ".keras"
    )
    try:
        with open(os.path.join(home, "keras.json"), encoding="utf-8") as file:
            return json.load(file).get("backend", "tensorflow")
    except (OSError, ValueError, AttributeError):
        return "tensorflow"


_CHOOSE = "; choose with --device or device="
#: Where a machine shows its NVIDIA GPUs: the driver's list, a device file.
_GPU_PLACES = ("/proc/driver/nvidia/gpus", "/dev/nvidia0")


def resolve_device(device):
    """`(device, how it was chosen)`: `device` as asked, else `"gpu"` where
    this machine shows an NVIDIA GPU (and `CUDA_VISIBLE_DEVICES` does not
    hide it), else `"cpu"`.

    Example:

    >>> resolve_device("cpu")
    ('cpu', 'as asked')
    """
    if device is not None:
        if device not in DEVICES:
            raise ValueError(f"device must be one of {DEVICES}, got {device!r}.")
        return device, "as asked"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return "cpu", f"CUDA_VISIBLE_DEVICES hides the GPUs{_CHOOSE}"
    for place in _GPU_PLACES:
        if os.path.exists(place) and (not os.path.isdir(place) or os.listdir(place)):
            return "gpu", f"this machine shows an NVIDIA GPU at {place}{_CHOOSE}"
    return "cpu", f"this machine shows no GPU{_CHOOSE}"


def resolve_costs(backend, device, compile_seconds_per_shape=None):
    """The `BackendCosts` of an estimate, or None without figures.

    Args:
        backend: a key of `BACKEND_COSTS`.
        device: `"cpu"` or `"gpu"`.
        compile_seconds_per_shape: None (the backend's costs on the
            device), seconds per shape that replace theirs (0: no
            compiles), or a `kerasbatch.tuner.CompileCost`, whose figures
            replace them all.

    Example:

    >>> resolve_costs("torch", "cpu", 2.0).compiles
    True
    >>> resolve_costs("tensorflow", "gpu") is None
    True
    """
    measured = compile_seconds_per_shape
    if all(
        hasattr(measured, name)
        for name in ("seconds_per_shape", "seconds_per_position", "seconds_per_step")
    ):
        return BackendCosts(
            seconds_per_position=float(measured.seconds_per_position),
            seconds_per_position_pair=0.0,
            seconds_per_step=float(measured.seconds_per_step),
            seconds_per_shape=float(measured.seconds_per_shape),
            hardware="your hardware",
            source=f"your model (a {type(measured).__name__})",
        )
    if measured is not None and (
        not isinstance(measured, numbers.Real)
        or isinstance(measured, bool)
        or not math.isfinite(measured)
        or measured < 0
    ):
        raise ValueError(
            "compile_seconds_per_shape must be a number of seconds >= 0 or a "
            f"kerasbatch.tuner.CompileCost, got {measured!r}."
        )
    costs = BACKEND_COSTS[backend].get(device)
    if costs is None or measured is None:
        return costs
    return dataclasses.replace(costs, seconds_per_shape=float(measured))


def extrapolate_shapes(counts, epochs):
    """Distinct batch shapes after `epochs` epochs, from the counts of the
    epochs planned.

    New shapes come ever more slowly (each epoch mostly feeds shapes an
    earlier one fed), so the count beyond the planned epochs follows a
    power law through the counts after half and after all of them:
    `counts[-1] × (epochs / planned) ** power`, where `power` makes the
    law pass through both. Where all the epochs are planned, or the second
    half brought no new shape, it is the last count.

    Args:
        counts: the distinct shapes fed so far after each planned epoch
            (`counts[i]`: over epochs `0 .. i`; never decreasing, the first
            positive).
        epochs: the epochs of the whole run (at least `len(counts)`).

    Returns:
        The estimated count (a float where extrapolated, not rounded).

    Example:

    >>> counts = [10, 16, 20, 24]  # 1.5 times as many after twice the epochs
    >>> round(extrapolate_shapes(counts, 16), 6)  # 24 x 1.5 x 1.5
    54.0
    >>> extrapolate_shapes(counts, 4), extrapolate_shapes([5, 5], 10)
    (24, 5)
    """
    planned = len(counts)
    if planned == epochs:
        return counts[-1]
    half = max(planned // 2, 1)
    if half == planned or counts[-1] == counts[half - 1]:
        return counts[-1]
    power = math.log(counts[-1] / counts[half - 1]) / math.log(planned / half)
    return counts[-1] * (epochs / planned) ** power
