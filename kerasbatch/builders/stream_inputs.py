"""What a stream's `build` takes: its source, checked, and the structure of
its elements (`kerasbatch.data.stream_elements.StreamElements`)."""

from kerasbatch import optional
from kerasbatch.data import sources
from kerasbatch.data.stream_elements import StreamElements
from kerasbatch.engines import processes

#: The cardinality of a source whose number of elements is unknown
#: (tf.data's).
UNKNOWN = -2


def tf_data_elements(dataset, shardable, batched):
    """`(elements, cardinality)` of a `tf.data.Dataset` source (`batched`:
    its elements are blocks of examples); a clear error for what the
    `tf.data` engine cannot stream."""
    if optional.imported("tensorflow") is None and not optional.tensorflow.available:
        raise ImportError(
            "StreamBucketBuilder streams tf.data datasets on the 'tf.data' "
            "engine, which needs TensorFlow: pip install tensorflow. "
            "Without it, build(source, engine='grain') streams a Grain "
            "dataset or a Python iterable."
        )
    tf = optional.tensorflow
    if not isinstance(dataset, tf.data.Dataset):
        raise TypeError(
            "StreamBucketBuilder.build(engine='tf.data') takes a "
            f"tf.data.Dataset, got {type(dataset).__name__}; stream a "
            "Grain dataset or a Python iterable with engine='grain' or "
            "'python'."
        )
    if shardable is not None and shardable.element_spec != dataset.element_spec:
        raise ValueError(
            "shardable must be the same dataset with a shard hint: its "
            f"element_spec {shardable.element_spec} differs from the "
            f"dataset's {dataset.element_spec}."
        )
    from kerasbatch.engines.tf_data import stream_rows

    spec = dataset.element_spec
    elements = StreamElements.of_spec(
        stream_rows.example_spec(spec) if batched else spec
    )
    cardinality = int(dataset.cardinality())
    if batched and cardinality >= 0:  # blocks, of elements not yet known
        cardinality = UNKNOWN
    return elements, cardinality


def numpy_elements(source, engine, per_example):
    """`(elements, cardinality)` of a source of the numpy engines: a Grain
    dataset, a Python iterable, or a function that returns an iterator
    (read once here, for its first element's structure); a clear error for
    what they cannot stream."""
    if optional.imported("tensorflow") and isinstance(
        source, optional.tensorflow.data.Dataset
    ):
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
