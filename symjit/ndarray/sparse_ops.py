"""Operators on sparse storage (MXNet 1.x `FComputeEx` kernels): what `invoke` runs when an
input is a CSRNDArray or RowSparseNDArray.

Each kernel works on the compressed arrays (`data`, `indices`, `indptr`) and returns arrays of
the storage type MXNet 1.9.1 gives (e.g. dot(csr.T, dense) -> row_sparse, elemwise_add(csr,
csr) -> csr, abs(csr) -> csr, sum(csr, axis=0) -> dense). Products with a CSR matrix run in
the runtime's C kernel library (runtime/nn/sparse.c) for float32 / float64, and on vectorised
numpy index arithmetic otherwise; nothing here densifies a sparse input. A kernel returns None
when it has no sparse path for its arguments: `invoke` then computes on the dense values (MXNet's
storage fallback), which gives a dense result.
"""
from __future__ import annotations

import ctypes
import functools
from typing import Callable

import numpy as np

from ..base import MXNetError
from .ndarray import NDArray
from .sparse import (BaseSparseNDArray, CSRNDArray, RowSparseNDArray, _INDEX_DTYPE, cast_storage,
                     csr_row_slice)

__all__ = ["run_sparse", "csr_dense", "csrt_dense", "csr_transpose", "SPARSE_KERNELS", "lazy_rows_update"]

#: op name -> kernel(op_name, attrs, inputs, out) returning the outputs (NDArrays) or None (dense fallback)
SPARSE_KERNELS: dict[str, Callable] = {}


def _kernel(*names: str):
    def deco(fn):
        for n in names:
            SPARSE_KERNELS[n] = fn
        return fn
    return deco


def run_sparse(op, attrs, inputs, out=None) -> list | None:
    """The outputs of `op` on `inputs` (at least one sparse) computed by a sparse kernel, or
    None where MXNet falls back to dense storage. `out`: invoke's out= (update kernels write
    the weight in place when it is the weight itself)."""
    kernel = SPARSE_KERNELS.get(op.name)
    return None if kernel is None else kernel(op.name, attrs, list(inputs), out)


def deliver(results: list, out) -> list:
    """`results` written into the `out=` arrays (sparse targets take the compressed arrays,
    dense ones the values), or `results` when `out` is None."""
    if out is None:
        return results
    outs = [out] if isinstance(out, NDArray) else list(out)
    for r, o in zip(results, outs):
        if r is o:
            continue
        if o.shape != r.shape:
            raise MXNetError(f"out= has shape {o.shape}, expected {r.shape}")
        if isinstance(o, BaseSparseNDArray):
            src = r if isinstance(r, BaseSparseNDArray) and r.stype == o.stype else cast_storage(r, o.stype)
            o._arrays = src._copied_arrays(o._dtype)
        else:
            from .write_guard import writable
            writable(o._data)[...] = r.asnumpy() if isinstance(r, BaseSparseNDArray) else r._data
    return outs + results[len(outs):]


# ------------------------------------------------------------------------------------------
# Constructors of results
# ------------------------------------------------------------------------------------------

def _csr(shape, data, indices, indptr, like: NDArray) -> CSRNDArray:
    return CSRNDArray._from_arrays(shape, data.dtype, like.context,
                                   {"data": np.ascontiguousarray(data),
                                    "indices": np.ascontiguousarray(indices, _INDEX_DTYPE),
                                    "indptr": np.ascontiguousarray(indptr, _INDEX_DTYPE)})


def _rsp(shape, data, indices, like: NDArray) -> RowSparseNDArray:
    return RowSparseNDArray._from_arrays(shape, data.dtype, like.context,
                                         {"data": np.ascontiguousarray(data),
                                          "indices": np.ascontiguousarray(indices, _INDEX_DTYPE)})


def _dense(values: np.ndarray, like: NDArray) -> NDArray:
    return NDArray(np.ascontiguousarray(values), like.context)


def _values(x: NDArray) -> np.ndarray:
    """A dense input's buffer (never called on sparse inputs)."""
    return x._data


def _csr_rows(a: dict) -> np.ndarray:
    """Row number of every stored entry of a CSR matrix."""
    return np.repeat(np.arange(a["indptr"].size - 1, dtype=_INDEX_DTYPE), np.diff(a["indptr"]))


# ------------------------------------------------------------------------------------------
# CSR products (C kernels for float32 / float64, numpy otherwise)
# ------------------------------------------------------------------------------------------

_KIND = {np.dtype(np.float32): 0, np.dtype(np.float64): 1}


@functools.lru_cache(maxsize=None)
def _native():
    """The kernel library (ctypes), or None when the native runtime is unavailable."""
    from ..native import native_runtime
    rt = native_runtime()
    return None if rt is None else rt.native_library()


def _ptr(a: np.ndarray) -> ctypes.c_void_p:
    return ctypes.c_void_p(a.ctypes.data)


def csr_dense(a: dict, dense: np.ndarray) -> np.ndarray:
    """A (rows, cols; csr arrays) . dense (cols, k) as a dense (rows, k) array."""
    rows = a["indptr"].size - 1
    dense = np.ascontiguousarray(dense)
    k = dense.shape[1]
    dt = np.result_type(a["data"].dtype, dense.dtype)
    lib = _native() if dt in _KIND else None
    if lib is None:
        products = a["data"][:, None].astype(dt) * dense[a["indices"]]
        out = np.zeros((rows, k), dt)
        np.add.at(out, _csr_rows(a), products)
        return out
    out = np.empty((rows, k), dt)
    data = np.ascontiguousarray(a["data"], dt)
    dense = np.ascontiguousarray(dense, dt)
    lib.symjit_nn_csr_dense(ctypes.c_int64(rows), ctypes.c_int64(k), ctypes.c_int64(_KIND[dt]), _ptr(data),
                            _ptr(a["indices"]), _ptr(a["indptr"]), _ptr(dense), _ptr(out))
    return out


def csr_transpose(a: dict, cols: int) -> dict:
    """The CSR arrays of A^T for A (csr arrays, `cols` columns); rows of A^T stay sorted (the
    numpy path: the C kernels never need the transpose)."""
    perm = np.argsort(a["indices"], kind="stable")
    indptr_t = np.concatenate([[0], np.cumsum(np.bincount(a["indices"], minlength=cols))]).astype(_INDEX_DTYPE)
    return {"data": a["data"][perm], "indices": _csr_rows(a)[perm], "indptr": indptr_t}


def csrt_dense(a: dict, cols: int, dense: np.ndarray) -> tuple:
    """A^T . dense for A (rows, cols; csr arrays) and dense (rows, k): (the columns of A holding
    entries, increasing; the rows of the product for them, a dense (len(columns), k) array).
    The other rows of the product are zero."""
    columns = np.nonzero(np.bincount(a["indices"], minlength=cols))[0].astype(_INDEX_DTYPE)
    dense = np.ascontiguousarray(dense)
    dt = np.result_type(a["data"].dtype, dense.dtype)
    lib = _native() if dt in _KIND else None
    if lib is None:
        return columns, csr_dense(_nonempty_rows(csr_transpose(a, cols))[1], dense)
    slot = np.zeros(cols, _INDEX_DTYPE)
    slot[columns] = np.arange(columns.size, dtype=_INDEX_DTYPE)
    k = dense.shape[1]
    out = np.empty((columns.size, k), dt)
    data = np.ascontiguousarray(a["data"], dt)
    dense = np.ascontiguousarray(dense, dt)
    parts = _scatter_parts(a["indices"].size)
    scratch = np.empty((parts - 1, columns.size, k), dt)   # the partial products of parts 1..
    lib.symjit_nn_csrt_dense(ctypes.c_int64(a["indptr"].size - 1), ctypes.c_int64(k), ctypes.c_int64(columns.size),
                             ctypes.c_int64(_KIND[dt]), _ptr(data), _ptr(a["indices"]), _ptr(a["indptr"]),
                             _ptr(slot), _ptr(dense), _ptr(out), ctypes.c_int64(parts), _ptr(scratch))
    return columns, out


#: stored entries per part of a parallel csr^T product (fewer: fewer parts)
_ENTRIES_PER_PART = 16384


def _scatter_parts(nnz: int) -> int:
    """How many row ranges a csr^T product scatters in parallel: one per thread, at most 8,
    each with at least _ENTRIES_PER_PART stored entries."""
    from ..runtime import num_threads
    return int(max(1, min(num_threads(), 8, nnz // _ENTRIES_PER_PART)))


def csrt_dense_full(a: dict, cols: int, dense: np.ndarray) -> np.ndarray:
    """A^T . dense as a dense (cols, k) array (rows of A^T without entries zero)."""
    columns, values = csrt_dense(a, cols, dense)
    full = np.zeros((cols, values.shape[1]), values.dtype)
    full[columns] = values
    return full


def _nonempty_rows(t: dict) -> tuple:
    """(row numbers, csr arrays) of the non-empty rows of a CSR matrix."""
    counts = np.diff(t["indptr"])
    keep = np.nonzero(counts)[0].astype(_INDEX_DTYPE)
    indptr = np.concatenate([[0], np.cumsum(counts[keep])]).astype(_INDEX_DTYPE)
    return keep, {"data": t["data"], "indices": t["indices"], "indptr": indptr}


def _check_dot(lhs: NDArray, rhs: NDArray, ta: bool, tb: bool) -> None:
    from ..ops.linalg import _check_float
    _check_float("dot", lhs.dtype)
    if lhs.dtype != rhs.dtype:
        raise MXNetError(f"dot: dtype mismatch: lhs {np.dtype(lhs.dtype).name}, rhs {np.dtype(rhs.dtype).name}")
    lk = lhs.shape[0] if ta else lhs.shape[-1]
    rk = rhs.shape[-1] if tb and rhs.ndim == 2 else rhs.shape[0]
    if lk != rk:
        raise MXNetError(f"dot: shape mismatch: lhs {lhs.shape} (transpose_a={ta}) and rhs {rhs.shape} "
                         f"(transpose_b={tb}) do not share the contracted dimension ({lk} vs {rk})")


def _as_stype(out: NDArray, stype) -> NDArray:
    return out if stype is None or out.stype == stype else cast_storage(out, stype)


@_kernel("dot")
def _dot(name, attrs, inputs, out=None):
    lhs, rhs = inputs
    ta, tb, fwd = attrs["transpose_a"], attrs["transpose_b"], attrs.get("forward_stype")
    if lhs.ndim != 2 or rhs.ndim not in (1, 2):
        return None
    _check_dot(lhs, rhs, ta, tb)
    if isinstance(lhs, BaseSparseNDArray) and rhs.ndim != 2:
        raise MXNetError(f"dot: a sparse lhs needs a 2-dimensional rhs (MXNet's sparse dot), got rhs shape "
                         f"{rhs.shape}")
    if isinstance(lhs, CSRNDArray) and not isinstance(rhs, CSRNDArray):
        return [_dot_csr_lhs(lhs, rhs, ta, tb, fwd)]
    if isinstance(rhs, CSRNDArray) and not isinstance(lhs, BaseSparseNDArray) and rhs.ndim == 2:
        return [_dot_csr_rhs(lhs, rhs, ta, tb, fwd)]
    if isinstance(lhs, RowSparseNDArray) and not isinstance(rhs, BaseSparseNDArray):
        return [_as_stype(_dot_rsp_lhs(lhs, rhs, ta, tb), fwd)]
    if isinstance(lhs, CSRNDArray):   # csr . csr: the rhs values, the lhs's sparse product
        return [_dot_csr_lhs(lhs, NDArray(rhs.asnumpy(), rhs.context), ta, tb, fwd)]
    return None


def _dense_operand(rhs: NDArray, tb: bool) -> np.ndarray:
    """The (k, n) matrix a product contracts with (rhs, transposed when `tb`)."""
    b = rhs.asnumpy() if isinstance(rhs, BaseSparseNDArray) else _values(rhs)
    return np.ascontiguousarray(b.T) if tb else b


def _dot_csr_lhs(lhs: CSRNDArray, rhs: NDArray, ta: bool, tb: bool, fwd):
    a = lhs._arrays
    b = _dense_operand(rhs, tb)
    if not ta:
        return _as_stype(_dense(csr_dense(a, b), lhs), fwd)
    if fwd in ("default", "csr"):   # MXNet: dot(csr.T, dense) = row_sparse unless asked otherwise
        return _as_stype(_dense(csrt_dense_full(a, lhs.shape[1], b), lhs), fwd)
    rows, values = csrt_dense(a, lhs.shape[1], b)
    return _rsp((lhs.shape[1], b.shape[1]), values, rows, lhs)


def _dot_csr_rhs(lhs: NDArray, rhs: CSRNDArray, ta: bool, tb: bool, fwd):
    d = _values(lhs)
    a = rhs._arrays
    if ta:   # MXNet has no sparse kernel for D^T . A (or D^T . A^T): a dense result
        out = csr_dense(a, d).T if tb else csrt_dense_full(a, rhs.shape[1], np.ascontiguousarray(d)).T
        return _as_stype(_dense(out, lhs), fwd)
    m = d.shape[0]
    if tb:   # D . A^T = (A . D^T)^T; MXNet (storage fallback): the dense product cast to csr
        return _as_stype(_dense(csr_dense(a, np.ascontiguousarray(d.T)).T, lhs), fwd or "csr")
    p = rhs.shape[1]
    columns, values = csrt_dense(a, p, np.ascontiguousarray(d.T))   # (D . A)^T on A's nonempty columns
    if fwd in (None, "csr"):   # MXNet (CPU): csr, every row on the columns of A holding entries
        return _csr((m, p), np.ascontiguousarray(values.T).reshape(-1), np.tile(columns, m),
                    np.arange(m + 1, dtype=_INDEX_DTYPE) * columns.size, lhs)
    full = np.zeros((m, p), values.dtype)
    full[:, columns] = values.T
    return _as_stype(_dense(full, lhs), fwd)


def _dot_rsp_lhs(lhs: RowSparseNDArray, rhs: NDArray, ta: bool, tb: bool) -> NDArray:
    a = lhs._arrays
    b = _dense_operand(rhs, tb)
    if not ta:
        out = np.zeros((lhs.shape[0], b.shape[1]), lhs._dtype)
        out[a["indices"]] = a["data"] @ b
    else:
        out = a["data"].T @ b[a["indices"]]
    return _dense(out, lhs)


# ------------------------------------------------------------------------------------------
# Elementwise operators
# ------------------------------------------------------------------------------------------

#: unary operators with f(0) = 0: the result keeps the input's storage (MXNet)
ZERO_PRESERVING_UNARY = ("abs", "sign", "round", "rint", "ceil", "floor", "trunc", "fix", "square", "sqrt",
                         "cbrt", "sin", "tan", "arcsin", "arctan", "sinh", "tanh", "arcsinh", "arctanh",
                         "expm1", "log1p", "degrees", "radians", "relu", "negative", "_copy",
                         "_mul_scalar", "_div_scalar", "clip")


def _with_values(x: BaseSparseNDArray, data: np.ndarray) -> BaseSparseNDArray:
    """An array with x's storage, shape and stored positions holding the values `data`."""
    arrays = {k: np.array(v, copy=True) for k, v in x._arrays.items() if k != "data"}
    arrays["data"] = np.ascontiguousarray(data)
    return x._with_arrays(arrays, dtype=data.dtype)


def _apply_to_values(op_name: str, attrs, values: np.ndarray) -> np.ndarray:
    """`op_name` with `attrs` applied to the stored values (the dense operator, on a flat copy)."""
    from .ndarray import invoke
    out = invoke(op_name, [NDArray(np.ascontiguousarray(values.reshape(-1)))], attrs)
    return out._data.reshape(values.shape)


@_kernel(*ZERO_PRESERVING_UNARY)
def _unary(op_name, attrs, inputs, out=None):
    (x,) = inputs
    if op_name == "clip" and not (attrs["a_min"] <= 0 <= attrs["a_max"]):
        raise MXNetError(f"clip: no {x.stype} result for a_min={attrs['a_min']}, a_max={attrs['a_max']} (zero "
                         f"outside [a_min, a_max]; MXNet refuses it): cast the input to default storage first")
    return [_with_values(x, _apply_to_values(op_name, attrs, x._arrays["data"]))]


def _keys(x: CSRNDArray) -> np.ndarray:
    """Flat positions (row * cols + col) of the stored entries of a CSR matrix, increasing."""
    a = x._arrays
    return _csr_rows(a) * x.shape[1] + a["indices"]


def _from_keys(shape, keys: np.ndarray, data: np.ndarray, like) -> CSRNDArray:
    rows, cols = np.divmod(keys, shape[1])
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=shape[0]))])
    return _csr(shape, data, cols, indptr, like)


def _union(ka: np.ndarray, kb: np.ndarray):
    """(sorted union of two increasing key arrays, positions of ka in it, of kb in it)."""
    keys = np.union1d(ka, kb)
    return keys, np.searchsorted(keys, ka), np.searchsorted(keys, kb)


def _combine_same(x: BaseSparseNDArray, y: BaseSparseNDArray, kind: str) -> BaseSparseNDArray:
    """x + y, x - y (union of the stored positions) or x * y (csr: the intersection of the stored
    positions; row_sparse: the union of the stored rows, as MXNet), x and y of one sparse
    storage type and shape."""
    a, b = x._arrays, y._arrays
    csr = isinstance(x, CSRNDArray)
    ka, kb = (_keys(x), _keys(y)) if csr else (a["indices"], b["indices"])
    dt = np.result_type(a["data"].dtype, b["data"].dtype)
    if kind == "mul" and csr:
        keys, ia, ib = np.intersect1d(ka, kb, assume_unique=True, return_indices=True)
        data = a["data"][ia].astype(dt) * b["data"][ib]
    elif kind == "mul":   # MXNet stores the union of the rows (zero where one side has none)
        keys, pa, pb = _union(ka, kb)
        left = np.zeros((keys.size,) + a["data"].shape[1:], dt)
        left[pa] = a["data"]
        data = np.zeros_like(left)
        data[pb] = left[pb] * b["data"]
    else:
        keys, pa, pb = _union(ka, kb)
        data = np.zeros((keys.size,) + a["data"].shape[1:], dt)
        data[pa] += a["data"]
        if kind == "add":
            data[pb] += b["data"]
        else:
            data[pb] -= b["data"]
    if csr:
        return _from_keys(x.shape, keys, data, x)
    return _rsp(x.shape, data, keys, x)


def _scatter_into_dense(dense: np.ndarray, x: BaseSparseNDArray, sign: float) -> np.ndarray:
    """dense + sign * x (a new dense array), touching only x's stored positions."""
    out = np.array(dense, copy=True)
    a = x._arrays
    vals = a["data"] if sign > 0 else -a["data"]
    if isinstance(x, CSRNDArray):
        np.add.at(out, (_csr_rows(a), a["indices"]), vals)
    else:
        out[a["indices"]] += vals
    return out


def _sparse_times_dense(x: BaseSparseNDArray, dense: np.ndarray) -> BaseSparseNDArray:
    """x * dense (dense broadcastable to x's shape) with x's storage and stored positions."""
    a = x._arrays
    full = np.broadcast_to(dense, x.shape)
    if isinstance(x, CSRNDArray):
        factor = full[_csr_rows(a), a["indices"]]
    else:
        factor = full[a["indices"]]
    return _with_values(x, a["data"] * factor)


_BINARY_KIND = {"elemwise_add": "add", "_plus": "add", "_add": "add", "elemwise_sub": "sub", "_minus": "sub",
                "_sub": "sub", "elemwise_mul": "mul", "_mul": "mul", "broadcast_mul": "mul",
                "broadcast_add": "add", "broadcast_plus": "add", "broadcast_sub": "sub", "broadcast_minus": "sub",
                "elemwise_div": "div", "broadcast_div": "div"}


@_kernel(*_BINARY_KIND)
def _binary(name, attrs, inputs, out=None):
    x, y = inputs
    kind = _BINARY_KIND[name]
    xs, ys = isinstance(x, BaseSparseNDArray), isinstance(y, BaseSparseNDArray)
    if x.dtype != y.dtype:
        return None
    if xs and ys and x.stype == y.stype and x.shape == y.shape and kind != "div":
        if kind == "mul" or not name.startswith("broadcast"):
            return [_combine_same(x, y, kind)]
        return None   # broadcast_add of two sparse arrays: MXNet falls back to dense
    if kind in ("mul", "div") and xs and not ys and name != "elemwise_div":   # elemwise_div: dense (MXNet)
        other = _values(y)
        try:
            np.broadcast_shapes(other.shape, x.shape)
        except ValueError:
            return None
        if np.broadcast_shapes(other.shape, x.shape) != x.shape:
            return None
        return [_sparse_times_dense(x, other if kind == "mul" else 1.0 / other)]
    if kind == "mul" and ys and not xs and x.shape == y.shape:
        return [_sparse_times_dense(y, _values(x))]
    if kind in ("add", "sub") and x.shape == y.shape and xs != ys:   # sparse +- dense: dense
        if xs:
            base = -_values(y) if kind == "sub" else _values(y)
            return [_dense(_scatter_into_dense(base, x, 1.0), x)]
        return [_dense(_scatter_into_dense(_values(x), y, 1.0 if kind == "add" else -1.0), x)]
    return None


@_kernel("zeros_like")
def _zeros_like(name, attrs, inputs, out=None):
    (x,) = inputs
    return [x.zeros_like()]


# ------------------------------------------------------------------------------------------
# Reductions, slicing, where
# ------------------------------------------------------------------------------------------

def _axis(attrs) -> int | None:
    axis = attrs.get("axis")
    if axis is None or (isinstance(axis, tuple) and len(axis) == 0):
        return None
    if isinstance(axis, tuple):
        if len(axis) != 1:
            return -1
        axis = axis[0]
    return int(axis) % 2


@_kernel("sum", "mean")
def _sum(name, attrs, inputs, out=None):
    (x,) = inputs
    if not isinstance(x, CSRNDArray) or attrs.get("exclude"):
        return None
    axis = _axis(attrs)
    if axis not in (0, 1):
        return None
    a = x._arrays
    if axis == 0:
        total = np.bincount(a["indices"], weights=a["data"], minlength=x.shape[1])
    else:
        total = np.bincount(_csr_rows(a), weights=a["data"], minlength=x.shape[0])
    if name == "mean":
        total = total / x.shape[axis]
    total = total.astype(x._dtype)
    if attrs.get("keepdims"):
        total = total[None, :] if axis == 0 else total[:, None]
    return [_dense(total, x)]


@_kernel("slice")
def _slice(name, attrs, inputs, out=None):
    (x,) = inputs
    if not isinstance(x, CSRNDArray):
        return None
    begin, end, step = attrs["begin"], attrs["end"], attrs.get("step") or ()
    if any(s not in (None, 1) for s in step):
        return None
    bounds = []
    for d, size in enumerate(x.shape):
        b = begin[d] if d < len(begin) else None
        e = end[d] if d < len(end) else None
        lo, hi, _ = slice(b, e).indices(size)
        bounds.append((lo, max(lo, hi)))
    (r0, r1), (c0, c1) = bounds
    part = csr_row_slice(x, r0, r1)
    if (c0, c1) == (0, x.shape[1]):
        return [part]
    a = part._arrays
    keep = (a["indices"] >= c0) & (a["indices"] < c1)
    counts = np.bincount(_csr_rows(a)[keep], minlength=r1 - r0)
    indptr = np.concatenate([[0], np.cumsum(counts)])
    return [_csr((r1 - r0, c1 - c0), a["data"][keep], a["indices"][keep] - c0, indptr, x)]


@_kernel("where")
def _where(name, attrs, inputs, out=None):
    cond, x, y = inputs
    if not isinstance(cond, CSRNDArray) or any(isinstance(v, BaseSparseNDArray) for v in (x, y)):
        return None
    if not (x.shape == y.shape == cond.shape):
        return None
    a = cond._arrays
    rows, cols = _csr_rows(a), a["indices"]
    chosen = a["data"] != 0
    out = np.array(_values(y), copy=True)
    out[rows[chosen], cols[chosen]] = _values(x)[rows[chosen], cols[chosen]]
    return [_dense(out, x)]


# ------------------------------------------------------------------------------------------
# Lazy (row_sparse) optimizer updates
# ------------------------------------------------------------------------------------------

#: update ops that are lazy on row_sparse gradients whatever their attributes (MXNet: adagrad, ftrl)
_ALWAYS_LAZY = ("_adagrad_update", "_sparse_adagrad_update", "ftrl_update")
#: update ops with a `lazy_update` attribute
_LAZY_BY_ATTR = ("sgd_update", "sgd_mom_update", "adam_update")


@_kernel(*(_ALWAYS_LAZY + _LAZY_BY_ATTR))
def _lazy_update(name, attrs, inputs, out=None):
    """Update ops on a row_sparse gradient: the lazy update (rows of the gradient only) where
    MXNet makes it; the weight and the states are updated in place (a fresh weight when out= is
    not the weight)."""
    weight, grad, *states = inputs
    lazy = name in _ALWAYS_LAZY or attrs.get("lazy_update", False)
    if not isinstance(grad, RowSparseNDArray) or not lazy or not _lazy_storage(name, weight, states):
        return None
    target = out if out is weight else weight.copy()
    lazy_rows_update(name, attrs, target, grad, states)
    return [target]


def _lazy_storage(name: str, weight: NDArray, states: list) -> bool:
    """Whether MXNet 1.9.1 has a sparse (lazy) kernel for these storage types (a row_sparse
    gradient given): ftrl only with row_sparse weight and states; the others with the states
    in the weight's storage (dense or row_sparse). Otherwise it falls back to the dense update."""
    if isinstance(weight, CSRNDArray):
        return False
    if name == "ftrl_update":
        return all(isinstance(x, RowSparseNDArray) for x in [weight] + states)
    return all(x.stype == weight.stype for x in states)


def lazy_rows_update(op_name: str, attrs, weight: NDArray, grad: RowSparseNDArray, states: list) -> None:
    """MXNet's lazy update: the update op applied to the rows stored in `grad` only (gathered,
    updated with the dense op on those rows, scattered back); every other row of the weight and
    of the states is left as it is. Row-sparse weights / states keep their storage."""
    from .ndarray import invoke
    g = grad._arrays
    rows = g["indices"]
    if rows.size == 0:
        return
    targets = [weight] + list(states)
    gathered = [NDArray(np.ascontiguousarray(_rows_of(t, rows)), weight.context) for t in targets]
    grad_rows = NDArray(np.ascontiguousarray(g["data"]), weight.context)
    invoke(op_name, [gathered[0], grad_rows] + gathered[1:], attrs, out=gathered[0])
    for t, new in zip(targets, gathered):
        _write_rows(t, rows, new._data)


def _rows_of(x: NDArray, rows: np.ndarray) -> np.ndarray:
    """Rows `rows` of x (dense or row_sparse: absent rows are zero)."""
    if not isinstance(x, RowSparseNDArray):
        return _values(x)[rows]
    a = x._arrays
    out = np.zeros((rows.size,) + x.shape[1:], x._dtype)
    pos = np.searchsorted(a["indices"], rows)
    ok = pos < a["indices"].size
    ok[ok] = a["indices"][pos[ok]] == rows[ok]
    out[ok] = a["data"][pos[ok]]
    return out


def _write_rows(x: NDArray, rows: np.ndarray, values: np.ndarray) -> None:
    """x[rows] = values in place (a row_sparse x stores the union of its rows and `rows`)."""
    if not isinstance(x, RowSparseNDArray):
        from .write_guard import writable
        writable(x._data)[rows] = values
        return
    a = x._arrays
    keys, pa, pb = _union(a["indices"], rows)
    data = np.zeros((keys.size,) + x.shape[1:], x._dtype)
    data[pa] = a["data"]
    data[pb] = values
    x._arrays = {"data": data, "indices": keys.astype(_INDEX_DTYPE)}


@_kernel("cast_storage")
def _cast_storage(name, attrs, inputs, out=None):
    return [cast_storage(inputs[0], attrs["stype"])]


@_kernel("_contrib_getnnz")
def _getnnz(name, attrs, inputs, out=None):
    """Stored entries of a CSR matrix: all or per row (axis 1); MXNet refuses axis 0."""
    (x,) = inputs
    if not isinstance(x, CSRNDArray):
        raise MXNetError(f"getnnz: a csr matrix is expected (MXNet), got storage {x.stype}")
    from ..ops.registry import get_op
    get_op(name).infer_shape(attrs, [x.shape])   # refuses the axes MXNet refuses
    a = x._arrays
    if attrs["axis"] is None:
        counts = np.array([a["indices"].size], np.int64)
    else:   # axis 1 (shape inference refuses the others, as MXNet)
        counts = np.diff(a["indptr"]).astype(np.int64)
    return [_dense(counts, x)]


@_kernel("_square_sum")
def _square_sum(name, attrs, inputs, out=None):
    """MXNet's row_sparse kernels: axis=1 keeps the stored rows (row_sparse with keepdims,
    dense otherwise); axis=0 sums the stored rows' squares (dense)."""
    (x,) = inputs
    axis = _axis(attrs)
    if not isinstance(x, RowSparseNDArray) or x.ndim != 2 or axis not in (0, 1) or attrs.get("exclude"):
        return None
    a = x._arrays
    squares = np.square(a["data"])
    keepdims = attrs.get("keepdims")
    if axis == 0:
        total = np.sum(squares, axis=0, dtype=x._dtype)
        return [_dense(total[None, :] if keepdims else total, x)]
    per_row = np.sum(squares, axis=1, dtype=x._dtype)
    if keepdims:
        return [_rsp((x.shape[0], 1), per_row[:, None], a["indices"].copy(), x)]
    full = np.zeros(x.shape[0], x._dtype)
    full[a["indices"]] = per_row
    return [_dense(full, x)]


@_kernel("_backward_Embedding")
def _embedding_grad(name, attrs, inputs, out=None):
    """Embedding's weight gradient with `sparse_grad`: a RowSparseNDArray storing exactly the
    indexed rows (sorted, distinct; MXNet's), each the sum of the head gradient rows that index it."""
    dy, idx = inputs
    if not attrs.get("sparse_grad") or isinstance(dy, BaseSparseNDArray) or isinstance(idx, BaseSparseNDArray):
        return None
    from ..ops.nn_conv import _embedding_indices
    n, m = attrs["input_dim"], attrs["output_dim"]
    g = _values(dy)
    if g.shape != idx.shape + (m,):
        return None   # the dense op reports the mismatch
    rows, inverse = np.unique(_embedding_indices(_values(idx), n).reshape(-1), return_inverse=True)
    acc = np.float64 if g.dtype == np.float64 else np.float32
    sums = np.zeros((rows.size, m), acc)
    np.add.at(sums, inverse.reshape(-1), g.reshape(-1, m).astype(acc))
    return [_rsp((n, m), sums.astype(g.dtype), rows, dy)]


def assign_gradient(buffer: BaseSparseNDArray, grad: NDArray, req: str) -> bool:
    """Write (req 'write') or add (req 'add') gradient `grad` into sparse `buffer` keeping the
    compressed structure when both have one storage type; False (nothing done) otherwise."""
    if not isinstance(grad, BaseSparseNDArray) or grad.stype != buffer.stype or grad.shape != buffer.shape:
        return False
    if req == "add":
        grad = _combine_same(buffer, grad, "add")
    buffer._arrays = grad._copied_arrays(buffer._dtype)
    return True


@_kernel("norm")
def _norm(name, attrs, inputs, out=None):
    """norm(csr / row_sparse) over all elements (MXNet's sparse kernel): from the stored values."""
    (x,) = inputs
    if _axis(attrs) is not None or attrs.get("out_dtype") not in (None, np.dtype(x._dtype).name):
        return None
    values = x._arrays["data"].astype(np.float64)
    total = np.sum(np.abs(values)) if attrs["ord"] == 1 else np.sqrt(np.sum(np.square(values)))
    shape = (1,) * x.ndim if attrs.get("keepdims") else (1,)
    return [_dense(np.full(shape, total, x._dtype), x)]


@_kernel("add_n", "ElementWiseSum", "_sparse_add_n")
def _add_n(name, attrs, inputs, out=None):
    """add_n of row_sparse arrays: row_sparse on the union of their rows (MXNet)."""
    if not all(isinstance(x, RowSparseNDArray) for x in inputs) or len({x.shape for x in inputs}) != 1:
        return None
    total = inputs[0]
    for x in inputs[1:]:
        total = _combine_same(total, x, "add")
    return [total if len(inputs) > 1 else total.copy()]
