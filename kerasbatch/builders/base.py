"""`Builder`: the base of the builders that batch elements.

Settings → plan → an engine's batches for `model.fit`: `PaddedBuilder`,
`SortedBuilder`, `BucketBuilder`, `ChunkBuilder` and `WindowBuilder` decide
which elements form a batch (`_epoch_order`); this base handles inputs,
overflow, padding and statistics. Below it: `planned_builder.PlannedBuilder`
(build, a built value, an engine's dataset), `datasets.BuiltDatasets` (the
datasets built, and their epochs) and `settings.Settings`.
"""

from __future__ import annotations

import functools

import numpy as np

from kerasbatch.builders.datasets import builder_of  # noqa: F401  (its old home)
from kerasbatch.builders.planned_builder import PlannedBuilder
from kerasbatch.builders.settings import (  # noqa: F401  (their old home)
    OVERFLOW_POLICIES,
    BatchedSettings,
    Settings,
    data_parallel_devices,
)
from kerasbatch.checks import checked_epoch  # noqa: F401  (its old home)
from kerasbatch.data import model_inputs as model_inputs_lib
from kerasbatch.planning import batching
from kerasbatch.planning import remainders as remainders_lib

REMAINDERS = remainders_lib.REMAINDERS


# --------------------------------------------------------------- overflow


class Builder(PlannedBuilder, BatchedSettings):
    """Base class of the dataset builders.

    A builder turns variable-length sequences into padded batches that
    `model.fit` takes directly: a `tf.data.Dataset`, a Grain dataset or a
    `keras.utils.PyDataset` (`build(..., engine=...)`, see
    `kerasbatch.engines`). Each epoch's batches are planned in numpy from the
    lengths alone (a pure function of `seed` and the epoch), then gathered
    and padded once per batch by the engine, the same on every engine.

    Subclasses decide which elements form a batch (`_epoch_order`); the base
    handles inputs, overflow policies, padding, statistics and the batch
    functions.

    Args:
        batch_size: elements per batch.
        shuffle: reshuffle the batches every epoch.
        seed: int seed; epoch k's batches depend only on `(seed, k)`. None
            draws one at construction (then kept in `get_config()`).
        drop_remainder: drop the last, smaller batch (of each bucket); the
            dropped elements are counted in `statistics().dropped`. The same
            as `remainder="drop"`.
        remainder: the last, smaller batch (of each bucket): `"keep"` (the
            default), `"drop"` (as `drop_remainder`), `"pad"` or `"even"`.
            `"pad"` feeds it with the full batch size, the rows past its
            elements filler (copies of its first element, `sample_weight` 0,
            counted as padding in `statistics()`). `"even"` cuts each bucket
            into its number of batches (as `"keep"`) of one size, at most
            the batch size, so fewer than one filler row per batch is
            needed. Either way every batch of a bucket has one size and,
            with `pad_to_bucket`, an epoch feeds one shape per bucket (one
            XLA compilation each); `"even"` costs far less padding (0.007 of
            padding efficiency at 32 buckets of 64 on the reference
            workloads, against 0.10 for `"pad"`). Both need targets y and a
            loss that weighs by `sample_weight`, as `batch_multiple` does: a
            `keras.losses.Loss` whose `__call__` takes no `sample_weight`
            fails in Keras' first step; one that takes it and ignores it
            (or a custom `train_step` that drops it) trains on the filler
            rows, which no builder or callback can see.
        padding: how sequence components are padded: None (value 0, to the
            batch's longest element), a `kerasbatch.Padding` or config dict
            for all components, or a dict mapping component names (`"x"`,
            `"y"`, `"sample_weight"` or dict keys) to one.
        max_length: the longest element allowed, or None.
        overflow: what happens to elements longer than `max_length`:
            `"error"` (raise, naming the element), `"truncate"` (cut to
            `max_length`, counted) or `"drop"` (leave out, counted).
        output_lengths: add each sequence component's (cut) lengths to x as
            `"<name>_length"` int32 entries of shape `(batch,)`; a single x
            becomes the dict `{"x": ..., "x_length": ...}`.
        output_mask: emit the padding mask of the per-frame targets as
            `sample_weight` (1.0 real, 0.0 padding; shape `(batch, time)`),
            multiplied by any `sample_weight` given, for masked losses.
        pad_to_multiple: pad every sequence component to a multiple of this
            length (e.g. 8 for tensor cores): the batch's or bucket's padded
            length rounded up, so an epoch also feeds fewer distinct shapes.
            A fixed padding length must be a multiple of it.
        batch_multiple: feed every batch with a multiple of this many rows,
            e.g. the number of devices of `keras.distribution.DataParallel`
            (JAX), which splits every batch evenly across them. A smaller
            batch gets filler rows (copies of its first element) whose
            `sample_weight` is 0, so the loss and the weighted metrics leave
            them out; `statistics()` counts them as padding, never as data.
            Every batch then has a `sample_weight` (ones for real rows, times
            any given or `output_mask` weights); this needs targets y and a
            loss that takes `sample_weight` (every Keras loss does).
            Unweighted metrics and batch statistics (`BatchNormalization`)
            do see the filler rows.
        prefetch: batches to prefetch: `"auto"` (tf.data AUTOTUNE), an int,
            or 0 / None for none.
        model_inputs: a `kerasbatch.ModelInputs`: the inputs x gives the
            model (e.g. a keras-hub model's `token_ids`, `padding_mask` and
            `segment_ids`) and next-token targets, made per batch.

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> builder = kerasbatch.SortedBuilder(
    ...     batch_size=2, max_length=3, overflow="truncate", shuffle=False)
    >>> dataset = builder.build([np.ones(n) for n in (1, 5, 2)])
    >>> [tuple(batch.shape) for batch in dataset]
    [(2, 2), (1, 3)]
    >>> builder.statistics().truncated, builder.statistics().truncated_positions
    (1, 2)
    >>> kerasbatch.SortedBuilder.from_config(builder.get_config()) == builder
    True

    With `batch_multiple=2`, batches of 3 and 1 elements get a filler row each:

    >>> builder = kerasbatch.PaddedBuilder(
    ...     batch_size=3, batch_multiple=2, shuffle=False)
    >>> x, y, weights = list(builder.build(
    ...     [np.ones(n) for n in (1, 2, 3, 4)], np.arange(4)))[1]
    >>> tuple(x.shape), weights.numpy().tolist()
    ((2, 4), [1.0, 0.0])
    >>> builder.statistics().padding_efficiency  # filler rows are padding
    0.5
    """

    #: Whether `Padding(length="bucket")` makes sense for this builder.
    has_buckets = False

    # ----------------------------------------------------------------- config
    def get_config(self):
        """The constructor arguments, JSON-serialisable."""
        config = {"batch_size": self.batch_size, **self._shared_config()}
        batch_multiple, prefetch = config.pop("batch_multiple"), config.pop("prefetch")
        model_inputs = config.pop("model_inputs")
        config.update(
            output_lengths=self.output_lengths,
            output_mask=self.output_mask,
            batch_multiple=batch_multiple,
            prefetch=prefetch,
            model_inputs=model_inputs,
        )
        return config

    def _attach(self, data):
        """Validates the settings against `data` and plans for it."""
        lengths_only = data.lengths_only
        component_lengths, layout = self._planned_units(data)
        names = list(component_lengths)
        lengths = np.zeros(data.num_elements, dtype=np.int64)  # no sequence
        if len(names) == 1:
            lengths = component_lengths[names[0]]
        elif names:
            lengths = np.max([component_lengths[name] for name in names], axis=0)
        paddings = self._resolve_paddings(data, names, self._default_padding_length())
        if not self.has_buckets and any(
            p.length == "bucket" for p in paddings.values()
        ):
            raise ValueError(
                f"Padding length 'bucket' needs buckets; {type(self).__name__} "
                "has none. Use BucketBuilder, or 'batch' or a fixed length."
            )
        has_targets = data.structure["y"] is not None
        if not lengths_only:
            x_keys, sequence_names = model_inputs_lib.component_names(data)
            self._check_model_inputs(
                x_keys,
                sequence_names,
                has_targets,
                {c.name: c.lengths for c in data.sequence_components},
            )
        if (
            self.output_mask
            and not lengths_only
            and not self._makes_targets
            and not any(c.is_sequence for c in data.role_components("y"))
        ):
            raise ValueError(
                "output_mask=True needs per-frame targets, but y has no "
                "variable-length component."
            )
        self._check_filler_weights(has_targets or self._makes_targets, lengths_only)
        prepared = self._overflowed(data, lengths, component_lengths, paddings)
        prepared = self._prepare(prepared, layout)
        self._check_fixed_lengths(prepared)
        self._bind(prepared, self._epoch_order(prepared))

    def _default_padding_length(self):
        return "batch"

    def _planned_units(self, data):
        """`({sequence component name: int64 length of every planned
        element}, layout)`.

        The planned elements are the data's elements (layout None); a
        subclass may plan other units of the data and describe them in a
        layout of its own, which `_prepare` receives (`kerasbatch.ChunkBuilder`:
        chunks).
        """
        return {c.name: c.lengths for c in data.sequence_components}, None

    def _check_fixed_lengths(self, prepared):
        candidates = prepared.candidates
        for name, padding in prepared.paddings.items():
            if padding.fixed_length is None or not len(candidates):
                continue
            kept = np.minimum(
                prepared.component_lengths[name], prepared.element_limits
            )[candidates]
            longest = int(np.argmax(kept))
            if kept[longest] > padding.fixed_length:
                raise ValueError(
                    f"Component {name!r} is padded to the fixed length "
                    f"{padding.fixed_length}, but element "
                    f"{candidates[longest]} is {kept[longest]} long. Raise "
                    "the length or set max_length with overflow='truncate'."
                )

    # -------------------------------------------------------- subclass hooks
    def _prepare(self, prepared, layout):
        """The build's final `Prepared` value (called once per build).

        `prepared` holds the lengths after the overflow policy and the
        candidates that batches may hold; `layout` is what `_planned_units`
        gave with the lengths. Subclasses resolve data-dependent settings
        here and return `prepared` replaced or extended: narrower
        `element_limits` (per-element cut lengths), `element_bounds`
        (per-element bucket padding lengths), fixed `paddings`, or fewer
        candidates by a policy of theirs (counted in `policy_dropped`).
        """
        return prepared

    def _epoch_order(self, prepared):
        """The `kerasbatch.planning.orders.EpochOrder` of the candidates' batches.

        Called once per build, with `_prepare`'s value; candidates no batch
        holds are left out of every epoch and counted as dropped.
        """
        raise NotImplementedError

    def _num_left_out(self):
        """Candidates that no batch of an epoch holds (subclass hook for
        plans that repeat elements); the same every epoch."""
        return len(self._prepared.candidates) - int(self._order.sizes.sum())

    # ------------------------------------------------------------------- plan
    def _planner(self):
        """`epoch -> BatchPlan` of the bound data."""
        prepared = self._prepared
        return functools.partial(
            batching.batch_plan,
            self._order,
            self.seed,
            element_limits=prepared.element_limits,
            element_bounds=prepared.element_bounds,
            component_lengths=prepared.component_lengths,
            paddings=prepared.paddings,
            dropped=prepared.policy_dropped + self._num_left_out(),
            batch_multiple=self.batch_multiple,
            pad_to_multiple=self.pad_to_multiple,
        )

    def element_batch(self, index, batch_size):
        """`batch_size` copies of element `index`, as the pipeline would batch it.

        The element is cut and padded exactly as in a real batch (its bucket
        bound with `pad_to_bucket`), with the same structure (`output_lengths`,
        `output_mask`), so a training step on it costs what a real batch of
        that shape costs. `kerasbatch.tuner.find_bucket_batch_sizes` probes
        memory with it.

        Args:
            index: the element, an index into the built data.
            batch_size: copies in the batch.

        Returns:
            The batch, in the structure of the built dataset's elements.
        """
        from kerasbatch.engines.tf_data import pipeline, rows

        served = self._built_served(None, "element_batch")
        built = served.built
        prepared = built.prepared
        if prepared.data.lengths_only:
            raise RuntimeError("element_batch needs data: call build(), not adapt().")
        if not 0 <= index < len(prepared.lengths):
            raise IndexError(
                f"index {index} is out of range for {len(prepared.lengths)} elements."
            )
        function = pipeline.batches_part(served).batch_function_class(built, None)
        return rows.element_batch(built, function, index, batch_size)
