"""Length buckets: batches of elements of similar length."""

import dataclasses

import keras
import numpy as np

from kerasbatch import checks
from kerasbatch.builders.base import Builder
from kerasbatch.planning import batching
from kerasbatch.planning import boundaries as boundaries_lib
from kerasbatch.planning.batching import AUTO
from kerasbatch.planning.prepared import Prepared


class BucketSettings:
    """The bucket arguments and rules every bucket builder shares.

    Validation and config of `boundaries`, `num_buckets`, the batch sizing
    (`batch_size`, `bucket_batch_sizes`, `max_tokens`, `quadratic_length`),
    `truncate` and `pad_to_bucket`; resolving boundaries; each bucket's
    bounds; and the token-budget rule for batch sizes. Used by
    `BucketBuilder` (in memory) and `kerasbatch.StreamBucketBuilder`.
    """

    has_buckets = True
    sizes_batches_itself = True

    def __init__(
        self,
        boundaries=AUTO,
        num_buckets=16,
        batch_size=None,
        bucket_batch_sizes=None,
        max_tokens=None,
        quadratic_length=None,
        truncate=False,
        pad_to_bucket=False,
        **settings,
    ):
        """Validates and sets the bucket arguments, then passes the batch
        size (`batch_size`, or 32 when no sizing is given) and `settings`
        on to the builder's settings (`BatchedSettings`)."""
        sizings = [batch_size, bucket_batch_sizes, max_tokens]
        if sum(s is not None for s in sizings) > 1:
            raise ValueError(
                "Give at most one of batch_size, bucket_batch_sizes and max_tokens."
            )
        if all(s is None for s in sizings):
            batch_size = 32
        if isinstance(boundaries, str):
            if boundaries != AUTO:
                boundaries_lib.get(boundaries)
        else:
            boundaries = boundaries_lib.validate_boundaries(
                boundaries, allow_empty=True
            )
        self.boundaries = boundaries
        self.num_buckets = checks.optional_positive_int(num_buckets, "num_buckets")
        if bucket_batch_sizes is not None:
            if (
                not isinstance(bucket_batch_sizes, list | tuple)
                or not bucket_batch_sizes
            ):
                raise ValueError(
                    "bucket_batch_sizes must be a non-empty list of positive "
                    f"ints, got {bucket_batch_sizes!r}."
                )
            bucket_batch_sizes = [
                checks.optional_positive_int(size, f"bucket_batch_sizes[{i}]")
                for i, size in enumerate(bucket_batch_sizes)
            ]
            if (
                isinstance(boundaries, list)
                and len(bucket_batch_sizes) != len(boundaries) + 1
            ):
                raise ValueError(
                    f"bucket_batch_sizes has {len(bucket_batch_sizes)} entries but "
                    f"{len(boundaries)} boundaries make {len(boundaries) + 1} buckets."
                )
        self.bucket_batch_sizes = bucket_batch_sizes
        self.max_tokens = checks.optional_positive_int(max_tokens, "max_tokens")
        self.quadratic_length = checks.optional_positive_int(
            quadratic_length, "quadratic_length"
        )
        if quadratic_length is not None and max_tokens is None:
            raise ValueError("quadratic_length only applies with max_tokens.")
        self.truncate = checks.checked_bool(truncate, "truncate")
        self.pad_to_bucket = checks.checked_bool(pad_to_bucket, "pad_to_bucket")
        self.resolved_boundaries = None
        self.resolved_batch_sizes = None
        self.bucket_counts = None
        self.bucket_lengths = None
        super().__init__(batch_size, **settings)

    def _fixed_batch_sizes(self):
        """The global batch sizes replicas must share evenly (a budget's are
        not fixed)."""
        if self.bucket_batch_sizes is None:
            return [] if self.batch_size is None else [("batch_size", self.batch_size)]
        return [
            (f"bucket_batch_sizes[{bucket}] (bucket {bucket})", size)
            for bucket, size in enumerate(self.bucket_batch_sizes)
        ]

    def _bucket_config(self):
        return {
            "boundaries": self.boundaries,
            "num_buckets": self.num_buckets,
            "bucket_batch_sizes": self.bucket_batch_sizes,
            "max_tokens": self.max_tokens,
            "quadratic_length": self.quadratic_length,
            "truncate": self.truncate,
            "pad_to_bucket": self.pad_to_bucket,
        }

    def _default_padding_length(self):
        return "bucket" if self.pad_to_bucket else "batch"

    def _resolve_boundaries(self, lengths):
        """The boundaries: the list given, or the strategy applied to `lengths`.

        `lengths` (the lengths the buckets will hold) may be None when the
        boundaries are a list.
        """
        boundaries = batching.resolve_boundaries(
            self.boundaries, lengths, self.num_buckets
        )
        num_buckets = len(boundaries) + 1
        if self.bucket_batch_sizes is not None and (
            len(self.bucket_batch_sizes) != num_buckets
        ):
            raise ValueError(
                f"bucket_batch_sizes has {len(self.bucket_batch_sizes)} entries but "
                f"the boundaries {boundaries} make {num_buckets} buckets."
            )
        return boundaries

    def _resolve_batch_sizes(self, num_buckets, budget_batch_size):
        """Every bucket's batch size; `budget_batch_size(bucket)` gives it
        under `max_tokens`."""
        if self.bucket_batch_sizes is not None:
            return list(self.bucket_batch_sizes)
        if self.max_tokens is None:
            return [self.batch_size] * num_buckets
        return [budget_batch_size(bucket) for bucket in range(num_buckets)]

    def _longest_padding_of(self, paddings, bound, longest_kept):
        """The longest padded length (any component) of a batch of a bucket
        (`kerasbatch.planning.batching.longest_padding`)."""
        return batching.longest_padding(
            paddings, bound, longest_kept, self.pad_to_multiple
        )

    def _budget_size(self, bucket, padded, count=None, longest=None):
        """The largest batch size with `size × cost(padded) <= max_tokens`.

        Args:
            bucket: the bucket, for error messages.
            padded: the longest padded length a batch of the bucket can have.
            count: elements in the bucket, or None when unknown.
            longest: `(index, kept length)` of the bucket's longest element,
                or None when unknown, for error messages.
        """
        size = batching.budget_batch_size(
            self.max_tokens, padded, count, self.quadratic_length
        )
        if size:
            return size
        if longest is not None:
            index, kept = longest
            if self._cost(kept) > self.max_tokens:
                raise ValueError(
                    f"Element {index} has length {kept}, whose "
                    f"cost {self._cost(kept):g} exceeds "
                    f"max_tokens={self.max_tokens}; raise max_tokens or set "
                    "max_length with overflow='truncate' or 'drop'."
                )
        raise ValueError(
            f"Bucket {bucket} pads to length {padded}, whose cost "
            f"{self._cost(padded):g} exceeds max_tokens={self.max_tokens}; "
            "raise max_tokens or lower the padding length."
        )

    def _cost(self, length):
        return batching.token_cost(length, self.quadratic_length)


@keras.saving.register_keras_serializable(package="kerasbatch")
class BucketBuilder(BucketSettings, Builder):
    """Batches from length buckets, as tf.data's `bucket_by_sequence_length`.

    Boundaries `[b_0, ..., b_{n-1}]` make the n+1 buckets `[0, b_0), [b_0,
    b_1), ..., [b_{n-1}, inf)`; an element goes to the bucket holding its
    length (the longest of its sequence components). Each epoch, every bucket
    is shuffled and cut into batches, and the batches of all buckets are
    interleaved in one random order, so training never sees a run of one
    bucket. The number of batches is the same every epoch.

    Args:
        boundaries: a strictly increasing list of positive ints, `"auto"`
            (the `"optimal"` strategy), or a strategy name of
            `kerasbatch.planning.boundaries` (`"uniform"`, `"quantile"`,
            `"equal_tokens"`, `"optimal"`) computed from the data's lengths.
        num_buckets: buckets for a boundary strategy (ignored with a list).
        batch_size: one batch size for every bucket. The default, when none
            of `batch_size`, `bucket_batch_sizes` and `max_tokens` is given,
            is 32.
        bucket_batch_sizes: a batch size per bucket (`len(boundaries) + 1`).
        max_tokens: a budget: each bucket's batch size is the largest with
            `batch size × cost(padded length) <= max_tokens`, where the padded
            length is the longest a batch of the bucket can have.
        quadratic_length: with `max_tokens`, the cost of a length L becomes
            `L + L**2 / quadratic_length` (Lhotse's `quadratic_duration`), so
            long batches of attention models shrink faster than linearly.
        truncate: truncation buckets: every element of bucket
            `[b_{i-1}, b_i)` is cut to `b_{i-1}`, so batches need no padding.
            The first bucket `[0, b_0)` has no lower bound and is padded.
        pad_to_bucket: pad every sequence component to its bucket's upper
            bound (`b_i - 1`; the last bucket's is `max_length` or the longest
            element) instead of the batch's longest element, so an epoch feeds
            at most one shape per bucket and batch size. Per-component
            `padding` lengths take precedence.
        **kwargs: the arguments of `kerasbatch.builders.Builder` (`shuffle`,
            `seed`, `drop_remainder`, `padding`, `max_length`, `overflow`,
            `output_lengths`, `output_mask`, `prefetch`).

    After `build` (or `adapt`), `resolved_boundaries`, `resolved_batch_sizes`,
    `bucket_counts` and `bucket_lengths` (the longest padded length a batch
    of each bucket can have) describe the buckets.

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> rng = np.random.default_rng(0)
    >>> x = [rng.integers(1, 100, n) for n in rng.integers(1, 60, 500)]
    >>> builder = kerasbatch.BucketBuilder(boundaries=[10, 20, 40], batch_size=16)
    >>> dataset = builder.build(x, y=rng.integers(0, 2, 500))
    >>> builder.resolved_boundaries
    [10, 20, 40]
    >>> int(dataset.cardinality()) == builder.statistics().num_batches
    True
    >>> print(builder.statistics())  # PaddedBuilder(16) gets 0.553 here
    33 batches of 500 elements: padding efficiency 0.822 (x=0.822), 15 distinct shapes, 0 dropped, 0 truncated (0 positions)
    """

    def get_config(self):
        config = super().get_config()
        config.update(self._bucket_config())
        return config

    def _prepare(self, prepared, layout):
        candidates = prepared.candidates
        lengths = prepared.cut_lengths
        boundaries = self._resolve_boundaries(lengths[candidates])
        longest = int(lengths[candidates].max())
        buckets = batching.bucket_layout(
            lengths,
            candidates,
            prepared.element_limits,
            prepared.component_lengths,
            prepared.paddings,
            boundaries=boundaries,
            last_upper=self.max_length if self.max_length is not None else longest,
            truncate=self.truncate,
            pad_to_multiple=self.pad_to_multiple,
        )
        prepared = prepared.extended(
            BucketPrepared,
            element_limits=buckets.element_limits,
            element_bounds=buckets.element_bounds,
            bucket_of=buckets.bucket_of,
        )
        self.resolved_boundaries = boundaries
        self.bucket_counts = buckets.counts
        self.bucket_lengths = buckets.padded_lengths
        self.resolved_batch_sizes = self._resolve_batch_sizes(
            len(boundaries) + 1,
            lambda bucket: self._budget_batch_size(prepared, bucket),
        )
        return prepared

    @staticmethod
    def _members(prepared, bucket):
        candidates = prepared.candidates
        return candidates[prepared.bucket_of[candidates] == bucket]

    def longest_element(self, bucket):
        """The index of the longest (cut) element of `bucket`, or None if empty."""
        return self._longest_element(self.built.prepared, bucket)

    def _longest_element(self, prepared, bucket):
        members = self._members(prepared, bucket)
        if not len(members):
            return None
        kept = np.minimum(
            prepared.cut_lengths[members], prepared.element_limits[members]
        )
        return int(members[np.argmax(kept)])

    def _budget_batch_size(self, prepared, bucket):
        members = self._members(prepared, bucket)
        longest = self._longest_element(prepared, bucket)
        if longest is not None:
            kept = min(prepared.cut_lengths[longest], prepared.element_limits[longest])
            longest = (longest, int(kept))
        return self._budget_size(
            bucket, self.bucket_lengths[bucket], len(members), longest
        )

    def _epoch_order(self, prepared):
        candidates = prepared.candidates
        return batching.bucket_order(
            candidates,
            prepared.bucket_of[candidates],
            self.resolved_batch_sizes,
            self.remainder,
            self.shuffle,
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class BucketPrepared(Prepared):
    """A `Prepared` value with every element's bucket.

    Attributes:
        bucket_of: int bucket of every element (by its cut length).
    """

    bucket_of: np.ndarray
