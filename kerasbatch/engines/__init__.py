"""Engines: each turns a built dataset's frozen plan into batches for Keras.

- `"tf.data"`: a `tf.data.Dataset` (needs TensorFlow): in-graph epochs,
  `distribute`, the tf.data service, iterator checkpoints.
- `"grain"`: a Grain `IterDataset` of numpy batches (needs Grain):
  `get_state`/`set_state` resume mid-epoch, multi-host JAX.
- `"python"`: a `keras.utils.PyDataset` of numpy batches (needs neither).

For the same seed and epoch, every engine yields bit-identical batches.
"""

ENGINES = ("tf.data", "grain", "python")


def check_engine(engine):
    """`engine`, or a ValueError naming the engines."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}.")
    return engine
