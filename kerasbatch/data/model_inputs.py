"""The inputs a model expects, made from a padded batch: `ModelInputs`.

keras-hub models (and many others) take named inputs such as `token_ids`,
`padding_mask` and `segment_ids`, and a causal language model trains on
next-token targets. `ModelInputs` turns a batch into those inputs as it is
made: x's components renamed, a padding mask computed from the lengths
(not stored), constant per-token inputs, and next-token targets shifted
from the one stored sequence. Nothing extra is stored, and padding
efficiency is counted on the stored components alone.
"""

import keras
import numpy as np

from kerasbatch import checks
from kerasbatch.config import Configurable

#: keras-hub's names of the inputs `ModelInputs.keras_hub` can make.
KERAS_HUB_TOKENS = "token_ids"
KERAS_HUB_MASK = "padding_mask"
KERAS_HUB_SEGMENTS = "segment_ids"


@keras.saving.register_keras_serializable(package="kerasbatch")
class ModelInputs(Configurable):
    """What a batch's x holds for the model, and next-token targets.

    Given as a builder's `model_inputs`, it changes every batch: x becomes
    a dict with

    - x's components under new names (`names`);
    - `padding_mask`: a bool `(batch, length)` array, True on the real
      positions of one sequence component (`mask_of`), computed from its
      lengths;
    - `constants`: `(batch, length)` arrays of one value each, e.g. a
      BERT's `segment_ids` of zeros (int32 for an int value, float32 for a
      float).

    With `shift_targets`, one stored sequence gives a causal language
    model's inputs and targets: x's sequence holds the tokens, y (which
    the builder makes; give none) the next token at every position, and
    sample_weight is 1.0 where a next token exists and 0.0 elsewhere. The
    padding mask covers every real token, the last one included: a causal
    model's outputs at the positions with a target are those of a
    keras-hub `CausalLMPreprocessor`'s inputs (which drop the last token),
    and `predict` also gives the logits after the last token, the ones a
    generation continues from. Inputs and targets keep the padded length
    of the stored sequences (bucket bounds, multiples). In packed rows
    (`PackedBuilder`) each sequence is shifted within its segment.

    A padding mask row of all False is NaN in fused attention kernels, so
    an element with nothing to mask in (empty; with `shift_targets`, fewer
    than 2 tokens) is refused, naming it.

    Args:
        names: `{component name: input name}`: x's components to rename.
            A single x is named `"x"`, dict entries by their keys.
        padding_mask: the name of the padding mask input, or None for none.
        mask_of: the x component (by its name before renaming) whose
            lengths give the padding mask and which `shift_targets` shifts.
            None: x's only sequence component.
        constants: `{input name: int or float}`: constant inputs of the
            padded length.
        shift_targets: make next-token targets from `mask_of` (see above).

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> inputs = kerasbatch.ModelInputs(
    ...     names={"x": "token_ids"}, padding_mask="padding_mask",
    ...     constants={"segment_ids": 0})
    >>> builder = kerasbatch.PaddedBuilder(
    ...     batch_size=2, shuffle=False, model_inputs=inputs)
    >>> x = [np.array([5, 6, 7]), np.array([8])]
    >>> batch = next(iter(builder.build(x, engine="python")))
    >>> sorted(batch), batch["padding_mask"].tolist()
    (['padding_mask', 'segment_ids', 'token_ids'], [[True, True, True], [True, False, False]])

    Next-token targets for a causal language model:

    >>> builder = kerasbatch.PaddedBuilder(
    ...     batch_size=2, shuffle=False, model_inputs=kerasbatch.ModelInputs(
    ...         names={"x": "token_ids"}, padding_mask="padding_mask",
    ...         shift_targets=True))
    >>> x, y, weights = next(iter(builder.build(
    ...     [np.array([5, 6, 7]), np.array([8, 9])], engine="python")))
    >>> x["token_ids"].tolist(), y.tolist(), weights.tolist()
    ([[5, 6, 7], [8, 9, 0]], [[6, 7, 0], [9, 0, 0]], [[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    >>> x["padding_mask"].tolist()
    [[True, True, True], [True, True, False]]
    """

    def __init__(
        self,
        names=None,
        padding_mask=None,
        mask_of=None,
        constants=None,
        shift_targets=False,
    ):
        self.names = _checked_names(names)
        self.padding_mask = _optional_name(padding_mask, "padding_mask")
        self.mask_of = _optional_name(mask_of, "mask_of")
        self.constants = _checked_constants(constants)
        self.shift_targets = checks.checked_bool(shift_targets, "shift_targets")
        added = [*self.names.values(), *self.constants]
        if self.padding_mask is not None:
            added.append(self.padding_mask)
        repeated = sorted({name for name in added if added.count(name) > 1})
        if repeated:
            raise ValueError(
                f"ModelInputs names the input {repeated[0]!r} twice (in names, "
                "padding_mask or constants): every input needs its own name."
            )

    def get_config(self):
        """The settings, a JSON-serialisable dict."""
        return {
            "names": dict(self.names),
            "padding_mask": self.padding_mask,
            "mask_of": self.mask_of,
            "constants": dict(self.constants),
            "shift_targets": self.shift_targets,
        }

    @classmethod
    def keras_hub(cls, model, token_ids="x"):
        """The inputs of a keras-hub task or backbone, read from `model`.

        Its `token_ids` come from the x component `token_ids`, its
        `padding_mask` from that component's lengths, its `segment_ids`
        (BERT-style token types) are zeros, and a `CausalLM` (GPT-2, Llama,
        Gemma, ...) trains on shifted next-token targets.

        Args:
            model: a keras-hub model (e.g. `keras_hub.models.
                BertTextClassifier`, `GPT2CausalLM`, or a backbone), built
                with `preprocessor=None`.
            token_ids: the x component holding the token ids (`"x"` for a
                single x, or a dict key).

        Raises:
            ValueError: the model takes an input this cannot make (named),
                or no `token_ids`.
        """
        wanted = _input_names(model)
        unknown = sorted(
            set(wanted) - {KERAS_HUB_TOKENS, KERAS_HUB_MASK, KERAS_HUB_SEGMENTS}
        )
        if unknown or KERAS_HUB_TOKENS not in wanted:
            what = f"the input {unknown[0]!r}" if unknown else "no 'token_ids' input"
            raise ValueError(
                f"ModelInputs.keras_hub makes a text model's token_ids, "
                f"padding_mask and segment_ids; {type(model).__name__} takes "
                f"{what}. Give ModelInputs(...) the inputs it needs yourself."
            )
        return cls(
            names={token_ids: KERAS_HUB_TOKENS},
            padding_mask=KERAS_HUB_MASK if KERAS_HUB_MASK in wanted else None,
            mask_of=token_ids,
            constants={KERAS_HUB_SEGMENTS: 0} if KERAS_HUB_SEGMENTS in wanted else {},
            shift_targets=_is_causal_lm(model),
        )

    # ------------------------------------------------------------ checks
    def check(self, x_keys, sequence_names, has_targets):
        """Raises if these inputs cannot be made for x: `x_keys` its dict
        keys (None for one array), `sequence_names` its sequence
        components' names, `has_targets` whether y is given. Returns the
        name of the component `mask_of` resolves to (None if not needed)."""
        x_names = ["x"] if x_keys is None else list(x_keys)
        unknown = sorted(set(self.names) - set(x_names))
        if unknown:
            raise ValueError(
                f"ModelInputs renames {unknown[0]!r}, but x has no such "
                f"component; x's components are {x_names}."
            )
        if self.shift_targets and has_targets:
            raise ValueError(
                "ModelInputs(shift_targets=True) makes the targets from x's "
                "tokens, but y was given too: build with x alone."
            )
        source = self._sequence_component(sequence_names)
        outputs = [self.names.get(name, name) for name in x_names]
        added = [*self.constants]
        if self.padding_mask is not None:
            added.append(self.padding_mask)
        clashes = sorted((set(added) & set(outputs)) | _repeats(outputs))
        if clashes:
            raise ValueError(
                f"ModelInputs would give x two inputs named {clashes[0]!r}: "
                "rename one of them."
            )
        return source

    def _needs_sequence(self):
        """Whether these inputs follow a sequence component of x."""
        return bool(self.padding_mask or self.shift_targets or self.constants)

    def shortest(self, name):
        """`(fewest positions, message template)` an element of component
        `name` needs: 2 with `shift_targets` (a token and its next one), 1
        with a padding mask (an all-False row is NaN in fused attention),
        else 0. The template's `{}`s take the element's index and length."""
        if self.shift_targets:
            minimum, why = 2, "shift_targets=True needs a token and its next one"
        elif self.padding_mask is not None:
            minimum = 1
            why = (
                "its padding_mask row would be all False, which fused "
                "attention kernels turn into NaN"
            )
        else:
            return 0, ""
        return minimum, (
            f"Element {{}} of {name} has {{}} positions, and ModelInputs "
            f"needs at least {minimum}: {why}. Leave such elements out."
        )

    def check_lengths(self, name, lengths):
        """Raises naming the first element of component `name` shorter
        than `shortest(name)` allows."""
        minimum, template = self.shortest(name)
        short = np.flatnonzero(np.asarray(lengths) < minimum)
        if len(short):
            index = int(short[0])
            raise ValueError(template.format(index, int(lengths[index])))

    def _sequence_component(self, sequence_names):
        if not self._needs_sequence():
            return None
        if self.mask_of is not None:
            if self.mask_of not in sequence_names:
                raise ValueError(
                    f"ModelInputs(mask_of={self.mask_of!r}) names no "
                    f"sequence component of x; x's are {list(sequence_names)}."
                )
            return self.mask_of
        if len(sequence_names) != 1:
            raise ValueError(
                "ModelInputs' padding mask, constants and shifted targets "
                "follow one "
                f"sequence component, and x has {len(sequence_names)} "
                f"({list(sequence_names)}): give mask_of=<name>."
            )
        return sequence_names[0]

    # ------------------------------------------------------------- batches
    def apply(self, ops, x, y, sample_weight, lengths):
        """The batch `(x, y, sample_weight)` with these inputs, from the
        padded batch and its `lengths` by component name; `ops` computes
        the values (`kerasbatch.data.outputs.NumpyOps`, or the `tf.data`
        engine's `GraphOps`)."""
        entries = dict(x) if isinstance(x, dict) else {"x": x}
        if not self._needs_sequence():
            return self._named(ops, entries, None, None), y, sample_weight
        name = self.mask_of or next(key for key in entries if key in lengths)
        tokens, length = entries[name], lengths[name]
        if self.shift_targets:
            y = ops.shift_left(tokens)
            sample_weight = ops.sequence_mask(length - 1, tokens, "float32")
        mask = ops.sequence_mask(length, tokens, "bool")
        return self._named(ops, entries, tokens, mask), y, sample_weight

    def apply_packed(self, ops, x, tokens_name, segment_ids, token_weights):
        """`apply` for packed rows: `(x, y, sample_weight)`, y and
        sample_weight None without `shift_targets`. The mask is
        `segment_ids > 0`; `shift_targets` shifts each sequence within its
        segment, and its weights are `token_weights` (`(rows, length)`: 0
        on padding and filler rows) where a next token exists;
        `tokens_name`: the x entry they follow."""
        entries = dict(x)
        tokens = entries[tokens_name]
        named = self._named(ops, entries, tokens, ops.positive(segment_ids))
        if not self.shift_targets:
            return named, None, None
        has_next = ops.same_segment(segment_ids, ops.shift_left(segment_ids))
        weights = token_weights * ops.cast(has_next, "float32")
        return named, ops.shift_left(tokens), weights

    def _named(self, ops, entries, tokens, mask):
        """x's entries renamed, with the padding mask and the constants
        (shaped as `tokens`' first two axes)."""
        named = {self.names.get(key, key): value for key, value in entries.items()}
        if self.padding_mask is not None:
            named[self.padding_mask] = mask
        for name, value in self.constants.items():
            named[name] = ops.full_like_rows(tokens, value)
        return named


def _repeats(names):
    return {name for name in names if names.count(name) > 1}


def _input_names(model):
    inputs = getattr(model, "input", None)
    if isinstance(inputs, dict):
        return list(inputs)
    if isinstance(inputs, list | tuple):
        return [getattr(t, "name", "").split(":")[0] for t in inputs]
    raise ValueError(
        f"ModelInputs.keras_hub reads a model's named inputs; "
        f"{type(model).__name__} has none (build it first)."
    )


def _is_causal_lm(model):
    return any(c.__name__ == "CausalLM" for c in type(model).__mro__)


def _optional_name(name, what):
    if name is None or (isinstance(name, str) and name):
        return name
    raise ValueError(f"{what} must be a non-empty str or None, got {name!r}.")


def _checked_names(names):
    names = dict(names or {})
    for key, value in names.items():
        if not (isinstance(key, str) and key and isinstance(value, str) and value):
            raise ValueError(
                "names maps x's component names to input names, both "
                f"non-empty strs; got {key!r}: {value!r}."
            )
    return names


def _checked_constants(constants):
    constants = dict(constants or {})
    for name, value in constants.items():
        _optional_name(name, "A constant input's name")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(
                f"The constant input {name!r} must be an int or a float, got {value!r}."
            )
        if isinstance(value, int) and not -(2**31) <= value < 2**31:
            raise ValueError(
                f"The constant input {name!r} is int32; {value} does not fit."
            )
    return constants


def component_names(data):
    """`(x's dict keys or None, x's sequence component names)` of
    `kerasbatch.data.sources.SequenceData`, for `ModelInputs.check`."""
    parts = data.role_components("x")
    keys = None if data.structure["x"] == "single" else [c.key for c in parts]
    return keys, [c.name for c in parts if c.is_sequence]
