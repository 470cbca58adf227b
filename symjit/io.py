"""symjit.io (`mx.io`): data descriptions, batches and iterators of MXNet 1.x."""
from __future__ import annotations

import threading
from collections import OrderedDict, namedtuple

import numpy as np

from .base import MXNetError, mx_real_t

#: MXNet's native iterators, implemented in symjit.dataio and imported on first use (they need
#: OpenCV, which plain `mx.io` users need not load)
_NATIVE_ITERS = ("ImageRecordIter", "ImageRecordUInt8Iter", "ImageRecordInt8Iter", "ImageDetRecordIter", "CSVIter", "LibSVMIter", "MNISTIter")

__all__ = ["DataDesc", "DataBatch", "DataIter", "NDArrayIter", "ResizeIter", "PrefetchingIter",
           *_NATIVE_ITERS]


def __getattr__(name):
    if name in _NATIVE_ITERS:
        from . import dataio
        return getattr(dataio, name)
    if name == "MXDataIter":          # MXNet's base class of its native iterators
        from .dataio.batching import BatchedIter
        return BatchedIter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class DataDesc(namedtuple("DataDesc", ["name", "shape"])):
    """Name, shape, dtype and layout of one input of a model."""

    def __new__(cls, name, shape, dtype=mx_real_t, layout="NCHW"):
        ret = super().__new__(cls, name, tuple(shape))
        ret.dtype = dtype
        ret.layout = layout
        return ret

    def __repr__(self):
        return f"DataDesc[{self.name},{self.shape},{self.dtype},{self.layout}]"

    @staticmethod
    def get_batch_axis(layout):
        return 0 if layout is None else layout.find("N")

    @staticmethod
    def get_list(shapes, types):
        if types is not None:
            type_dict = dict(types)
            return [DataDesc(x[0], x[1], type_dict[x[0]]) for x in shapes]
        return [DataDesc(x[0], x[1]) for x in shapes]


class DataBatch:
    """A batch: lists of data and label NDArrays, padding and optional shape descriptions."""

    def __init__(self, data, label=None, pad=None, index=None, bucket_key=None, provide_data=None,
                 provide_label=None):
        if data is not None and not isinstance(data, (list, tuple)):
            raise MXNetError("DataBatch: data must be a list of NDArrays")
        if label is not None and not isinstance(label, (list, tuple)):
            raise MXNetError("DataBatch: label must be a list of NDArrays")
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label

    def __str__(self):
        data_shapes = [d.shape for d in self.data]
        label_shapes = [l.shape for l in self.label] if self.label else None
        return f"{self.__class__.__name__}: data shapes: {data_shapes} label shapes: {label_shapes}"


class DataIter:
    """Base iterator: `next()` returns a DataBatch; `reset()` rewinds."""

    def __init__(self, batch_size=0):
        self.batch_size = batch_size

    def __iter__(self):
        return self

    def reset(self):
        pass

    def next(self):
        if self.iter_next():
            return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(),
                             index=self.getindex())
        raise StopIteration

    def __next__(self):
        return self.next()

    def iter_next(self):
        return False

    def getdata(self):
        return None

    def getlabel(self):
        return None

    def getindex(self):
        return None

    def getpad(self):
        return 0


def _init_data(data, allow_empty, default_name):
    from .ndarray import NDArray, array
    if data is None:
        data = []
    if isinstance(data, (np.ndarray, NDArray)):
        data = [data]
    if isinstance(data, list):
        if not allow_empty and not data:
            raise MXNetError("NDArrayIter: data must not be empty")
        data = OrderedDict([(default_name if len(data) == 1 else f"_{i}_{default_name}", d)
                            for i, d in enumerate(data)])
    if not isinstance(data, dict):
        raise MXNetError("NDArrayIter: input must be an NDArray, numpy array, a list of them or a dict")
    out = []
    for k, v in data.items():
        # as MXNet's `nd.array`: arrays that are not NDArrays become float32 NDArrays
        out.append((k, v if isinstance(v, NDArray) else array(np.asarray(v), dtype=np.float32)))
    return sorted(out, key=lambda kv: kv[0])   # MXNet orders the inputs by name


class NDArrayIter(DataIter):
    """Iterate over in-memory arrays in batches ('pad', 'discard' or 'roll_over' the last one)."""

    def __init__(self, data, label=None, batch_size=1, shuffle=False, last_batch_handle="pad",
                 data_name="data", label_name="softmax_label"):
        super().__init__(batch_size)
        self.data = _init_data(data, False, data_name)
        self.label = _init_data(label, True, label_name)
        if last_batch_handle not in ("pad", "discard", "roll_over"):
            raise MXNetError(f"NDArrayIter: last_batch_handle must be pad, discard or roll_over, "
                             f"got {last_batch_handle!r}")
        self.num_data = self.data[0][1].shape[0]
        for k, v in self.data + self.label:   # MXNet batches every input by the data's sample count
            if v.shape[0] < self.num_data:
                raise MXNetError(f"NDArrayIter: {k} has {v.shape[0]} samples, expected at least "
                                 f"{self.num_data} (the samples of {self.data[0][0]})")
        self.idx = np.arange(self.num_data)
        if shuffle:
            from . import random as _random
            _random.generator().shuffle(self.idx)
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self.cursor = -batch_size
        if last_batch_handle == "discard":
            self.num_data = self.num_data - self.num_data % batch_size
            self.idx = self.idx[:self.num_data]

    @property
    def provide_data(self):
        return [DataDesc(k, (self.batch_size,) + tuple(v.shape[1:]), v.dtype) for k, v in self.data]

    @property
    def provide_label(self):
        return [DataDesc(k, (self.batch_size,) + tuple(v.shape[1:]), v.dtype) for k, v in self.label]

    def reset(self):
        if self.shuffle:
            from . import random as _random
            _random.generator().shuffle(self.idx)
        if self.last_batch_handle == "roll_over" and self.cursor > self.num_data:
            self.cursor = -self.batch_size + (self.cursor % self.num_data) % self.batch_size
        else:
            self.cursor = -self.batch_size

    def iter_next(self):
        self.cursor += self.batch_size
        return self.cursor < self.num_data

    def _batch(self, arrays):
        from .ndarray import NDArray
        start, end = self.cursor, self.cursor + self.batch_size
        out = []
        for _, v in arrays:
            idx = self.idx[start:min(end, self.num_data)]
            if end > self.num_data:
                idx = np.concatenate([idx, self.idx[:end - self.num_data]])
            out.append(NDArray(np.ascontiguousarray(v._data[idx]), v.context))
        return out

    def getdata(self):
        return self._batch(self.data)

    def getlabel(self):
        return self._batch(self.label)

    def getpad(self):
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            return self.cursor + self.batch_size - self.num_data
        return 0

    def getindex(self):
        return self.idx[self.cursor:self.cursor + self.batch_size]


class _CurrentBatchIter(DataIter):
    """An iterator whose `iter_next` stores `current_batch`; the getters read it."""

    current_batch = None

    def next(self):
        if self.iter_next():
            return self.current_batch
        raise StopIteration

    def getdata(self):
        return self.current_batch.data

    def getlabel(self):
        return self.current_batch.label

    def getindex(self):
        return self.current_batch.index

    def getpad(self):
        return self.current_batch.pad


class ResizeIter(_CurrentBatchIter):
    """Exactly `size` batches per epoch from `data_iter`, resetting it when it runs out (and at
    `reset()` when `reset_internal`)."""

    def __init__(self, data_iter, size, reset_internal=True):
        super().__init__(data_iter.batch_size)
        self.data_iter = data_iter
        self.size = size
        self.reset_internal = reset_internal
        self.cur = 0
        self.provide_data = data_iter.provide_data
        self.provide_label = data_iter.provide_label
        if hasattr(data_iter, "default_bucket_key"):
            self.default_bucket_key = data_iter.default_bucket_key

    def reset(self):
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self):
        if self.cur == self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            self.current_batch = self.data_iter.next()
        self.cur += 1
        return True


def _renamed(descs, renames):
    if renames is None:
        return list(descs)
    out = []
    for d in descs:
        d = d if isinstance(d, DataDesc) else DataDesc(*d)
        out.append(DataDesc(renames.get(d.name, d.name), d.shape, d.dtype, d.layout))
    return out


class PrefetchingIter(_CurrentBatchIter):
    """Reads the next batch of each iterator in `iters` (one or a list) in a background thread
    while the current one is used; a batch joins the iterators' data and labels in order.
    `rename_data` / `rename_label`: one {old name: new name} dict per iterator. An exception in
    an iterator is raised again by `next()`."""

    def __init__(self, iters, rename_data=None, rename_label=None):
        iters = iters if isinstance(iters, list) else [iters]
        if not iters:
            raise MXNetError("PrefetchingIter: needs at least one iterator")
        self.iters = iters
        self.n_iter = len(iters)
        self.rename_data = rename_data
        self.rename_label = rename_label
        super().__init__(self.provide_data[0][1][0])
        self._ready = [threading.Event() for _ in iters]
        self._taken = [threading.Event() for _ in iters]
        for ev in self._taken:
            ev.set()
        self._running = True
        self._next = [None] * self.n_iter
        self._threads = [threading.Thread(target=self._prefetch, args=(i,), daemon=True,
                                          name=f"symjit-prefetch-{i}") for i in range(self.n_iter)]
        for t in self._threads:
            t.start()

    def _prefetch(self, i):
        while True:
            self._taken[i].wait()
            if not self._running:
                return
            try:
                self._next[i] = self.iters[i].next()
            except StopIteration:
                self._next[i] = None
            except BaseException as err:   # handed to the consumer thread
                self._next[i] = err
            self._taken[i].clear()
            self._ready[i].set()

    def __del__(self):
        self._running = False
        for ev in getattr(self, "_taken", ()):
            ev.set()

    @property
    def provide_data(self):
        renames = self.rename_data or [None] * self.n_iter
        return sum((_renamed(it.provide_data, r) for r, it in zip(renames, self.iters)), [])

    @property
    def provide_label(self):
        renames = self.rename_label or [None] * self.n_iter
        return sum((_renamed(it.provide_label, r) for r, it in zip(renames, self.iters)), [])

    def reset(self):
        for ev in self._ready:
            ev.wait()
        for it in self.iters:
            it.reset()
        for ev in self._ready:
            ev.clear()
        for ev in self._taken:
            ev.set()

    def iter_next(self):
        for ev in self._ready:
            ev.wait()
        for b in self._next:
            if isinstance(b, BaseException):
                raise MXNetError(f"PrefetchingIter: an iterator failed: {b!r}") from b
        if self._next[0] is None:
            if any(b is not None for b in self._next):
                raise MXNetError("PrefetchingIter: Number of entry mismatches between iterators")
            return False
        if any(b is None or b.pad != self._next[0].pad for b in self._next):
            raise MXNetError("PrefetchingIter: Number of entry mismatches between iterators")
        self.current_batch = DataBatch(sum((b.data for b in self._next), []),
                                       sum((b.label or [] for b in self._next), []),
                                       self._next[0].pad, self._next[0].index,
                                       provide_data=self.provide_data, provide_label=self.provide_label)
        for ev in self._ready:
            ev.clear()
        for ev in self._taken:
            ev.set()
        return True
