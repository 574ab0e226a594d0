"""A Keras layer that pads a ragged batch like `keras.utils.pad_sequences`."""

import sys

import keras
import numpy as np

from kerasbatch.optional import tensorflow as tf

_POSITIONS = ("pre", "post")


@keras.saving.register_keras_serializable(package="kerasbatch")
class PadSequences(keras.layers.Layer):
    """Pads (and truncates) a ragged batch of sequences into a dense tensor.

    This layer is the in-graph, vectorised counterpart of
    `keras.utils.pad_sequences`, with exactly the same semantics and
    defaults. It takes a batch of variable-length sequences, given as a
    `tf.RaggedTensor` of shape `(batch_size, None, *trailing_dims)` with
    `ragged_rank=1`, and returns a dense tensor of shape
    `(batch_size, num_timesteps, *trailing_dims)`, where `num_timesteps` is
    `maxlen` if it is set, or else the length of the longest sequence in the
    batch (so each batch is padded only as much as it needs to be).

    Sequences longer than `num_timesteps` are truncated, and shorter ones
    (empty ones included) are padded with `value`. Where the truncation and
    the padding happen is set by `truncating` and `padding`. A dense
    `tf.Tensor` is accepted too, and treated as a batch whose rows all have
    the full length of its second axis.

    The layer has no weights. It runs eagerly, inside `tf.data.Dataset.map`
    (e.g. after `Dataset.ragged_batch`), and, with the TensorFlow backend,
    in Keras models, including functional models built on
    `keras.Input(shape=(None,), ragged=True)`.

    With another Keras backend (e.g. JAX), TensorFlow inputs
    (`tf.RaggedTensor`, `tf.Tensor`, eager or inside `tf.data`) are still
    padded with TensorFlow and give a `tf.Tensor`: pad the batches in the
    `tf.data` pipeline (`dataset.map(PadSequences(...))`) and give the padded
    dataset to `model.fit`. NumPy or backend arrays (dense) called eagerly
    give a backend array. Inside a model on such a backend the layer raises
    a `ValueError`: there is no ragged tensor there, and Keras zero-pads
    ragged data at the end of each row before the model sees it, so the row
    lengths are already lost.

    Args:
        maxlen: `None` or a positive int. The number of timesteps of the
            output. If `None`, each batch is padded to the length of its
            longest sequence. Defaults to `None`.
        padding: `"pre"` or `"post"`. Whether to pad before or after each
            sequence. Defaults to `"pre"`.
        truncating: `"pre"` or `"post"`. Whether to remove values from the
            beginning (keeping the last `maxlen` items) or from the end
            (keeping the first `maxlen` items) of sequences longer than
            `maxlen`. Defaults to `"pre"`.
        value: The padding value, cast to `dtype` the way NumPy casts it
            (so `-1.5` becomes `-1` for an integer `dtype`). Defaults to
            `0.0`.
        dtype: The dtype of the output. Input values are cast to it.
            Defaults to `"int32"`, like `keras.utils.pad_sequences`.
        **kwargs: Other keyword arguments passed to `keras.layers.Layer`,
            e.g. `name`.

    Call arguments:
        inputs: A `tf.RaggedTensor` of shape
            `(batch_size, None, *trailing_dims)` with `ragged_rank=1`, or a
            dense `tf.Tensor` of shape
            `(batch_size, timesteps, *trailing_dims)`.

    Returns:
        A dense tensor of dtype `dtype` and shape
        `(batch_size, num_timesteps, *trailing_dims)`.

    Example:

    >>> import tensorflow as tf
    >>> from kerasbatch.layers import PadSequences
    >>> batch = tf.ragged.constant([[1], [2, 3], [4, 5, 6]])
    >>> PadSequences()(batch).numpy()
    array([[0, 0, 1],
           [0, 2, 3],
           [4, 5, 6]], dtype=int32)
    >>> PadSequences(maxlen=2, padding="post", truncating="post")(batch).numpy()
    array([[1, 0],
           [2, 3],
           [4, 5]], dtype=int32)
    >>> PadSequences(maxlen=4, value=-1.5, dtype="float32")(batch).numpy()
    array([[-1.5, -1.5, -1.5,  1. ],
           [-1.5, -1.5,  2. ,  3. ],
           [-1.5,  4. ,  5. ,  6. ]], dtype=float32)

    Padding the batches of a `tf.data` pipeline:

    >>> ds = tf.data.Dataset.from_tensor_slices(batch).ragged_batch(2)
    >>> ds = ds.map(PadSequences(padding="post"))
    >>> [x.numpy().tolist() for x in ds]
    [[[1, 0], [2, 3]], [[4, 5, 6]]]
    """

    def __init__(
        self,
        maxlen=None,
        padding="pre",
        truncating="pre",
        value=0.0,
        dtype="int32",
        **kwargs,
    ):
        if padding not in _POSITIONS:
            raise ValueError(
                "`padding` must be one of 'pre' or 'post'. "
                f"Received: padding={padding!r}"
            )
        if truncating not in _POSITIONS:
            raise ValueError(
                "`truncating` must be one of 'pre' or 'post'. "
                f"Received: truncating={truncating!r}"
            )
        if maxlen is not None:
            if (
                isinstance(maxlen, (bool, np.bool_))
                or not isinstance(maxlen, (int, np.integer))
                or maxlen <= 0
            ):
                raise ValueError(
                    "`maxlen` must be None or a positive integer. "
                    f"Received: maxlen={maxlen!r}"
                )
            maxlen = int(maxlen)
        # Inputs are cast to `dtype` in `call()`; Keras' float autocasting
        # would only duplicate that.
        kwargs.setdefault("autocast", False)
        super().__init__(dtype=dtype, **kwargs)
        if isinstance(value, (str, bytes)) and self.compute_dtype != "string":
            # Keras' message, but for the advice: strings are tf.string here.
            raise ValueError(
                f"`dtype` {self.compute_dtype} is not compatible with `value`'s "
                f"type: {type(value)}\nYou should set `dtype='string'` for "
                f"variable length strings. Received: value={value!r}"
            )
        if self.compute_dtype != "string":
            _check_value_fits(value, self.compute_dtype)
        if isinstance(value, np.generic):
            value = value.item()  # Keep the config JSON-serializable.
        self.maxlen = maxlen
        self.padding = padding
        self.truncating = truncating
        self.value = value
        # The output length depends on the data (the longest row), so XLA
        # would recompile for every new batch: keep `jit_compile="auto"` off.
        self.supports_jit = False
        self.built = True

    def __call__(self, inputs, **kwargs):
        backend = keras.backend.backend()
        if backend == "tensorflow":
            return super().__call__(inputs, **kwargs)
        # Keras' `Layer.__call__` on another backend rejects TensorFlow
        # tensors (and would feed JAX tracers to TensorFlow ops), so route
        # the inputs here. Keras' own preprocessing layers do the same for
        # `tf.data` (`keras.src.layers.preprocessing.data_layer.DataLayer`
        # switches to the TensorFlow backend in a TF graph); this layer only
        # uses TensorFlow ops, so it needs no private Keras API for it. The
        # layer has no weights, no mask and no `training` argument, so
        # calling `call()` directly skips nothing it uses.
        if kwargs:
            raise TypeError(
                f"`PadSequences` takes no call arguments. Received: {sorted(kwargs)}"
            )
        if isinstance(inputs, keras.KerasTensor) or _is_traced(inputs):
            raise ValueError(_in_model_error(backend, inputs))
        if isinstance(inputs, (tf.Tensor, tf.RaggedTensor, tf.Variable)):
            # Eager, or symbolic in a `tf.data` map: pad with TensorFlow.
            with tf.name_scope(self.name):
                return self.call(inputs)
        if isinstance(inputs, tf.SparseTensor):
            raise TypeError(
                "`PadSequences` does not take a `tf.SparseTensor`; give it a "
                "`tf.RaggedTensor`, e.g. `tf.RaggedTensor.from_sparse(x)`."
            )
        # NumPy or backend arrays (dense): pad in TensorFlow, return a
        # backend array (NumPy for strings, which JAX cannot hold).
        outputs = self.call(tf.convert_to_tensor(keras.ops.convert_to_numpy(inputs)))
        if outputs.dtype == tf.string:
            return outputs.numpy()
        return keras.ops.convert_to_tensor(outputs.numpy(), dtype=self.compute_dtype)

    def _padding_value(self, dtype):
        if dtype == tf.string:
            return tf.constant(self.value, dtype=tf.string)
        # Go through NumPy so that the value is cast like `np.full` casts it
        # (e.g. 0.1 stays exact in float64, -1.5 becomes -1 in int32).
        return tf.cast(tf.constant(np.asarray(self.value)), dtype)

    def call(self, inputs):
        """Pads (and truncates) a batch of ragged sequences to a dense tensor."""
        dtype = tf.as_dtype(self.compute_dtype)
        input_dtype = tf.as_dtype(inputs.dtype)
        if (input_dtype == tf.string) != (dtype == tf.string):
            raise ValueError(
                f"`PadSequences(dtype={dtype.name!r})` cannot pad "
                f"{input_dtype.name} inputs: strings pad only with "
                "`dtype='string'`, and numbers only with a numeric dtype. "
                "Convert text to ids first, or set dtype. Received: "
                f"inputs.dtype={input_dtype.name}"
            )
        if isinstance(inputs, tf.RaggedTensor):
            if inputs.ragged_rank != 1:
                raise ValueError(
                    "`PadSequences` expects a `tf.RaggedTensor` with "
                    "`ragged_rank=1` (only the time axis ragged), e.g. "
                    "`tf.ragged.constant(rows, ragged_rank=1)`. Received: "
                    f"ragged_rank={inputs.ragged_rank}, shape={inputs.shape}"
                )
            values = inputs.values
            row_starts = tf.cast(inputs.row_starts(), tf.int64)
            row_lengths = tf.cast(inputs.row_lengths(), tf.int64)
            static_time = None
        else:
            inputs = tf.convert_to_tensor(inputs)
            if inputs.shape.rank is not None and inputs.shape.rank < 2:
                raise ValueError(
                    "`PadSequences` expects inputs of shape "
                    "`(batch_size, timesteps, ...)`. "
                    f"Received: shape={inputs.shape}"
                )
            shape = tf.shape(inputs, out_type=tf.int64)
            batch_size, timesteps = shape[0], shape[1]
            values = tf.reshape(inputs, tf.concat([[-1], tf.shape(inputs)[2:]], axis=0))
            if inputs.shape.rank is not None:
                values.set_shape([None, *inputs.shape[2:]])
            row_starts = tf.range(batch_size) * timesteps
            row_lengths = tf.fill([batch_size], timesteps)
            static_time = inputs.shape[1]
        batch_dim = inputs.shape[0]
        trailing_dims = values.shape[1:]

        # Append one padding item after all the values: every padded
        # position of the output gathers it.
        values = tf.cast(values, dtype)
        pad_item = tf.fill(tf.shape(values)[1:], self._padding_value(dtype))
        values = tf.concat([values, pad_item[tf.newaxis]], axis=0)
        pad_index = tf.shape(values, out_type=tf.int64)[0] - 1

        if self.maxlen is None:
            # `maximum` with 0 covers an empty batch.
            num_steps = tf.maximum(tf.reduce_max(row_lengths), 0)
        else:
            num_steps = tf.constant(self.maxlen, tf.int64)
            static_time = self.maxlen
        kept = tf.minimum(row_lengths, num_steps)
        zeros = tf.zeros_like(kept)
        # Offset in each row of the first kept item.
        start = row_lengths - kept if self.truncating == "pre" else zeros
        # Number of padding steps before the kept items.
        lead = num_steps - kept if self.padding == "pre" else zeros

        step = tf.range(num_steps)[tf.newaxis, :] - lead[:, tf.newaxis]
        is_item = (step >= 0) & (step < kept[:, tf.newaxis])
        item_index = (row_starts + start)[:, tf.newaxis] + step
        outputs = tf.gather(values, tf.where(is_item, item_index, pad_index))
        if trailing_dims.rank is not None:
            outputs.set_shape([batch_dim, static_time, *trailing_dims])
        return outputs

    def compute_output_shape(self, input_shape):
        """`(batch, maxlen or the input's time axis, *trailing)`."""
        input_shape = tuple(input_shape)
        timesteps = self.maxlen if self.maxlen is not None else input_shape[1]
        return (input_shape[0], timesteps, *input_shape[2:])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "maxlen": self.maxlen,
                "padding": self.padding,
                "truncating": self.truncating,
                "value": self.value,
                # A plain dtype name rather than a serialized DTypePolicy.
                "dtype": self.compute_dtype,
            }
        )
        return config


def _is_traced(inputs):
    """Whether `inputs` is a tracer of a JAX transformation (`jit`, `grad`)."""
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(inputs, jax.core.Tracer)


def _in_model_error(backend, inputs):
    received = (
        f"a symbolic input (ragged={inputs.ragged})"
        if isinstance(inputs, keras.KerasTensor)
        else f"a traced {type(inputs).__name__}"
    )
    return (
        f"`PadSequences` cannot pad inside a model with the {backend} "
        f"backend: {backend} has no ragged tensors, and Keras zero-pads "
        "ragged data at the end of each row before the model sees it, so "
        "the row lengths are lost (a padded model input would silently "
        "differ from `keras.utils.pad_sequences`). Pad in the input "
        "pipeline instead: `dataset.map(PadSequences(...))` on a "
        "`tf.data.Dataset` of ragged batches (e.g. after "
        "`Dataset.ragged_batch`) runs in TensorFlow on any backend, and a "
        "kerasbatch builder batches and pads for you; then give the padded "
        "dataset to `model.fit`. Or use `KERAS_BACKEND=tensorflow`. "
        f"Received: {received}"
    )


def _check_value_fits(value, dtype):
    """A value `dtype` cannot hold is an error, never wrapped around.

    As `keras.utils.pad_sequences` (`np.full(..., value, dtype)`), whose
    OverflowError an out-of-range int gets; a float outside an integer
    dtype's range, which NumPy would cast to garbage, gets one too.
    """
    if np.issubdtype(dtype, np.integer) and isinstance(value, float | np.floating):
        if np.isnan(value):
            raise ValueError(f"value={value!r} is not a number: {dtype} cannot hold it")
        bounds = np.iinfo(dtype)
        if not bounds.min <= value <= bounds.max:
            raise OverflowError(f"value={value!r} is out of bounds for {dtype}")
    np.full((), value, dtype=dtype)  # Keras' own error for ints out of range
