"""The `tf.data` engine: plans turned into batches inside a graph.

- `pipeline`: a built value's dataset, epoch after epoch (what every
  pipeline shares: `epoch_pipeline`), with the parts
  for its kind of batches (`rows`, `packed`, `chunks`, `windows`);
- `orders`: each epoch's order of batches, computed in the graph (the
  twin of `kerasbatch.planning.orders`, bit for bit);
- `batch`: the epoch counter in variables, and the map that gathers, cuts
  and pads one batch;
- `distribute`: each replica's part of every batch (`tf.distribute`);
- `service`: epochs made by the workers of a tf.data service;
- `stream_pipeline`: a stream's dataset, its rows (`stream_rows`), buckets planned
  block by block (`stream_blocks`) and counters (`stream_counters`);
- `tensors`, `outputs`, `reducers`: the data's tensors, the batch element
  and window reductions as TensorFlow ops; `in_memory`: a finite dataset
  read into memory; `replay`: batches made again in a pipeline.
"""

from kerasbatch import optional

#: Its datasets are `tf.data` datasets.
IN_GRAPH = True


def available():
    """Whether the engine runs here: TensorFlow imports."""
    return optional.tensorflow.available


def is_dataset(value):
    """Whether `value` is a `tf.data.Dataset` (importing nothing: a dataset
    needs TensorFlow imported)."""
    tf = optional.imported("tensorflow")
    return tf is not None and isinstance(value, tf.data.Dataset)


def planned(built, epoch=0):
    """A `tf.data.Dataset` of the batches of `built` (a
    `kerasbatch.planning.built.Built`); its next iteration yields `epoch`."""
    from kerasbatch.engines.tf_data import pipeline

    return pipeline.planned(built, epoch)


def stream(built, epoch=0):
    """A `tf.data.Dataset` of the batches of the stream `built` (a
    `kerasbatch.planning.built.StreamBuilt`, which holds its `tf.data`
    source); its next iteration yields `epoch`."""
    from kerasbatch.engines.tf_data import stream_pipeline

    return stream_pipeline.stream(built, epoch)


def pipeline_of(served):
    """The pipelines of the built dataset of `served`: planned batches, or a
    stream's."""
    if served.built.batches == "stream":
        from kerasbatch.engines.tf_data import stream_pipeline

        return stream_pipeline.StreamPipeline(served)
    from kerasbatch.engines.tf_data import pipeline

    return pipeline.Pipeline(served)


def distributed(served, strategy):
    """The batches of a built `tf.data` dataset (planned, or a stream's), per
    replica, for `strategy` (`kerasbatch.builders.PlannedBuilder.distribute`):
    a `tf.distribute.DistributedDataset` served by `served`."""
    from kerasbatch.engines import served as served_lib
    from kerasbatch.engines.tf_data import distribute
    from kerasbatch.optional import tensorflow as tf
    from kerasbatch.planning import plan as plan_lib

    if not isinstance(strategy, tf.distribute.Strategy):
        raise TypeError(
            "distribute takes a tf.distribute.Strategy (e.g. "
            f"MirroredStrategy), got {type(strategy).__name__}."
        )
    built = served.built
    replicas = strategy.num_replicas_in_sync
    distribute.check_divisible(
        [
            (what, size)
            for what, size in built.fixed_batch_sizes
            if plan_lib.round_up(size, built.settings.batch_multiple) % replicas
        ],
        replicas,
        built.builder,
    )
    built.check_even_split(
        replicas,
        f"The strategy's {replicas} replicas each take an equal part of every batch",
    )

    def per_pipeline(input_context):
        return pipeline_of(served).dataset(
            distribute.ReplicaSlice.of(strategy, input_context)
        )

    distributed = strategy.distribute_datasets_from_function(per_pipeline)
    steps = served.steps_per_epoch()
    if steps is not None:
        # tf.distribute reports the per-pipeline cardinality (one element
        # per local replica and step), which Keras takes for steps.
        distributed._cardinality = steps
    return served_lib.serve(distributed, served)
