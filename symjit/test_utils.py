"""Testing helpers with MXNet 1.9.1's `mx.test_utils` interface (names, signatures, defaults).

MXNet users' own test suites are written with these, so their meaning is MXNet's:

- Tolerances default per dtype (`default_rtols()` / `default_atols()`): float16 1e-2 / 1e-1,
  float32 1e-4 / 1e-3, float64 1e-5 / 1e-20, integers and bool exact. When two values are
  compared, the looser tolerance of their two dtypes applies (`get_tols`).
- `assert_almost_equal(a, b)` broadcasts `a` against `b` (unless `use_broadcast=False`) and on
  failure reports the largest violation, its location and the share of mismatching elements.
- `check_numeric_gradient`, `check_symbolic_forward`, `check_symbolic_backward` and
  `check_consistency` drive a Symbol through executors (`bind` / `simple_bind`) as MXNet does.
- Data helpers (`get_mnist`, `get_cifar10`, `download`) read local files and raise a clear
  MXNetError when a file is absent and cannot be fetched.

Project extras, outside `__all__`: `check_op_gradient` (an op's registered gradient rule against
finite differences of its numpy reference) and `numeric_grad(f, x)` on a scalar function.
"""
from __future__ import annotations

import bz2  # noqa: F401  (exported as MXNet's module does)
import ctypes  # noqa: F401
import errno  # noqa: F401
import functools
import gzip
import json  # noqa: F401
import logging
import numbers
import os
import platform  # noqa: F401
import struct
import sys
import time
import traceback
import zipfile
from collections import OrderedDict, namedtuple  # noqa: F401
from contextlib import contextmanager
from typing import Mapping, Sequence

import numpy as np
import numpy.random as rnd
import numpy.testing as npt

from .base import MXNetError
from .context import Context, cpu, current_context  # noqa: F401
from .ops.registry import ComputeContext, apply_numpy, get_op, list_ops, numpy_emitter
from .util import getenv, setenv, use_np  # noqa: F401

try:  # scipy is optional: only chi_square_check and the csr generators need it
    import scipy.stats as ss
except ImportError:  # pragma: no cover
    ss = None

# The names `from mxnet.test_utils import *` brings in with MXNet 1.9.1 (its module has no
# __all__, so its public functions and the modules it imports are exported).
__all__ = [
    # modules MXNet's test_utils exports through `import *`
    "time", "traceback", "numbers", "sys", "os", "platform", "errno", "logging", "bz2", "zipfile",
    "json", "ctypes", "gzip", "struct", "np", "npt", "rnd", "ss", "mx", "contextmanager", "OrderedDict",
    "Context", "current_context", "array", "use_np", "getenv", "setenv", "namedtuple",
    # tolerances and contexts
    "default_context", "set_default_context", "default_dtype", "default_rtols", "default_atols",
    "default_numeric_eps", "effective_dtype", "get_tolerance", "get_tols", "get_rtol", "get_atol",
    "get_etol",
    # random data
    "random_arrays", "random_uniform_arrays", "random_sample", "rand_ndarray", "rand_sparse_ndarray",
    "create_sparse_array", "create_sparse_array_zd", "rand_shape_2d", "rand_shape_3d", "rand_shape_nd",
    "rand_coord_2d", "assign_each", "assign_each2", "shuffle_csr_column_indices", "np_reduce",
    "new_matrix_with_real_eigvals_2d", "new_matrix_with_real_eigvals_nd", "new_orthonormal_matrix_2d",
    "new_sym_matrix_with_real_eigvals_2d", "new_sym_matrix_with_real_eigvals_nd",
    # comparisons
    "same", "checkShapes", "almost_equal", "assert_almost_equal", "assert_allclose",
    "assert_almost_equal_with_err", "almost_equal_ignore_nan", "assert_almost_equal_ignore_nan",
    "assert_exception", "locationError", "same_array", "same_symbol_structure", "collapse_sum_like",
    "compare_ndarray_tuple", "compare_optimizer", "compare_optimizer_noise_seeded", "retry",
    # symbol checks
    "simple_forward", "numeric_grad", "check_numeric_gradient", "check_symbolic_forward",
    "check_symbolic_backward", "check_speed", "check_consistency", "check_gluon_hybridize_consistency",
    # environment and processes
    "environment", "set_env_var", "discard_stderr", "list_gpus", "is_cd_run", "has_tvm_ops",
    "is_op_runnable", "get_all_registered_operators", "get_operator_arguments", "OperatorArguments",
    # data
    "download", "get_mnist", "get_mnist_pkl", "get_mnist_ubyte", "get_mnist_iterator", "get_cifar10",
    "get_zip_data", "get_bz2_data", "get_im2rec_path", "DummyIter",
    # random generator statistics
    "gen_buckets_probs_with_ppf", "mean_check", "var_check", "chi_square_check", "verify_generator",
]


def __getattr__(name):
    # `mx` and `array` refer back to the package; resolved lazily because the package imports
    # this module while it is still initialising.
    if name == "mx":
        import symjit
        return symjit
    if name == "array":
        from .ndarray import array
        return array
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _mx():
    import symjit
    return symjit


# ------------------------------------------------------------------------------------------
# Contexts, dtypes and tolerances
# ------------------------------------------------------------------------------------------

def default_context() -> Context:
    """The context tests run on: the current default context (cpu(0) unless changed)."""
    return current_context()


def set_default_context(ctx: Context) -> None:
    """Make `ctx` the default context of this thread (what `default_context()` returns)."""
    Context._default.value = ctx


def default_dtype():
    """The dtype of generated test data: float32."""
    return np.float32


_INT_DTYPES = (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64)


def default_rtols() -> dict:
    """Default relative tolerance per dtype: float16 1e-2, float32 1e-4, float64 1e-5, exact for
    integers and bool."""
    tols = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-5}
    tols.update({np.dtype(t): 0 for t in _INT_DTYPES})
    return tols


def default_atols() -> dict:
    """Default absolute tolerance per dtype: float16 1e-1, float32 1e-3, float64 1e-20, exact for
    integers and bool."""
    tols = {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 1e-3, np.dtype(np.float64): 1e-20}
    tols.update({np.dtype(t): 0 for t in _INT_DTYPES})
    return tols


def default_numeric_eps() -> dict:
    """Finite-difference step per dtype for `check_numeric_gradient`: 2**-6, 2**-9, 2**-14."""
    return {np.dtype(np.float16): 1.0 / 2 ** 6, np.dtype(np.float32): 1.0 / 2 ** 9,
            np.dtype(np.float64): 1.0 / 2 ** 14}


def effective_dtype(dat) -> np.dtype:
    """The dtype whose precision `dat`'s values carry. On CPUs this is `dat.dtype` (no TensorFloat
    computation trims float32 precision there)."""
    dtype = getattr(dat, "dtype", None)
    if dtype is None:
        dtype = np.asarray(dat).dtype
    return np.dtype(dtype)


def get_tolerance(dat, tol, default_tol: Mapping):
    """`tol` when it is a number; else `tol[dtype]` (a dict) or `default_tol[dtype]` for the
    effective dtype of `dat`."""
    if isinstance(tol, numbers.Number):
        return tol
    dtype = effective_dtype(dat)
    table = dict(default_tol)
    table.update(tol or {})
    if dtype not in table:
        raise MXNetError(f"get_tolerance: no default tolerance for dtype {dtype}; pass rtol/atol explicitly")
    return table[dtype]


def get_tols(x, y, rtol, atol):
    """(rtol, atol) for comparing `x` with `y`: the given values, or the looser default of the two
    dtypes (numbers count as float64 numpy scalars)."""
    if isinstance(x, numbers.Number):
        x = np.array(x)
    if isinstance(y, numbers.Number):
        y = np.array(y)
    rtol = max(get_tolerance(x, rtol, default_rtols()), get_tolerance(y, rtol, default_rtols()))
    atol = max(get_tolerance(x, atol, default_atols()), get_tolerance(y, atol, default_atols()))
    return rtol, atol


def get_rtol(rtol=None, dtype=np.dtype(np.float64)):
    """`rtol`, or the default relative tolerance of `dtype`."""
    return default_rtols()[np.dtype(dtype)] if rtol is None else rtol


def get_atol(atol=None, dtype=np.dtype(np.float64)):
    """`atol`, or the default absolute tolerance of `dtype`."""
    return default_atols()[np.dtype(dtype)] if atol is None else atol


def get_etol(etol=None):
    """Allowed fraction of mismatching elements for `assert_almost_equal_with_err` (default 0)."""
    return 0 if etol is None else etol


# ------------------------------------------------------------------------------------------
# Random data
# ------------------------------------------------------------------------------------------

def random_arrays(*shapes):
    """One standard-normal numpy array of `default_dtype()` per shape (a 0-d array for `()`);
    the array itself when one shape is given, else a list."""
    arrays = [np.array(np.random.randn(), dtype=default_dtype()) if len(s) == 0
              else np.random.randn(*s).astype(default_dtype()) for s in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def random_uniform_arrays(*shapes, **kwargs):
    """Uniform arrays in [low, high) (kwargs low=0.0, high=1.0, dtype=default_dtype())."""
    low = kwargs.pop("low", 0.0)
    high = kwargs.pop("high", 1.0)
    dtype = kwargs.pop("dtype", default_dtype())
    if kwargs:
        raise TypeError(f"random_uniform_arrays: unexpected keyword arguments {sorted(kwargs)}")
    arrays = [np.random.uniform(low, high, size=s).astype(dtype) for s in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def random_sample(population, k):
    """k distinct elements of `population`, in random order."""
    population_copy = list(population)
    np.random.shuffle(population_copy)
    return population_copy[0:k]


def rand_shape_2d(dim0=10, dim1=10):
    """A random 2-D shape, each dimension in [1, dim]."""
    return rnd.randint(1, dim0 + 1), rnd.randint(1, dim1 + 1)


def rand_shape_3d(dim0=10, dim1=10, dim2=10):
    """A random 3-D shape, each dimension in [1, dim]."""
    return rnd.randint(1, dim0 + 1), rnd.randint(1, dim1 + 1), rnd.randint(1, dim2 + 1)


def rand_shape_nd(num_dim, dim=10, allow_zero_size=False):
    """A random shape of `num_dim` dimensions, each in [1, dim] ([0, dim] with allow_zero_size)."""
    low = 0 if allow_zero_size else 1
    return tuple(rnd.randint(low, dim + 1, size=num_dim))


def rand_coord_2d(x_low, x_high, y_low, y_high):
    """A random integer point with x in [x_low, x_high] and y in [y_low, y_high]."""
    return rnd.randint(x_low, x_high + 1), rnd.randint(y_low, y_high + 1)


def assign_each(the_input, function):
    """`function` applied to every element of a numpy array (a new array of the same shape)."""
    if function is None:
        return np.array(the_input)
    return np.vectorize(function)(the_input)


def assign_each2(input1, input2, function):
    """`function(a, b)` applied elementwise to two numpy arrays of the same shape."""
    if function is None:
        return np.array(input1)
    return np.vectorize(function)(input1, input2)


def _check_stype(stype):
    if stype not in ("default", "csr", "row_sparse"):
        raise MXNetError(f"unknown storage type {stype!r}; expected 'default', 'csr' or 'row_sparse'")


def shuffle_csr_column_indices(csr):
    """Shuffle the column indices (and values) within each row of a scipy csr matrix, in place.
    The result breaks the sorted-indices invariant on purpose (to test unsorted input)."""
    for r in range(csr.shape[0]):
        lo, hi = csr.indptr[r], csr.indptr[r + 1]
        perm = np.random.permutation(hi - lo) + lo
        csr.indices[lo:hi] = csr.indices[perm]
        csr.data[lo:hi] = csr.data[perm]
    return csr


def _dense_with_density(shape, density, dtype, data_init, row_wise):
    """A dense numpy array of `shape` whose entries (or rows) are nonzero with probability
    `density`; values uniform in (0, 1] or `data_init`."""
    if row_wise:
        keep = np.random.uniform(size=shape[0]) < density
        mask = np.broadcast_to(keep.reshape((-1,) + (1,) * (len(shape) - 1)), shape)
    else:
        mask = np.random.uniform(size=shape) < density
    values = (np.full(shape, data_init, dtype=np.float64) if data_init is not None
              else 1.0 - np.random.uniform(size=shape))   # (0, 1]: stored values are never 0
    return np.where(mask, values, 0).astype(dtype)


def _powerlaw_dense(shape, density, dtype, data_init):
    """A 2-D matrix whose row r holds about 2**r nonzero entries (MXNet's 'powerlaw'
    distribution), capped so the total stays near density * size."""
    rows, cols = shape
    out = np.zeros(shape, dtype=np.float64)
    budget = int(density * rows * cols)
    count = 1
    for r in range(rows):
        if budget <= 0:
            break
        n = min(count, cols, budget)
        idx = np.random.choice(cols, n, replace=False)
        out[r, idx] = data_init if data_init is not None else 1.0 - np.random.uniform(size=n)
        budget -= n
        count *= 2
    return out.astype(dtype)


def rand_sparse_ndarray(shape, stype, density=None, dtype=None, distribution=None, data_init=None,
                        rsp_indices=None, modifier_func=None, shuffle_csr_indices=False, ctx=None):
    """A random sparse NDArray and its parts.

    stype 'row_sparse': returns (arr, (data, indices)); each row is stored with probability
    `density` (random in [0, 1) when None) unless `rsp_indices` lists the rows.
    stype 'csr' (2-D): returns (arr, (indptr, indices, data)); `distribution` 'uniform'
    (default) or 'powerlaw'. `data_init` fills stored values; `modifier_func` maps each one.
    """
    from .ndarray import sparse
    _check_stype(stype)
    density = rnd.rand() if density is None else density
    dtype = default_dtype() if dtype is None else dtype
    if not 0 <= density <= 1:
        raise MXNetError(f"rand_sparse_ndarray: density must be in [0, 1], got {density}")
    if stype == "row_sparse":
        if rsp_indices is not None:
            indices = np.unique(np.asarray(rsp_indices, dtype=np.int64))
            if indices.size and (indices[0] < 0 or indices[-1] >= shape[0]):
                raise MXNetError(f"rand_sparse_ndarray: rsp_indices must be in [0, {shape[0]}), got {rsp_indices}")
        else:
            indices = np.argwhere(np.random.uniform(size=shape[0]) < density).reshape(-1)
        data = (np.full((len(indices),) + tuple(shape[1:]), data_init, dtype=dtype) if data_init is not None
                else np.random.rand(len(indices), *shape[1:]).astype(dtype))
        if modifier_func is not None:
            data = assign_each(data, modifier_func).astype(dtype)
        arr = sparse.row_sparse_array((data, indices), shape=shape, dtype=dtype, ctx=ctx)
        return arr, (data, indices)
    if stype == "csr":
        if len(shape) != 2:
            raise MXNetError(f"rand_sparse_ndarray: csr storage is 2-D only, got shape {shape}")
        if distribution in (None, "uniform"):
            dense = _dense_with_density(shape, density, dtype, data_init, row_wise=False)
        elif distribution == "powerlaw":
            dense = _powerlaw_dense(shape, density, dtype, data_init)
        else:
            raise MXNetError(f"rand_sparse_ndarray: distribution must be 'uniform' or 'powerlaw', got {distribution!r}")
        if modifier_func is not None:
            nz = dense != 0
            dense[nz] = assign_each(dense[nz], modifier_func)
        arr = sparse.array(dense, ctx=ctx, dtype=dtype).tostype("csr")
        if shuffle_csr_indices:
            # symjit's csr arrays keep column indices sorted (an invariant MXNet does not enforce),
            # so a shuffled copy is returned only in the parts
            import scipy.sparse as sps
            parts = shuffle_csr_column_indices(sps.csr_matrix(dense))
            return arr, (parts.indptr, parts.indices, parts.data)
        return arr, (arr.indptr.asnumpy(), arr.indices.asnumpy(), arr.data.asnumpy())
    raise MXNetError(f"rand_sparse_ndarray: stype must be 'csr' or 'row_sparse', got {stype!r}")


def rand_ndarray(shape, stype="default", density=None, dtype=None, modifier_func=None,
                 shuffle_csr_indices=False, distribution=None, ctx=None):
    """A random NDArray of `shape`: standard normal values for stype 'default', else
    `rand_sparse_ndarray`'s array."""
    _check_stype(stype)
    if stype == "default":
        from .ndarray import array
        return array(random_arrays(shape), dtype=dtype, ctx=ctx)
    arr, _ = rand_sparse_ndarray(shape, stype, density=density, dtype=dtype, modifier_func=modifier_func,
                                 shuffle_csr_indices=shuffle_csr_indices, distribution=distribution, ctx=ctx)
    return arr


def create_sparse_array(shape, stype, data_init=None, rsp_indices=None, dtype=None, modifier_func=None,
                        density=0.5, shuffle_csr_indices=False):
    """A random sparse array of `shape` (row_sparse may have any rank; csr is 2-D)."""
    arr, _ = rand_sparse_ndarray(shape, stype, density=density, dtype=dtype, data_init=data_init,
                                 rsp_indices=rsp_indices, modifier_func=modifier_func,
                                 shuffle_csr_indices=shuffle_csr_indices)
    return arr


def create_sparse_array_zd(shape, stype, density, data_init=None, rsp_indices=None, dtype=None,
                           modifier_func=None, shuffle_csr_indices=False):
    """`create_sparse_array` that allows density 0 (and rows given explicitly)."""
    if stype == "row_sparse" and rsp_indices is None and density == 0:
        rsp_indices = []
    return create_sparse_array(shape, stype, data_init=data_init, rsp_indices=rsp_indices, dtype=dtype,
                               modifier_func=modifier_func, density=density,
                               shuffle_csr_indices=shuffle_csr_indices)


def np_reduce(dat, axis, keepdims, numpy_reduce_func):
    """Reduce numpy array `dat` over `axis` (an int, a sequence, or None for all axes) one axis
    at a time with `numpy_reduce_func(x, axis=i)`; keepdims keeps reduced axes as size 1."""
    if isinstance(axis, int):
        axis = [axis]
    else:
        axis = list(axis) if axis is not None else list(range(len(dat.shape)))
    axis = [a % dat.ndim if dat.ndim else a for a in axis]
    ret = dat
    for i in reversed(sorted(axis)):
        ret = numpy_reduce_func(ret, axis=i)
    if keepdims:
        keepdims_shape = list(dat.shape)
        for i in axis:
            keepdims_shape[i] = 1
        ret = ret.reshape(tuple(keepdims_shape))
    return ret


def new_matrix_with_real_eigvals_2d(n):
    """A random n x n matrix with real eigenvalues (similar to a diagonal matrix)."""
    shape = (n, n)
    q = np.random.normal(size=shape)
    while np.abs(np.linalg.det(q)) < 1e-2:
        q = np.random.normal(size=shape)
    return q @ np.diag(np.random.normal(size=n)) @ np.linalg.inv(q)


def new_matrix_with_real_eigvals_nd(shape):
    """A stack of square matrices with real eigenvalues (last two dims square)."""
    n = int(np.prod(shape[:-2]))
    mats = [new_matrix_with_real_eigvals_2d(shape[-1]) for _ in range(n)]
    return np.array(mats).reshape(shape)


def new_orthonormal_matrix_2d(n):
    """A random n x n orthonormal matrix."""
    q, _ = np.linalg.qr(np.random.normal(size=(n, n)))
    return q


def new_sym_matrix_with_real_eigvals_2d(n):
    """A random symmetric n x n matrix (real eigenvalues)."""
    q = new_orthonormal_matrix_2d(n)
    return q @ np.diag(np.random.normal(size=n)) @ q.T


def new_sym_matrix_with_real_eigvals_nd(shape):
    """A stack of random symmetric matrices (last two dims square)."""
    n = int(np.prod(shape[:-2]))
    mats = [new_sym_matrix_with_real_eigvals_2d(shape[-1]) for _ in range(n)]
    return np.array(mats).reshape(shape)


# ------------------------------------------------------------------------------------------
# Comparisons
# ------------------------------------------------------------------------------------------

def _as_numpy(x):
    """numpy view of an NDArray / sparse array / array-like (numbers stay numbers)."""
    if hasattr(x, "asnumpy"):
        return x.asnumpy()
    if isinstance(x, numbers.Number):
        return x
    return np.asarray(x)


def same(a, b) -> bool:
    """Whether `a` and `b` have the same shape and elements."""
    return np.array_equal(_as_numpy(a), _as_numpy(b))


def checkShapes(a, b):
    """Assert that `a` and `b` have the same shape (no broadcasting)."""
    sa, sb = np.shape(a), np.shape(b)
    if sa != sb:
        raise AssertionError(f"Shape mismatch: {sa} vs {sb}")


def almost_equal(a, b, rtol=None, atol=None, equal_nan=False, use_broadcast=True) -> bool:
    """Whether |a - b| <= atol + rtol * |b| everywhere (tolerances per dtype when None; `a` is
    broadcast against `b` unless use_broadcast is False)."""
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = _as_numpy(a), _as_numpy(b)
    if not use_broadcast:
        checkShapes(a, b)
    return _allclose_in_chunks(np.asarray(a), np.asarray(b), rtol, atol, equal_nan)


def _allclose_in_chunks(a: np.ndarray, b: np.ndarray, rtol, atol, equal_nan, chunk: int = 1 << 22) -> bool:
    """np.allclose, over equal-shaped arrays a chunk of elements at a time: its temporaries
    (differences, tolerances, finiteness masks; numpy 1.x makes more of them than 2.x) then stay a
    few chunks in size instead of several copies of arrays that are already hundreds of MB, as
    MXNet's own comparison runs as an operator without them."""
    if a.shape != b.shape or a.size <= chunk:
        return bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan))
    fa, fb = a.reshape(-1), b.reshape(-1)
    return all(np.allclose(fa[i:i + chunk], fb[i:i + chunk], rtol=rtol, atol=atol, equal_nan=equal_nan)
               for i in range(0, fa.size, chunk))


def _find_max_violation(a, b, rtol, atol):
    """(index, ratio) of the element where |a-b| / (atol + rtol*|b|) is largest (equal values,
    infinities included, count as 0)."""
    with np.errstate(invalid="ignore", over="ignore"):
        absdiff = np.where(np.equal(a, b), 0, np.abs(np.subtract(a, b, dtype=np.float64)))
        tol = atol + rtol * np.abs(b.astype(np.float64))
        violation = absdiff / (tol + 1e-20)
    violation = np.where(np.isnan(violation), np.inf, violation)
    loc = int(np.argmax(violation))
    return tuple(int(i) for i in np.unravel_index(loc, violation.shape)), float(violation.reshape(-1)[loc])


def locationError(a, b, index, names, maxError=False):
    """The text describing the mismatch of `a` and `b` at `index`."""
    maximum = "maximum " if maxError else ""
    return "Location of %serror: %s, %s=%.8f, %s=%.8f" % (maximum, str(index), names[0], a[index],
                                                          names[1], b[index])


def assert_almost_equal(a, b, rtol=None, atol=None, names=("a", "b"), equal_nan=False, use_broadcast=True,
                        mismatches=(10, 10)):
    """Assert |a - b| <= atol + rtol * |b| elementwise.

    rtol/atol: numbers, dicts dtype -> tol, or None for the dtype defaults (`get_tols`). `a` is
    broadcast against `b` unless use_broadcast is False. On failure the AssertionError names the
    largest violation ("Error R exceeds tolerance rtol=..., atol=... (mismatch P%)"), its location,
    and both arrays; up to mismatches[0] of the worst elements are printed, and the mismatch share
    counts at most mismatches[1] elements (<= 0: all).
    """
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = np.asarray(_as_numpy(a)), np.asarray(_as_numpy(b))
    if not use_broadcast:
        checkShapes(a, b)
    if almost_equal(a, b, rtol, atol, equal_nan=equal_nan):
        return
    try:
        a_b, b_b = np.broadcast_arrays(a, b)
    except ValueError:
        raise AssertionError(f"Shape mismatch: {names[0]} {a.shape} cannot broadcast to {names[1]} {b.shape}") from None
    index, rel = _find_max_violation(a_b, b_b, rtol, atol)
    if a_b.size and index != ():
        worst_index, worst_rel = index, rel
        a_tmp, b_tmp = a_b.astype(np.float64), b_b.astype(np.float64)
        print("\n*** Maximum errors for vector of size {}:  rtol={}, atol={}\n".format(a_b.size, rtol, atol))
        count = 1
        while count <= a_b.size:
            if count <= mismatches[0]:
                print("%3d: Error %f  %s" % (count, rel, locationError(a_b, b_b, index, names)))
            a_tmp[index] = b_tmp[index] = 0
            if almost_equal(a_tmp, b_tmp, rtol, atol, equal_nan=equal_nan):
                break
            count += 1
            if count <= mismatches[1] or mismatches[1] <= 0:
                index, rel = _find_max_violation(a_tmp, b_tmp, rtol, atol)
            else:
                break
        degree = "at least " if 0 < mismatches[1] < count else ""
        message = "Error %f exceeds tolerance rtol=%e, atol=%e (mismatch %s%f%%).\n%s" % (
            worst_rel, rtol, atol, degree, 100 * count / a_b.size,
            locationError(a_b, b_b, worst_index, names, maxError=True))
    else:
        message = "Error %f exceeds tolerance rtol=%e, atol=%e.\n" % (rel, rtol, atol)
    with np.printoptions(threshold=4, suppress=True):
        raise AssertionError(npt.build_err_msg([a, b], err_msg=message, names=names))


def assert_allclose(a, b, rtol=1e-07, atol=0, equal_nan=True):
    """numpy.testing.assert_allclose's defaults over `assert_almost_equal`."""
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def assert_almost_equal_with_err(a, b, rtol=None, atol=None, etol=None, names=("a", "b"), equal_nan=False,
                                 mismatches=(10, 10)):
    """`assert_almost_equal` that tolerates a fraction `etol` of mismatching elements."""
    etol = get_etol(etol)
    if etol <= 0:
        assert_almost_equal(a, b, rtol, atol, names, equal_nan, mismatches=mismatches)
        return
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = np.asarray(_as_numpy(a)), np.asarray(_as_numpy(b))
    a_b, b_b = np.broadcast_arrays(a, b)
    close = np.isclose(a_b, b_b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    share = 1.0 - float(np.mean(close)) if close.size else 0.0
    if share > etol:
        index, rel = _find_max_violation(a_b, b_b, rtol, atol)
        message = "Error %f exceeds tolerance rtol=%e, atol=%e, etol=%e (mismatch %f%%).\n%s" % (
            rel, rtol, atol, etol, 100 * share, locationError(a_b, b_b, index, names, maxError=True))
        with np.printoptions(threshold=4, suppress=True):
            raise AssertionError(npt.build_err_msg([a, b], err_msg=message, names=names))


def _nan_masked(a, b):
    a, b = np.array(_as_numpy(a), dtype=None, copy=True), np.array(_as_numpy(b), copy=True)
    a_b, b_b = np.broadcast_arrays(a, b)
    a_b, b_b = a_b.copy(), b_b.copy()
    mask = np.logical_or(np.isnan(a_b), np.isnan(b_b))
    a_b[mask] = 0
    b_b[mask] = 0
    return a_b, b_b


def almost_equal_ignore_nan(a, b, rtol=None, atol=None) -> bool:
    """`almost_equal` where a NaN in either array matches anything."""
    a, b = _nan_masked(a, b)
    return almost_equal(a, b, rtol, atol)


def assert_almost_equal_ignore_nan(a, b, rtol=None, atol=None, names=("a", "b")):
    """`assert_almost_equal` where a NaN in either array matches anything."""
    a, b = _nan_masked(a, b)
    assert_almost_equal(a, b, rtol, atol, names)


def assert_exception(f, exception_type, *args, **kwargs):
    """Assert that f(*args, **kwargs) raises `exception_type`."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    raise AssertionError(f"{getattr(f, '__name__', f)} did not raise {getattr(exception_type, '__name__', exception_type)}")


def retry(n):
    """Decorator: rerun a test up to `n` times while it fails with an AssertionError."""
    if n <= 0:
        raise ValueError(f"retry: n must be positive, got {n}")

    def decorate(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            for attempt in range(n):
                try:
                    return f(*args, **kwargs)
                except AssertionError:
                    if attempt == n - 1:
                        raise
        return wrapper
    return decorate


def same_array(array1, array2) -> bool:
    """Whether two NDArrays share memory: a change to array1 shows in array2."""
    array1[:] += 1
    if not same(array1.asnumpy(), array2.asnumpy()):
        array1[:] -= 1
        return False
    array1[:] -= 1
    return same(array1.asnumpy(), array2.asnumpy())


def same_symbol_structure(sym1, sym2) -> bool:
    """Whether two Symbols have the same graph (ops and edges, names ignored)."""
    nodes1 = json.loads(sym1.tojson(), strict=False)["nodes"]
    nodes2 = json.loads(sym2.tojson(), strict=False)["nodes"]
    if len(nodes1) != len(nodes2):
        return False
    for n1, n2 in zip(nodes1, nodes2):
        if n1["op"] != n2["op"]:
            return False
        if [tuple(i[:2]) for i in n1["inputs"]] != [tuple(i[:2]) for i in n2["inputs"]]:
            return False
    return True


def collapse_sum_like(a, shape):
    """Sum numpy array `a` down to `shape` (the reverse of broadcasting `shape` to a.shape)."""
    assert len(a.shape) >= len(shape)
    if np.prod(shape) == 0 or a.size == 0:
        return np.zeros(shape, dtype=a.dtype)
    lead = len(a.shape) - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and a.shape[lead + i] != 1)
    return a.sum(axis=axes).reshape(shape) if axes else a.reshape(shape)


def compare_ndarray_tuple(t1, t2, rtol=None, atol=None):
    """Compare two (nested tuples of) NDArrays with `assert_almost_equal`; None matches anything."""
    if t1 is None or t2 is None:
        return
    if isinstance(t1, tuple):
        for s1, s2 in zip(t1, t2):
            compare_ndarray_tuple(s1, s2, rtol, atol)
    else:
        assert_almost_equal(t1, t2, rtol=rtol, atol=atol)


def _optimizer_pair_arrays(shape, dtype, w_stype, g_stype):
    mx = _mx()
    ctx = default_context()
    if w_stype == "default":
        w2 = mx.random.uniform(shape=shape, ctx=ctx, dtype=dtype)
        w1 = w2.copyto(ctx)
    else:
        w2 = rand_ndarray(shape, w_stype, density=1, dtype=dtype)
        w1 = w2.copyto(ctx).tostype("default")
    if g_stype == "default":
        g2 = mx.random.uniform(shape=shape, ctx=ctx, dtype=dtype)
        g1 = g2.copyto(ctx)
    else:
        g2 = rand_ndarray(shape, g_stype, dtype=dtype)
        g1 = g2.copyto(ctx).tostype("default")
    return w1, w2, g1, g2


def _compare_optimizer(opt1, opt2, shape, dtype, w_stype, g_stype, rtol, atol, compare_states, ntensors,
                       before_update):
    if ntensors == 1:
        w1, w2, g1, g2 = _optimizer_pair_arrays(shape, dtype, w_stype, g_stype)
        state1 = opt1.create_state_multi_precision(0, w1)
        state2 = opt2.create_state_multi_precision(0, w2)
        if compare_states:
            compare_ndarray_tuple(state1, state2)
        before_update()
        opt1.update_multi_precision(0, w1, g1, state1)
        before_update()
        opt2.update_multi_precision(0, w2, g2, state2)
        if compare_states:
            compare_ndarray_tuple(state1, state2, rtol=rtol, atol=atol)
        assert_almost_equal(w1, w2, rtol=rtol, atol=atol)
        return
    shapes = shape if isinstance(shape, (list, tuple)) and isinstance(shape[0], (list, tuple)) else [shape] * ntensors
    arrays = [_optimizer_pair_arrays(s, dtype, w_stype, g_stype) for s in shapes]
    w1, w2, g1, g2 = (list(x) for x in zip(*arrays))
    indices = list(range(ntensors))
    state1 = [opt1.create_state_multi_precision(i, w) for i, w in zip(indices, w1)]
    state2 = [opt2.create_state_multi_precision(i, w) for i, w in zip(indices, w2)]
    if compare_states:
        for s1, s2 in zip(state1, state2):
            compare_ndarray_tuple(s1, s2)
    before_update()
    opt1.update_multi_precision(indices, w1, g1, state1)
    before_update()
    opt2.update_multi_precision(indices, w2, g2, state2)
    for i in range(ntensors):
        if compare_states:
            compare_ndarray_tuple(state1[i], state2[i], rtol=rtol, atol=atol)
        assert_almost_equal(w1[i], w2[i], rtol=rtol, atol=atol)


def compare_optimizer(opt1, opt2, shape, dtype, w_stype="default", g_stype="default", rtol=1e-4, atol=1e-5,
                      compare_states=True, ntensors=1):
    """Apply one update of `opt1` and `opt2` to the same random weight and gradient (stypes
    `w_stype`/`g_stype` for opt2; dense copies for opt1) and compare states and weights."""
    _compare_optimizer(opt1, opt2, shape, dtype, w_stype, g_stype, rtol, atol, compare_states, ntensors,
                       lambda: None)


def compare_optimizer_noise_seeded(opt1, opt2, shape, dtype, noise_seed, w_stype="default", g_stype="default",
                                   rtol=1e-4, atol=1e-5, compare_states=True, ntensors=1):
    """`compare_optimizer` for optimizers that draw noise: the random seed is reset to
    `noise_seed` before each update."""
    mx = _mx()
    _compare_optimizer(opt1, opt2, shape, dtype, w_stype, g_stype, rtol, atol, compare_states, ntensors,
                       lambda: mx.random.seed(noise_seed))


# ------------------------------------------------------------------------------------------
# Symbol checks
# ------------------------------------------------------------------------------------------

def simple_forward(sym, ctx=None, is_train=False, **inputs):
    """Bind `sym` to the numpy `inputs`, run forward and return the output(s) as numpy (one
    array for one output, else a list)."""
    from .ndarray import array
    ctx = ctx or default_context()
    inputs = {k: array(v) for k, v in inputs.items()}
    exe = sym.bind(ctx, args=inputs)
    exe.forward(is_train=is_train)
    outputs = [x.asnumpy() for x in exe.outputs]
    return outputs[0] if len(outputs) == 1 else outputs


def _as_nd(value, ctx, dtype):
    """numpy -> NDArray on ctx (dtype 'asnumpy' keeps the numpy dtype); NDArrays pass through."""
    from .ndarray import array
    if isinstance(value, np.ndarray):
        return array(value, ctx=ctx, dtype=value.dtype if _is_asnumpy(dtype) else dtype)
    return value


def _is_asnumpy(dtype) -> bool:
    return isinstance(dtype, str) and dtype == "asnumpy"


def _parse_location(sym, location, ctx, dtype=default_dtype()):
    """Argument values as {name: NDArray}: a dict (keys must be exactly sym.list_arguments())
    or a list in list_arguments() order."""
    if not isinstance(location, (dict, list, tuple)):
        raise ValueError(f"location must be a dict or a list, got {type(location).__name__}")
    if isinstance(location, dict):
        if set(location.keys()) != set(sym.list_arguments()):
            raise ValueError("Symbol arguments and keys of the given location do not match. "
                             "symbol args:%s, location.keys():%s"
                             % (str(set(sym.list_arguments())), str(set(location.keys()))))
    else:
        location = dict(zip(sym.list_arguments(), location))
    return {k: _as_nd(v, ctx, dtype) for k, v in location.items()}


def _parse_aux_states(sym, aux_states, ctx, dtype=default_dtype()):
    """Auxiliary state values as {name: NDArray} (dict keyed like list_auxiliary_states(), or a
    list in that order); None stays None."""
    if aux_states is None:
        return None
    if isinstance(aux_states, dict):
        if set(aux_states.keys()) != set(sym.list_auxiliary_states()):
            raise ValueError("Symbol aux_states names and given aux_states do not match. "
                             "symbol aux_names:%s, aux_states.keys:%s"
                             % (str(set(sym.list_auxiliary_states())), str(set(aux_states.keys()))))
    elif isinstance(aux_states, (list, tuple)):
        aux_states = dict(zip(sym.list_auxiliary_states(), aux_states))
    else:
        raise ValueError(f"aux_states must be a dict or a list, got {type(aux_states).__name__}")
    return {k: _as_nd(v, ctx, dtype) for k, v in aux_states.items()}


def _finite_difference(f, x: np.ndarray, eps: float) -> np.ndarray:
    """Central finite differences of scalar function f() at x, varying x in place (float64)."""
    g = np.zeros_like(x, dtype=np.float64)
    flat = x.reshape(-1)
    gf = g.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        fp = f()
        flat[i] = old - eps
        fm = f()
        flat[i] = old
        gf[i] = (fp - fm) / (2 * eps)
    return g


def numeric_grad(executor, location, aux_states=None, eps=1e-4, use_forward_train=True, dtype=default_dtype()):
    """Finite-difference gradients.

    MXNet's form: `numeric_grad(executor, location)` with `location` {name: numpy array}:
    returns {name: d sum(outputs[0]) / d arg} by central differences of step eps (each value
    moved by +-eps/2), running the executor's forward; integer arguments are skipped.

    symjit's form: `numeric_grad(f, x, eps=1e-4)` with f a callable returning a float and x a
    numpy array that f reads: returns df/dx (float64), x moved by +-eps.
    """
    if callable(executor) and not hasattr(executor, "arg_dict"):
        return _finite_difference(executor, location, eps)
    for k, v in location.items():
        executor.arg_dict[k][:] = v
    location = {k: np.array(v, copy=True, order="C") for k, v in location.items()}
    approx_grads = {k: np.zeros(v.shape, dtype=dtype) for k, v in location.items()}

    def output_sum():
        if aux_states is not None:
            for key, val in aux_states.items():
                executor.aux_dict[key][:] = val
        executor.forward(is_train=use_forward_train)
        return executor.outputs[0].asnumpy().astype(np.float64)

    for k, v in location.items():
        if v.dtype.kind != "f":
            continue
        old_value = v.copy()
        flat = v.reshape(-1)
        for i in range(flat.size):
            flat[i] = old_value.reshape(-1)[i] + eps / 2.0
            executor.arg_dict[k][:] = v
            f_peps = output_sum()
            flat[i] = old_value.reshape(-1)[i] - eps / 2.0
            executor.arg_dict[k][:] = v
            f_neps = output_sum()
            approx_grads[k].reshape(-1)[i] = (f_peps - f_neps).sum() / eps
            flat[i] = old_value.reshape(-1)[i]
        executor.arg_dict[k][:] = old_value
    return approx_grads


def _random_projection(shape):
    # elements bounded away from 0, so the finite differences keep their precision
    return np.random.rand(*shape) + 0.1


def _grad_reqs(grad_nodes, default_names):
    if grad_nodes is None:
        names = list(default_names)
        return names, {k: "write" for k in names}
    if isinstance(grad_nodes, (list, tuple)):
        names = list(grad_nodes)
        return names, {k: "write" for k in names}
    if isinstance(grad_nodes, dict):
        return list(grad_nodes.keys()), dict(grad_nodes)
    raise ValueError(f"grad_nodes must be None, a list or a dict, got {type(grad_nodes).__name__}")


def _compare_grad(req, name, reference, got, start, rtol, atol, labels, equal_nan=False):
    if req == "write":
        assert_almost_equal(reference, got, rtol, atol, labels, equal_nan=equal_nan)
    elif req == "add":
        assert_almost_equal(reference, got - start, rtol, atol, labels, equal_nan=equal_nan)
    elif req == "null":
        assert_almost_equal(start, got, rtol, atol, labels, equal_nan=equal_nan)
    else:
        raise ValueError("Invalid grad_req %s for argument %s" % (req, name))


def check_numeric_gradient(sym, location, aux_states=None, numeric_eps=None, rtol=None, atol=None,
                           grad_nodes=None, use_forward_train=True, ctx=None, grad_stype_dict=None,
                           dtype=default_dtype()):
    """Compare `sym`'s backward with finite differences of its forward.

    The output is projected to a scalar with a random positive weight (`sum(out * proj)`);
    gradients of `grad_nodes` (all arguments by default; a dict maps name -> grad_req
    'write'/'add'/'null') are checked with `assert_almost_equal(numeric, backward, rtol, atol)`.
    numeric_eps defaults per dtype (`default_numeric_eps()`).
    """
    mx = _mx()
    if np.dtype(dtype) not in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"check_numeric_gradient: dtype must be float16/32/64, got {dtype}")
    ctx = ctx or default_context()
    location = _parse_location(sym=sym, location=location, ctx=ctx, dtype=dtype)
    location_npy = {k: v.asnumpy() for k, v in location.items()}
    aux_states = _parse_aux_states(sym=sym, aux_states=aux_states, ctx=ctx, dtype=dtype)
    aux_states_npy = None if aux_states is None else {k: v.asnumpy() for k, v in aux_states.items()}
    grad_nodes, grad_req = _grad_reqs(grad_nodes, sym.list_arguments())
    input_shape = {k: v.shape for k, v in location.items()}
    _, out_shape, _ = sym.infer_shape(**input_shape)
    proj = mx.sym.Variable("__random_proj")
    out = mx.sym.make_loss(sym * proj)
    location = dict(location)
    location["__random_proj"] = mx.nd.array(_random_projection(out_shape[0]), ctx=ctx, dtype=dtype)
    args_grad_npy = {k: np.random.normal(0, 0.01, size=location[k].shape) for k in grad_nodes}
    args_grad_npy["__random_proj"] = np.random.normal(0, 0.01, size=out_shape[0])
    args_grad = {k: mx.nd.array(v, ctx=ctx, dtype=dtype) for k, v in args_grad_npy.items()}
    if grad_stype_dict is not None:
        for k, stype in grad_stype_dict.items():
            if k in args_grad and stype != "default":
                args_grad[k] = args_grad[k].tostype(stype)
    executor = out.bind(ctx, grad_req=grad_req, args=location, args_grad=args_grad, aux_states=aux_states)
    inps = executor.arg_arrays
    if len(inps) != len(location):
        raise ValueError("Executor arg_arrays and and location len do not match."
                         "Got %d inputs and %d locations" % (len(inps), len(location)))
    executor.forward(is_train=True)
    eps = get_tolerance(executor.outputs[0], numeric_eps, default_numeric_eps())
    if np.dtype(dtype) in (np.dtype(np.float32), np.dtype(np.float16)) and eps < 1e-5:
        raise ValueError(f"check_numeric_gradient: numeric_eps {eps} is too small for {np.dtype(dtype)}")
    executor.backward()
    symbolic_grads = {k: executor.grad_dict[k].asnumpy() for k in grad_nodes}
    numeric_gradients = numeric_grad(executor, location_npy, aux_states_npy, eps=eps,
                                     use_forward_train=use_forward_train, dtype=dtype)
    for name in grad_nodes:
        _compare_grad(grad_req[name], name, numeric_gradients[name], symbolic_grads[name], args_grad_npy[name],
                      rtol, atol, ("NUMERICAL_%s" % name, "BACKWARD_%s" % name))


def check_symbolic_forward(sym, location, expected, rtol=None, atol=None, aux_states=None, ctx=None,
                           equal_nan=False, dtype=default_dtype()):
    """Bind `sym` at `location`, run forward (inference) and compare each output with
    `expected` (a list in list_outputs() order or a dict by output name). Returns the outputs."""
    from .ndarray import empty
    ctx = ctx or default_context()
    location = _parse_location(sym=sym, location=location, ctx=ctx, dtype=dtype)
    aux_states = _parse_aux_states(sym=sym, aux_states=aux_states, ctx=ctx, dtype=dtype)
    if isinstance(expected, dict):
        expected = [expected[k] for k in sym.list_outputs()]
    args_grad_data = {k: empty(v.shape, ctx=ctx, dtype=v.dtype if _is_asnumpy(dtype) else dtype)
                      for k, v in location.items()}
    executor = sym.bind(ctx=ctx, args=location, args_grad=args_grad_data, aux_states=aux_states)
    executor.forward(is_train=False)
    for output_name, expect, output in zip(sym.list_outputs(), expected, executor.outputs):
        assert_almost_equal(expect, output, rtol, atol, ("EXPECTED_%s" % output_name, "FORWARD_%s" % output_name),
                            equal_nan=equal_nan)
    return executor.outputs


def check_symbolic_backward(sym, location, out_grads, expected, rtol=None, atol=None, aux_states=None,
                            grad_req="write", ctx=None, grad_stypes=None, equal_nan=False, dtype=default_dtype()):
    """Bind `sym` at `location`, run forward (training) and backward with `out_grads` (list,
    dict by output name, or None), and compare the gradients with `expected` (list in
    list_arguments() order or dict). Gradient buffers start random, so grad_req 'add' and 'null'
    are checked against that start. Returns the gradient NDArrays by name."""
    mx = _mx()
    ctx = ctx or default_context()
    location = _parse_location(sym=sym, location=location, ctx=ctx, dtype=dtype)
    aux_states = _parse_aux_states(sym=sym, aux_states=aux_states, ctx=ctx, dtype=dtype)
    if isinstance(expected, (list, tuple)):
        expected = dict(zip(sym.list_arguments(), expected))
    args_grad_npy = {k: np.random.normal(size=np.shape(v)) for k, v in expected.items()}
    args_grad_data = {}
    for k, v in args_grad_npy.items():
        arr = mx.nd.array(v, ctx=ctx, dtype=np.asarray(_as_numpy(expected[k])).dtype if _is_asnumpy(dtype) else dtype)
        if grad_stypes is not None and k in grad_stypes and grad_stypes[k] != "default":
            arr = arr.tostype(grad_stypes[k])
        args_grad_data[k] = arr
    if isinstance(grad_req, str):
        grad_req = {k: grad_req for k in sym.list_arguments()}
    elif isinstance(grad_req, (list, tuple)):
        grad_req = dict(zip(sym.list_arguments(), grad_req))
    executor = sym.bind(ctx=ctx, args=location, args_grad=args_grad_data, aux_states=aux_states, grad_req=grad_req)
    executor.forward(is_train=True)
    if isinstance(out_grads, (tuple, list)):
        out_grads = [_as_nd(v, ctx, dtype) for v in out_grads]
    elif isinstance(out_grads, dict):
        out_grads = {k: _as_nd(v, ctx, dtype) for k, v in out_grads.items()}
    elif out_grads is not None:
        raise ValueError(f"out_grads must be a list, a dict or None, got {type(out_grads).__name__}")
    executor.backward(out_grads)
    grads = {k: v.asnumpy() for k, v in args_grad_data.items()}
    for name in expected:
        _compare_grad(grad_req[name], name, expected[name], grads[name], args_grad_npy[name], rtol, atol,
                      ("EXPECTED_%s" % name, "BACKWARD_%s" % name), equal_nan=equal_nan)
    return args_grad_data


def check_speed(sym, location=None, ctx=None, N=20, grad_req=None, typ="whole", **kwargs):
    """Seconds per iteration of `sym`: forward + backward (typ 'whole') or forward only
    ('forward'), averaged over N runs after one warm-up. Without `location`, arguments are
    random normal with shapes from kwargs (passed to simple_bind)."""
    mx = _mx()
    ctx = ctx or default_context()
    grad_req = grad_req or "write"
    if location is None:
        exe = sym.simple_bind(grad_req=grad_req, ctx=ctx, **kwargs)
        location = {k: np.random.normal(size=arr.shape, scale=1.0) for k, arr in exe.arg_dict.items()}
    else:
        if not isinstance(location, dict):
            raise ValueError(f"check_speed: location must be a dict of numpy arrays, got {type(location).__name__}")
        exe = sym.simple_bind(grad_req=grad_req, ctx=ctx, **{k: v.shape for k, v in location.items()})
    for name, iarr in location.items():
        exe.arg_dict[name][:] = iarr.astype(exe.arg_dict[name].dtype)
    if typ == "whole":
        def step():
            exe.forward(is_train=True)
            exe.backward(out_grads=exe.outputs)
    elif typ == "forward":
        def step():
            exe.forward(is_train=False)
    else:
        raise ValueError('typ can only be "whole" or "forward".')
    step()
    for output in exe.outputs:
        output.wait_to_read()
    tic = time.time()
    for _ in range(N):
        step()
    mx.nd.waitall()
    return (time.time() - tic) * 1.0 / N


def check_consistency(sym, ctx_list, scale=1.0, grad_req="write", arg_params=None, aux_params=None, tol=None,
                      raise_on_err=True, ground_truth=None, equal_nan=False, use_uniform=False, rand_type=np.float64,
                      rtol=None, atol=None):
    """Run `sym` (or one symbol per entry) bound on each of `ctx_list` (dicts of simple_bind
    kwargs: ctx, shapes, type_dict) with the same random arguments, and compare outputs (and,
    unless grad_req is 'null', gradients) with those of the most precise binding (or
    `ground_truth`). Tolerance per output dtype: `tol` (number or dtype dict) for both rtol and
    atol, else rtol/atol, else the dtype defaults. Returns the ground truth arrays by name."""
    if len(ctx_list) < 2:
        raise ValueError("check_consistency: ctx_list needs at least two entries")
    if tol is not None:
        rtol = atol = tol
    symbols = [sym] * len(ctx_list) if not isinstance(sym, (list, tuple)) else list(sym)
    if len(symbols) != len(ctx_list):
        raise ValueError(f"check_consistency: {len(symbols)} symbols for {len(ctx_list)} contexts")
    output_names = symbols[0].list_outputs()
    arg_names = symbols[0].list_arguments()
    exe_list = []
    for s, ctx in zip(symbols, ctx_list):
        if s.list_arguments() != arg_names or s.list_outputs() != output_names:
            raise ValueError("check_consistency: the symbols must have the same arguments and outputs")
        exe_list.append(s.simple_bind(grad_req=grad_req, **ctx))
    arg_params = {} if arg_params is None else arg_params
    aux_params = {} if aux_params is None else aux_params
    for n, arr in exe_list[0].arg_dict.items():
        if n not in arg_params:
            if use_uniform:
                arg_params[n] = np.random.uniform(low=-0.92 * scale, high=0.92 * scale, size=arr.shape).astype(rand_type)
            else:
                arg_params[n] = np.random.normal(size=arr.shape, scale=scale).astype(rand_type)
    for n in exe_list[0].aux_dict:
        aux_params.setdefault(n, 0)
    for exe in exe_list:
        for name, arr in exe.arg_dict.items():
            arr[:] = arg_params[name]
        for name, arr in exe.aux_dict.items():
            arr[:] = aux_params[name]
        if grad_req == "add":
            for arr in exe.grad_arrays:
                if arr is not None:
                    arr[:] = 0
    dtypes = [np.dtype(exe.outputs[0].dtype) for exe in exe_list]
    max_idx = int(np.argmax([d.itemsize if d.kind == "f" else 0 for d in dtypes]))
    gt = ground_truth
    if gt is None:
        gt = dict(exe_list[max_idx].output_dict)
        if grad_req != "null":
            gt.update(exe_list[max_idx].grad_dict)

    def compare(stage, pairs, i):
        for name, arr in pairs:
            if gt.get(name) is None:
                if arr is not None:
                    raise AssertionError(f"{stage} Err: ctx {i}: {name} has a value where the ground truth has none")
                continue
            got = arr.asnumpy()
            want = np.asarray(_as_numpy(gt[name])).astype(got.dtype)
            try:
                assert_almost_equal(got, want, rtol=rtol, atol=atol, equal_nan=equal_nan)
            except AssertionError:
                print("%s Err: ctx %d vs ctx %d at %s" % (stage, i, max_idx, name))
                traceback.print_exc()
                if raise_on_err:
                    raise

    for exe in exe_list:
        exe.forward(is_train=False)
    if ground_truth is None:   # the ground truth's arrays were filled by its own forward
        gt = {k: (v.copy() if v is not None else None) for k, v in gt.items()}
    for i, exe in enumerate(exe_list):
        if i != max_idx:
            compare("Predict", zip(output_names, exe.outputs), i)
    if grad_req != "null":
        for exe in exe_list:
            exe.forward(is_train=True)
            exe.backward(exe.outputs)
        if ground_truth is None:
            gt = dict(exe_list[max_idx].output_dict)
            gt.update(exe_list[max_idx].grad_dict)
        for i, exe in enumerate(exe_list):
            if i != max_idx:
                compare("Train", zip(output_names + arg_names, list(exe.outputs) + list(exe.grad_arrays)), i)
    return gt


def check_gluon_hybridize_consistency(net_builder, data_l, numpy_func=None, test_grad=True, rtol=1e-4, atol=1e-4):
    """Build a net with `net_builder()` three ways (imperative, hybridized, hybridized again) with
    the same parameters and check they give the same outputs (and input gradients), optionally
    against `numpy_func` of the inputs' numpy values."""
    mx = _mx()
    saved = None
    results = []
    for hybridize in (False, True, True):
        net = net_builder()
        net.initialize()
        if saved is None:
            saved = {k: v.data().copy() for k, v in net.collect_params().items()}
        else:
            for (k, v), val in zip(net.collect_params().items(), saved.values()):
                v.set_data(val)
        if hybridize:
            net.hybridize()
        inputs = [x.copy() for x in data_l]
        for x in inputs:
            x.attach_grad()
        with mx.autograd.record():
            out = net(*inputs)
        if test_grad:
            out.backward()
        results.append((out.asnumpy(), [x.grad.asnumpy() for x in inputs] if test_grad else []))
    if numpy_func is not None:
        assert_almost_equal(results[0][0], numpy_func(*[x.asnumpy() for x in data_l]), rtol=rtol, atol=atol)
    for out, grads in results[1:]:
        assert_almost_equal(out, results[0][0], rtol=rtol, atol=atol)
        for g, g0 in zip(grads, results[0][1]):
            assert_almost_equal(g, g0, rtol=rtol, atol=atol)


# ------------------------------------------------------------------------------------------
# Environment, processes, registry
# ------------------------------------------------------------------------------------------

@contextmanager
def environment(*args):
    """Set environment variables for the body of a `with` (or a decorated function) and restore
    them afterwards, even on error. `environment(name, value)` or `environment({name: value})`;
    a value of None unsets the variable."""
    if len(args) == 1 and isinstance(args[0], dict):
        env_vars = dict(args[0])
    elif len(args) == 2:
        env_vars = {args[0]: args[1]}
    else:
        raise ValueError("environment: expected one dict argument or two arguments (name, value), "
                         f"got {len(args)} arguments")
    snapshot = {name: os.environ.get(name) for name in env_vars}

    def apply(values):
        for name, value in values.items():
            setenv(name, value)

    apply(env_vars)
    try:
        yield
    finally:
        apply(snapshot)


def set_env_var(key, val, default_val=""):
    """Set environment variable `key` to `val`; returns its previous value (or default_val)."""
    prev_val = os.environ.get(key, default_val)
    os.environ[key] = val
    return prev_val


@contextmanager
def discard_stderr():
    """Discard everything written to stderr inside the `with` body: file descriptor 2 (so native
    code's messages too) and the descriptor behind `sys.stderr` when that is another one."""
    fds = {2}
    try:
        fds.add(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):
        pass
    sys.stderr.flush()
    saved = {}
    with open(os.devnull, "w") as bit_bucket:
        try:
            for fd in sorted(fds):
                saved[fd] = os.dup(fd)
                os.dup2(bit_bucket.fileno(), fd)
            yield
        finally:
            sys.stderr.flush()
            for fd, old in saved.items():
                os.dup2(old, fd)
                os.close(old)


def list_gpus():
    """Indices of the visible GPUs."""
    from .context import num_gpus
    return list(range(num_gpus()))


def is_cd_run() -> bool:
    """Whether tests run in a continuous-delivery pipeline (CD_JOB=1)."""
    return os.environ.get("CD_JOB") == "1"


def has_tvm_ops() -> bool:
    """Whether operators generated by TVM are built in: never in symjit."""
    return False


def is_op_runnable() -> bool:
    """Whether TVM-generated operators can run on the default context: never in symjit."""
    return False


OperatorArguments = namedtuple("OperatorArguments", ["narg", "names", "types"])


def get_all_registered_operators():
    """Names of every registered operator."""
    return list(list_ops())


def get_operator_arguments(op_name):
    """An operator's attribute arguments as OperatorArguments(narg, names, types)."""
    op = get_op(op_name)
    names = list(op.params)
    types = [getattr(p, "type_name", type(p).__name__) for p in op.params.values()]
    return OperatorArguments(len(names), names, types)


# ------------------------------------------------------------------------------------------
# Data sets (local files; downloads fail clearly offline)
# ------------------------------------------------------------------------------------------

def download(url, fname=None, dirname=None, overwrite=False, retries=5):
    """Fetch `url` into dirname/fname (default: the URL's last component in the current
    directory) unless that file exists and overwrite is False; returns the path. Raises
    MXNetError when the file is absent and the URL cannot be fetched."""
    import urllib.request
    if fname is None:
        fname = url.split("/")[-1]
    if dirname is not None:
        os.makedirs(dirname, exist_ok=True)
        fname = os.path.join(dirname, fname)
    elif os.path.dirname(fname):
        os.makedirs(os.path.dirname(fname), exist_ok=True)
    if not overwrite and os.path.exists(fname):
        logging.info("%s exists, skipping download", fname)
        return fname
    if retries <= 0:
        raise ValueError(f"download: retries must be positive, got {retries}")
    error = None
    for _ in range(retries):
        try:
            with urllib.request.urlopen(url, timeout=30) as response, open(fname + ".part", "wb") as f:
                f.write(response.read())
            os.replace(fname + ".part", fname)
            return fname
        except OSError as e:
            error = e
    raise MXNetError(f"download: {fname} is not present and {url} could not be fetched ({error}); "
                     f"place the file there to use it offline")


_MNIST_FILES = {"train_data": "train-images-idx3-ubyte", "train_label": "train-labels-idx1-ubyte",
                "test_data": "t10k-images-idx3-ubyte", "test_label": "t10k-labels-idx1-ubyte"}
_MNIST_URL = "https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/gluon/dataset/mnist/"


def _read_idx(path):
    """An IDX file (MNIST's format, gzipped or not) as a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        magic = struct.unpack(">I", f.read(4))[0]
        ndim = magic & 0xFF
        dims = struct.unpack(">" + "I" * ndim, f.read(4 * ndim))
        return np.frombuffer(f.read(), dtype=np.uint8).reshape(dims)


def _mnist_file(path, stem):
    for candidate in (os.path.join(path, stem), os.path.join(path, stem + ".gz")):
        if os.path.exists(candidate):
            return candidate
    return download(_MNIST_URL + stem + ".gz", dirname=path)


def get_mnist(path="data"):
    """MNIST as {'train_data', 'train_label', 'test_data', 'test_label'}: images float32 of shape
    (N, 1, 28, 28) scaled to [0, 1], labels float32. Reads the IDX files (optionally .gz) under
    `path`; raises MXNetError when they are absent and cannot be downloaded."""
    out = {}
    for key, stem in _MNIST_FILES.items():
        values = _read_idx(_mnist_file(path, stem))
        if key.endswith("data"):
            out[key] = values.reshape(values.shape[0], 1, 28, 28).astype(np.float32) / 255
        else:
            out[key] = values.astype(np.float32)
    return out


def get_mnist_ubyte(path="data"):
    """Make sure the four uncompressed MNIST IDX files are in `path` (decompressing .gz files
    found there); raises MXNetError when they cannot be found or downloaded."""
    os.makedirs(path, exist_ok=True)
    for stem in _MNIST_FILES.values():
        target = os.path.join(path, stem)
        if not os.path.exists(target):
            source = _mnist_file(path, stem)
            with gzip.open(source, "rb") as src, open(target, "wb") as dst:
                dst.write(src.read())
    return path


def get_mnist_pkl(path="data"):
    """Make sure `path`/mnist.pkl.gz exists (MXNet's pickled MNIST); returns its path."""
    return download("http://deeplearning.net/data/mnist/mnist.pkl.gz", dirname=path)


def get_mnist_iterator(batch_size, input_shape, num_parts=1, part_index=0, path="data"):
    """(train, val) NDArrayIters over MNIST with data reshaped to (N,) + input_shape; the
    training set is split in `num_parts` and part `part_index` is used."""
    mx = _mx()
    mnist = get_mnist(path)
    train_x = mnist["train_data"].reshape((-1,) + tuple(input_shape))
    train_y = mnist["train_label"]
    parts = np.array_split(np.arange(train_x.shape[0]), num_parts)[part_index]
    train = mx.io.NDArrayIter(train_x[parts], train_y[parts], batch_size, shuffle=True)
    val = mx.io.NDArrayIter(mnist["test_data"].reshape((-1,) + tuple(input_shape)), mnist["test_label"],
                            batch_size)
    return train, val


def get_zip_data(data_dir, url, data_origin_name):
    """Download `url` as data_dir/data_origin_name (unless present) and extract the zip there."""
    path = download(url, fname=data_origin_name, dirname=data_dir, overwrite=False)
    with zipfile.ZipFile(path) as zf:
        zf.extractall(data_dir)


def get_bz2_data(data_dir, data_name, url, data_origin_name):
    """Download `url` as data_dir/data_origin_name (unless present) and decompress it to
    data_dir/data_name."""
    target = os.path.join(data_dir, data_name)
    if os.path.exists(target):
        return
    path = download(url, fname=data_origin_name, dirname=data_dir, overwrite=False)
    with bz2.BZ2File(path, "rb") as src, open(target, "wb") as dst:
        dst.write(src.read())


def get_cifar10(path="data"):
    """Make sure CIFAR-10's record files are in path/cifar (train.rec, test.rec), extracting
    path/cifar10.zip if it is there; raises MXNetError when they cannot be found or fetched."""
    if not (os.path.exists(os.path.join(path, "cifar", "train.rec"))
            and os.path.exists(os.path.join(path, "cifar", "test.rec"))):
        get_zip_data(path, "http://data.mxnet.io/mxnet/data/cifar10.zip", "cifar10.zip")
    return os.path.join(path, "cifar")


def get_im2rec_path(home_env="MXNET_HOME"):
    """Path of MXNet's tools/im2rec.py under $MXNET_HOME (MXNetError when it is not there)."""
    home = os.environ.get(home_env)
    candidate = os.path.join(home, "tools", "im2rec.py") if home else None
    if candidate and os.path.isfile(candidate):
        return candidate
    raise MXNetError(f"get_im2rec_path: im2rec.py not found; set {home_env} to an MXNet source tree")


class DummyIter:
    """A data iterator that yields the first batch of `real_iter` forever (for speed tests)."""

    def __init__(self, real_iter):
        self.real_iter = real_iter
        self.provide_data = real_iter.provide_data
        self.provide_label = real_iter.provide_label
        self.batch_size = real_iter.batch_size
        self.the_batch = next(iter(real_iter))

    def __iter__(self):
        return self

    def next(self):
        return self.the_batch

    __next__ = next

    def reset(self):
        """Nothing to rewind: the same batch is returned forever."""


# ------------------------------------------------------------------------------------------
# Statistics of random generators
# ------------------------------------------------------------------------------------------

def gen_buckets_probs_with_ppf(ppf, nbuckets):
    """`nbuckets` equal-probability buckets [(ppf(i/n), ppf((i+1)/n))] and their probabilities
    (1/n each), from a distribution's percent point function."""
    probs = [1.0 / nbuckets for _ in range(nbuckets)]
    buckets = [(ppf(i / float(nbuckets)), ppf((i + 1) / float(nbuckets))) for i in range(nbuckets)]
    return buckets, probs


def mean_check(generator, mu, sigma, nsamples=1000000) -> bool:
    """Whether the mean of generator(nsamples) lies within mu +- 3 sigma / sqrt(nsamples)."""
    samples = np.array(generator(nsamples))
    sample_mean = samples.mean()
    bound = 3 * sigma / np.sqrt(nsamples)
    return bool(mu - bound < sample_mean < mu + bound)


def var_check(generator, sigma, nsamples=1000000) -> bool:
    """Whether the unbiased variance of generator(nsamples) lies within
    sigma^2 +- 3 sqrt(2 sigma^4 / (nsamples - 1))."""
    samples = np.array(generator(nsamples))
    sample_var = samples.var(ddof=1)
    bound = 3 * np.sqrt(2 * sigma ** 4 / (nsamples - 1))
    return bool(sigma ** 2 - bound < sample_var < sigma ** 2 + bound)


def chi_square_check(generator, buckets, probs, nsamples=1000000):
    """Pearson's chi-square test of generator(nsamples) against bucket probabilities.

    buckets: (low, high) pairs for a continuous distribution (a sample counts in the first
    bucket with low <= x < high) or single values for a discrete one. Returns
    (p_value, observed_counts, expected_counts)."""
    if ss is None:
        raise ImportError("chi_square_check needs scipy (scipy.stats)")
    if not 0.99 < float(np.sum(probs)) < 1.01:
        raise ValueError(f"chi_square_check: probs must sum to 1, got {np.sum(probs)}")
    expected_freq = nsamples * np.array(probs)
    samples = np.asarray(generator(nsamples)).reshape(-1)
    if samples.shape[0] != nsamples:
        raise ValueError(f"chi_square_check: the generator gave {samples.shape[0]} samples, expected {nsamples}")
    continuous = isinstance(buckets[0], tuple)
    if continuous:
        edges = np.array([b for pair in buckets for b in pair], dtype=np.float64)
        pos = np.searchsorted(edges, samples, side="right")
        inside = pos % 2 == 1   # right of a bucket's low edge and left of its high edge
        counts = np.bincount((pos[inside] - 1) // 2, minlength=len(buckets))
    else:
        values = np.asarray(buckets)
        counts = np.array([np.sum(samples == v) for v in values])
    obs_freq = counts[:len(buckets)].astype(np.float64)
    # chisquare needs equal totals: scale the expectation to the counted samples
    expected = expected_freq * (obs_freq.sum() / expected_freq.sum()) if obs_freq.sum() else expected_freq
    _, p = ss.chisquare(f_obs=obs_freq, f_exp=expected)
    return p, obs_freq, expected_freq


def verify_generator(generator, buckets, probs, nsamples=1000000, nrepeat=5, success_rate=0.2, alpha=0.05):
    """Run `chi_square_check` nrepeat times; raise AssertionError unless at least
    nrepeat * success_rate of the p-values exceed alpha. Returns the p-values."""
    cs_ret_l, obs_freq_l, expected_freq_l = [], [], []
    for _ in range(nrepeat):
        p, obs_freq, expected_freq = chi_square_check(generator=generator, buckets=buckets, probs=probs,
                                                      nsamples=nsamples)
        cs_ret_l.append(p)
        obs_freq_l.append(obs_freq)
        expected_freq_l.append(expected_freq)
    success_num = int((np.array(cs_ret_l) > alpha).sum())
    if success_num < nrepeat * success_rate:
        raise AssertionError("Generator test fails, Chi-square p=%s, obs_freq=%s, expected_freq=%s."
                             "\nbuckets=%s, probs=%s" % (str(cs_ret_l), str(obs_freq_l), str(expected_freq_l),
                                                         str(buckets), str(probs)))
    return cs_ret_l


# ------------------------------------------------------------------------------------------
# symjit extra: an op's registered gradient rule against finite differences
# ------------------------------------------------------------------------------------------

def check_op_gradient(op_name: str, inputs: Sequence[np.ndarray], attrs: Mapping | None = None,
                      wrt: Sequence[int] | None = None, eps: float = 1e-4, rtol: float = 1e-3,
                      atol: float = 1e-5, is_train: bool = False, seed: int = 0) -> None:
    """Assert that `op_name`'s gradient rule matches finite differences.

    Inputs are promoted to float64 (integer inputs such as indices are kept). The
    loss is sum_k <out_k, head_k> over the visible outputs with random heads, so
    every output's gradient path is exercised. `wrt` selects which inputs to check
    (default: every floating-point input).
    """
    attrs = dict(attrs or {})
    op = get_op(op_name)
    parsed = op.parse(attrs)
    xs = [np.array(x, dtype=np.float64, order="C") if np.issubdtype(np.asarray(x).dtype, np.floating)
          else np.array(x, order="C") for x in inputs]
    ctx = ComputeContext(is_train=is_train)
    nvis = op.num_visible_outputs(parsed)
    outs = apply_numpy(op_name, xs, attrs, ctx)[:nvis]
    rng = np.random.default_rng(seed)
    heads = [rng.uniform(-1, 1, size=o.shape).astype(o.dtype) for o in outs]

    def loss():
        ys = apply_numpy(op_name, xs, attrs, ComputeContext(is_train=is_train))[:nvis]
        return float(sum(np.sum(y.astype(np.float64) * h) for y, h in zip(ys, heads)))

    all_outs = apply_numpy(op_name, xs, attrs, ctx)
    grads = op.grad(numpy_emitter(ctx), parsed, xs, all_outs, heads + [
        np.zeros_like(o) for o in all_outs[nvis:]])
    if len(grads) != len(xs):
        raise MXNetError(f"{op_name}: gradient rule returned {len(grads)} gradients for {len(xs)} inputs")
    if wrt is None:
        wrt = [i for i, x in enumerate(xs) if np.issubdtype(x.dtype, np.floating)]
    for i in wrt:
        expected = _finite_difference(loss, xs[i], eps)
        got = np.asarray(grads[i], dtype=np.float64)
        assert_almost_equal(got, expected, rtol=rtol, atol=atol,
                            names=(f"{op_name} analytic d/d{op.input_names(parsed)[i]}", "numeric"))
