"""`mx.np.utils`: the dtypes and constants of `mx.np` (numpy's own objects)."""
from __future__ import annotations

import numpy as _onp

__all__ = ["float16", "float32", "float64", "uint8", "int32", "int8", "int64", "bool", "bool_", "pi", "inf",
           "nan", "PZERO", "NZERO", "newaxis", "finfo", "e", "NINF", "PINF", "NAN", "NaN"]

pi, e, inf, nan, newaxis = _onp.pi, _onp.e, _onp.inf, _onp.nan, None
PINF, NINF, NAN, NaN, PZERO, NZERO = _onp.inf, -_onp.inf, _onp.nan, _onp.nan, 0.0, -0.0
float16, float32, float64 = _onp.float16, _onp.float32, _onp.float64
int8, int32, int64, uint8 = _onp.int8, _onp.int32, _onp.int64, _onp.uint8
bool_ = _onp.bool_
bool = _onp.bool_  # noqa: A001 - MXNet exports numpy's bool type under this name
finfo = _onp.finfo
