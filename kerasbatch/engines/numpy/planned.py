"""The batches of a built in-memory dataset, made in numpy from its plans.

What the numpy engines (`grain`, `python`) serve: batch `k` of epoch `e`
is made from the plan of `e` by the batch function of the built value's
kind of batches (`batches`, `packed`, `chunks`, `windows`).
"""

import numpy as np

from kerasbatch.data import random_access
from kerasbatch.engines import processes
from kerasbatch.engines.numpy import batches, chunks, packed, windows


def batch_function(built):
    """The numpy `(plan, index) -> batch` of the kind of batches of `built`."""
    kind = built.batches
    if kind == "packed":
        return packed.PackRows(built)
    if kind == "chunks":
        return chunks.ChunkBatchFunction(built)
    if kind == "windows":
        return windows.WindowBatchFunction(built)
    return batches.BatchFunction(built)


class PlannedBatches:
    """Batch `index` of `epoch` of a built dataset, in numpy.

    Under multi-process JAX, each process gets its part of every batch
    (`kerasbatch.engines.processes`).

    Args:
        served: the dataset's `kerasbatch.engines.served.Served` (its
            `plan(epoch)` and built value).

    Example:

    >>> import numpy as np
    >>> import kerasbatch
    >>> from kerasbatch.engines import served
    >>> padded = kerasbatch.PaddedBuilder(batch_size=2, shuffle=False)
    >>> x = [np.ones(n) for n in (2, 4, 1)]
    >>> batches = kerasbatch.engines.numpy.planned.PlannedBatches(
    ...     served.served_by(padded.build(x, engine="grain")))
    >>> batches.num_batches, batches.batch(0, 0).shape, batches.batch(0, 1).shape
    (2, (2, 4), (1, 1))
    """

    def __init__(self, served):
        self._served = served
        self._make = batch_function(served.built)
        self._reads_by_index = served.built.prepared.data.reads_by_index
        self.num_batches = served.plan(0).num_batches
        served.built.check_has_batches(self.num_batches)
        self.process, self.processes = processes.jax_processes()
        if self.processes > 1:
            served.built.check_even_split(
                self.processes,
                f"The {self.processes} JAX processes each take an equal part of "
                "every batch",
            )

    def batch(self, epoch, index):
        """Batch `index` of `epoch` (its element, numpy arrays): this
        process's part of it. Data read by index from a source: only the
        elements of this process's rows are read."""
        plan = self._served.plan(epoch)
        if self.processes == 1 or not self._reads_by_index:
            batch = self._make(plan, index)
        else:
            rows = processes.part_of(
                self._make.row_elements(plan, index), self.process, self.processes
            )
            with random_access.reading_only(np.concatenate(rows)):
                batch = self._make(plan, index)
        return processes.part_of(batch, self.process, self.processes)
