"""Primary and secondary features, processing steps and padding of a loader.

A loader reads *primary* features from the records and renames them
(`from_name` → `to_name`), constructs *secondary* features (constants), runs
the *processing steps* in order, then batches, padding as configured. This
module parses those configuration lists into plain objects and applies them
to one element (a dict of tensors, before batching); `plan_features`
resolves them all for a model's inputs and outputs, as a `FeaturePlan`.
"""

import dataclasses
import re

from kerasbatch.io.validation import check_keys, object_list, string
from kerasbatch.optional import tensorflow as tf

SECONDARY_TYPES = ("const",)
PROCESSING_TYPES = ("slice",)
_SLICE_ITEM = re.compile(r"^(-?\d+)?(:(-?\d+)?)?(:(-?\d+)?)?$")


@dataclasses.dataclass(frozen=True)
class Primary:
    from_name: str
    to_name: str


@dataclasses.dataclass(frozen=True)
class Constant:
    """A secondary `const` feature: `shape` and `dtype` given or copied from a tensor."""

    to_name: str
    shape: tuple | str
    dtype: str
    value: object

    def make(self, element):
        shape = (
            tf.shape(element[self.shape]) if isinstance(self.shape, str) else self.shape
        )
        dtype = (
            element[self.dtype].dtype
            if self.dtype in element
            else tf.as_dtype(self.dtype)
        )
        value = self.value
        if value is None:
            value = "" if dtype == tf.string else 0
        return tf.fill(shape, tf.constant(value, dtype))


@dataclasses.dataclass(frozen=True)
class Slice:
    """A `slice` processing step on one tensor (no batch dimension)."""

    tensor: str
    spec: str
    items: tuple

    def apply(self, element, where):
        tensor = element[self.tensor]
        rank = tensor.shape.rank
        if rank is not None and len(self.items) > rank:
            raise ValueError(
                f"{where}: slice {self.spec} has {len(self.items)} indices but "
                f"tensor {self.tensor!r} has rank {rank} (shape {tensor.shape})."
            )
        element[self.tensor] = tensor[self.items]


@dataclasses.dataclass(frozen=True)
class PaddingSpec:
    """How one tensor is padded when batched: a shape (-1: batch max) and a value."""

    shape: tuple | None
    value: object


def parse_primaries(config, manifest, where="primary_features"):
    """`[Primary]` from the config list, checked against the manifest."""
    primaries = []
    keys = {"from_name", "to_name"}
    for at, item in _items(config, where, keys, keys):
        from_name = string(item["from_name"], f"{at}.from_name")
        if from_name not in manifest.names:
            raise ValueError(
                f"{at}.from_name: the manifest has no feature {from_name!r}; "
                f"it has {list(manifest.names)}."
            )
        primaries.append(Primary(from_name, string(item["to_name"], f"{at}.to_name")))
    if not primaries:
        raise ValueError(f"{where} is empty: a loader reads at least one feature.")
    return primaries


def parse_secondaries(config, primary_names, where="secondary_features"):
    """`[Constant]` from the config list; shapes and dtypes may name primaries."""
    constants = []
    keys = {"to_name", "type"}
    for at, item in _items(config, where, keys, {*keys, "args"}):
        _check_type(item, SECONDARY_TYPES, at)
        args = _args(item, {"shape", "dtype"}, {"shape", "dtype", "value"}, at)
        constants.append(
            Constant(
                to_name=string(item["to_name"], f"{at}.to_name"),
                shape=_constant_shape(args["shape"], primary_names, f"{at}.args.shape"),
                dtype=_constant_dtype(args["dtype"], primary_names, f"{at}.args.dtype"),
                value=args.get("value"),
            )
        )
    return constants


def parse_steps(config, names, where="processing_steps"):
    """`[Slice]` from the config list; every step names a known tensor."""
    steps = []
    keys = {"tensor", "type"}
    for at, item in _items(config, where, keys, {*keys, "args"}):
        tensor = _tensor(item, names, at)
        _check_type(item, PROCESSING_TYPES, at)
        args = _args(item, {"slice"}, {"slice"}, at)
        spec = string(args["slice"], f"{at}.args.slice")
        steps.append(Slice(tensor, spec, parse_slice(spec, f"{at}.args.slice")))
    return steps


def parse_slice(spec, where="slice"):
    """`"[3,:,4:,:-2,1:4]"` → a tuple of ints and `slice` objects.

    Example:

    >>> parse_slice("[3,:,4:,:-2,1:4]")
    (3, slice(None, None, None), slice(4, None, None), slice(None, -2, None), slice(1, 4, None))
    """
    text = spec.replace(" ", "")
    if not (text.startswith("[") and text.endswith("]")) or len(text) < 3:
        raise ValueError(
            f"{where}: {spec!r} is not a slice such as '[3,:,4:,:-2,1:4]'."
        )
    items = []
    for part in text[1:-1].split(","):
        match = _SLICE_ITEM.match(part)
        if not part or not match:
            raise ValueError(
                f"{where}: {part!r} in {spec!r} is not an integer index or a "
                "slice of integers and colons."
            )
        if match.group(2) is None:
            items.append(int(part))
            continue
        start, stop, step = (
            None if group is None else int(group) for group in match.group(1, 3, 5)
        )
        if step == 0:
            raise ValueError(f"{where}: {spec!r} has a zero step.")
        items.append(slice(start, stop, step))
    return tuple(items)


def parse_padding(config, names, where="padding"):
    """None (no padding) or `{name: PaddingSpec}` for every tensor in `names`."""
    if config is False:
        return None
    defaults = dict.fromkeys(names, PaddingSpec(None, None))
    if config is True:
        return defaults
    items = object_list(config, where)
    if not items:
        raise ValueError(f"{where} is an empty list: use false for no padding or true.")
    for at, item in _items(items, where, {"tensor"}, {"tensor", "shape", "value"}):
        tensor = _tensor(item, names, at)
        shape = item.get("shape")
        if shape is not None:
            if not isinstance(shape, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= -1
                for d in shape
            ):
                raise ValueError(
                    f"{at}.shape must be a list of ints (-1: the batch maximum), got {shape!r}."
                )
            shape = tuple(shape)
        defaults[tensor] = PaddingSpec(shape, item.get("value"))
    return defaults


def padded_shapes_and_values(padding, element_spec, where="padding"):
    """`padded_batch` arguments for `padding` over an element's tensor specs."""
    shapes, values = {}, {}
    for name, spec in element_spec.items():
        wanted = padding[name]
        if wanted.shape is None:
            shapes[name] = [None] * spec.shape.rank
        else:
            if len(wanted.shape) != spec.shape.rank:
                raise ValueError(
                    f"{where}: tensor {name!r} has rank {spec.shape.rank} (shape "
                    f"{spec.shape}), but its padding shape {list(wanted.shape)} has "
                    f"{len(wanted.shape)} dimensions."
                )
            shapes[name] = [None if d == -1 else d for d in wanted.shape]
        value = wanted.value
        if value is None:
            value = "" if spec.dtype == tf.string else 0
        values[name] = tf.constant(value, spec.dtype)
    return shapes, values


@dataclasses.dataclass(frozen=True)
class FeaturePlan:
    """The resolved features of one build: what to read, construct and process."""

    manifest: object
    primaries: list
    secondaries: list
    steps: list
    padding: dict | None

    def construct(self, element):
        element = dict(element)
        for constant in self.secondaries:
            element[constant.to_name] = constant.make(element)
        for i, step in enumerate(self.steps):
            step.apply(element, f"processing_steps[{i}]")
        return element


def plan_features(config, manifest, input_names, output_names, source):
    """The `FeaturePlan` of a loader configuration for a model's input and
    output names: every input has a feature, every `to_name` is unique and
    used (errors name `source`, the configuration)."""

    def at(key):
        return f"{source}: {key}"

    primaries = parse_primaries(
        config["primary_features"], manifest, at("primary_features")
    )
    primary_names = [p.to_name for p in primaries]
    secondaries = parse_secondaries(
        config["secondary_features"], primary_names, at("secondary_features")
    )
    names = primary_names + [s.to_name for s in secondaries]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{source}: to_name {duplicates} is used more than once.")
    missing = [n for n in input_names if n not in names]
    if missing:
        raise ValueError(
            f"{source}: model input(s) {missing} are satisfied by no primary "
            f"or secondary feature (to_names: {names})."
        )
    unused = [n for n in names if n not in input_names and n not in output_names]
    if unused:
        raise ValueError(
            f"{source}: feature(s) {unused} are constructed but the model does "
            f"not use them (inputs {list(input_names)}, outputs {list(output_names)})."
        )
    steps = parse_steps(config["processing_steps"], set(names), at("processing_steps"))
    padding = parse_padding(config["padding"], names, at("padding"))
    return FeaturePlan(manifest, primaries, secondaries, steps, padding)


def _items(config, where, required, allowed):
    """`(where, item)` for each object of a configuration list, its keys
    checked."""
    for i, item in enumerate(object_list(config, where)):
        at = f"{where}[{i}]"
        check_keys(item, required, allowed, at)
        yield at, item


def _args(item, required, allowed, at):
    """The item's `args` object (empty when left out), its keys checked."""
    args = item.get("args", {})
    check_keys(args, required, allowed, f"{at}.args")
    return args


def _check_type(item, types, at):
    if item["type"] not in types:
        raise ValueError(f"{at}.type must be one of {types}, got {item['type']!r}.")


def _tensor(item, names, at):
    """The item's `tensor`, one of `names`."""
    tensor = string(item["tensor"], f"{at}.tensor")
    if tensor not in names:
        raise ValueError(
            f"{at}.tensor: no tensor {tensor!r}; tensors are {sorted(names)}."
        )
    return tensor


def _constant_shape(shape, primary_names, where):
    if isinstance(shape, str):
        if shape not in primary_names:
            raise ValueError(
                f"{where}: {shape!r} names no primary feature; primaries are "
                f"{sorted(primary_names)}."
            )
        return shape
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise ValueError(
            f"{where} must be a list of non-negative ints or a primary feature's "
            f"name, got {shape!r}."
        )
    return tuple(shape)


def _constant_dtype(dtype, primary_names, where):
    dtype = string(dtype, where)
    if dtype in primary_names:
        return dtype
    try:
        tf.as_dtype(dtype)
    except TypeError as error:
        raise ValueError(
            f"{where}: {dtype!r} is neither a TensorFlow dtype nor a primary "
            f"feature ({sorted(primary_names)})."
        ) from error
    return dtype
