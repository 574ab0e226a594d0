"""The seam where a plan becomes tensors: an epoch's batches, in-graph.

`GraphOrder(order, seed).batch_rows(epoch)` computes with TensorFlow ops exactly
the batches `kerasbatch.planning.orders.EpochOrder.batches` computes in NumPy (the
same hash, the same stable sorts), from constants fixed at `build` and the
epoch as a tensor. A built dataset therefore holds no Python callback: its
graph can be serialised (tf.data service, `tf.distribute`) and its iterator
checkpointed mid-epoch.

An epoch's tensors stay a small share of the data's memory: a large
order's units are sorted in chunks of groups and the batches' rows made in
slices (see `GraphOrder`), int32 where indices fit, and no index range over
its units is a constant that the graph's optimiser would fold into a tensor
as large as the units (`GraphPackedOrder` still hashes such ranges).
"""

import numpy as np

from kerasbatch.engines.tf_data import tensors
from kerasbatch.optional import tensorflow as tf
from kerasbatch.planning import orders


def mix64(z):
    """`kerasbatch.planning.orders.mix64` on a uint64 tensor."""
    z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, _u64(30))) * _u64(
        orders.MIX1
    )
    z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, _u64(27))) * _u64(
        orders.MIX2
    )
    return tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, _u64(31)))


def hash31(seed, epoch, stream, count):
    """`kerasbatch.planning.orders.hash31` with int64 tensors `epoch`, `count` and
    (or an int) `stream`."""
    return hash31_at(seed, epoch, stream, tf.range(tf.cast(count, tf.int64)))


def hash31_at(seed, epoch, stream, indices):
    """Values `indices` (an int tensor of indices) of `hash31(seed, epoch,
    stream, count)`: the hash of some indices, without the others."""
    key = mix64(_u64(seed)) ^ tf.cast(epoch, tf.uint64)
    stream = _u64(stream) if isinstance(stream, int) else tf.cast(stream, tf.uint64)
    key = mix64(key) ^ stream
    key = mix64(key)
    values = mix64(key ^ tf.cast(indices, tf.uint64))
    return tf.cast(tf.bitwise.right_shift(values, _u64(33)), tf.int64)


#: An epoch orders its units in chunks of whole groups, at most this many
#: chunks, each of at least `CHUNK_UNITS` units (one chunk below twice that):
#: the hash, keys and sort of a chunk are a small share of the units' memory.
MAX_CHUNKS = 16
CHUNK_UNITS = 2**16
#: `GraphOrder.slices`: the batches of an epoch are made in slices of about
#: this many positions (batches times the largest batch size).
SLICE_POSITIONS = 2**17


class GraphOrder:
    """An `EpochOrder` whose epochs are computed with TensorFlow ops.

    Its arrays become tensors once, when the pipeline is made (the units
    and groups share the order's memory), and the pipeline's functions
    capture them; each epoch then costs one hash, two stable sorts and one
    gather (about 2 ms for 20 000 elements).

    An epoch's memory stays a small share of the units': large orders sort
    their units chunk after chunk (`epoch`), and a pipeline can make the
    rows of the batches slice after slice (`slices`, `rows`) rather than
    all at once (`batch_rows`).

    Args:
        order: a `kerasbatch.planning.orders.EpochOrder`.
        seed: the builder's int seed.
        chunk_units: chunks sort at least this many units (`chunks`;
            default `CHUNK_UNITS`).
        slice_positions: slices hold about this many positions (`slices`;
            default `SLICE_POSITIONS`).
    """

    def __init__(self, order, seed, chunk_units=None, slice_positions=None):
        self.order = order
        self.seed = seed
        self.width = int(order.sizes.max(initial=1))
        slice_positions = slice_positions or SLICE_POSITIONS
        self.slice_batches = max(1, slice_positions // self.width)
        with tf.device("/CPU:0"):
            self.starts = tf.constant(order.starts, tf.int64)
            self.sizes = tf.constant(order.sizes, tf.int64)
            self.capacities = tf.constant(order.capacities, tf.int64)
            if order.shuffle_units:
                self.units = shared(order.units)
                self.groups = shared(order.groups)
                groups = order.groups
                self.one_group = not len(groups) or groups.min() == groups.max()
                self.chunk_units = chunk_units or CHUNK_UNITS
                self.chunks = tf.constant(
                    chunks(order.groups, chunk_units=self.chunk_units),
                    self.groups.dtype,
                )
            else:  # the same every epoch
                self.ordered = shared(orders.compact(order.ordered_units(seed, 0)))

    @property
    def slices(self):
        """How many slices of `slice_batches` batches an epoch has."""
        return -(-self.order.num_batches // self.slice_batches)

    def batch_rows(self, epoch):
        """The element indices of every batch of `epoch` (a scalar int64
        tensor): one vectorised computation per epoch (a sort of the units,
        a sort of the batches, one gather); `rows` of all of `epoch`.

        Returns:
            `(rows, sizes, capacities)`: `(num_batches, largest batch size)`
            indices of every batch in the epoch's order, padded with -1
            (int32 where the units fit, as `EpochOrder.units`, else int64);
            int64 `(num_batches,)` batch sizes, and the rows each batch is
            fed (`EpochOrder.capacities`).
        """
        return self.rows(*self.epoch(epoch))

    def epoch(self, epoch):
        """`(ordered, taken)` of `epoch` (a scalar int64 tensor): the units
        sorted by `(group, hash)`, in the units' dtype
        (`EpochOrder.ordered_units`), and the order of its batches
        (`EpochOrder.batch_order`).

        The units are sorted chunk after chunk of whole groups (`chunks`):
        a chunk takes the units of its groups in their order in `units`, so
        that its stable sort orders them as the stable sort of all units
        does, and only one chunk's hash, keys and sort are in memory.
        """
        order = self.order
        ordered = self._ordered_units(epoch) if order.shuffle_units else self.ordered
        taken = tf.range(order.num_batches, dtype=tf.int64)
        if order.shuffle_batches:
            keys = hash31(self.seed, epoch, orders.BATCH_STREAM, order.num_batches)
            taken = tf.argsort(keys, stable=True)
        return ordered, taken

    def rows(self, ordered, taken):
        """`batch_rows` of the batches `taken` (indices into the order's
        batches, e.g. a slice of `epoch`'s), given `ordered`."""
        starts = tf.gather(self.starts, taken)
        sizes = tf.gather(self.sizes, taken)
        capacities = tf.gather(self.capacities, taken)
        columns = tf.range(self.width, dtype=tf.int64)
        positions = tf.minimum(starts[:, None] + columns, len(self.order.units) - 1)
        valid = columns < sizes[:, None]
        missing = tf.constant(-1, ordered.dtype)
        rows = tf.where(valid, tf.gather(ordered, positions), missing)
        return rows, sizes, capacities

    def _ordered_units(self, epoch):
        num_chunks = int(self.chunks.shape[0])
        if len(self.order.units) < 2 * self.chunk_units:
            # Small: one sort, the hash of a range (a constant the graph's
            # optimiser may fold, of a few hundred KB at most).
            keys = tf.cast(self.groups, tf.int64) * orders.MAX_GROUP + hash31(
                self.seed, epoch, orders.UNIT_STREAM, len(self.order.units)
            )
            return tf.gather(self.units, tf.argsort(keys, stable=True))
        if num_chunks == 1:
            return self._chunk(epoch, self.chunks[0, 0], self.chunks[0, 1])

        def body(index, ordered):
            units = self._chunk(epoch, self.chunks[index, 0], self.chunks[index, 1])
            return index + 1, ordered.write(index, units)

        ordered = tf.TensorArray(
            self.units.dtype, size=num_chunks, infer_shape=False, element_shape=[None]
        )
        _, ordered = tf.while_loop(
            lambda index, _: index < num_chunks,
            body,
            (tf.constant(0), ordered),
            parallel_iterations=1,
        )
        return ordered.concat()

    def _chunk(self, epoch, first, last):
        """The units of groups `first` to `last` (keys), sorted by `(group,
        hash)`. Their positions come from the data (`tf.where`), never from a
        range the graph could fold into a constant as large as the units."""
        inside = tf.logical_and(self.groups >= first, self.groups <= last)
        positions = tf.where(inside)[:, 0]
        keys = hash31_at(self.seed, epoch, orders.UNIT_STREAM, positions)
        if not self.one_group:
            groups = tf.cast(tf.gather(self.groups, positions) - first, tf.int64)
            keys = groups * orders.MAX_GROUP + keys
        else:  # one group: the hash alone, in int32
            keys = tf.cast(keys, tf.int32)
        sorted_positions = tf.gather(positions, tf.argsort(keys, stable=True))
        return tf.gather(self.units, sorted_positions)


def shared(array):
    """A CPU tensor of `array`, an array kerasbatch made and never writes
    again: its very memory where TensorFlow can read it in place (64-byte
    aligned, as `orders.compact` makes them), else a copy."""
    return tensors.as_tensor(array, owned=array.flags.writeable)


def chunks(groups, max_chunks=MAX_CHUNKS, chunk_units=CHUNK_UNITS):
    """`(first, last)` group keys of every chunk `GraphOrder` sorts: runs of
    whole groups, in key order, with about equally many units.

    Args:
        groups: the group key of every unit (`EpochOrder.groups`).

    Returns:
        int64 `(chunks, 2)`: at most `max_chunks` rows, about
        `len(groups) / chunk_units` and at least one (`(0, 0)`: no units).

    Example:

    >>> import numpy as np
    >>> chunks(np.array([3, 0, 0, 7, 3, 7]), max_chunks=3, chunk_units=2).tolist()
    [[0, 0], [3, 3], [7, 7]]
    """
    if not len(groups):
        return np.zeros((1, 2), np.int64)
    count = min(max_chunks, len(groups) // chunk_units)
    if count <= 1:
        return np.array([[groups.min(), groups.max()]], np.int64)
    if groups.max() < 2 * len(groups):  # small keys: counted without a sort
        counts = np.bincount(groups)
        keys = np.flatnonzero(counts)
        counts = counts[keys]
    else:
        keys, counts = np.unique(groups, return_counts=True)
    # A group goes to the chunk where its first unit falls.
    chunk_of = (np.cumsum(counts) - counts) * count // len(groups)
    firsts = np.flatnonzero(np.diff(chunk_of, prepend=-1))
    lasts = np.append(firsts[1:] - 1, len(keys) - 1)
    return np.stack([keys[firsts], keys[lasts]], axis=1).astype(np.int64)


class GraphPackedOrder:
    """A `kerasbatch.planning.orders.PackedOrder` whose epochs are computed in-graph
    (as `GraphOrder`, from tensors made once).

    Args:
        order: a `kerasbatch.planning.orders.PackedOrder`.
        seed: the builder's int seed.
    """

    def __init__(self, order, seed):
        self.order = order
        self.seed = seed
        self.rows = GraphOrder(order.rows, seed)
        with tf.device("/CPU:0"):
            self.candidates = tf.constant(order.candidates, tf.int64)
            self.length_keys = tf.constant(order.length_keys())
            self.slot_ranks = tf.constant(order.slot_ranks, tf.int64)
            self.row_keys = tf.constant(order.row_of_slot * orders.MAX_GROUP)
            self.row_splits = tf.constant(order.row_splits, tf.int64)

    def batch_rows(self, epoch):
        """Every batch of `epoch` (a scalar int64 tensor) as `(elements,
        segments, num_rows, capacities)`: int64 `(num_batches, most elements)` element
        indices row after row (padded past the batch's own), int64
        `(num_batches, batch_size)` sequences per row (0 past the batch's
        rows), int64 `(num_batches,)` rows per batch, and the rows each
        batch is fed (filler rows included)."""
        keys = self.length_keys
        if self.order.shuffle:
            keys = keys + hash31(
                self.seed, epoch, orders.UNIT_STREAM, len(self.order.candidates)
            )
        by_length = tf.gather(self.candidates, tf.argsort(keys, stable=True))
        elements = tf.gather(by_length, self.slot_ranks)
        if self.order.shuffle:
            keys = self.row_keys + hash31(
                self.seed, epoch, orders.SLOT_STREAM, len(self.order.slot_ranks)
            )
            elements = tf.gather(elements, tf.argsort(keys, stable=True))
        rows, num_rows, capacities = self.rows.batch_rows(epoch)
        packed = tf.RaggedTensor.from_row_splits(
            elements, self.row_splits, validate=False
        )
        batch_elements = tf.gather(packed, tf.maximum(rows, 0)).merge_dims(1, 2)
        segments = tf.where(
            rows >= 0, tf.gather(packed.row_lengths(), tf.maximum(rows, 0)), 0
        )
        return batch_elements.to_tensor(-1), segments, num_rows, capacities


def _u64(value):
    return tf.constant(int(value), tf.uint64)
