"""Batches made by tf.data service workers: epochs as data, not as state.

A built dataset reads its epoch from a `tf.Variable` in the builder's
process; a tf.data service worker runs the dataset's graph in another
process, where that variable does not exist. So the dataset a builder sends
to the service carries its epochs as data:

- its source is `Dataset.range` over the global batch numbers of `epochs`
  epochs (batch `i` is batch `i % num_batches` of epoch
  `initial_epoch + i // num_batches`);
- a `scan` keeps the batch arguments of the epoch running on that worker,
  computed in the graph from `(seed, epoch)` exactly as the local pipeline
  does (`kerasbatch.engines.tf_data.orders`) and recomputed only when the epoch changes;
- the batch function gathers and pads the batch, on the worker.

The graph holds no Python and no client state, so it can be serialised and
sent to the dispatcher. With `processing_mode="distributed_epoch"` the
dispatcher hands the batch numbers out to the workers one at a time
(dynamic sharding): every batch of every epoch is made exactly once, by
whichever worker asks first, and arrives in an order that depends on the
workers' speed. With `"parallel_epochs"` every worker makes every batch, in
the plan's order: exactly once only with a single worker, which is why the
builder asks for `num_workers=1` with that mode.

At the client, a running count of the batches that arrived tells the epoch
(`last_started_epoch`), so `statistics()` and the callbacks describe the
epoch being trained on.

A `kerasbatch.StreamBucketBuilder` has no plan to carry: its graph holds no
data, only how to read and bucket the input. So every epoch is registered
as a dataset of its own with its epoch (its shuffle seed) fixed, and each
iteration at the client reads the next epoch's dataset from the service,
as a local iteration would; workers share out the input elements
(`ShardingPolicy.HINT`) and bucket their share. The statistics are counted
at the client from what each batch carries (`_measure_batch` runs on the
workers, `_count_batch` here).
"""

import numbers
import socket
import urllib.parse

from kerasbatch.engines.tf_data.as_written import traced_as_written
from kerasbatch.optional import tensorflow as tf


def sharding():
    """`tf.data.experimental.service.ShardingPolicy`."""
    return tf.data.experimental.service.ShardingPolicy


def planned_modes():
    """The modes that keep every epoch exactly once for an in-memory
    builder's batches: `{mode: name}`."""
    return {
        "distributed_epoch": "'distributed_epoch'",
        sharding().DYNAMIC: "ShardingPolicy.DYNAMIC",
    }


def stream_modes():
    """... and for a stream's: `FILE` auto-sharding cannot reach the files
    through the bucketing (`group_by_window`), and dynamic sharding has no
    single source to split, so workers shard the elements (`HINT`) or the
    batches (`DATA`)."""
    return {
        sharding().HINT: "ShardingPolicy.HINT",
        sharding().DATA: "ShardingPolicy.DATA",
    }


def check_request(
    service,
    processing_mode,
    num_workers,
    epochs,
    initial_epoch,
    timeout,
    exactly_once_modes,
):
    """Raises on a request `distribute_with_service` cannot serve exactly
    once, bad epochs, or a dispatcher that does not answer (bounded wait).

    Args:
        exactly_once_modes: `{mode: name}` of the processing modes that keep
            every epoch exactly once with any number of workers.
    """
    check_mode(processing_mode, num_workers, exactly_once_modes)
    for name, value, least in (
        ("epochs", epochs, 1),
        ("initial_epoch", initial_epoch, 0),
    ):
        if (
            not isinstance(value, numbers.Integral)
            or isinstance(value, bool)
            or value < least
        ):
            kind = "positive" if least else "non-negative"
            raise ValueError(f"{name} must be a {kind} int, got {value!r}.")
    check_reachable(service, timeout)


def check_mode(processing_mode, num_workers, exactly_once_modes):
    """Raises unless `processing_mode` keeps every epoch exactly once."""
    if processing_mode in exactly_once_modes:
        return
    if processing_mode in ("parallel_epochs", sharding().OFF):
        if num_workers == 1:
            return
        raise ValueError(
            "processing_mode='parallel_epochs' makes every worker produce "
            "every batch, so with N workers an epoch holds each element N "
            f"times. Use {' or '.join(exactly_once_modes.values())}, or pass "
            "num_workers=1 if the service has a single worker (got "
            f"num_workers={num_workers!r})."
        )
    raise ValueError(
        f"processing_mode {processing_mode!r} cannot keep every epoch exactly "
        f"once for these batches; use {' or '.join(exactly_once_modes.values())}"
        ", or 'parallel_epochs' with one worker."
    )


def check_reachable(service, timeout):
    """Raises if nothing accepts a connection at the dispatcher's address
    within `timeout` seconds (the tf.data service client would wait forever).

    Args:
        service: `"grpc://host:port"` or `"host:port"`.
        timeout: seconds.
    """
    if not isinstance(service, str):
        raise TypeError(
            "service must be the dispatcher's address as a string, e.g. "
            f"'grpc://localhost:5050', got {service!r}."
        )
    parsed = urllib.parse.urlsplit(service if "://" in service else f"//{service}")
    try:
        host, port = parsed.hostname, parsed.port
    except ValueError:
        host = port = None
    if not host or not port:
        raise ValueError(
            f"service {service!r} is not a dispatcher address of the form "
            "'grpc://host:port'."
        )
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as error:
        raise ConnectionError(
            f"No tf.data service dispatcher answers at {service!r} (waited "
            f"{timeout:g} s: {error}). Start one "
            "(tf.data.experimental.service.DispatchServer) or fix the address."
        ) from None


@traced_as_written
def distribute_planned(
    served, service, *, processing_mode, epochs, initial_epoch, num_workers, timeout
):
    """The batches of a built `tf.data` dataset for `epochs` epochs, made by
    the workers of a tf.data service
    (`kerasbatch.builders.PlannedBuilder.distribute_with_service`)."""
    from kerasbatch.engines import served as served_lib
    from kerasbatch.engines.tf_data import pipeline

    check_request(
        service,
        processing_mode,
        num_workers,
        epochs,
        initial_epoch,
        timeout,
        planned_modes(),
    )
    local = pipeline.Pipeline(served)
    batch_function, num_batches = local.part.batch_function(None)
    batches = global_batches(
        local.part.batch_arguments, int(epochs), int(initial_epoch), num_batches
    ).map(batch_function, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    remote = batches.apply(
        tf.data.experimental.service.distribute(processing_mode, service)
    )

    def arrived(number, batch):
        epoch = initial_epoch + number // num_batches
        with tf.control_dependencies([served.state.mark_started(epoch)]):
            return tf.nest.map_structure(tf.identity, batch)

    remote = local.prefetched(remote.enumerate().map(arrived))
    remote = remote.apply(tf.data.experimental.assert_cardinality(epochs * num_batches))
    return served_lib.serve(remote, served)


def global_batches(batch_arguments, epochs, initial_epoch, num_batches):
    """The batch function's arguments of `epochs` epochs, one per batch, as
    a dataset with no state outside its graph (see the module docstring).

    Args:
        batch_arguments: `epoch -> ` the stacked arguments of every batch of
            `epoch` (a tensor).
        epochs: how many epochs.
        initial_epoch: the first epoch.
        num_batches: batches per epoch.
    """
    first = batch_arguments(tf.constant(initial_epoch, tf.int64))

    def step(state, number):
        cached_epoch, cached = state
        epoch = initial_epoch + number // num_batches
        arguments = tf.cond(
            tf.equal(epoch, cached_epoch),
            lambda: cached,
            lambda: batch_arguments(epoch),
        )
        batch = tf.nest.map_structure(
            lambda values: values[number % num_batches], arguments
        )
        return (epoch, arguments), batch

    numbers = tf.data.Dataset.range(epochs * num_batches)
    initial = (tf.constant(initial_epoch, tf.int64), first)
    return numbers.scan(initial, step)


@traced_as_written
def distribute_stream(
    served, service, processing_mode, epochs, initial_epoch, timeout, num_workers
):
    """A stream's epochs made by the workers of a tf.data service
    (`kerasbatch.StreamBucketBuilder.distribute_with_service`): a
    `tf.data.Dataset`, one epoch per iteration, counted at the client."""
    from kerasbatch.engines import served as served_lib
    from kerasbatch.engines.tf_data import stream_pipeline
    from kerasbatch.engines.tf_data.as_written import plain

    pipeline = stream_pipeline.StreamPipeline(served)
    if processing_mode is None:
        processing_mode = sharding().HINT
    check_request(
        service,
        processing_mode,
        num_workers,
        epochs,
        initial_epoch,
        timeout,
        stream_modes(),
    )
    source, shard_elements = served.built.source, False
    sharded = processing_mode == sharding().HINT
    if sharded:
        if served.built.shardable is not None:
            source = served.built.shardable  # whole files per worker
        else:
            shard_elements = True
    measured = [
        pipeline.epoch_batches(
            source,
            tf.constant(epoch, tf.int64),
            shard_elements,
            whole_input=not sharded,
        )
        for epoch in range(initial_epoch, initial_epoch + epochs)
    ]
    service_api = tf.data.experimental.service
    ids = tf.stack([service_api.register_dataset(service, m) for m in measured])
    spec = measured[0].element_spec

    def epoch_batches(epoch):
        registered = epoch - initial_epoch
        check = tf.debugging.assert_less(
            registered,
            tf.constant(epochs, tf.int64),
            message=(
                f"distribute_with_service registered epochs {initial_epoch} "
                f"to {initial_epoch + epochs - 1}; this iteration is past "
                "them: pass a larger epochs= (or set_epoch to one of them)"
            ),
        )
        with tf.control_dependencies([check]):
            dataset_id = tf.gather(ids, registered)
        batches = service_api.from_dataset_id(
            processing_mode, service, dataset_id, element_spec=spec
        )
        return pipeline.counted(batches)

    epochs_ = tf.data.Dataset.range(1).map(plain(lambda _: pipeline.begin_epoch()))
    remote = pipeline.prefetched(epochs_.flat_map(plain(epoch_batches)))
    return served_lib.serve(remote, served)
