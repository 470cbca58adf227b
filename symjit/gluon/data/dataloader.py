"""DataLoader (MXNet 1.x `gluon.data.DataLoader`): batches of dataset samples.

Samples are gathered by a batch sampler and combined by `batchify_fn` (default: stack
NDArrays, numpy arrays and numbers into one NDArray per field). With `num_workers > 0`
batches are produced concurrently by a pool of worker threads (numpy releases the GIL in
its kernels) and yielded in sampler order with up to `prefetch` batches in flight.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from collections import deque

import numpy as np

from ... import ndarray as nd
from ...ndarray.ndarray import NDArray
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "default_batchify_fn", "default_mp_batchify_fn"]


def default_batchify_fn(data):
    """Stack a list of samples: NDArrays with nd.stack, tuples field by field (a list of
    batches), anything else through numpy (keeping its dtype)."""
    if isinstance(data[0], NDArray):
        return nd.stack(*data)
    if isinstance(data[0], tuple):
        return [default_batchify_fn(list(field)) for field in zip(*data)]
    arr = np.asarray(data)
    return nd.array(arr, dtype=arr.dtype)


#: MXNet's name for the batchify used by worker processes; workers here are threads sharing
#: memory, so it is the same function.
default_mp_batchify_fn = default_batchify_fn


class DataLoader:
    """Loads batches from `dataset`.

    Either `batch_size` (with optional `shuffle`, `sampler`, `last_batch` in
    {'keep', 'discard', 'rollover'}) or a `batch_sampler` yielding index lists.
    `pin_memory`, `pin_device_id`, `timeout` and `try_nopython` are accepted as in MXNet
    (CPU memory needs no pinning here)."""

    def __init__(self, dataset, batch_size=None, shuffle=False, sampler=None, last_batch=None,
                 batch_sampler=None, batchify_fn=None, num_workers=0, pin_memory=False,
                 pin_device_id=0, prefetch=None, thread_pool=False, timeout=120, try_nopython=None):
        self._dataset = dataset
        self._pin_memory = pin_memory
        self._pin_device_id = pin_device_id
        self._thread_pool = thread_pool
        self._timeout = timeout
        if batch_sampler is None:
            if batch_size is None:
                raise ValueError("batch_size must be specified unless batch_sampler is specified")
            if sampler is None:
                sampler = RandomSampler(len(dataset)) if shuffle else SequentialSampler(len(dataset))
            elif shuffle:
                raise ValueError("shuffle must not be specified if sampler is specified")
            batch_sampler = BatchSampler(sampler, batch_size, last_batch if last_batch else "keep")
        elif batch_size is not None or shuffle or sampler is not None or last_batch is not None:
            raise ValueError("batch_size, shuffle, sampler and last_batch must not be specified if "
                             "batch_sampler is specified.")
        self._batch_sampler = batch_sampler
        self._num_workers = num_workers if num_workers >= 0 else 0
        self._prefetch = max(0, int(prefetch) if prefetch is not None else 2 * self._num_workers)
        self._batchify_fn = batchify_fn if batchify_fn is not None else default_batchify_fn

    def _load(self, indices):
        return self._batchify_fn([self._dataset[i] for i in indices])

    def __iter__(self):
        if self._num_workers == 0:
            for batch in self._batch_sampler:
                yield self._load(batch)
            return
        yield from self._iter_workers()

    def _iter_workers(self):
        """Batches computed by the worker pool, yielded in order; at most
        max(prefetch, num_workers) batches are pending at any time."""
        depth = max(self._prefetch, self._num_workers)
        with ThreadPoolExecutor(max_workers=self._num_workers,
                                thread_name_prefix="symjit-dataloader") as pool:
            pending = deque()
            batches = iter(self._batch_sampler)
            for batch in batches:
                pending.append(pool.submit(self._load, batch))
                if len(pending) >= depth:
                    break
            while pending:
                result = pending.popleft().result(timeout=self._timeout)
                nxt = next(batches, None)
                if nxt is not None:
                    pending.append(pool.submit(self._load, nxt))
                yield result

    def __len__(self):
        return len(self._batch_sampler)
