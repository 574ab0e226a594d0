"""Data: the inputs a builder takes, and the batches it gives the model.

- `sources`: inputs (lists of arrays, ragged tensors, dicts) as checked
  components with their lengths;
- `stream_elements`: the structure of a stream's elements;
- `padding`: `Padding`, how a component is padded, and the padded-length rule;
- `outputs`: the batch's final structure (lengths, masks, filler weights);
- `model_inputs`: `ModelInputs`, the inputs a model takes, made per batch;
- `reducers`: `Reducer`s, per-component batching of windows.
"""

from kerasbatch.data import (  # noqa: F401
    model_inputs,
    outputs,
    padding,
    reducers,
    sources,
    stream_elements,
)
