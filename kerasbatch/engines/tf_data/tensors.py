"""The data's components as tensors: made once, and shared by every pipeline
of the data (the built dataset, its `distribute` and
`distribute_with_service` variants)."""

import weakref

from kerasbatch.data import sparse_components
from kerasbatch.optional import tensorflow as tf
from kerasbatch.planning import orders

#: Component -> its tensors, for as long as the component lives.
_TENSORS = weakref.WeakKeyDictionary()


def component_tensor(component):
    """The tensors of `component` (a `kerasbatch.data.sources.Component` or
    `kerasbatch.data.sparse_components.SparseComponent`).

    A sequence component is a `tf.RaggedTensor`, a per-example one a
    `tf.Tensor`; a sparse one is `(entries (n, None, rank), values (n,
    None), shapes (n, rank))`.
    """
    if component not in _TENSORS:
        _TENSORS[component] = _make(component)
    return _TENSORS[component]


def _make(component):
    if component.reads_by_index:
        raise TypeError(
            f"{component.where} is read by index from a source, which a graph "
            "cannot hold as a tensor: this pipeline reads it batch by batch, "
            "or not at all."
        )
    if isinstance(component, sparse_components.SparseComponent):
        return (
            tf.RaggedTensor.from_row_splits(component.indices, component.entry_splits),
            tf.RaggedTensor.from_row_splits(component.values, component.entry_splits),
            tf.constant(component.shapes),
        )
    if component.is_sequence:
        return tf.RaggedTensor.from_row_splits(
            as_tensor(component.values, component.owned),
            as_tensor(component.row_splits, component.owned),
            validate=False,
        )
    return as_tensor(component.values, component.owned)


def as_tensor(array, owned):
    """A tensor of `array`: the same memory (DLPack) when kerasbatch made the
    buffer (`owned`: no one else writes it) and TensorFlow can read it in
    place (C-contiguous, 64-byte aligned as
    `kerasbatch.planning.orders.aligned_empty` makes
    them, int or float), else a copy."""
    if (
        owned
        and array.flags.c_contiguous
        and array.dtype.kind in "iuf"
        and array.ctypes.data % orders.ALIGNMENT == 0
        and array.size
    ):
        return tf.experimental.dlpack.from_dlpack(array.__dlpack__())
    return tf.convert_to_tensor(array)
