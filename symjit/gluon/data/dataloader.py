"""DataLoader (MXNet 1.x `gluon.data.DataLoader`): batches of dataset samples.

Samples are gathered by a batch sampler and combined by `batchify_fn` (default: stack
NDArrays, numpy arrays and numbers into one NDArray per field). With `num_workers > 0`
batches are produced concurrently, as in MXNet, by worker processes (forked where the platform
allows, so datasets and transforms need not be picklable; each worker reseeds Python's, numpy's
and symjit's generators with its own seed) or, with `thread_pool=True`, by worker threads; they
are yielded in sampler order with up to `prefetch` batches in flight (arrays come back from worker
processes through shared memory, as MXNet's do, not through a pipe), so the batches equal those
of `num_workers=0` for deterministic datasets. A worker's exception is raised again in the
parent as a RuntimeError carrying the worker's traceback; a dead worker or a batch that takes
longer than `timeout` seconds raises RuntimeError instead of hanging.
"""
from __future__ import annotations

import multiprocessing
import os
import random
import traceback
from dataclasses import dataclass
from multiprocessing import resource_tracker, shared_memory
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures import TimeoutError as _FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from collections import deque

import numpy as np

from ... import ndarray as nd
from ...ndarray.ndarray import NDArray
from ...util import is_np_array, is_np_shape, np_array, np_shape
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "default_batchify_fn", "default_mp_batchify_fn"]


def default_batchify_fn(data):
    """Stack a list of samples: NDArrays with nd.stack, tuples field by field (a list of
    batches), anything else through numpy (keeping its dtype). Under NumPy array semantics
    (`npx.set_np()`) the batches are `mx.np.ndarray`s, as MXNet's."""
    if isinstance(data[0], tuple):
        return [default_batchify_fn(list(field)) for field in zip(*data)]
    if isinstance(data[0], NDArray):
        batch = nd.stack(*data)
    else:
        arr = np.asarray(data)
        batch = nd.array(arr, dtype=arr.dtype)
    return batch.as_np_ndarray() if is_np_array() else batch


#: MXNet's name for the batchify used by worker processes (batches travel back pickled, so
#: it is the same function)
default_mp_batchify_fn = default_batchify_fn

#: what a worker process reads: (dataset, batchify_fn), set by its initializer
_WORKER_STATE: dict = {}


def _worker_init(dataset, batchify_fn, base_seed: int) -> None:
    """Worker-process setup: the dataset and batchify function, and generators seeded apart
    from the parent's and the other workers'."""
    from ... import random as mx_random
    _WORKER_STATE["dataset"] = dataset
    _WORKER_STATE["batchify_fn"] = batchify_fn
    seed = (base_seed + os.getpid()) % (2 ** 31)
    random.seed(seed)
    np.random.seed(seed)
    mx_random.seed(seed)


@dataclass(frozen=True)
class _SharedArray:
    """An array a worker left in a shared-memory block `name` for the parent to take."""
    name: str
    shape: tuple
    dtype: str
    ndarray: bool        # an NDArray (else a numpy array) in the batch

    @staticmethod
    def put(arr: np.ndarray, ndarray: bool) -> "_SharedArray":
        block = shared_memory.SharedMemory(create=True, size=max(arr.nbytes, 1))
        np.ndarray(arr.shape, arr.dtype, buffer=block.buf)[...] = arr
        block.close()
        return _SharedArray(block.name, arr.shape, arr.dtype.str, ndarray)

    def take(self):
        """The array (copied out) as NDArray or numpy array; the block is freed."""
        block = shared_memory.SharedMemory(name=self.name)
        try:
            arr = np.array(np.ndarray(self.shape, np.dtype(self.dtype), buffer=block.buf))
        finally:
            block.close()
            block.unlink()
        return NDArray(arr) if self.ndarray else arr


def _to_shared(obj):
    """`obj` with its NDArrays and numpy arrays (in lists / tuples) moved to shared memory."""
    if isinstance(obj, NDArray) and type(obj) is NDArray:
        return _SharedArray.put(obj.asnumpy(), True)
    if isinstance(obj, np.ndarray) and obj.dtype != object:
        return _SharedArray.put(obj, False)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_shared(o) for o in obj)
    return obj


def _from_shared(obj):
    """Inverse of `_to_shared`, in the parent."""
    if isinstance(obj, _SharedArray):
        return obj.take()
    if isinstance(obj, (list, tuple)):
        return type(obj)(_from_shared(o) for o in obj)
    return obj


def _in_callers_np_mode(fn):
    """`fn` run with the calling thread's NumPy-semantics switches (they are per thread; worker
    threads would otherwise batch in legacy mode)."""
    shape, array = is_np_shape(), is_np_array()

    def run(*args):
        with np_shape(shape), np_array(array):
            return fn(*args)
    return run


def _discard(future) -> None:
    """Free the shared blocks of a batch nobody will read (iteration stopped early)."""
    if not future.cancelled() and future.exception() is None:
        _from_shared(future.result())


def _worker_batch(indices):
    """One batch computed in a worker process, its arrays in shared memory; failures come
    back as RuntimeError with the worker's traceback (the original exception may not survive
    pickling)."""
    try:
        dataset = _WORKER_STATE["dataset"]
        return _to_shared(_WORKER_STATE["batchify_fn"]([dataset[i] for i in indices]))
    except Exception as err:
        raise RuntimeError(f"DataLoader worker process {os.getpid()} failed on sample indices "
                           f"{list(indices)}: {type(err).__name__}: {err}\n"
                           f"{traceback.format_exc()}") from None


def _process_context():
    """fork where available (datasets need not be picklable, as in MXNet), else spawn."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


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
        self._worker_pool = None

    def __del__(self):
        pool = getattr(self, "_worker_pool", None)
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _load(self, indices):
        return self._batchify_fn([self._dataset[i] for i in indices])

    def __iter__(self):
        if self._num_workers == 0:
            for batch in self._batch_sampler:
                yield self._load(batch)
            return
        if self._thread_pool:
            with ThreadPoolExecutor(max_workers=self._num_workers,
                                    thread_name_prefix="symjit-dataloader") as pool:
                load = _in_callers_np_mode(self._load)
                yield from self._iter_pool(lambda b: pool.submit(load, b))
            return
        pool = self._processes()
        for batch in self._iter_pool(lambda b: pool.submit(_worker_batch, b), _discard):
            yield _from_shared(batch)

    def _processes(self) -> ProcessPoolExecutor:
        """The worker processes (started on first use, kept across epochs)."""
        if self._worker_pool is None:
            resource_tracker.ensure_running()   # one tracker for the shared blocks of all workers
            base_seed = int(np.random.randint(0, 2 ** 31 - 1))
            self._worker_pool = ProcessPoolExecutor(
                max_workers=self._num_workers, mp_context=_process_context(), initializer=_worker_init,
                initargs=(self._dataset, self._batchify_fn, base_seed))
        return self._worker_pool

    def _result(self, future):
        try:
            return future.result(timeout=self._timeout)
        except _FutureTimeout:
            raise RuntimeError(f"DataLoader: no batch from the workers within timeout={self._timeout} s") from None
        except BrokenProcessPool as err:
            self._worker_pool = None
            raise RuntimeError(f"DataLoader: a worker process died ({err}); the batch is lost") from None

    def _iter_pool(self, submit, discard=None):
        """Batches computed by a pool, yielded in sampler order; at most
        max(prefetch, num_workers) batches are pending at any time. When iteration stops
        early, pending batches are cancelled, or passed to `discard` once computed."""
        depth = max(self._prefetch, self._num_workers)
        pending = deque()
        batches = iter(self._batch_sampler)
        for batch in batches:
            pending.append(submit(batch))
            if len(pending) >= depth:
                break
        try:
            while pending:
                result = self._result(pending.popleft())
                nxt = next(batches, None)
                if nxt is not None:
                    pending.append(submit(nxt))
                yield result
        finally:
            for fut in pending:
                if not fut.cancel() and discard is not None:
                    fut.add_done_callback(discard)

    def __len__(self):
        return len(self._batch_sampler)
