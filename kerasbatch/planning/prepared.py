"""What a build resolves from its data before planning: one frozen value.

`build` (and `adapt`) turn the data and the builder's settings into a
`Prepared` value: every element's lengths, what the overflow policy left and
cut, the resolved paddings and the per-element cut limits and bucket bounds.
Every plan is a pure function of that value, the builder's
`kerasbatch.planning.orders.EpochOrder` (made from it), the seed and the epoch.
Builders that resolve more (buckets, chunks, windows) extend it with a frozen
subclass of their own; nothing changes a `Prepared` value once made (its
arrays are read-only), so a built dataset's plans cannot drift from its data.
"""

import dataclasses
import types

import numpy as np


@dataclasses.dataclass(frozen=True, kw_only=True)
class Prepared:
    """The data of one build and what planning resolved from it.

    Attributes:
        data: the `kerasbatch.data.sources.SequenceData` (lengths only after
            `adapt`).
        lengths: int64 length of every planned element (its longest
            sequence component).
        cut_lengths: `lengths` after the overflow policy.
        candidates: indices of the elements that batches may hold (int32
            where they fit).
        policy_dropped: elements a policy left out (overflow `"drop"`, or a
            builder's own, e.g. chunks shorter than `min_chunk_size`).
        paddings: `{sequence component name: kerasbatch.Padding}`, resolved.
        component_lengths: `{sequence component name: int64 length of every
            planned element}`.
        element_limits: int64 cut length of every element
            (`kerasbatch.planning.plan.NO_LIMIT`: none).
        element_bounds: int bucket padding bound of every element, or None.
    """

    data: object
    lengths: np.ndarray
    cut_lengths: np.ndarray
    candidates: np.ndarray
    policy_dropped: int
    paddings: types.MappingProxyType
    component_lengths: types.MappingProxyType
    element_limits: np.ndarray
    element_bounds: np.ndarray | None = None

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, np.ndarray):
                value = _read_only(value)
            elif isinstance(value, dict):
                value = types.MappingProxyType(
                    {
                        key: _read_only(item) if isinstance(item, np.ndarray) else item
                        for key, item in value.items()
                    }
                )
            object.__setattr__(self, field.name, value)

    def replace(self, **changes):
        """A copy with `changes` (field name → value)."""
        return dataclasses.replace(self, **changes)

    def extended(self, prepared_type, **fields):
        """This value as a `prepared_type` (a subclass), with `fields` (the
        subclass's own, and changes to this value's)."""
        own = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return prepared_type(**{**own, **fields})


def _read_only(array):
    """`array` if read-only, else a read-only view of it (no copy)."""
    if not array.flags.writeable:
        return array
    view = array.view()
    view.flags.writeable = False
    return view
