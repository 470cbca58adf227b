"""NumPy-semantics creation operators (no array inputs): `_npi_zeros`, `_npi_ones`, `_npi_full`,
`_npi_identity`, `_npi_eye`, `_npi_arange`, `_npi_linspace`, `_npi_logspace`, `_npi_indices`,
`_npi_hanning`, `_npi_hamming`, `_npi_blackman`, and `_npi_full_like` (the shape of its input).
MXNet's parameter names; float32 unless `dtype` says otherwise (indices: int32)."""
from __future__ import annotations

from typing import Callable, ClassVar

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Dtype, Float, Int, Optional, Param
from .np_base import Axis, NumpyOp, register_numpy

__all__ = []


def _shape(v):
    v = Axis(v)
    return () if v is None else (v,) if isinstance(v, int) else v


class _Creation(NumpyOp):
    """An array made from the attributes alone."""
    inputs = ()
    no_gradient = True
    default_dtype: ClassVar[str] = "float32"

    def _dtype(self, attrs):
        return attrs.get("dtype") or self.default_dtype

    def out_types(self, attrs, in_types):
        return [np.dtype(self._dtype(attrs))]

    def forward(self, attrs, *xs):
        try:
            return np.asarray(self.make(attrs, *xs)).astype(self._dtype(attrs))
        except (ValueError, TypeError) as e:
            raise MXNetError(f"{self.name}: {e}") from None

    def infer_shape(self, attrs, in_shapes):
        """The result's shape from the attributes (`out_shape`) without allocating it, when the op
        says how; else by running it."""
        if self.out_shape is not None:
            return list(in_shapes), [tuple(self.out_shape(attrs))]
        return super().infer_shape(attrs, in_shapes)

    out_shape: ClassVar[Callable | None] = None


_DT = {"dtype": Param(Optional(Dtype), None)}


def _creation(name: str, params: dict, make: Callable, doc: str, default_dtype="float32", shape=None):
    register_numpy(name)(type(f"Np{name}", (_Creation,), {
        "params": dict(params, **_DT), "make": staticmethod(make), "__doc__": doc,
        "default_dtype": default_dtype, "out_shape": None if shape is None else staticmethod(shape)}))


def _given_shape(a):
    return a["shape"]


_creation("_npi_zeros", {"shape": Param(_shape, ())}, lambda a: np.zeros(a["shape"]), "numpy.zeros.",
          shape=_given_shape)
_creation("_npi_ones", {"shape": Param(_shape, ())}, lambda a: np.ones(a["shape"]), "numpy.ones.",
          shape=_given_shape)
_creation("_npi_full", {"shape": Param(_shape, ()), "value": Param(Float, 0.0)},
          lambda a: np.full(a["shape"], a["value"]), "numpy.full with `value`.", shape=_given_shape)
_creation("_npi_identity", {"shape": Param(_shape, ())},
          lambda a: np.eye(*a["shape"]), "numpy.identity: the identity matrix of `shape` (n, n).",
          shape=_given_shape)
_creation("_npi_eye", {"N": Param(Int), "M": Param(Optional(Int), None), "k": Param(Int, 0)},
          lambda a: np.eye(a["N"], a["M"], a["k"]), "numpy.eye.",
          shape=lambda a: (a["N"], a["N"] if a["M"] is None else a["M"]))
_creation("_npi_arange", {"start": Param(Float, 0.0), "stop": Param(Optional(Float), None),
                          "step": Param(Float, 1.0), "repeat": Param(Int, 1), "infer_range": Param(Bool, False)},
          lambda a: np.repeat(np.arange(0.0, a["start"], a["step"]) if a["stop"] is None
                              else np.arange(a["start"], a["stop"], a["step"]), a["repeat"]), "numpy.arange.")
_creation("_npi_linspace", {"start": Param(Float, 0.0), "stop": Param(Float, 1.0), "num": Param(Int, 50),
                            "endpoint": Param(Bool, True)},
          lambda a: np.linspace(a["start"], a["stop"], a["num"], a["endpoint"]), "numpy.linspace.",
          shape=lambda a: (a["num"],))
_creation("_npi_logspace", {"start": Param(Float, 0.0), "stop": Param(Float, 1.0), "num": Param(Int, 50),
                            "endpoint": Param(Bool, True), "base": Param(Float, 10.0)},
          lambda a: np.logspace(a["start"], a["stop"], a["num"], a["endpoint"], a["base"]), "numpy.logspace.",
          shape=lambda a: (a["num"],))
_creation("_npi_indices", {"dimensions": Param(_shape, ())}, lambda a: np.indices(a["dimensions"]),
          "numpy.indices (int32 by default).", default_dtype="int32",
          shape=lambda a: (len(a["dimensions"]),) + tuple(a["dimensions"]))
for _kind, _fn in (("hanning", np.hanning), ("hamming", np.hamming), ("blackman", np.blackman)):
    _creation(f"_npi_{_kind}", {"M": Param(Int)}, lambda a, f=_fn: f(a["M"]), f"numpy.{_kind} window.",
              shape=lambda a: (max(a["M"], 0),))


@register_numpy("_npi_full_like")
class NpFullLike(_Creation):
    """An array of a's shape filled with `fill_value` (a's dtype unless `dtype`)."""
    inputs = ("a",)
    params = {"fill_value": Param(Float, 0.0), "dtype": Param(Optional(Dtype), None)}

    def out_types(self, attrs, in_types):
        return [np.dtype(attrs["dtype"]) if attrs["dtype"] else in_types[0]]

    def forward(self, attrs, a):
        return np.full(a.shape, attrs["fill_value"], attrs["dtype"] or a.dtype)
