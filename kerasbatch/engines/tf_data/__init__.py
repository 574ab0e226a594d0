"""The `tf.data` engine: plans turned into batches inside a graph.

- `pipeline`: a built value's dataset, epoch after epoch, with the parts
  for its kind of batches (`rows`, `packed`, `chunks`, `windows`);
- `orders`: each epoch's order of batches, computed in the graph (the
  twin of `kerasbatch.planning.orders`, bit for bit);
- `batch`: the epoch counter in variables, and the map that gathers, cuts
  and pads one batch;
- `distribute`: each replica's part of every batch (`tf.distribute`);
- `service`: epochs made by the workers of a tf.data service;
- `stream_pipeline`: a stream's dataset, its rows (`stream_rows`), buckets planned
  block by block (`stream_blocks`) and counters (`stream_counters`).
"""

#: Its datasets are `tf.data` datasets.
IN_GRAPH = True


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
