"""`StreamSettings`: the bucket settings of a stream, resolved against its
elements into a frozen `kerasbatch.planning.built.StreamBuilt` value."""

import numpy as np

from kerasbatch.builders.bucket_builder import BucketSettings
from kerasbatch.data import outputs
from kerasbatch.data import padding as padding_lib
from kerasbatch.planning import boundaries as boundaries_lib
from kerasbatch.planning import built as built_lib
from kerasbatch.planning import remainders as remainders_lib
from kerasbatch.planning.buckets import Buckets

#: tf.data's cardinality of infinite input.
INFINITE = built_lib.INFINITE


class StreamSettings(BucketSettings):
    """The bucket settings of `kerasbatch.StreamBucketBuilder` (those of
    `BucketSettings`), resolved against a stream: its elements, and the
    lengths of every element where they are given."""

    def _resolve_stream(self, elements, lengths, cardinality):
        """The `StreamBuilt` value of a source of `elements`: checks them
        against the settings and resolves the paddings and buckets (with
        `lengths`, the batches per epoch; `INFINITE` for infinite input)."""
        has_targets = "y" in elements.roles
        self._check_filler_weights(has_targets or self._makes_targets)
        x_sequences = [
            c.name for c in elements.components if c.role == "x" and c.is_sequence
        ]
        if self.output_lengths:
            outputs.check_length_names(elements.keys[0], x_sequences)
        followed = self._check_model_inputs(elements.keys[0], x_sequences, has_targets)
        shortest = None  # elements too short for the model inputs fail
        if followed is not None:
            column = elements.sequence_names.index(followed)
            shortest = (column, *self.model_inputs.shortest(followed))
        if (
            self.output_mask
            and not self._makes_targets
            and "y" not in elements.sequence_roles
        ):
            raise ValueError(
                "output_mask=True needs per-frame targets, but the elements "
                "have no y with a variable first dimension: "
                f"{', '.join(f'{c.where} {c.shape}' for c in elements.components)}."
            )
        paddings = padding_lib.resolve_padding(
            self._parsed_padding,
            elements.sequence_names,
            self._default_padding_length(),
            dtypes={c.name: c.dtype for c in elements.components},
        )
        self._check_multiple_of_fixed(paddings)
        buckets, longest, num_batches = self._resolve_buckets(
            paddings, lengths, cardinality
        )
        return built_lib.StreamBuilt(
            builder_type=type(self),
            arguments=self._arguments(),
            settings=self._snapshot(),
            elements=elements,
            paddings=paddings,
            buckets=buckets,
            longest=tuple(longest),
            shortest=shortest,
            num_batches=INFINITE if cardinality == INFINITE else num_batches,
            fixed_batch_sizes=tuple(self._fixed_batch_sizes()),
        )

    def _resolve_buckets(self, paddings, lengths, cardinality):
        """Boundaries, bounds and batch sizes: `(buckets, each bucket's
        longest element, batches per epoch)`; the batches are None where
        unknown (no `lengths`)."""
        if lengths is None:
            if not isinstance(self.boundaries, list):
                raise ValueError(
                    f"boundaries={self.boundaries!r} is computed from the "
                    "lengths of the data: pass build(dataset, lengths=...) "
                    "(e.g. from a length-index pass) or give boundaries as a "
                    "list of ints."
                )
            boundaries = self._resolve_boundaries(None)
            last_upper = -1 if self.max_length is None else self.max_length
        else:
            lengths = boundaries_lib.as_lengths(lengths)
            if cardinality >= 0 and cardinality != len(lengths):
                raise ValueError(
                    f"lengths has {len(lengths)} entries but the dataset has "
                    f"{cardinality} elements; pass one length per element."
                )
            candidates, limit, _ = self._apply_overflow(lengths)
            cut = np.minimum(lengths, limit)[candidates]
            boundaries = self._resolve_boundaries(cut)
            last_upper = self.max_length if self.max_length is not None else cut.max()
        num_buckets = len(boundaries) + 1
        buckets = Buckets.of(boundaries, last_upper, self.truncate)
        longest = [None] * num_buckets
        if lengths is not None:
            bucket_of = buckets.assign(cut)
            cut = np.minimum(cut, buckets.cut_limits(bucket_of))
            self.bucket_counts = np.bincount(bucket_of, minlength=num_buckets).tolist()
            for bucket in range(num_buckets):
                members = np.flatnonzero(bucket_of == bucket)
                if len(members):
                    at = members[np.argmax(cut[members])]
                    longest[bucket] = (int(candidates[at]), int(cut[at]))
        else:
            self.bucket_counts = None
        self.bucket_lengths = [
            self._bucket_length(bucket, paddings, buckets, longest)
            for bucket in range(num_buckets)
        ]
        self.resolved_boundaries = boundaries
        self.resolved_batch_sizes = self._resolve_batch_sizes(
            num_buckets, lambda bucket: self._budget_batch_size(bucket, longest)
        )
        if lengths is None:
            return buckets, longest, None
        num_batches = 0
        for count, size in zip(
            self.bucket_counts, self.resolved_batch_sizes, strict=True
        ):
            # A stream keeps or pads its remainders, or drops them.
            num_batches += remainders_lib.num_batches(count, size, self.remainder)
        if num_batches == 0 and cardinality != INFINITE:
            raise ValueError(
                "No batch left: every bucket holds fewer elements than its "
                "batch size and drop_remainder=True."
            )
        return buckets, longest, num_batches

    def _bucket_length(self, bucket, paddings, buckets, longest):
        """The longest padded length of a batch of `bucket`, or None if unknown."""
        bound = int(buckets.bounds[bucket])
        known = self.bucket_counts is not None
        if known and not self.bucket_counts[bucket]:
            return 0
        if bound < 0 and any(p.length == "bucket" for p in paddings.values()):
            raise ValueError(
                "Padding to the bucket bound (pad_to_bucket or "
                "Padding(length='bucket')) needs the last bucket's upper bound: "
                "set max_length, or pass lengths to build()."
            )
        kept = longest[bucket][1] if known else bound
        if kept < 0 and any(p.fixed_length is None for p in paddings.values()):
            return None
        return self._longest_padding_of(paddings, bound, lambda name: kept)

    def _budget_batch_size(self, bucket, longest):
        padded = self.bucket_lengths[bucket]
        if padded is None:
            raise ValueError(
                "max_tokens needs every bucket's upper bound, but the last "
                "bucket has none: set max_length, or pass lengths to build()."
            )
        count = None if self.bucket_counts is None else self.bucket_counts[bucket]
        return self._budget_size(bucket, padded, count, longest[bucket])
