"""Batches made ahead by threads: while the consumer trains on batch `k`,
worker threads make batches `k + 1, ..., k + depth` of the same epoch.

Each batch is a pure function of `(epoch, index)`, so making it early
changes neither its values nor the order in which they are served; only
the batches taken count as made (a dataset's state never counts those made
ahead). What the numpy engines use for `workers` (`python`) and for data
read by index from disk (`grain`), whose batches wait on reads.
"""

import concurrent.futures
import threading


class Ahead:
    """Batch `index` of `epoch` from `make(epoch, index)`, the next
    `depth` batches of the epoch made ahead by `workers` threads.

    Args:
        make: `(epoch, index) -> batch`.
        num_batches: the batches of an epoch.
        workers: the threads (1: none; every batch is made when taken).
        depth: how many batches are made ahead, at most.
        name: the threads' name.
    """

    def __init__(self, make, num_batches, workers, depth, name):
        self.make = make
        self.num_batches = num_batches
        self.workers = workers
        self.depth = depth
        self.name = name
        self._pool = None  # started at the first batch made ahead
        self._ahead = {}  # (epoch, index) -> Future
        self._lock = threading.Lock()

    def batch(self, epoch, index, ahead=True):
        """Batch `index` of `epoch`; with `ahead`, the threads start on the
        batches after it."""
        if self.workers == 1:
            return self.make(epoch, index)
        with self._lock:
            future = self._ahead.pop((epoch, index), None)
            if ahead:
                self._make_ahead(epoch, index + 1)
        if future is None:
            return self.make(epoch, index)
        return future.result()

    def _make_ahead(self, epoch, first):
        """Keeps batches `first`, ... of `epoch` (up to `depth`) made ahead,
        and drops the others (called with the lock held)."""
        end = min(first + self.depth, self.num_batches)
        for key in [k for k in self._ahead if k[0] != epoch or not first <= k[1]]:
            self._ahead.pop(key).cancel()
        if first >= end:
            return
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                self.workers, thread_name_prefix=self.name
            )
        for index in range(first, end):  # in order: the pool runs them FIFO
            if (epoch, index) not in self._ahead:
                self._ahead[(epoch, index)] = self._pool.submit(self.make, epoch, index)

    def __len__(self):
        """The batches made (or being made) ahead."""
        return len(self._ahead)

    def drop(self):
        """Forgets the batches made ahead (their epoch ended before them)."""
        with self._lock:
            for future in self._ahead.values():
                future.cancel()
            self._ahead.clear()
