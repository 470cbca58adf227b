"""KVStore foundations: key/value normalization, validation and gradient compression.

Shared by every store type (`kvstore.KVStore` for 'local'/'device', `dist` for the MPI types),
so that all of them accept the same arguments as MXNet 1.x's `KVStore`:

* a key is an `int` (numpy integers too) or a `str`; a call takes one key or a list of keys;
* for one key the value is an NDArray or a list of NDArrays (one per device: a push sums them,
  a pull fills every one); for a list of keys it is a list with one such entry per key;
* a key listed twice in one call has its values grouped (a push sums all of them).

Errors in arguments are `MXNetError`s raised before anything in a store changes.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..base import MXNetError
from ..ndarray import NDArray
from ..ndarray.sparse import BaseSparseNDArray, cast_storage

__all__ = ["KVStoreBase", "SparseImage", "commit_sparse", "key_value_pairs", "group_pairs", "check_key", "GradientCompression"]


def check_key(key: Any) -> int | str:
    """A valid key (int or str), normalized to a Python int or str."""
    if isinstance(key, (bool, np.bool_)):
        raise MXNetError(f"KVStore: key must be an int or a str, got {type(key).__name__} {key!r}")
    if isinstance(key, (int, np.integer)):
        return int(key)
    if isinstance(key, str):
        return key
    raise MXNetError(f"KVStore: key must be an int or a str, got {type(key).__name__} {key!r}")


class SparseImage(NDArray):
    """The dense image of a sparse array given to a store (stores compute densely; MXNet's sparse
    results are their compressed images). `commit()` writes the image's values back into the
    sparse array (an output of pull / row_sparse_pull)."""

    def __init__(self, sparse: BaseSparseNDArray):
        super().__init__(sparse.asnumpy(), sparse.context)
        self.sparse = sparse

    def commit(self) -> None:
        compressed = cast_storage(NDArray(self._data, self.context), self.sparse.stype)
        self.sparse._arrays = compressed._arrays


def commit_sparse(arrays) -> None:
    """Write the values of every SparseImage among `arrays` back into its sparse array."""
    for a in arrays:
        if isinstance(a, SparseImage):
            a.commit()


def _as_array_list(value: Any, key, what: str) -> list[NDArray]:
    """The per-device arrays given for one key (an NDArray or a non-empty list of them); sparse
    arrays are replaced by their SparseImage."""
    vals = list(value) if isinstance(value, (list, tuple)) else [value]
    if not vals:
        raise MXNetError(f"KVStore.{what}: empty list of values for key {key!r}")
    for i, v in enumerate(vals):
        if isinstance(v, BaseSparseNDArray):
            vals[i] = SparseImage(v)
        elif not isinstance(v, NDArray):
            raise MXNetError(f"KVStore.{what}: values for key {key!r} must be NDArrays, "
                             f"got {type(v).__name__}")
    return vals


def key_value_pairs(key: Any, value: Any, what: str) -> list[tuple[int | str, list[NDArray]]]:
    """Normalize MXNet-style (key, value) arguments to [(key, [arrays...]), ...] in call order."""
    if isinstance(key, (list, tuple)):
        keys = [check_key(k) for k in key]
        if not isinstance(value, (list, tuple)):
            raise MXNetError(f"KVStore.{what}: a list of {len(keys)} keys needs a list of values, "
                             f"got {type(value).__name__}")
        if len(value) != len(keys):
            raise MXNetError(f"KVStore.{what}: {len(keys)} keys but {len(value)} values")
        return [(k, _as_array_list(v, k, what)) for k, v in zip(keys, value)]
    k = check_key(key)
    return [(k, _as_array_list(value, k, what))]


def group_pairs(pairs: list[tuple[int | str, list[NDArray]]]) -> dict[int | str, list[NDArray]]:
    """Merge the arrays of keys listed more than once (first-occurrence order of keys)."""
    grouped: dict[int | str, list[NDArray]] = {}
    for k, vals in pairs:
        grouped.setdefault(k, []).extend(vals)
    return grouped


def sort_key(key: int | str, str_order: dict[str, int]) -> tuple:
    """Order in which one call's keys are processed (MXNet sorts its integer key ids; string keys
    get ids in the order they were first initialized)."""
    if isinstance(key, str):
        return (1, str_order.get(key, len(str_order)))
    return (0, key)


class KVStoreBase:
    """What every symjit KVStore offers (MXNet 1.x `mxnet.kvstore.KVStoreBase`)."""

    OPTIMIZER = "optimizer"

    def is_capable(self, capability: str) -> bool:
        """Whether the store supports `capability` ('optimizer': it can apply updates itself)."""
        if str(capability).lower() == KVStoreBase.OPTIMIZER:
            return self._optimizer_capable()
        raise ValueError(f"Unknown capability: {capability}")

    def _optimizer_capable(self) -> bool:
        return True

    def barrier(self) -> None:
        """Wait until every worker reached this point (no-op for single-process stores)."""
        self._barrier()

    def _barrier(self) -> None:
        """In-process stores have a single worker: nothing to wait for."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} type={self.type!r} rank={self.rank} num_workers={self.num_workers}>"


class GradientCompression:
    """MXNet's 2-bit gradient compression: each value becomes +threshold, -threshold or 0, and what
    is cut off is kept in a residual (one per key and per sender) and added before the next
    quantization. Data is quantized where it is produced (each device of a 'device' store; each
    worker of a 'dist' store, after local aggregation) and dequantized before it is summed."""

    def __init__(self, params: Any):
        if not isinstance(params, dict):
            raise MXNetError(f"set_gradient_compression: compression_params must be a dict such as "
                             f"{{'type': '2bit', 'threshold': 0.5}}, got {type(params).__name__}")
        params = dict(params)
        ctype = str(params.pop("type", "")).lower()
        if ctype == "none":
            self.threshold = None
        elif ctype == "2bit":
            try:
                self.threshold = float(params.pop("threshold", 0.5))
            except (TypeError, ValueError):
                raise MXNetError("set_gradient_compression: threshold must be a number") from None
            if not self.threshold > 0:
                raise MXNetError(f"set_gradient_compression: threshold must be greater than 0, "
                                 f"got {self.threshold}")
        else:
            raise MXNetError(f"set_gradient_compression: unknown type {ctype!r} for gradient "
                             "compression; supported: '2bit' (or 'none')")
        if params:
            raise MXNetError(f"set_gradient_compression: unexpected parameters {sorted(params)} for "
                             f"type {ctype!r} (only 'threshold')")
        self.type = ctype
        self._residuals: dict = {}

    @property
    def active(self) -> bool:
        return self.threshold is not None

    def quantize(self, slot, data: np.ndarray) -> np.ndarray:
        """Dequantized 2-bit image of `data` (+ the residual of `slot`); updates that residual."""
        if not np.issubdtype(data.dtype, np.floating):
            raise MXNetError(f"gradient compression: only floating-point gradients can be "
                             f"compressed, got dtype {data.dtype.name}")
        res = self._residuals.get(slot)
        if res is None or res.shape != data.shape or res.dtype != data.dtype:
            res = self._residuals[slot] = np.zeros(data.shape, data.dtype)
        res += data
        t = data.dtype.type(self.threshold)
        pos = res >= t
        neg = res <= -t
        out = np.zeros(data.shape, data.dtype)
        out[pos] = t
        out[neg] = -t
        res[pos] -= t
        res[neg] += t
        return out
