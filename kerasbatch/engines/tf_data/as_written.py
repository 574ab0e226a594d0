"""The engine's graph code, which tf.data traces as written: no AutoGraph.

tf.data converts every function it traces with AutoGraph, unless told
not to. The engine's functions need no conversion: their Python `if`s and
loops decide on Python values as the graph is traced, and what the data
decides is TensorFlow ops (`tf.cond`, datasets). Converted, they would only
cost: AutoGraph parses and rewrites the source of every function it reaches,
2-4 CPU-s in the first build of a process (`benchmarks/first_build.py`:
a `BucketBuilder` on 300 sequences, 2.66 CPU-s converted, 0.29 as
written). A user's functions
that the engine traces (a `kerasbatch.Reducer`'s) are converted, as tf.data
converts them (`kerasbatch.engines.tf_data.reducers`).

`kerasbatch.io` builds its pipelines as written too (`traced_as_written` on
its entry points): AutoGraph converted its record checks and parsers in
every build of a loader; a loader's first length pass and build took 9.6
CPU-s, 2.3 as written (`benchmarks/first_build.py`).
"""

import functools

from kerasbatch.optional import tensorflow as tf


def plain(function):
    """`function`, which runs as written, and so do the functions of the
    datasets it makes (no AutoGraph, nor its cost)."""
    return tf.autograph.experimental.do_not_convert(function)


def traced_as_written(function):
    """Decorator: every call of `function` runs as `plain` makes it, so the
    functions of the datasets it makes are traced as written. TensorFlow is
    imported at the first call, not where the decorator is applied."""

    @functools.wraps(function)
    def as_written(*args, **kwargs):
        return plain(function)(*args, **kwargs)

    return as_written
