"""The components of a stream's elements: what `StreamBucketBuilder` pads,
stacks and names.

An element is `x`, `(x, y)` or `(x, y, sample_weight)`, each one array or a
dict of arrays. Its components are read from a `tf.data` dataset's
`element_spec` (`kerasbatch.engines.tf_data.stream_rows.elements_of_spec`:
a first dimension of None marks a sequence) or from the first element of a Grain dataset or a Python iterable
(`StreamElements.of_element`: an array with a first axis is a sequence,
unless named per-example). Both engines then flatten, check and pack the
elements by the same description, in `tf.nest` order (dict keys sorted).
"""

import dataclasses

import numpy as np

from kerasbatch.data import sources


@dataclasses.dataclass(frozen=True)
class Component:
    """One component of every element.

    Attributes:
        name: the name it is padded and reported under
            (`kerasbatch.data.sources.component_name`).
        role: `"x"`, `"y"` or `"sample_weight"`.
        key: its dict key inside the role, or None.
        dtype: its numpy dtype.
        shape: its shape in one element; a sequence's first axis is None.
    """

    name: str
    role: str
    key: str | None
    dtype: np.dtype
    shape: tuple

    @property
    def is_sequence(self):
        return len(self.shape) >= 1 and self.shape[0] is None

    @property
    def trailing(self):
        """The shape after the first (sequence or batch) axis."""
        return self.shape[1:]

    @property
    def where(self):
        """How a user names it in an error message: `x`, `y['b']`."""
        return self.role if self.key is None else f"{self.role}[{self.key!r}]"


class StreamElements:
    """The components of a stream's elements, in `tf.nest` order.

    Args:
        components: the `Component`s, role by role, dict keys sorted.
        keys: per role, the sorted dict keys, or None where the role is one
            array.
        is_tuple: whether elements are tuples `(x, ...)` rather than x alone.
    """

    def __init__(self, components, keys, is_tuple):
        self.components = list(components)
        self.keys = list(keys)
        self.is_tuple = is_tuple
        self.names = [c.name for c in self.components]
        self.roles = [c.role for c in self.components]
        self.sequence_positions = [
            i for i, c in enumerate(self.components) if c.is_sequence
        ]
        self.sequence_names = [self.names[i] for i in self.sequence_positions]
        self.sequence_roles = {self.roles[i] for i in self.sequence_positions}
        seen = {}
        for component in self.components:
            sources.check_dtype(component.dtype, component.where)
            if component.name in seen:
                raise ValueError(
                    f"{component.where} and {seen[component.name]} share the "
                    f"name {component.name!r}; rename one of them."
                )
            seen[component.name] = component.where
        if not self.sequence_positions:
            raise ValueError(
                "The elements have no sequence component (an array with a "
                "variable first axis): "
                f"{', '.join(f'{c.where} {c.shape}' for c in self.components)}."
                " Give sequences a variable first axis, or use a builder for "
                "fixed-length data."
            )

    # --------------------------------------------------------- from an element
    @classmethod
    def of_element(cls, element, per_example=()):
        """The components of a stream's first element (numpy engines): an
        array with at least one axis is a sequence (its first axis varies),
        unless its name is in `per_example`; a scalar is per-example."""
        per_example = set(per_example)

        def component(role, key, value):
            where = role if key is None else f"{role}[{key!r}]"
            array = _as_array(value, where, 0)
            name = sources.component_name(role, key)
            shape = array.shape
            if array.ndim and name not in per_example:
                shape = (None, *shape[1:])
            per_example.discard(name)
            return Component(name, role, key, array.dtype, tuple(shape))

        elements = cls.of_roles(element, component, "source")
        if per_example:
            raise ValueError(
                f"per_example names {sorted(per_example)}, which are not "
                f"components of the elements: {elements.names}."
            )
        return elements

    @classmethod
    def of_roles(cls, element, component, what):
        """The components of `element` (an element, or a dataset's
        `element_spec`): `component(role, key, leaf)` makes each; `what`
        names the element's source in messages."""
        if isinstance(element, tuple):
            if not 1 <= len(element) <= 3:
                raise TypeError(
                    f"The {what}'s elements must be x, (x, y) or (x, y, "
                    f"sample_weight); got a tuple of {len(element)}: {element}."
                )
            roles = list(zip(sources.ROLES, element, strict=False))
        else:
            roles = [("x", element)]
        components, keys = [], []
        for role, part in roles:
            if isinstance(part, dict):
                keys.append(sorted(part))  # tf.nest order
                components += [component(role, key, part[key]) for key in keys[-1]]
            else:
                keys.append(None)
                components.append(component(role, None, part))
        return cls(components, keys, isinstance(element, tuple))

    def aligned(self):
        """`(reference, other, template)` of every pair of sequence
        components that must have equal lengths, as the in-memory builders
        check (`kerasbatch.data.sources`): per-frame targets follow a single x,
        per-frame weights their targets. `reference` and `other` are
        sequence columns; `template` is the error, formatted with the
        element's index and the other's length."""
        columns = {name: i for i, name in enumerate(self.sequence_names)}
        by_role = {}
        for component in self.components:
            by_role.setdefault(component.role, []).append(component)
        targets = by_role.get("y", [])
        pairs = []
        for weight in by_role.get("sample_weight", []):
            target = next((y for y in targets if y.key == weight.key), None)
            if target is None and len(targets) == 1:
                target = targets[0]
            if target is not None:
                pairs.append((target, weight))
        inputs = by_role.get("x", [])
        if len(inputs) == 1:
            pairs += [(inputs[0], target) for target in targets]
        return [
            (
                columns[reference.name],
                columns[other.name],
                f"{other.where} of element {{}} has length {{}}, not the "
                f"length of its {reference.where}: aligned sequences (per-frame "
                "targets and weights) need equal lengths.",
            )
            for reference, other in pairs
            if reference.is_sequence and other.is_sequence
        ]

    # ----------------------------------------------------------------- numpy
    def flatten(self, element, index):
        """The numpy arrays of `element` (the `index`-th of the stream), in
        component order; an element of another structure, dtype or shape
        than the first is a ValueError that names it."""
        parts = element if self.is_tuple else (element,)
        if not isinstance(parts, tuple) or len(parts) != len(self.keys):
            raise ValueError(
                f"Element {index} of the source is {_structure(element)}, but "
                f"the first element is {self._structure()}: every element "
                "must have the first one's structure."
            )
        flat = []
        for role, part, keys in zip(sources.ROLES, parts, self.keys, strict=False):
            if keys is None:
                if isinstance(part, dict):
                    raise ValueError(
                        f"Element {index} of the source has a dict as {role}, "
                        f"but the first element has one array there."
                    )
                flat.append(part)
            elif not isinstance(part, dict) or sorted(part) != keys:
                raise ValueError(
                    f"Element {index} of the source has {role} "
                    f"{_structure(part)}, but the first element has a dict "
                    f"with the keys {keys}."
                )
            else:
                flat += [part[key] for key in keys]
        arrays = []
        for component, value in zip(self.components, flat, strict=True):
            array = _as_array(value, component.where, index)
            if array.dtype != component.dtype:
                raise ValueError(
                    f"Element {index} of the source has {component.where} of "
                    f"dtype {array.dtype}, but the first element's is "
                    f"{component.dtype}: give every element the same dtypes."
                )
            shape = array.shape
            if component.is_sequence and array.ndim:
                shape = (None, *shape[1:])
            if shape != component.shape:
                raise ValueError(
                    f"Element {index} of the source has {component.where} of "
                    f"shape {array.shape}, but the first element's is "
                    f"{_shown(component.shape)}: only a sequence's first axis "
                    "may vary."
                )
            arrays.append(array)
        return arrays

    def _structure(self):
        parts = [
            "an array" if keys is None else f"a dict with the keys {keys}"
            for keys in self.keys
        ]
        if not self.is_tuple:
            return parts[0]
        return f"a tuple of {len(parts)} ({', '.join(parts)})"

    # ------------------------------------------------------------------ both
    def pack(self, flat):
        """`flat` (one value per component) in the elements' structure."""
        flat = iter(flat)
        parts = [
            next(flat) if keys is None else {key: next(flat) for key in keys}
            for keys in self.keys
        ]
        return tuple(parts) if self.is_tuple else parts[0]


def _as_array(value, where, index):
    """`value` as a numpy array, or a ValueError that names the element."""
    if isinstance(value, dict | tuple | list) and not _is_flat_list(value):
        raise ValueError(
            f"Element {index} of the source has {where} {_structure(value)}; "
            "each of x, y and sample_weight is one array or a dict of arrays."
        )
    if sources.is_sparse(value):
        raise TypeError(
            f"Element {index} of the source has a sparse {where}; pass dense arrays."
        )
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"Element {index} of the source has {where} that is no array: {error}"
        ) from None


def _is_flat_list(value):
    """A list of numbers (one sequence), not a nested structure."""
    return isinstance(value, list) and all(
        isinstance(item, int | float | np.number | list) for item in value
    )


def _structure(value):
    if isinstance(value, dict):
        return f"a dict with the keys {sorted(value)}"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    return f"a {type(value).__name__}"


def _shown(shape):
    return "(" + ", ".join("None" if d is None else str(d) for d in shape) + ")"
