"""`mxnet.numpy` (`mx.np`): NumPy-compatible arrays and functions, as in MXNet 1.9.1's
`npx.set_np()` mode (zero-dim arrays, numpy shapes and indexing, float32 by default).

`ndarray` subclasses the legacy NDArray (same storage, autograd, kvstore, optimizers); every
function applies a registered `_np_*` / `_npi_*` operator, so gradients flow through all of the
differentiable ones. The names of MXNet's fallback list run numpy itself (`fallback`).
`linalg` and `random` are the sub-modules of the same names.
"""
from __future__ import annotations

import numpy as _onp

from . import _op, creation, fallback
from .multiarray import array, asarray, empty, full, ndarray, ones, zeros  # noqa: F401
from . import linalg, random  # noqa: F401

for _module in (fallback, creation, _op):      # later modules win: native ops over fallbacks
    for _name in _module.__all__:
        globals()[_name] = getattr(_module, _name)

# constants and dtypes, as numpy's
pi, e, inf, nan, newaxis = _onp.pi, _onp.e, _onp.inf, _onp.nan, None
PINF, NINF, NAN, NaN, PZERO, NZERO = _onp.inf, -_onp.inf, _onp.nan, _onp.nan, 0.0, -0.0
float16, float32, float64 = _onp.float16, _onp.float32, _onp.float64
int8, int32, int64, uint8 = _onp.int8, _onp.int32, _onp.int64, _onp.uint8
bool_ = _onp.bool_
bool = _onp.bool_  # noqa: A001 - MXNet exports numpy's bool type under this name
finfo = _onp.finfo
set_printoptions = _onp.set_printoptions      # the repr of arrays is numpy's
genfromtxt = fallback.numpy_fallback(_onp.genfromtxt, "genfromtxt")

__all__ = (_op.__all__ + creation.__all__ + fallback.__all__
           + ["array", "asarray", "empty", "full", "ndarray", "ones", "zeros", "random", "linalg", "pi", "e",
              "inf", "nan", "newaxis", "PINF", "NINF", "NAN", "NaN", "PZERO", "NZERO", "float16", "float32",
              "float64", "int8", "int32", "int64", "uint8", "bool_", "bool", "finfo", "set_printoptions",
              "genfromtxt"])
