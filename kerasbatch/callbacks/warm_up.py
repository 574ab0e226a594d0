"""Compiles every batch shape before training, leaving the model untouched."""

import time

import keras
import numpy as np

from kerasbatch import engines, optional
from kerasbatch.builders.datasets import builder_of
from kerasbatch.callbacks.base import BuilderCallback
from kerasbatch.callbacks.compile_shapes import compiles_per_shape
from kerasbatch.callbacks.fit_datasets import fit_sources
from kerasbatch.engines import derived
from kerasbatch.engines import served as served_lib
from kerasbatch.engines import tf_data as tf_data_engine
from kerasbatch.engines.numpy import planned as numpy_planned
from kerasbatch.engines.tf_data import batch as tf_data
from kerasbatch.engines.tf_data import replay as tf_data_replay


class WarmUp(BuilderCallback):
    """Compiles the model's train step for every batch shape before epoch 1.

    Under XLA (`jit_compile=True`, the default on the JAX backend and on a
    TensorFlow GPU) every distinct batch shape costs one compilation the
    first time it arrives, so the first epoch mixes training with
    compiling: its progress bar and `kerasbatch.callbacks.Throughput` show
    neither speed. A builder knows every shape an epoch feeds before it runs
    (`batch_shapes()`); at `on_train_begin` this callback takes one real
    batch of each (from a private copy of the dataset's pipeline, with its
    own epoch counter: the dataset itself is not iterated), runs the
    model's own train function on each, and then leaves every variable as
    it was. Epoch 1 then compiles nothing: it runs at steady-state speed.

    Nothing the warm-up runs survives it: the model's weights (trainable,
    non-trainable, random seed states), the optimizer's variables
    (`iterations` included) and the metrics' states are exactly those
    before it, so training with `WarmUp` gives bit for bit the weights of
    training without it.

    * JAX: the train function is a pure jitted function of `(state, data)`;
      the warm-up calls the very function `fit` calls, on a copy of the
      state (its argument is donated), and throws the new state away.
    * TensorFlow: the warm-up calls the model's `train_function` on an
      iterator whose batches have the training dataset's exact
      `element_spec` (so the `tf.function` is traced once, as `fit` would
      trace it, and XLA compiles each shape into the cache `fit` reads),
      then assigns every model, optimizer and metric variable its value
      from before.

    `steps_per_execution > 1` works on both: one execution then runs the
    warm-up batches one after the other.

    What is not warmed up, and why:

    * A model that does not compile per shape (`jit_compile=False`, or
      `run_eagerly=True`): its first epoch has nothing to compile per
      shape, and the callback does nothing (`shapes` stays empty).
    * Training under a `tf.distribute` strategy other than the default, or
      a `keras.distribution` on JAX: the batches and state would have to be
      laid out over the devices exactly as `fit` lays them out; the
      callback raises a `ValueError` rather than compile layouts `fit`
      would not use.
    * Shapes that cannot be known before an epoch runs (a
      `kerasbatch.StreamBucketBuilder` without `lengths`, or whose padding
      depends on the batch): `ValueError`.
    * Shapes of later epochs: builders whose shapes change every epoch
      (batch padding without `pad_to_bucket` / `pad_to_multiple`) meet new
      shapes each epoch; `epochs` warms more of them up front. With
      `pad_to_bucket=True` and `remainder="even"` (or `"pad"`) every epoch
      has the same shapes.

    The warm-up reads the data of each epoch it warms until every shape has
    appeared (at worst one epoch of the pipeline, not of training; for a
    stream, its input from the start), and costs one train step per shape.

    Args:
        builder: the `kerasbatch` builder whose dataset `model.fit` trains on.
        dataset: the dataset `model.fit` trains on, as `builder.build`
            returned it or made from it by per-batch transformations
            (`map`, `prefetch`, ...; `kerasbatch.engines.derived`): the
            warm-up runs its maps on the warm-up batches, so the model is
            compiled for the batches `fit` gives it. Needed when the builder
            built several datasets still in use, and when `fit` trains on a
            mapped dataset.
        validation_data: the validation dataset given to `model.fit`, as a
            builder's `build` returned it or mapped from it: its shapes are
            warmed up too (the test step, which only metric states
            remember).
        epochs: how many epochs of shapes to warm up, from the one the
            dataset will yield next.
        verbose: 1 prints how many shapes were compiled, and how long it
            took.

    Attributes:
        shapes: the training shapes warmed up (as `batch_shapes()` lists
            them), after `on_train_begin`.
        validation_shapes: the validation shapes warmed up.
        seconds: how long the warm-up took.

    Example:

    >>> import numpy as np
    >>> import keras
    >>> import kerasbatch
    >>> x = [np.ones(n, "int32") for n in (1, 2, 3, 5, 6, 7)]
    >>> builder = kerasbatch.BucketBuilder(boundaries=[4], batch_size=2,
    ...     pad_to_bucket=True, remainder="pad", max_length=8)
    >>> train = builder.build(x, y=np.zeros(6))
    >>> model = keras.Sequential([
    ...     keras.layers.Embedding(10, 2),
    ...     keras.layers.GlobalAveragePooling1D(),
    ...     keras.layers.Dense(1),
    ... ])
    >>> model.compile("sgd", "mse", jit_compile=True)
    >>> warm_up = kerasbatch.callbacks.WarmUp(builder)
    >>> history = model.fit(train, epochs=1, verbose=0, callbacks=[warm_up])
    >>> warm_up.shapes
    [{'x': (2, 3)}, {'x': (2, 8)}]
    """

    def __init__(
        self, builder, dataset=None, validation_data=None, epochs=1, verbose=0
    ):
        super().__init__(builder)
        if not isinstance(epochs, int) or isinstance(epochs, bool) or epochs <= 0:
            raise ValueError(f"epochs must be a positive int, got {epochs!r}.")
        self.dataset = dataset
        self.validation_data = validation_data
        self.epochs = epochs
        self.verbose = verbose
        self.shapes = []
        self.validation_shapes = []
        self.seconds = 0.0

    def on_train_begin(self, logs=None):
        self.shapes, self.validation_shapes, self.seconds = [], [], 0.0
        training, validation = fit_sources(
            self.builder, self.dataset, self.validation_data, "WarmUp"
        )
        if training is self.builder:
            raise ValueError(
                f"WarmUp: {type(self.builder).__name__} has no built dataset "
                "in use: call builder.build(...) and train on what it returns."
            )
        model = self.model
        if not compiles_per_shape(model):
            return  # nothing is compiled per shape: nothing to warm up
        _check_distribution(model)
        started = time.perf_counter()
        batches, train_spec, self.shapes = _warm_up_batches(
            training, self._training_dataset(training), self.epochs
        )
        val_batches, val_spec = [], None
        if validation is not None:
            val_batches, val_spec, self.validation_shapes = _warm_up_batches(
                validation, self.validation_data, self.epochs
            )
        with _variables_kept(model, train_spec):
            _run(model, "train", batches, train_spec)
            if val_batches:
                _run(model, "test", val_batches, val_spec)
        self.seconds = time.perf_counter() - started
        if self.verbose:
            print(
                f"WarmUp: compiled {len(self.shapes)} training and "
                f"{len(self.validation_shapes)} validation shapes in "
                f"{self.seconds:.1f}s"
            )

    def _training_dataset(self, training):
        """The dataset `fit` trains on: `dataset`, or the one built (None
        for the numpy engines, whose batches go to JAX as they are, unless
        `dataset` was made from one by Grain transformations)."""
        engine = training._served().engine
        if not engines.in_graph(engine):
            if keras.backend.backend() != "jax":
                raise ValueError(
                    f"WarmUp warms up datasets of the {engine!r} engine "
                    "on JAX; on TensorFlow, build with engine='tf.data'."
                )
            return self.dataset
        dataset = self.dataset
        if dataset is None:
            for built in self.builder._not_freed():
                if builder_of(built) is training:
                    dataset = built
                    break
        root = served_lib.built_dataset(dataset)
        if not tf_data_engine.is_dataset(root):
            raise ValueError(
                "WarmUp warms up a tf.data.Dataset that a builder built (or "
                "made with distribute_with_service); a distributed dataset "
                f"({type(root).__name__}) is not supported."
            )
        return dataset


def _check_distribution(model):
    if keras.backend.backend() == "jax":
        if keras.distribution.distribution() is not None:
            raise ValueError(
                "WarmUp does not support a keras.distribution (JAX): fit lays "
                "out batches and state over the devices, and a warm-up "
                "compiled for other layouts would not be used. Remove WarmUp "
                "from the callbacks."
            )
        return
    # Set when the model was made under a strategy's scope (Keras' own test).
    strategy = getattr(model, "_distribute_strategy", None)
    if strategy is not None:
        raise ValueError(
            f"WarmUp does not support training under {type(strategy).__name__}: "
            "fit distributes batches over the replicas, and a warm-up "
            "compiled for undistributed batches would not be used. Remove "
            "WarmUp from the callbacks."
        )


def _probe(served, epoch):
    """A pipeline identical to `served`'s built dataset, with an epoch
    counter (and a stream's counters) of its own starting at `epoch`
    (iterating it changes nothing that the built dataset or the callbacks
    read)."""
    run = served._served()
    probe = type(run)(run.built, run.engine, tf_data.GraphEpochState(epoch))
    return tf_data_engine.pipeline_of(probe).dataset()


def _warm_up_batches(served, dataset, epochs):
    """One batch of every distinct shape of `epochs` epochs, as `dataset`
    (the dataset `fit` iterates, served by `served`: a built one, or one made
    from it by per-batch transformations, whose maps run on the batches;
    None: the built one, of a numpy engine) yields them; its
    `element_spec` (None for the numpy engines); and the shapes (as
    `batch_shapes` lists them)."""
    built, chain = (None, []) if dataset is None else served_lib.derivation(dataset)
    in_graph = engines.in_graph(served._served().engine)
    element_spec = built.element_spec if in_graph else None
    batches, shapes = _shape_batches(served, element_spec, epochs)
    batches, element_spec = derived.replay(chain, batches, element_spec)
    return batches, element_spec, shapes


def _shape_batches(served, element_spec, epochs):
    """One real batch of every distinct shape of `epochs` epochs of the
    dataset `served` serves, and those shapes (as `batch_shapes` lists
    them)."""
    first = served.epoch
    batches, shapes, seen = [], [], set()
    for epoch in range(first, first + epochs):
        try:
            expected = served.batch_shapes(epoch)
        except ValueError as error:
            raise ValueError(
                f"WarmUp cannot know {type(served).__name__}'s batch shapes "
                f"before the epoch runs: {error}"
            ) from error
        wanted = {_key(shape) for shape in expected} - {_key(s) for s in shapes}
        if not wanted:
            continue
        for batch in _epoch_batches(served, epoch, element_spec):
            signature = tuple(
                tuple(t.shape) for t in keras.tree.flatten(_dense_leaves(batch))
            )
            if signature in seen:
                continue
            seen.add(signature)
            batches.append(batch)
            if len(seen) >= len(shapes) + len(wanted):
                break
        shapes.extend(s for s in expected if _key(s) in wanted)
    return batches, sorted(shapes, key=_key)


def _epoch_batches(served, epoch, element_spec):
    """The batches of `epoch` of the dataset `served` serves, made apart
    from it (nothing it or the callbacks read changes)."""
    if not engines.in_graph(served._served().engine):
        batches = numpy_planned.PlannedBatches(served._served())
        return (batches.batch(epoch, k) for k in range(batches.num_batches))
    probe = _probe(served, epoch)
    if probe.element_spec != element_spec:
        raise ValueError(
            "WarmUp: the dataset's element_spec "
            f"{element_spec} differs from its builder's pipeline "
            f"{probe.element_spec}: pass the dataset build() returned."
        )
    return probe


def _dense_leaves(batch):
    """`batch` with sparse tensors as their dense parts (for shapes)."""
    tf = optional.imported("tensorflow")  # a sparse tensor needs it imported
    if tf is None:
        return batch
    return tf.nest.flatten(batch, expand_composites=True)


def _key(shape):
    return tuple(sorted(shape.items()))


def _model_variables(model):
    """Every variable a train or test step may change, once each."""
    found, seen = [], set()
    groups = [model.variables, model.metrics_variables]
    if getattr(model, "optimizer", None) is not None:
        groups.append(model.optimizer.variables)
    for group in groups:
        for variable in group:
            if id(variable) not in seen:
                seen.add(id(variable))
                found.append(variable)
    return found


class _variables_kept:
    """Every model, optimizer and metric variable restored on exit (exact
    values; on JAX nothing is assigned, the steps run on copies).

    On TensorFlow without a strategy, Keras builds the model, its metrics
    and the optimizer when the train function is first traced: that is
    done first here (symbolically, from the dataset's `element_spec`, as
    Keras does under a strategy), so every variable exists, and is saved,
    before a step runs.
    """

    def __init__(self, model, element_spec):
        self.model = model
        self.element_spec = element_spec

    def __enter__(self):
        if keras.backend.backend() == "jax":
            self.values = None
            return self
        self.model._symbolic_build(data_batch=self.element_spec)
        self.variables = _model_variables(self.model)
        self.values = [keras.ops.copy(v.value) for v in self.variables]
        return self

    def __exit__(self, *exc):
        if self.values is None:
            return False
        for variable, value in zip(self.variables, self.values, strict=True):
            variable.assign(value)
        known = {id(v) for v in self.variables}
        created = [v.path for v in _model_variables(self.model) if id(v) not in known]
        if created and exc[0] is None:
            raise RuntimeError(
                "WarmUp: the train step created variables that did not exist "
                f"before it ran ({', '.join(created[:5])}), whose first values "
                "are lost. Build the model (call it on a batch) and the "
                "optimizer (optimizer.build(model.trainable_variables)) "
                "before fit, or remove WarmUp."
            )
        return False


def _run(model, step, batches, element_spec):
    """Runs the model's compiled `step` ("train" or "test") function once on
    every batch, as `fit` would call it."""
    if keras.backend.backend() == "jax":
        _run_jax(model, step, batches)
    else:
        _run_tensorflow(model, step, batches, element_spec)


def _run_tensorflow(model, step, batches, element_spec):
    getattr(model, f"make_{step}_function")()
    function = getattr(model, f"{step}_function")
    # The batches, with the exact element_spec of the dataset fit iterates:
    # the tf.function sees the iterator fit gives it, and is not retraced.
    dataset = tf_data_replay.dataset_of(batches, element_spec)
    distributed = model.distribute_strategy.experimental_distribute_dataset(dataset)
    tf_data_replay.run_until_exhausted(function, iter(distributed))


def _run_jax(model, step, batches):
    import jax

    getattr(model, f"make_{step}_function")()
    function = getattr(model, f"{step}_function")
    if step == "train":
        state = model._get_jax_state(
            trainable_variables=True,
            non_trainable_variables=True,
            optimizer_variables=True,
            metrics_variables=True,
        )
    else:
        state = model._get_jax_state(
            trainable_variables=True,
            non_trainable_variables=True,
            metrics_variables=True,
        )
    for batch in batches:
        data = keras.tree.map_structure(np.asarray, batch)
        copied = jax.tree_util.tree_map(lambda value: value.copy(), state)
        _, new_state = function(copied, iter([data]))
        jax.block_until_ready(new_state)
