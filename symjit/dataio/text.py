"""MXNet's native iterators over text and IDX files: CSVIter, LibSVMIter (CSR batches) and
MNISTIter, batched with MXNet's round_batch semantics (batching.py).

As MXNet's native iterators, they accept and ignore keyword arguments meant for other
iterators (`prefetch_buffer`, `ctx`, ...): MXNet parses them with InitAllowUnknown.
"""
from __future__ import annotations

import os

import numpy as np

from ..base import MXNetError
from ..io import DataDesc
from .batching import BatchedIter, BatchPlan

__all__ = ["CSVIter", "LibSVMIter", "MNISTIter"]

_CSV_DTYPES = ("float32", "int32", "int64")


def _files(path: str, what: str) -> list:
    """`path`, or every file in it (sorted) when it is a directory."""
    if os.path.isdir(path):
        return sorted(os.path.join(path, f) for f in os.listdir(path)
                      if os.path.isfile(os.path.join(path, f)))
    if not os.path.isfile(path):
        raise MXNetError(f"{what}: cannot open {path!r}: no such file")
    return [path]


def _read_csv(path: str, dtype: str, what: str) -> list:
    """The rows of the CSV file(s) at `path`, each as a 1-D array of `dtype`."""
    rows = []
    for name in _files(path, what):
        with open(name) as fin:
            for lineno, line in enumerate(fin, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rows.append(np.array([float(v) if dtype == "float32" else int(v)
                                          for v in line.split(",")], dtype=dtype))
                except ValueError as err:
                    raise MXNetError(f"{what}: {name}:{lineno}: not a number in {line!r}: {err}") from None
    return rows


def _as_shape(rows: list, shape: tuple, what: str) -> np.ndarray:
    size = int(np.prod(shape))
    for r in rows:
        if r.size != size:
            raise MXNetError(f"{what}: The data size in CSV do not match size of shape: specified "
                             f"shape={tuple(shape)}, the csv row-length={r.size}")
    if not rows:
        return np.zeros((0,) + tuple(shape), np.float32)
    return np.stack(rows).reshape((len(rows),) + tuple(shape))


def _order(num: int, shuffle: bool, seed: int):
    """Pass orders: identity, or a permutation drawn from (seed, pass number)."""
    def order(pass_number: int) -> np.ndarray:
        if not shuffle:
            return np.arange(num)
        return np.random.default_rng((seed, pass_number)).permutation(num)
    return order


def _gather(arr: np.ndarray, indices) -> np.ndarray:
    """arr[indices] with zeros where an index is None (a short batch's missing slots)."""
    out = np.zeros((len(indices),) + arr.shape[1:], arr.dtype)
    for k, i in enumerate(indices):
        if i is not None:
            out[k] = arr[i]
    return out


def _nd(arr: np.ndarray):
    from ..context import cpu
    from ..ndarray.ndarray import NDArray
    return NDArray(np.ascontiguousarray(arr), cpu())


class CSVIter(BatchedIter):
    """Rows of `data_csv` (a file or a directory of files) reshaped to `data_shape`, with labels
    from `label_csv` rows (shape `label_shape`) or zeros of shape (1,). Batches are
    (batch_size,) + data_shape of `dtype` (float32, int32 or int64) and
    (batch_size,) + label_shape float32."""

    def __init__(self, data_csv, data_shape, batch_size, label_csv="NULL", label_shape=(1,),
                 round_batch=True, dtype="float32", data_name="data", label_name="softmax_label",
                 **kwargs):
        if dtype not in _CSV_DTYPES:
            raise MXNetError(f"CSVIter: dtype must be one of {_CSV_DTYPES}, got {dtype!r}")
        data = _as_shape(_read_csv(data_csv, dtype, "CSVIter"), tuple(data_shape), "CSVIter")
        if label_csv not in (None, "NULL"):
            rows = _read_csv(label_csv, "float32", "CSVIter")
            if len(rows) < len(data):
                raise MXNetError("CSVIter: Data CSV's row is smaller than the number of rows in label_csv")
            label = _as_shape(rows[:len(data)], tuple(label_shape), "CSVIter").astype(np.float32)
        else:
            label = np.zeros((len(data), 1), np.float32)
        self._data, self._label = data, label
        plan = BatchPlan(len(data), int(batch_size), round_batch, _order(len(data), False, 0), "CSVIter")
        super().__init__(plan, [DataDesc(data_name, (batch_size,) + data.shape[1:], data.dtype)],
                         [DataDesc(label_name, (batch_size,) + label.shape[1:], np.float32)])

    def _load(self, indices, pad):
        return [_nd(_gather(self._data, indices))], [_nd(_gather(self._label, indices))]


def _parse_libsvm_line(line: str, width: int, where: str):
    """(label values, column indices, values) of one LibSVM line `label [col:value ...]` with
    zero-based, ascending column indices below `width`."""
    fields = line.split()
    labels, cols, vals = [], [], []
    for f in fields:
        if ":" in f:
            c, v = f.split(":", 1)
            cols.append(int(c))
            vals.append(float(v))
        elif cols:
            raise MXNetError(f"LibSVMIter: {where}: a label after the features in {line!r}")
        else:
            labels.append(float(f))
    if any(c < 0 or c >= width for c in cols):
        raise MXNetError(f"LibSVMIter: {where}: column index out of range [0, {width}) in {line!r}")
    if any(b <= a for a, b in zip(cols, cols[1:])):
        raise MXNetError(f"LibSVMIter: {where}: column indices must be ascending in {line!r}")
    return labels, cols, vals


def _read_libsvm(path: str, width: int):
    """[(labels, cols, vals)] of every non-empty line of the LibSVM file(s) at `path`."""
    rows = []
    for name in _files(path, "LibSVMIter"):
        with open(name) as fin:
            for lineno, line in enumerate(fin, 1):
                if line.strip():
                    rows.append(_parse_libsvm_line(line, width, f"{name}:{lineno}"))
    return rows


def _csr_batch(rows, indices, width: int, dtype=np.float32):
    """A CSRNDArray (len(indices), width) of the given LibSVM rows (None: an empty row)."""
    from ..ndarray import sparse
    data, cols, indptr = [], [], [0]
    for i in indices:
        if i is not None:
            cols.extend(rows[i][1])
            data.extend(rows[i][2])
        indptr.append(len(cols))
    return sparse.csr_matrix((np.array(data, dtype), np.array(cols, np.int64), np.array(indptr, np.int64)),
                             shape=(len(indices), width))


class LibSVMIter(BatchedIter):
    """Sparse rows of a LibSVM file (`label col:value ...`, zero-based ascending columns) as
    CSR batches (batch_size, data_shape[0]). Labels are the lines' first values, a dense
    (batch_size,) array, or, with `label_libsvm`, CSR rows (batch_size, label_shape[0]) of that
    file. round_batch only (as MXNet); `num_parts`/`part_index` split the rows into contiguous
    parts."""

    def __init__(self, data_libsvm, data_shape, batch_size, label_libsvm="NULL", label_shape=(1,),
                 num_parts=1, part_index=0, round_batch=True, data_name="data",
                 label_name="softmax_label", **kwargs):
        if len(data_shape) != 1 or len(label_shape) != 1:
            raise MXNetError(f"LibSVMIter: data_shape and label_shape must be 1-D, got {data_shape} "
                             f"and {label_shape}")
        self._width = int(data_shape[0])
        rows = _read_libsvm(data_libsvm, self._width)
        self._label_rows = None
        if label_libsvm not in (None, "NULL"):
            self._label_width = int(label_shape[0])
            self._label_rows = _read_libsvm(label_libsvm, self._label_width)
            if len(self._label_rows) < len(rows):
                raise MXNetError(f"LibSVMIter: {label_libsvm} has {len(self._label_rows)} rows, fewer "
                                 f"than the {len(rows)} of {data_libsvm}")
        rows, self._label_rows = self._partition(rows, self._label_rows, num_parts, part_index)
        self._rows = rows
        plan = BatchPlan(len(rows), int(batch_size), True, _order(len(rows), False, 0), "LibSVMIter")
        label_desc = (batch_size,) if self._label_rows is None else (batch_size, self._label_width)
        super().__init__(plan, [DataDesc(data_name, (batch_size, self._width))],
                         [DataDesc(label_name, label_desc)])

    @staticmethod
    def _partition(rows, label_rows, num_parts, part_index):
        if not 0 <= part_index < num_parts:
            raise MXNetError(f"LibSVMIter: part_index {part_index} not in [0, {num_parts})")
        per = (len(rows) + num_parts - 1) // num_parts
        sl = slice(part_index * per, (part_index + 1) * per)
        return rows[sl], (None if label_rows is None else label_rows[sl])

    def _load(self, indices, pad):
        data = _csr_batch(self._rows, indices, self._width)
        if self._label_rows is not None:
            return [data], [_csr_batch(self._label_rows, indices, self._label_width)]
        label = np.array([self._rows[i][0][0] if self._rows[i][0] else 0.0 for i in indices], np.float32)
        return [data], [_nd(label)]


def _read_idx(path: str, magic: int, what: str) -> np.ndarray:
    """The array of an IDX file (big-endian header, uint8 payload), gzip'd or not."""
    import gzip
    if not os.path.isfile(path):
        raise MXNetError(f"MNISTIter: cannot open {what} file {path!r}: no such file")
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as fin:
        raw = fin.read()
    ndim = magic & 0xFF
    head = np.frombuffer(raw[:4 + 4 * ndim], ">u4")
    if head[0] != magic:
        raise MXNetError(f"MNISTIter: {path} is not an IDX {what} file (magic {int(head[0])}, expected {magic})")
    dims = tuple(int(d) for d in head[1:])
    body = np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise MXNetError(f"MNISTIter: {path} holds {body.size} values, its header says {dims}")
    return body.reshape(dims)


class MNISTIter(BatchedIter):
    """MNIST IDX files (`image`, `label`; raw or .gz) as float32 batches scaled to [0, 1]:
    (batch_size, 1, 28, 28), or (batch_size, 784) with `flat`. `shuffle` (default True)
    permutes the samples once, with `seed`; a final partial batch is dropped, as MXNet's
    MNISTIter does. `num_parts`/`part_index` keep a contiguous part of the samples."""

    def __init__(self, image="./train-images-idx3-ubyte", label="./train-labels-idx1-ubyte",
                 batch_size=128, shuffle=True, flat=False, seed=0, silent=False, num_parts=1,
                 part_index=0, data_name="data", label_name="softmax_label", **kwargs):
        images = _read_idx(image, 2051, "image")
        labels = _read_idx(label, 2049, "label")
        if len(images) != len(labels):
            raise MXNetError(f"MNISTIter: {len(images)} images but {len(labels)} labels")
        if not 0 <= part_index < num_parts:
            raise MXNetError(f"MNISTIter: part_index {part_index} not in [0, {num_parts})")
        per = len(images) // num_parts
        sl = slice(part_index * per, (part_index + 1) * per)
        images, labels = images[sl], labels[sl]
        if shuffle:
            perm = np.random.default_rng(seed).permutation(len(images))
            images, labels = images[perm], labels[perm]
        n, h, w = images.shape
        shape = (h * w,) if flat else (1, h, w)
        self._images = images.reshape((n,) + shape).astype(np.float32) / np.float32(255.0)
        self._labels = labels.astype(np.float32)
        self._batches = n // int(batch_size)
        plan = BatchPlan(self._batches * int(batch_size), int(batch_size), True,
                         _order(n, False, 0), "MNISTIter")
        super().__init__(plan, [DataDesc(data_name, (batch_size,) + shape)],
                         [DataDesc(label_name, (batch_size,))])

    def _load(self, indices, pad):
        return [_nd(self._images[indices])], [_nd(self._labels[indices])]
