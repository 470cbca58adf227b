"""symjit.io (`mx.io`): data descriptions, batches and iterators of MXNet 1.x."""
from __future__ import annotations

from collections import OrderedDict, namedtuple

import numpy as np

from .base import MXNetError, mx_real_t

__all__ = ["DataDesc", "DataBatch", "DataIter", "NDArrayIter"]


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
