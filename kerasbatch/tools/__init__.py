"""Tools around the builders.

- `analysis` (with `lengths`): `kerasbatch analyze`, which compares
  batching strategies on a corpus's lengths, without Keras;
- `plotting`: length histograms and efficiency curves (matplotlib);
- `restore`, `prediction`: `restore_order` and `predict`, outputs back in
  input order;
- `demo`: `kerasbatch demo`.
"""

from kerasbatch.tools import analysis, lengths, plotting  # noqa: F401
