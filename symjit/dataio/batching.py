"""Batching of MXNet's native data iterators (CSVIter, LibSVMIter, ImageRecordIter, ...): which
samples go into each batch, with MXNet's `round_batch` semantics (its C++ BatchLoader).

A *pass* visits every sample once, in an order chosen per pass (shuffled or not). Batches take
samples in pass order. When a pass ends inside a batch:
  * round_batch=True: the batch is completed from the start of the next pass and `pad` is the
    number of those extra samples; the iterator then ends, and the following `reset()` does
    not rewind, so the next epoch continues in that pass after the samples already used;
  * round_batch=False: the batch is returned short (missing slots are None) with `pad` the
    number of missing samples; `reset()` starts a new pass.
"""
from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

from ..base import MXNetError
from .. import io as _io

__all__ = ["BatchPlan", "BatchedIter"]


class BatchPlan:
    """Sample indices of successive batches over `num_samples` samples.

    `order(pass_number)` gives the visiting order of a pass (a permutation of
    range(num_samples)). Invariant: every returned batch has exactly `batch_size` entries."""

    def __init__(self, num_samples: int, batch_size: int, round_batch: bool,
                 order: Callable[[int], np.ndarray], what: str):
        if batch_size <= 0:
            raise MXNetError(f"{what}: batch_size must be positive, got {batch_size}")
        self.num_samples = num_samples
        self.batch_size = batch_size
        self.round_batch = bool(round_batch)
        self._order_fn = order
        self._what = what
        self._pass = -1
        self._order = np.arange(0)
        self._pos = 0
        self._overflow = 0
        self._new_pass()

    def _new_pass(self):
        self._pass += 1
        self._order = np.asarray(self._order_fn(self._pass))
        self._pos = 0

    @property
    def pass_number(self) -> int:
        """The pass the next sample is taken from."""
        return self._pass

    def _take(self):
        if self._pos >= self.num_samples:
            return None
        i = int(self._order[self._pos])
        self._pos += 1
        return i

    def next_batch(self):
        """(indices, pad) of the next batch, or None at the end of the epoch. With
        round_batch=False a short batch has None in its missing slots."""
        if self._overflow:
            return None
        idx = []
        while len(idx) < self.batch_size:
            i = self._take()
            if i is None:
                break
            idx.append(i)
        if len(idx) == self.batch_size:
            return idx, 0
        if not idx:
            return None
        pad = self.batch_size - len(idx)
        if not self.round_batch:
            return idx + [None] * pad, pad
        self._new_pass()
        for _ in range(pad):
            i = self._take()
            if i is None:
                raise MXNetError(f"{self._what}: number of input must be bigger than batch size "
                                 f"({self.num_samples} samples, batch_size {self.batch_size})")
            idx.append(i)
        self._overflow = pad
        return idx, pad

    def reset(self):
        """Start the next epoch (see the module docstring for round_batch)."""
        if self.round_batch and self._overflow:
            self._overflow = 0
            return
        self._new_pass()


class BatchedIter(_io.DataIter):
    """A DataIter over a BatchPlan: subclasses implement `_load(indices, pad)` returning
    (list of data NDArrays, list of label NDArrays) for one batch (None marks a missing slot).

    With `prefetch` > 0 a background thread prepares up to `prefetch` batches ahead (MXNet's
    PrefetcherIter), in order; `reset()` waits for it and drops what it prepared.

    `_short_batch_pad`: whether a short last batch (round_batch=False) reports its missing
    samples as `pad` (MXNet's BatchLoader does; its ImageRecordIter reports 0)."""

    _short_batch_pad = True

    def __init__(self, plan: BatchPlan, provide_data, provide_label, prefetch: int = 0):
        super().__init__(plan.batch_size)
        self._plan = plan
        self.provide_data = provide_data
        self.provide_label = provide_label
        self._current = None
        self._prefetch = max(0, int(prefetch))
        self._producer = None
        self._ahead = deque()

    def reset(self):
        for fut in self._ahead:
            fut.result()
        self._ahead.clear()
        self._plan.reset()
        self._current = None

    def _load(self, indices, pad):
        raise NotImplementedError

    def _produce(self):
        """The next DataBatch of the plan, or None at the end of the epoch."""
        nxt = self._plan.next_batch()
        if nxt is None:
            return None
        indices, pad = nxt
        data, label = self._load(indices, pad)
        if not self._plan.round_batch and not self._short_batch_pad:
            pad = 0
        return _io.DataBatch(data, label, pad=pad, index=self._index(indices),
                             provide_data=self.provide_data, provide_label=self.provide_label)

    def _next_batch(self):
        if not self._prefetch:
            return self._produce()
        if self._producer is None:
            self._producer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="symjit-prefetch")
        while len(self._ahead) < self._prefetch:
            self._ahead.append(self._producer.submit(self._produce))
        return self._ahead.popleft().result()

    def iter_next(self):
        self._current = self._next_batch()
        return self._current is not None

    def __del__(self):
        producer = getattr(self, "_producer", None)
        if producer is not None:
            producer.shutdown(wait=False, cancel_futures=True)

    def _index(self, indices):
        return np.array([-1 if i is None else i for i in indices], dtype=np.int64)

    def next(self):
        if self.iter_next():
            return self._current
        raise StopIteration

    def _require_batch(self):
        if self._current is None:
            raise MXNetError(f"{type(self).__name__}: no current batch (call iter_next() first)")
        return self._current

    def getdata(self):
        return self._require_batch().data[0]

    def getlabel(self):
        return self._require_batch().label[0]

    def getpad(self):
        return self._require_batch().pad

    def getindex(self):
        return self._require_batch().index
