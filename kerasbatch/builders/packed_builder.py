"""Packed rows: several sequences per fixed-length row, with segment ids."""

from __future__ import annotations

import functools

import keras
import numpy as np

from kerasbatch import checks
from kerasbatch.builders.planned_builder import PlannedBuilder
from kerasbatch.data import model_inputs as model_inputs_lib
from kerasbatch.data import sources
from kerasbatch.planning import batching

#: The default names of the inputs x gains: no keras-hub model takes them
#: (a BERT's `segment_ids` are token types, 0 or 1, not packed segments).
SEGMENT_IDS = "packed_segment_ids"
POSITIONS = "positions"


@keras.saving.register_keras_serializable(package="kerasbatch")
class PackedBuilder(PlannedBuilder):
    """Rows of `sequence_length` positions, each packed with several sequences.

    The sequences are packed into rows by best-fit decreasing
    (`kerasbatch.planning.packing.pack`) once, at `build`: almost no position is
    padding. The rows are
    cut into batches of `batch_size` rows, all padded to `sequence_length`,
    so the model sees one shape (two with a smaller last batch). Which
    sequences share a row (among those of equal length), their order in the
    row and the order of the rows are reshuffled every epoch, in the
    `tf.data` graph, from `(seed, epoch)` (`kerasbatch.planning.orders.PackedOrder`);
    the number of rows is the same every epoch.

    A model tells the packed sequences apart by two int32 inputs of shape
    `(batch, sequence_length)` that x gains: `"packed_segment_ids"` (1, 2,
    ... for the sequences of a row, in row order; 0 for padding) and
    `"positions"` (0..n-1 within each sequence; 0 for padding); their names
    are settings. Give attention layers
    the mask of `kerasbatch.layers.SegmentAttentionMask`, and position
    embeddings `positions`: a packed sequence is then processed exactly as
    if it were alone.

    Sequence components (tokens, per-token targets, per-token weights) are
    packed into `(batch, sequence_length, *trailing)`; every sequence
    component of an element must be equally long. Per-example components
    (e.g. a class label) become per-segment arrays of shape `(batch,
    max_segments, *shape)`: slot k of a row belongs to segment id k + 1 (pool
    token features with `kerasbatch.layers.SegmentPooling`). A scalar
    per-example target (a label, a value) becomes `(batch, max_segments,
    1)`, the shape of the predictions of `SegmentPooling` and a `Dense`
    layer: Keras' losses (which average the last axis, and squeeze a last
    axis of 1) then give one loss per slot as they come. Keep the
    predictions `(batch, max_segments, units)`: predictions without the
    last axis would have every Keras loss average over the slots.

    With targets y, the batches carry sample weights: per-token targets
    weigh 1 on real tokens and 0 on padding, per-example targets 1 on the
    row's real segment slots and 0 on empty ones (`(batch, max_segments)`),
    times any `sample_weight` given. Compile the loss with
    `reduction="mean_with_sample_weight"` to average over real tokens or
    segments (Keras' default divides by all positions).

    The per-segment axis has one size for every dataset of a builder, so
    that one model takes them all (train and validation data, say): unless
    `max_segments_per_row` is given, the first `build` (or `adapt`) resolves
    it from its data (`resolved_max_segments`), and later builds pack at
    most that many sequences into a row.

    Args:
        sequence_length: positions per packed row, a positive int.
        batch_size: rows per batch.
        max_segments_per_row: the most sequences a row may hold, which is
            also the size of the per-segment axis. None: the most the packing
            of the first `build` puts in a row (the same every epoch, and
            the limit of later builds; `resolved_max_segments`).
        normalize_segments: per-token sample weights of `1 / length` on the
            tokens of each sequence, so every sequence weighs the same in the
            loss whatever its length (default: every token weighs 1).
        shuffle: reshuffle the packing and the rows every epoch. Without it,
            rows hold their sequences longest first, in creation order.
        seed: int seed; epoch k's rows depend only on `(seed, k)`. None
            draws one at construction.
        drop_remainder: drop the last batch when it has fewer rows than
            `batch_size`; its elements count in `statistics().dropped`.
        remainder: the last batch when it has fewer rows: `"keep"`,
            `"drop"` (as `drop_remainder`), `"pad"` (filled to
            `batch_size` rows with copies of the batch's first row, whose
            sample weights are 0: a row of padding alone would be NaN in
            attention and normalisation) or `"even"`
            (the rows cut into equal batches of at most `batch_size`, fewer
            than one padding row per batch): every batch then has one
            shape.
        padding: the padding values: None (0), a `kerasbatch.Padding` or
            config dict for all components, or a dict of them by component
            name (`"x"`, `"y"`, `"sample_weight"` or dict keys; per-example
            components pad their empty segment slots with it). Rows are
            always `sequence_length` long, so a length, if given, must be
            `sequence_length`.
        max_length: the longest element allowed (at most, and by default,
            `sequence_length`).
        overflow: what happens to elements longer than `max_length`:
            `"error"` (raise, naming the element and its length),
            `"truncate"` (cut to `max_length`) or `"drop"` (leave out);
            truncated and dropped elements are counted in `statistics()`.
        batch_multiple, pad_to_multiple: as in `kerasbatch.builders.Builder`.
        prefetch: batches to prefetch: `"auto"`, an int, or 0 / None.
        segment_ids_name, positions_name: the names of the segment ids and
            positions in x. An x component or a `model_inputs` input of the
            same name is refused.
        model_inputs: a `kerasbatch.ModelInputs`: renamed inputs, a padding
            mask (the real positions of the rows), constants, and next-token
            targets shifted within each packed sequence.

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> x = [np.full(n, i + 1) for i, n in enumerate([5, 3, 2, 7, 1])]
    >>> builder = kerasbatch.PackedBuilder(8, batch_size=3, shuffle=False)
    >>> dataset = builder.build(x, y=np.array([10, 11, 12, 13, 14]))
    >>> inputs, labels, weights = next(iter(dataset))
    >>> inputs["x"].numpy()
    array([[4, 4, 4, 4, 4, 4, 4, 5],
           [1, 1, 1, 1, 1, 2, 2, 2],
           [3, 3, 0, 0, 0, 0, 0, 0]])
    >>> inputs["packed_segment_ids"].numpy()
    array([[1, 1, 1, 1, 1, 1, 1, 2],
           [1, 1, 1, 1, 1, 2, 2, 2],
           [1, 1, 0, 0, 0, 0, 0, 0]], dtype=int32)
    >>> inputs["positions"].numpy()[1]
    array([0, 1, 2, 3, 4, 0, 1, 2], dtype=int32)
    >>> labels.numpy()[..., 0], labels.shape  # (batch, max_segments, 1)
    (array([[13, 14],
           [10, 11],
           [12,  0]]), TensorShape([3, 2, 1]))
    >>> weights.numpy()
    array([[1., 1.],
           [1., 1.],
           [1., 0.]], dtype=float32)
    >>> print(builder.statistics())
    1 batches of 5 elements: padding efficiency 0.750 (x=0.750), 1 distinct shapes, 0 dropped, 0 truncated (0 positions)
    >>> kerasbatch.PackedBuilder.from_config(builder.get_config()) == builder
    True
    """

    batches = "packed"

    def __init__(
        self,
        sequence_length,
        batch_size=32,
        max_segments_per_row=None,
        normalize_segments=False,
        *,
        max_length=None,
        segment_ids_name=SEGMENT_IDS,
        positions_name=POSITIONS,
        **settings,
    ):
        if sequence_length is None:
            raise ValueError("sequence_length must be a positive int, got None.")
        self.sequence_length = checks.optional_positive_int(
            sequence_length, "sequence_length"
        )
        if batch_size is None:
            raise ValueError("batch_size must be a positive int, got None.")
        self.batch_size = checks.optional_positive_int(batch_size, "batch_size")
        self.max_segments_per_row = checks.optional_positive_int(
            max_segments_per_row, "max_segments_per_row"
        )
        self.normalize_segments = checks.checked_bool(
            normalize_segments, "normalize_segments"
        )
        if max_length is None:
            max_length = self.sequence_length
        super().__init__(max_length=max_length, **settings)
        self.segment_ids_name = _input_name(segment_ids_name, "segment_ids_name")
        self.positions_name = _input_name(positions_name, "positions_name")
        if self.segment_ids_name == self.positions_name:
            raise ValueError(
                "segment_ids_name and positions_name are both "
                f"{self.positions_name!r}: give them different names."
            )
        if self.sequence_length % self.pad_to_multiple:
            raise ValueError(
                f"Packed rows are sequence_length={self.sequence_length} long, "
                f"which is not a multiple of pad_to_multiple="
                f"{self.pad_to_multiple}: give a sequence_length that is."
            )
        if self.max_length > self.sequence_length:
            raise ValueError(
                f"max_length={self.max_length} is longer than the packed rows "
                f"(sequence_length={self.sequence_length})."
            )
        self.resolved_max_segments = None

    def get_config(self):
        """The constructor arguments, JSON-serialisable."""
        return {
            "sequence_length": self.sequence_length,
            "batch_size": self.batch_size,
            "max_segments_per_row": self.max_segments_per_row,
            "normalize_segments": self.normalize_segments,
            **self._shared_config(),
            "segment_ids_name": self.segment_ids_name,
            "positions_name": self.positions_name,
        }

    def _attach(self, data):
        self._check_filler_weights(
            data.structure["y"] is not None or self._makes_targets, data.lengths_only
        )
        _check_aligned(data)
        _check_weight_targets(data)
        self._check_packed_names(data)
        names = [c.name for c in data.components]
        paddings = self._resolve_paddings(data, names, "batch")
        for name, padding in paddings.items():
            if padding.length not in ("batch", self.sequence_length):
                raise ValueError(
                    f"padding[{name!r}] has length {padding.length!r}, but packed "
                    f"rows are always sequence_length={self.sequence_length} long; "
                    "give only a padding value."
                )
        lengths = data.element_lengths()
        self._check_fits(lengths)
        prepared = self._overflowed(
            data,
            lengths,
            {c.name: c.lengths for c in data.sequence_components},
            paddings,
        )
        candidates = prepared.candidates
        kept = prepared.cut_lengths
        if len(candidates) < len(kept):  # else every element, in order: no copy
            kept = kept[candidates]
        # The rows formed do not depend on the epoch (only who fills them).
        # One per-segment width for every build: that of the first.
        max_segments = self.max_segments_per_row or self.resolved_max_segments
        order = batching.packed_order(
            candidates,
            kept,
            self.sequence_length,
            self.batch_size,
            self.remainder,
            self.shuffle,
            max_segments,
        )
        segments_per_row = np.diff(order.row_splits)
        if self.drop_remainder and len(segments_per_row) < self.batch_size:
            raise ValueError(
                f"No batch left: the data packs into {len(segments_per_row)} rows, "
                f"fewer than batch_size={self.batch_size}, and drop_remainder=True."
            )
        self._bind(prepared, order)
        self.resolved_max_segments = max_segments or int(segments_per_row.max())

    def _check_packed_names(self, data):
        """Raises where the segment ids' or positions' name is taken: by a
        component of x, or by an input `model_inputs` makes."""
        if data.lengths_only:
            return
        x_keys, sequence_names = model_inputs_lib.component_names(data)
        taken = {name: "x has a component" for name in x_keys or ()}
        if self.model_inputs is not None:
            inputs = self.model_inputs
            for name in [*inputs.names.values(), *inputs.constants]:
                taken[name] = "model_inputs makes an input"
            if inputs.padding_mask is not None:
                taken[inputs.padding_mask] = "model_inputs makes an input"
        for setting in ("segment_ids_name", "positions_name"):
            name = getattr(self, setting)
            if name in taken:
                bert = " (a BERT's 'segment_ids' are token types, not segments)"
                raise ValueError(
                    f"PackedBuilder adds {setting}={name!r} to x, but "
                    f"{taken[name]} named {name!r} too: give {setting} another "
                    f"name{bert if name == 'segment_ids' else ''}."
                )
        has_targets = data.structure["y"] is not None
        self._check_model_inputs(
            x_keys,
            sequence_names,
            has_targets,
            {c.name: c.lengths for c in data.sequence_components},
        )

    def _check_fits(self, lengths):
        """The `"error"` overflow policy, in the words of packing."""
        if self.overflow != "error":
            return
        too_long = lengths > self.max_length
        if too_long.any():
            first = int(np.argmax(too_long))
            raise ValueError(
                f"Element {first} has length {lengths[first]}, longer than a "
                f"packed row allows (max_length={self.max_length}, "
                f"sequence_length={self.sequence_length}); {too_long.sum()} "
                "elements are. Set overflow='truncate' or overflow='drop', or "
                "raise sequence_length."
            )

    def _planner(self):
        prepared = self._prepared
        return functools.partial(
            batching.packed_plan,
            self._order,
            self.seed,
            sequence_length=self.sequence_length,
            lengths=prepared.lengths,
            cut_lengths=prepared.cut_lengths,
            component_names=[c.name for c in prepared.data.sequence_components],
            dropped=prepared.policy_dropped,
            batch_multiple=self.batch_multiple,
        )


def _input_name(name, setting):
    if not (isinstance(name, str) and name):
        raise ValueError(f"{setting} must be a non-empty str, got {name!r}.")
    return name


def _check_aligned(data):
    """Every sequence component of an element fills the same positions."""
    first, *others = data.sequence_components
    for other in others:
        sources.check_same_lengths(
            first,
            other,
            "PackedBuilder packs every sequence component of an element into "
            "the same positions, so they need equal lengths",
        )


def _check_weight_targets(data):
    """Per-token weights need per-token targets."""
    targets = data.role_components("y")
    for weight in data.role_components("sample_weight"):
        if not weight.is_sequence:
            continue
        matching = [t for t in targets if t.key == weight.key] or targets
        for target in matching:
            if not target.is_sequence:
                raise ValueError(
                    f"{weight.where} is per-token but its target {target.where} "
                    "is per-example (a per-segment slot after packing); give "
                    "per-example weights."
                )
