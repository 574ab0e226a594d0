"""What both engines' batch functions of packed rows share: the data and
settings they read, and the batch element made from the packed components
(x with segment ids and positions, targets and their weights per token or
per slot).
"""

from kerasbatch.data import sources


class PackedRowsSettings:
    """What both batch functions of packed rows read: the data and settings."""

    def __init__(self, built):
        prepared = built.prepared
        settings = built.settings
        data = prepared.data
        self.components = data.components
        self.structure = data.structure
        self.paddings = prepared.paddings
        self.sequence_length = settings.sequence_length
        self.max_segments = settings.resolved_max_segments
        self.normalize_segments = settings.normalize_segments
        self.segment_ids_name = settings.segment_ids_name
        self.positions_name = settings.positions_name
        self.model_inputs = settings.model_inputs
        #: The x entry the model inputs follow (mask, shifted targets).
        self.tokens_name = next(
            c.name for c in self.components if c.role == "x" and c.is_sequence
        )
        if self.model_inputs is not None and self.model_inputs.mask_of:
            self.tokens_name = self.model_inputs.mask_of
        #: Where every element's tokens start, and how many are kept.
        self.starts = data.sequence_components[0].row_splits[:-1]
        self.lengths = prepared.cut_lengths

    def pack(self, gather, to_rows, to_slots, token_index, indices):
        """Every component packed: a sequence's tokens (`gather(component,
        token_index)`) into rows, a per-element value (`gather(component,
        indices)`) into slots, each padded with its padding value."""
        packed = {}
        for component in self.components:
            value = self.paddings[component.name].value
            if component.is_sequence:
                packed[component.name] = to_rows(gather(component, token_index), value)
            else:
                packed[component.name] = to_slots(gather(component, indices), value)
        return packed

    def element(
        self,
        packed,
        to_rows,
        to_slots,
        *,
        ids,
        token_weights,
        slot_weights,
        tokens_of,
        broadcast,
        ops,
    ):
        """The batch element from its packed components, for both batch
        functions (each gives its own ops): x with the `(segment ids,
        positions)` of `ids`, and every target's weights (per token or
        per slot, times any given `sample_weight`; `tokens_of(given)`
        spreads a per-example weight over its sequence's tokens; `ops`:
        `kerasbatch.data.outputs`' graph or numpy ops)."""
        x = self.role("x", packed)
        if not isinstance(x, dict):
            x = {"x": x}
        segment_ids, positions = (to_rows(values) for values in ids)
        x[self.segment_ids_name], x[self.positions_name] = segment_ids, positions
        if self.model_inputs is not None:
            weights = None
            if self.model_inputs.shift_targets:
                weights = to_rows(token_weights, weights=True)
            x, y, weights = self.model_inputs.apply_packed(
                ops, x, self.tokens_name, segment_ids, weights
            )
            if y is not None:
                return x, y, weights
        if self.structure["y"] is None:
            return x
        weights = {}
        for target in self.components:
            if target.role != "y":
                continue
            if target.is_sequence:
                weight = to_rows(token_weights, weights=True)
            else:
                weight = to_slots(slot_weights, weights=True)
            given = self.weight_component(target)
            if given is None:
                pass
            elif given.is_sequence or not target.is_sequence:
                weight = weight * broadcast(packed[given.name], weight)
            else:  # a per-example weight on every token of its sequence
                weight = weight * broadcast(to_rows(tokens_of(given)), weight)
            weights[target.name] = weight
        for target in self.components:
            if (
                target.role == "y"
                and not target.is_sequence
                and target.values.ndim == 1
            ):
                packed[target.name] = packed[target.name][..., None]  # per slot
        y = self.role("y", packed)
        if self.structure["y"] == "single":
            return x, y, weights["y"]
        return x, y, {key: weights[key] for key in self.structure["y"]}

    def role(self, role, tensors):
        if self.structure[role] == "single":
            return tensors[role]
        return {c.key: tensors[c.name] for c in self.components if c.role == role}

    def weight_component(self, target):
        """The sample weight component of `target`, or None."""
        parts = self.structure["sample_weight"]
        if parts is None:
            return None
        if parts == "single":
            name = "sample_weight"
        else:
            name = sources.component_name("sample_weight", target.key)
        return next((c for c in self.components if c.name == name), None)
