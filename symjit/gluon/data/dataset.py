"""Datasets (MXNet 1.x `gluon.data.dataset`): indexable collections of samples.

A Dataset is anything with `__getitem__(idx)` and `__len__()`; `transform(fn)` /
`transform_first(fn)` return lazily (or eagerly) transformed views without copying the data.
"""
from __future__ import annotations

import os

from ...ndarray.ndarray import NDArray

__all__ = ["Dataset", "SimpleDataset", "ArrayDataset", "RecordFileDataset"]


class Dataset:
    """Abstract dataset: subclasses implement `__getitem__` and `__len__`."""

    def __getitem__(self, idx):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError

    def filter(self, fn):
        """A dataset of the samples for which `fn(sample)` is true."""
        from .sampler import FilterSampler
        return self.sample(FilterSampler(fn, self))

    def sample(self, sampler):
        """A lazy view of the samples at the indices `sampler` yields."""
        return _SampledDataset(self, list(sampler))

    def take(self, count):
        """A dataset of the first `count` samples (all of them when count is None)."""
        if count is None or count > len(self):
            count = len(self)
        return SimpleDataset([self[i] for i in range(count)])

    def shard(self, num_shards, index):
        """The `index`-th of `num_shards` contiguous shards (earlier shards get the remainder)."""
        if not 0 <= index < num_shards:
            raise ValueError(f"Shard index of out bound: {index} out of {num_shards}")
        length = len(self)
        shard_len = length // num_shards
        rest = length % num_shards
        start = shard_len * index + min(index, rest)
        end = start + shard_len + (index < rest)
        return SimpleDataset([self[i] for i in range(start, end)])

    def transform(self, fn, lazy=True):
        """A dataset whose samples are `fn(*sample)` (tuple samples are unpacked)."""
        trans = _LazyTransformDataset(self, fn)
        if lazy:
            return trans
        return SimpleDataset([trans[i] for i in range(len(trans))])

    def transform_first(self, fn, lazy=True):
        """Like `transform`, applying `fn` only to the first element of each sample."""
        return self.transform(_TransformFirstClosure(fn), lazy)


class _SampledDataset(Dataset):
    """The samples of `data` at `indices`, read lazily."""

    def __init__(self, data, indices):
        self._data = data
        self._indices = indices

    def __len__(self):
        return len(self._indices)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return [self._data[i] for i in self._indices[idx]]
        return self._data[self._indices[idx]]


class _TransformFirstClosure:
    """`fn` applied to the first element of a sample (a picklable closure)."""

    def __init__(self, fn):
        self._fn = fn

    def __call__(self, x, *args):
        if args:
            return (self._fn(x),) + args
        return self._fn(x)


class _LazyTransformDataset(Dataset):
    """`fn` applied to each sample of `data` when read."""

    def __init__(self, data, fn):
        self._data = data
        self._fn = fn

    def __len__(self):
        return len(self._data)

    def __getitem__(self, idx):
        item = self._data[idx]
        if isinstance(item, tuple):
            return self._fn(*item)
        return self._fn(item)


class SimpleDataset(Dataset):
    """A dataset over any indexable sequence (list, array, ...)."""

    def __init__(self, data):
        self._data = data

    def __len__(self):
        return len(self._data)

    def __getitem__(self, idx):
        return self._data[idx]


class ArrayDataset(Dataset):
    """Zips equally long arrays: sample i is (a[i], b[i], ...), or a[i] for a single array.

    A 1-D NDArray yields Python scalars per sample, as MXNet's (`.asscalar()`)."""

    def __init__(self, *args):
        if not args:
            raise ValueError("Needs at least 1 arrays")
        self._length = len(args[0])
        self._data = []
        for i, data in enumerate(args):
            if len(data) != self._length:
                raise ValueError(f"All arrays must have the same length; array[0] has length "
                                 f"{self._length} while array[{i}] has {len(data)}.")
            if isinstance(data, NDArray) and len(data.shape) == 1:
                data = data.asnumpy()
            self._data.append(data)

    def __getitem__(self, idx):
        if len(self._data) == 1:
            return self._data[0][idx]
        return tuple(data[idx] for data in self._data)

    def __len__(self):
        return self._length


class RecordFileDataset(Dataset):
    """The records of a RecordIO file `filename` (raw bytes), indexed through the `.idx` file
    beside it (same name, `.idx` extension)."""

    def __init__(self, filename):
        from ... import recordio
        self.idx_file = os.path.splitext(filename)[0] + ".idx"
        self.filename = filename
        if not os.path.isfile(self.idx_file):
            raise OSError(f"RecordFileDataset: index file {self.idx_file} not found (it is written "
                          f"with {filename} by MXIndexedRecordIO / im2rec)")
        self._record = recordio.MXIndexedRecordIO(self.idx_file, self.filename, "r")

    def __getitem__(self, idx):
        return self._record.read_idx(self._record.keys[idx])

    def __len__(self):
        return len(self._record.keys)
