"""What a stream's `build` takes on the numpy engines: its source, checked,
and the structure of its elements
(`kerasbatch.data.stream_elements.StreamElements`). The `tf.data` engine
checks its own (`kerasbatch.engines.tf_data.stream_rows.stream_elements`).
"""

from kerasbatch import optional
from kerasbatch.data import sources
from kerasbatch.data.stream_elements import StreamElements
from kerasbatch.engines import processes

#: The cardinality of a source whose number of elements is unknown
#: (tf.data's).
UNKNOWN = -2


def numpy_elements(source, engine, per_example):
    """`(elements, cardinality)` of a source of the numpy engines: a Grain
    dataset, a Python iterable, or a function that returns an iterator
    (read once here, for its first element's structure); a clear error for
    what they cannot stream."""
    tf = optional.imported("tensorflow")
    if tf is not None and isinstance(source, tf.data.Dataset):
        raise TypeError(
            "A tf.data.Dataset streams on the 'tf.data' engine: build it "
            f"with engine='tf.data', not {engine!r}."
        )
    if not callable(source):
        try:
            iterator = iter(source)
        except TypeError:
            raise TypeError(
                f"StreamBucketBuilder.build(engine={engine!r}) takes a "
                "Grain dataset, a Python iterable or a function that "
                f"returns an iterator, got {type(source).__name__}."
            ) from None
        if iterator is source:
            raise TypeError(
                "The source is an iterator (e.g. a generator), which gives "
                "one pass only, but every epoch reads the source again: "
                "pass an iterable (a list, a Grain dataset) or a function "
                "that returns a new iterator."
            )
    from kerasbatch.engines.numpy import stream as numpy_stream

    try:
        first = next(numpy_stream.open_source(source))
    except StopIteration:
        raise ValueError("The source yields no element.") from None
    elements = StreamElements.of_element(first, per_example)
    strings = [c.where for c in elements.components if sources.is_string(c.dtype)]
    if strings:
        raise ValueError(
            f"{', '.join(strings)} hold strings, which a stream pads on "
            "the 'tf.data' engine only: encode them as numbers (e.g. "
            "token ids), or build a tf.data.Dataset with engine='tf.data'."
        )
    if processes.jax_processes()[1] > 1:
        raise ValueError(
            "StreamBucketBuilder on the numpy engines feeds one process; "
            "under multi-process JAX, BucketBuilder(...).build(x, "
            f"engine={engine!r}) gives each process its part of every "
            "batch."
        )
    cardinality = len(source) if hasattr(source, "__len__") else UNKNOWN
    return elements, cardinality
