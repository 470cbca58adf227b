"""Samplers (MXNet 1.x `gluon.data.sampler`): iterables of dataset indices or index batches."""
from __future__ import annotations

import numpy as np

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "BatchSampler", "IntervalSampler",
           "FilterSampler"]


class Sampler:
    """Base class: iterating yields indices (or batches of indices)."""

    def __iter__(self):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """Indices start, start+1, ..., start+length-1."""

    def __init__(self, length, start=0):
        self._length = length
        self._start = start

    def __iter__(self):
        return iter(range(self._start, self._start + self._length))

    def __len__(self):
        return self._length


class RandomSampler(Sampler):
    """A random permutation of range(length), fresh on each pass (numpy's global RNG, as MXNet)."""

    def __init__(self, length):
        self._length = length

    def __iter__(self):
        indices = np.arange(self._length)
        np.random.shuffle(indices)
        return iter(indices.tolist())

    def __len__(self):
        return self._length


class FilterSampler(Sampler):
    """The indices of the samples of `dataset` for which `fn(sample)` is true (evaluated once,
    at creation)."""

    def __init__(self, fn, dataset):
        self._fn = fn
        self._dataset = dataset
        self._indices = [i for i in range(len(dataset)) if fn(dataset[i])]

    def __iter__(self):
        return iter(self._indices)

    def __len__(self):
        return len(self._indices)


class IntervalSampler(Sampler):
    """Indices 0, interval, 2*interval, ..., then (with rollover) 1, 1+interval, ..."""

    def __init__(self, length, interval, rollover=True):
        if not 0 < interval <= length:
            raise ValueError(f"Interval {interval} must be positive and not larger than length {length}")
        self._length = length
        self._interval = interval
        self._rollover = rollover

    def __iter__(self):
        for i in range(self._interval if self._rollover else 1):
            yield from range(i, self._length, self._interval)

    def __len__(self):
        return self._length if self._rollover else len(range(0, self._length, self._interval))


class BatchSampler(Sampler):
    """Groups a sampler's indices into lists of `batch_size`.

    last_batch: 'keep' yields the short final batch, 'discard' drops it, 'rollover' carries
    its indices over to the front of the next pass."""

    def __init__(self, sampler, batch_size, last_batch="keep"):
        if last_batch not in ("keep", "discard", "rollover"):
            raise ValueError(f"last_batch must be one of 'keep', 'discard', or 'rollover', "
                             f"but got {last_batch}")
        self._sampler = sampler
        self._batch_size = batch_size
        self._last_batch = last_batch
        self._prev = []

    def __iter__(self):
        batch, self._prev = self._prev, []
        for i in self._sampler:
            batch.append(i)
            if len(batch) == self._batch_size:
                yield batch
                batch = []
        if batch:
            if self._last_batch == "keep":
                yield batch
            elif self._last_batch == "rollover":
                self._prev = batch

    def __len__(self):
        n = len(self._sampler)
        if self._last_batch == "keep":
            return (n + self._batch_size - 1) // self._batch_size
        if self._last_batch == "discard":
            return n // self._batch_size
        return (len(self._prev) + n) // self._batch_size
