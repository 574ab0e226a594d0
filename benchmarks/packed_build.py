"""CPU seconds to build a packed tf.data pipeline, and to iterate one epoch.

Building a tf.data pipeline traces its functions; this measures what a
`PackedBuilder(64, batch_size=8)` build and epoch cost on 300 sequences of
1-59 tokens (per-token targets), averaged over `--repeats` fresh builders
after one warm-up build:

    python benchmarks/packed_build.py --repeats 4
"""

import argparse
import time

import numpy as np

import kerasbatch


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = [rng.integers(1, 100, size=n) for n in rng.integers(1, 60, size=300)]
    y = [rng.integers(0, 2, size=len(s)) for s in x]
    kerasbatch.PackedBuilder(64, batch_size=8).build(x, y)  # imports, warm-up
    build = epoch = 0.0
    for _ in range(args.repeats):
        start = time.process_time()
        dataset = kerasbatch.PackedBuilder(64, batch_size=8).build(x, y)
        build += time.process_time() - start
        start = time.process_time()
        for _ in dataset:
            pass
        epoch += time.process_time() - start
    print(
        f"packed tf.data build {build / args.repeats:.2f} CPU-s, "
        f"one epoch {epoch / args.repeats:.2f} CPU-s"
    )


if __name__ == "__main__":
    main()
