"""Memory of `BucketBuilder.build` on 1 million int32 token sequences.

Reports what `build` adds to the process's resident memory and the peak
while iterating 2 000 batches, against the raw bytes of the token values
(the target: at most 1.5x). Run it once per checkout to compare:

    .venv/bin/python benchmarks/build_memory.py
    PYTHONPATH=/tmp/baseline .venv/bin/python benchmarks/build_memory.py
"""

import os

import numpy as np
from process_memory import rss

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"

import kerasbatch  # noqa: E402

rng = np.random.default_rng(0)
lengths = np.clip(rng.lognormal(3.5, 0.7, 1_000_000).astype(int), 1, 512)
values = rng.integers(1, 1000, lengths.sum()).astype("int32")
x = np.split(values, np.cumsum(lengths)[:-1])
raw = values.nbytes
before = rss()
b = kerasbatch.BucketBuilder(num_buckets=32, batch_size=64)
ds = b.build(x)
after = rss()
for i, _ in enumerate(ds):
    if i > 2000:
        break
peak = rss("VmHWM")
print(
    f"raw {raw / 1e6:.0f} MB, build adds {(after - before) / 1e6:.0f} MB ({(after - before) / raw:.2f}x), peak-before {(peak - before) / 1e6:.0f} MB ({(peak - before) / raw:.2f}x)"
)
