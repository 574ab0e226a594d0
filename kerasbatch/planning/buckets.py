"""Length buckets: which bucket holds a length, where truncation cuts it, and
to what length its batches pad.

One `Buckets` value serves both bucket builders: `kerasbatch.BucketBuilder`
assigns a whole array of lengths at `build` (NumPy), and
`kerasbatch.StreamBucketBuilder` assigns one element at a time in the
`tf.data` graph (TensorFlow). Each rule is written once, in both engines side
by side, and they agree bit for bit (tested). Imports without TensorFlow.
"""

import dataclasses

import numpy as np

from kerasbatch.planning import plan as plan_lib


@dataclasses.dataclass(frozen=True)
class Buckets:
    """Boundaries `[b_0, ..., b_{n-1}]` make the n+1 buckets `[0, b_0), [b_0,
    b_1), ..., [b_{n-1}, inf)`.

    Attributes:
        boundaries: tuple of strictly increasing positive ints.
        lower: int64 shortest length of each bucket.
        bounds: int64 padding bound of each bucket: the longest its elements
            can be after cutting (`b_i - 1`; the last bucket's longest, -1
            when unknown; with `truncate`, the lower bound they are cut to).
        truncate: truncation buckets: an element of bucket i > 0 is cut to
            the bucket's lower bound `b_{i-1}`.

    Example:

    >>> import numpy as np
    >>> buckets = Buckets.of([4, 8], last_upper=20, truncate=True)
    >>> buckets.assign(np.array([1, 4, 7, 8, 20])).tolist()
    [0, 1, 1, 2, 2]
    >>> buckets.cut_limits(np.array([0, 1, 2]), limit=6).tolist()
    [6, 4, 6]
    >>> buckets.bounds.tolist()
    [3, 4, 8]
    """

    boundaries: tuple
    lower: np.ndarray
    bounds: np.ndarray
    truncate: bool

    @classmethod
    def of(cls, boundaries, last_upper, truncate):
        """The buckets of `boundaries`; `last_upper` is the longest length
        the last bucket holds (-1 when unknown)."""
        lower = np.array([0, *boundaries], dtype=np.int64)
        bounds = np.array([b - 1 for b in boundaries] + [last_upper], dtype=np.int64)
        if truncate:
            bounds = np.where(lower > 0, lower, bounds)
        return cls(tuple(int(b) for b in boundaries), lower, bounds, bool(truncate))

    @property
    def num_buckets(self):
        return len(self.boundaries) + 1

    # ------------------------------------------------------------------ NumPy
    def assign(self, lengths):
        """int32 bucket of every length (an int array)."""
        return np.searchsorted(self.boundaries, lengths, side="right").astype(np.int32)

    def cut_limits(self, buckets, limit=plan_lib.NO_LIMIT):
        """int64 cut length of elements in `buckets` (an int array) whose cut
        length so far is `limit` (an int or an array)."""
        if not self.truncate:
            return np.broadcast_to(np.int64(limit), np.shape(buckets))
        return np.where(buckets > 0, np.minimum(self.lower[buckets], limit), limit)
