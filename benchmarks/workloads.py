"""The reference workloads, as token-id sequences.

- `lognormal`: `np.clip(rng.lognormal(3.5, 0.7, 20_000).astype(int), 1, 512)`
  with `rng = np.random.default_rng(0)`.
- `bimodal`: 70 % `normal(12, 4)` and 30 % `normal(200, 50)`, rounded and
  clipped to `[1, 512]`, 20 000 items, seed 0. The two modes are drawn one
  after the other from `np.random.default_rng(0)` (14 000 short, then 6 000
  long) and shuffled with the same generator, so the modes are interleaved.

Token ids are drawn from `[1, vocab)` so that 0 is free for padding (a padded
position is exactly a 0); labels are per-example binary labels. Both come from
a separate generator (seed 1), so the lengths are exactly the ones above.

The benchmarks that need `lognormal` data of any size draw it from a generator
of their own (`draw_lognormal_lengths`, `draw_lognormal_sequences`).
"""

import numpy as np

NUM_ELEMENTS = 20_000
MAX_LENGTH = 512
SIGMA = 0.7  # of the log-lengths of `lognormal`
WORKLOADS = ("lognormal", "bimodal")


def draw_lognormal_lengths(rng, num_elements, mu=3.5, max_length=MAX_LENGTH):
    """`num_elements` lengths `clip(lognormal(mu, 0.7), 1, max_length)` drawn
    from `rng` (the reference: `mu=3.5`, `max_length=512`; mean about 42)."""
    lengths = rng.lognormal(mu, SIGMA, num_elements).astype(int)
    return np.clip(lengths, 1, max_length)


def lognormal_mu(mean_length):
    """The `mu` of `draw_lognormal_lengths` whose (unclipped) mean length is
    `mean_length`: `log(mean_length) - 0.7**2 / 2`."""
    return float(np.log(mean_length) - SIGMA**2 / 2)


def draw_lognormal_sequences(rng, num_elements, vocab=1000, **length_options):
    """`num_elements` int32 token-id sequences, all drawn from `rng`: the lengths
    (`draw_lognormal_lengths` with `length_options`), then the ids in
    `[1, vocab)` sequence by sequence."""
    lengths = draw_lognormal_lengths(rng, num_elements, **length_options)
    return [rng.integers(1, vocab, n).astype("int32") for n in lengths]


def lognormal_lengths(num_elements=NUM_ELEMENTS):
    """The `lognormal` lengths, int64 of shape `(num_elements,)`."""
    lengths = draw_lognormal_lengths(np.random.default_rng(0), NUM_ELEMENTS)
    return lengths.astype(np.int64)[:num_elements]


def bimodal_lengths(num_elements=NUM_ELEMENTS):
    """The `bimodal` lengths, int64 of shape `(num_elements,)`."""
    rng = np.random.default_rng(0)
    num_short = int(round(0.7 * NUM_ELEMENTS))
    short = rng.normal(12, 4, num_short)
    long = rng.normal(200, 50, NUM_ELEMENTS - num_short)
    lengths = rng.permutation(np.concatenate([short, long]))
    lengths = np.clip(np.rint(lengths), 1, MAX_LENGTH).astype(np.int64)
    return lengths[:num_elements]


def lengths(name, num_elements=NUM_ELEMENTS):
    """The lengths of workload `name` (the first `num_elements` of them)."""
    if name == "lognormal":
        return lognormal_lengths(num_elements)
    if name == "bimodal":
        return bimodal_lengths(num_elements)
    raise ValueError(f"Unknown workload {name!r}; valid names: {WORKLOADS}.")


def sequences(name, num_elements=NUM_ELEMENTS, vocab=1000):
    """Returns `(x, y, lengths)` of workload `name`.

    `x` is a list of int32 token-id arrays of shape `(length,)` with ids in
    `[1, vocab)`; `y` float32 binary labels of shape `(num_elements,)`.
    """
    lengths_ = lengths(name, num_elements)
    rng = np.random.default_rng(1)
    tokens = rng.integers(1, vocab, int(lengths_.sum()), dtype=np.int32)
    x = np.split(tokens, np.cumsum(lengths_)[:-1])
    y = rng.integers(0, 2, len(lengths_)).astype(np.float32)
    return x, y, lengths_
