"""A `TFRecordLoader`'s configuration: its keys, their defaults, and checks.

`complete` fills in the defaults of a configuration's loader type and
refuses unknown keys; `validate` checks every value, with errors that name
the configuration and the key.
"""

import copy

from kerasbatch.io.validation import boolean, check_keys, integer

LOADER_TYPES = ("independent", "continuous_sequence", "discrete_sequence")
ON_ERROR = ("raise", "skip")
_COMMON_REQUIRED = (
    "type",
    "dataset",
    "target_batch_size",
    "drop_remainder",
    "epochs",
    "num_read_buffer_bytes",
    "num_prefetch",
    "primary_features",
)
_COMMON_DEFAULTS = {
    "num_parallel_reads": 1,
    "num_parallel_parses": 1,
    "shuffle": False,
    "num_shuffle_buffer_elements": None,
    "num_filenames_shuffle_buffer": None,
    "num_mix_files": None,
    "sloppy_interleave": False,
    "num_interleave_out_buffer_elements": 1,
    "num_interleave_in_buffer_elements": 1,
    "secondary_features": [],
    "processing_steps": [],
    "padding": False,
    "seed": None,
    "on_error": "raise",
}
_TYPE_DEFAULTS = {
    "independent": {"multi_load": False},
    "continuous_sequence": {"min_window": None, "max_window": None, "stride": None},
    "discrete_sequence": {"min_window": None, "max_window": None},
}
_SHUFFLE_REQUIRED = (
    "num_shuffle_buffer_elements",
    "num_filenames_shuffle_buffer",
    "num_mix_files",
)


def complete(config, source):
    """`config` with the defaults of its type filled in; unknown keys are errors."""
    if "type" not in config:
        raise ValueError(f"{source} is missing the required key(s) ['type'].")
    loader_type = config["type"]
    type_defaults = _TYPE_DEFAULTS.get(loader_type, {})
    allowed = set(_COMMON_REQUIRED) | set(_COMMON_DEFAULTS) | set(type_defaults)
    check_keys(config, _COMMON_REQUIRED, allowed, source)
    return copy.deepcopy({**_COMMON_DEFAULTS, **type_defaults, **config})


def validate(config, source):
    """Raises a ValueError naming the key of a completed configuration's first
    wrong value (`source` names the configuration)."""
    c = config

    def at(key):
        return f"{source}: {key}"

    if c["type"] not in LOADER_TYPES:
        raise ValueError(
            f"{at('type')} must be one of {LOADER_TYPES}, got {c['type']!r}."
        )
    integer(c["target_batch_size"], at("target_batch_size"), minimum=1)
    boolean(c["drop_remainder"], at("drop_remainder"))
    integer(c["epochs"], at("epochs"), minimum=1, allow_none=True)
    for key in (
        "num_parallel_reads",
        "num_parallel_parses",
        "num_interleave_out_buffer_elements",
        "num_interleave_in_buffer_elements",
    ):
        integer(c[key], at(key), minimum=1)
    integer(c["num_read_buffer_bytes"], at("num_read_buffer_bytes"), minimum=0)
    integer(c["num_prefetch"], at("num_prefetch"), minimum=0)
    boolean(c["sloppy_interleave"], at("sloppy_interleave"))
    if boolean(c["shuffle"], at("shuffle")):
        for key in _SHUFFLE_REQUIRED:
            if c[key] is None:
                raise ValueError(f"{at(key)} is required when shuffle is true.")
            integer(c[key], at(key), minimum=1)
    integer(c["seed"], at("seed"), allow_none=True)
    if c["on_error"] not in ON_ERROR:
        raise ValueError(
            f"{at('on_error')} must be one of {ON_ERROR}, got {c['on_error']!r}."
        )
    if not (
        c["padding"] is True or c["padding"] is False or isinstance(c["padding"], list)
    ):
        raise ValueError(
            f"{at('padding')} must be true, false or a list, got {c['padding']!r}."
        )
    if c["type"] == "independent":
        multi_load = boolean(c["multi_load"], at("multi_load"))
        if multi_load and (
            c["secondary_features"]
            or c["processing_steps"]
            or c["padding"]
            or c["on_error"] == "skip"
        ):
            raise ValueError(
                f"{at('multi_load')} parses whole batches, so it cannot be "
                "combined with secondary_features, processing_steps, padding "
                "or on_error='skip'."
            )
        return
    for key in ("min_window", "max_window"):
        if c[key] is None:
            raise ValueError(f"{at(key)} is required for a {c['type']} loader.")
        integer(c[key], at(key), minimum=1)
    if c["min_window"] > c["max_window"]:
        raise ValueError(
            f"{source}: min_window={c['min_window']} is greater than "
            f"max_window={c['max_window']}."
        )
    if c["type"] == "continuous_sequence":
        integer(c["stride"], at("stride"), minimum=1, allow_none=True)
