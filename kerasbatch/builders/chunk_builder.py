"""Batches of fixed-size chunks of long sequences, with context frames."""

import dataclasses

import keras
import numpy as np

from kerasbatch import checks
from kerasbatch.builders.padded_builder import PaddedBuilder
from kerasbatch.data import sources
from kerasbatch.data.padding import Padding
from kerasbatch.planning import chunking
from kerasbatch.planning.prepared import Prepared


@keras.saving.register_keras_serializable(package="kerasbatch")
class ChunkBuilder(PaddedBuilder):
    """Batches of chunks of long sequences, with context, for frame-level models.

    Long sequences (audio, sensor logs) are cut into chunks of `chunk_size`
    frames, one every `chunk_step` frames (the chunking of RETURNN's TensorFlow
    data pipeline; see `kerasbatch.planning.chunking.chunk_table`). The chunks of all
    sequences are the elements planned and batched: every epoch shuffles them
    across sequences (a pure function of `(seed, epoch)`) and cuts them into
    batches of `batch_size` chunks.

    Every frame-aligned sequence component named in `keys` (features,
    per-frame targets, per-frame weights) is chunked at the same frames;
    other components are left whole (each chunk carries its sequence's, padded
    per batch). Chunks of input (x) components get `context` frames before
    and after: the neighbouring frames of the sequence, or zeros (the padding
    value) beyond its borders. A model whose time layers use
    `padding="valid"` and shrink the time axis by exactly the context then
    outputs `chunk_size` frames, aligned with the chunk's targets.

    A sequence's last chunk may be shorter than `chunk_size`: it is kept when
    it has at least `min_chunk_size` frames (else left out and counted in
    `statistics().dropped`) and padded to `chunk_size`, so every batch has
    the same shapes: x `(batch, chunk_size + left + right, *features)`,
    targets `(batch, chunk_size, ...)`. With `output_mask=True` the padding
    has sample weight 0, so a masked loss
    (`kerasbatch.losses.MaskedMeanSquaredError`) ignores it. Statistics count
    that padding; context frames, zeros at the borders included, are real
    input the model needs.

    After training on shuffled chunks, `for_inference()` builds whole
    sequences padded by the context, and `reassemble` turns the outputs of
    either (chunks or whole sequences) into one output per input frame.

    Args:
        chunk_size: frames per chunk, or None for whole sequences (one chunk
            per sequence, padded per batch; what `for_inference` builds).
        chunk_step: frames between the starts of consecutive chunks, from 1
            to `chunk_size` (smaller overlaps them). Defaults to `chunk_size`.
        context: frames added before and after each chunk of the input (x)
            components: an int for both sides or a `(left, right)` pair. Each
            side is at most `chunk_size` (more would make every input mostly
            repeated neighbour frames: use longer chunks instead).
        min_chunk_size: shortest last chunk kept, from 1 to `chunk_size`.
        keys: names of the sequence components to chunk (`"x"`, `"y"`,
            `"sample_weight"`, dict keys; a single name works too). They must
            be frame-aligned: the same number of frames in every sequence.
            None (default): every sequence component.
        batch_size: chunks per batch.
        shuffle: reshuffle the chunks across sequences every epoch.
        seed: int seed; None draws one at construction.
        drop_remainder: drop the last, smaller batch (counted as dropped).
        remainder: `"keep"`, `"drop"`, `"pad"` or `"even"`, as for
            `kerasbatch.builders.Builder` (with `"pad"` or `"even"` and a
            `chunk_size`, every batch has one shape).
        padding: the padding value of each sequence component, as for
            `kerasbatch.builders.Builder`; it fills short chunks and the
            context beyond the sequence borders. Chunked components have the
            fixed lengths above, so their padding gives no length.
        output_lengths: add each sequence input's lengths to x as
            `"<name>_length"` (a chunk of x: its frames plus its context).
        output_mask: emit the padding mask of the per-frame targets as
            `sample_weight` (1.0 for the chunk's frames, 0.0 for padding).
        batch_multiple, pad_to_multiple: as in `kerasbatch.builders.Builder`.
        prefetch: batches to prefetch: `"auto"`, an int, or 0 / None.

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> x = [np.arange(1.0, n + 1) for n in (5, 3)]
    >>> builder = kerasbatch.ChunkBuilder(
    ...     chunk_size=2, context=1, batch_size=8, shuffle=False, output_mask=True)
    >>> chunk_x, chunk_y, mask = next(iter(builder.build(x, y=x)))
    >>> chunk_x.numpy()
    array([[0., 1., 2., 3.],
           [2., 3., 4., 5.],
           [4., 5., 0., 0.],
           [0., 1., 2., 3.],
           [2., 3., 0., 0.]])
    >>> mask.numpy()[:, 1]
    array([1., 1., 0., 1., 0.], dtype=float32)
    >>> builder.chunks()
    ChunkTable(sequence=[0, 0, 0, 1, 1], offset=[0, 2, 4, 0, 2], length=[2, 2, 1, 2, 1])
    >>> builder.reassemble(chunk_y.numpy())  # model outputs → whole sequences
    [array([1., 2., 3., 4., 5.]), array([1., 2., 3.])]
    """

    batches = "chunks"

    settings_not_taken = ("max_length", "overflow")  # chunks cut every sequence

    def __init__(
        self,
        chunk_size,
        chunk_step=None,
        context=0,
        min_chunk_size=1,
        keys=None,
        batch_size=32,
        **settings,
    ):
        self.chunk_size = checks.optional_positive_int(chunk_size, "chunk_size")
        if chunk_step is not None and chunk_size is None:
            raise ValueError(
                "chunk_step needs a chunk_size; whole sequences have none."
            )
        self.chunk_step = checks.optional_positive_int(chunk_step, "chunk_step")
        if self.chunk_step is None:
            self.chunk_step = self.chunk_size
        elif self.chunk_step > self.chunk_size:
            raise ValueError(
                f"chunk_step={chunk_step} is larger than chunk_size={chunk_size}: "
                "frames between chunks would never be seen, and reassembly "
                "could not give an output for them."
            )
        self.context = chunking.context_pair(context)
        if chunk_size is not None and max(self.context) > chunk_size:
            raise ValueError(
                f"context {self.context} is larger than chunk_size={chunk_size} "
                "on a side; each side may be at most chunk_size. Use longer "
                "chunks."
            )
        self.min_chunk_size = checks.optional_positive_int(
            min_chunk_size, "min_chunk_size"
        )
        if self.min_chunk_size is None or (
            chunk_size is not None and self.min_chunk_size > chunk_size
        ):
            raise ValueError(
                f"min_chunk_size must be from 1 to chunk_size={chunk_size}, got "
                f"{min_chunk_size!r}."
            )
        self.keys = _keys(keys)
        super().__init__(batch_size, **self.take_settings(settings))
        if self._makes_targets:
            raise ValueError(
                "ChunkBuilder cannot shift targets (ModelInputs(shift_targets="
                "True)): the next token of a chunk's last position is in the "
                "next chunk. Shift the sequences before chunking them."
            )

    def get_config(self):
        config = super().get_config()
        del config["max_length"], config["overflow"]  # chunks bound the lengths
        config.update(
            chunk_size=self.chunk_size,
            chunk_step=self.chunk_step,
            context=list(self.context),
            min_chunk_size=self.min_chunk_size,
            keys=self.keys,
        )
        return config

    # ------------------------------------------------------------- chunks
    @property
    def sequence_lengths(self):
        """int64 frames of every built sequence (of the chunked components)."""
        return self.built.prepared.layout.sequence_lengths

    @property
    def chunk_table(self):
        """The `ChunkTable` of every chunk of the built sequences.

        Element `i` of the plans (`plan().indices`) is chunk `i` of this
        table; chunks shorter than `min_chunk_size` are in it but never in a
        plan.
        """
        return self.built.prepared.layout.table

    def chunks(self, epoch=None):
        """The `ChunkTable` of `epoch`'s chunks, in the order they are batched.

        Args:
            epoch: as for `plan` (default: the epoch last started, or next).
        """
        return self.chunk_table[self.plan(epoch).indices]

    def reassemble(self, chunk_outputs, epoch=None, cut_context=False):
        """One output per frame of every sequence from a dataset's outputs.

        Args:
            chunk_outputs: what `model.predict` returned for `epoch` of this
                builder's dataset (one row per chunk, in batch order), as for
                `kerasbatch.planning.chunking.reassemble`.
            epoch: the epoch the outputs are of (default: the epoch last
                started, i.e. the one `model.predict` just ran).
            cut_context: the outputs still hold the context frames (a model
                that keeps its input's length, e.g. `padding="same"`): cut
                them off. Default False: outputs hold the chunk's frames only.

        Returns:
            A list with one float array `(frames, *features)` per sequence, in
            the input order; overlapping chunks are averaged, frames of
            dropped chunks are NaN.

        Raises:
            ValueError: the outputs do not have one row per chunk, or (with a
                `chunk_size`) not the frames a chunk's output has.
        """
        context = self.context if cut_context else (0, 0)
        if self.chunk_size is not None:
            self._check_output_frames(chunk_outputs, context, cut_context)
        return chunking.reassemble(
            chunk_outputs, self.chunks(epoch), self.sequence_lengths, context
        )

    def for_inference(self, batch_size=None, output_mask=False):
        """A builder of whole sequences with this builder's context and keys.

        Its datasets hold every non-empty sequence once, in input order,
        padded by the context (inputs `(batch, longest + left + right, ...)`), so a model
        trained on chunks runs on whole sequences; its `reassemble` cuts the
        outputs back to each sequence's frames.

        Its batches differ in length. `model.predict` joins them into a
        ragged tensor on TensorFlow, but on JAX Keras cannot join batches of
        different shapes: there, call `model.predict_on_batch` on each batch
        and pad the outputs to the longest before `reassemble` (which reads
        only each sequence's frames).

        Args:
            batch_size: sequences per batch (default: this builder's).
            output_mask: emit the targets' padding mask as `sample_weight`,
                to evaluate on whole sequences with targets
                (`model.evaluate`). Default False: inference feeds x alone.

        Example:

        >>> import numpy as np
        >>> import kerasbatch
        >>> builder = kerasbatch.ChunkBuilder(chunk_size=4, context=(2, 1))
        >>> whole = builder.for_inference(batch_size=2)
        >>> batch = next(iter(whole.build([np.ones(3), np.ones(5)])))
        >>> batch.shape  # the longest sequence, 5, plus 2 + 1 frames of context
        TensorShape([2, 8])
        """
        config = self.get_config()
        config.update(
            chunk_size=None,
            chunk_step=None,
            min_chunk_size=1,
            batch_size=batch_size or self.batch_size,
            output_mask=output_mask,
            shuffle=False,
            drop_remainder=False,
            remainder="keep",
        )
        return type(self).from_config(config)

    def _check_output_frames(self, chunk_outputs, context, cut_context):
        expected = self.chunk_size + sum(context)
        for outputs in _leaves(chunk_outputs):
            shape = tuple(
                outputs.shape if hasattr(outputs, "shape") else np.shape(outputs)
            )
            frames = shape[1] if len(shape) > 1 else None
            if frames == expected:
                continue
            hint = ""
            if not cut_context and frames == expected + sum(self.context):
                hint = " They keep the context frames: pass cut_context=True."
            raise ValueError(
                f"Chunk outputs have {frames} frames, but chunks of chunk_size="
                f"{self.chunk_size} need {expected}"
                f"{' (context included)' if cut_context else ''}.{hint}"
            )

    # ------------------------------------------------------------ planning
    def _planned_units(self, data):
        chunked = self._chunked_components(data)
        frames = chunked[0].lengths
        layout = ChunkLayout(
            sequence_lengths=frames,
            table=chunking.chunk_table(frames, self.chunk_size, self.chunk_step),
            context={
                c.name: self.context if c.role == "x" else (0, 0) for c in chunked
            },
        )
        table = layout.table
        lengths = {
            c.name: (
                table.length + sum(layout.context[c.name])
                if c.name in layout.context
                else c.lengths[table.sequence]
            )
            for c in data.sequence_components
        }
        return lengths, layout

    def _chunked_components(self, data):
        sequences = data.sequence_components
        if self.keys is None or data.lengths_only:
            chunked = sequences
        else:
            by_name = {c.name: c for c in data.components}
            unknown = [key for key in self.keys if key not in by_name]
            if unknown:
                raise ValueError(
                    f"keys names {unknown}, but the components are {list(by_name)}."
                )
            for key in self.keys:
                if not by_name[key].is_sequence:
                    raise ValueError(
                        f"keys names {key!r}, but {by_name[key].where} has one "
                        "value per sequence, not frames: only sequences can "
                        "be chunked."
                    )
            chunked = [c for c in sequences if c.name in self.keys]
        reference = chunked[0]
        for component in chunked[1:]:
            sources.check_same_lengths(
                reference,
                component,
                "chunked components must be frame-aligned: leave "
                f"{component.name!r} out of keys to keep it whole",
            )
        return chunked

    def _prepare(self, prepared, layout):
        candidates = prepared.candidates
        long_enough = layout.table.length[candidates] >= self.min_chunk_size
        frames = layout.sequence_lengths
        if not long_enough.any() and (
            not frames.any() or layout.table.length.max() < self.min_chunk_size
        ):
            reason = (
                f"every one of the {len(frames)} sequences has 0 frames"
                if not frames.any()
                else f"every chunk is shorter than min_chunk_size="
                f"{self.min_chunk_size} (the longest sequence has "
                f"{frames.max()} frames)"
            )
            raise ValueError(
                f"No chunk can be cut: {reason}. Pass sequences with frames, or "
                "lower min_chunk_size."
            )
        paddings = dict(prepared.paddings)
        fixed = layout.context.items() if self.chunk_size is not None else ()
        for name, (left, right) in fixed:
            padding = paddings[name]
            window = self.chunk_size + left + right
            if padding.length != "batch":
                raise ValueError(
                    f"padding of the chunked component {name!r} gives the length "
                    f"{padding.length}, but chunks fix it to {window} "
                    f"(chunk_size {self.chunk_size} + context {left} + {right}); "
                    "give only a value."
                )
            paddings[name] = Padding(value=padding.value, length=window)
        self._check_multiple_of_fixed(paddings)
        return prepared.extended(
            ChunkPrepared,
            candidates=candidates[long_enough],
            policy_dropped=prepared.policy_dropped + int((~long_enough).sum()),
            paddings=paddings,
            layout=layout,
        )


@dataclasses.dataclass(frozen=True)
class ChunkLayout:
    """The chunks of the built sequences: the units a `ChunkBuilder` plans.

    Attributes:
        sequence_lengths: int64 frames of every sequence (of the chunked
            components).
        table: the `kerasbatch.planning.chunking.ChunkTable` of every chunk.
        context: `{chunked component name: (left, right)}` context frames
            cut with each chunk.
    """

    sequence_lengths: np.ndarray
    table: chunking.ChunkTable
    context: dict


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChunkPrepared(Prepared):
    """A `Prepared` value whose elements are the chunks of `layout`."""

    layout: ChunkLayout


def _keys(keys):
    if keys is None:
        return None
    if isinstance(keys, str):
        keys = [keys]
    if (
        not isinstance(keys, list | tuple)
        or not keys
        or not all(isinstance(key, str) for key in keys)
        or len(set(keys)) != len(keys)
    ):
        raise ValueError(
            f"keys must be None or a non-empty list of distinct names, got {keys!r}."
        )
    return list(keys)


def _leaves(outputs):
    if isinstance(outputs, dict):
        return list(outputs.values())
    if isinstance(outputs, list | tuple):
        return list(outputs)
    return [outputs]
