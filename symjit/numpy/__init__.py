"""`mxnet.numpy` (`mx.np`): NumPy-compatible arrays and functions, as in MXNet 1.9.1's
`npx.set_np()` mode (zero-dim arrays, numpy shapes and indexing, float32 by default).

`ndarray` subclasses the legacy NDArray (same storage, autograd, kvstore, optimizers); every
function applies a registered `_np_*` / `_npi_*` operator, so gradients flow through all of the
differentiable ones. The names of MXNet's fallback list run numpy itself (`fallback`).
`linalg` and `random` are the sub-modules of the same names.
"""
from __future__ import annotations

from . import (_op, arrayprint, creation, fallback, fallback_linalg, function_base, io,  # noqa: F401
               stride_tricks, utils)
from .multiarray import array, asarray, empty, full, ndarray, ones, zeros  # noqa: F401
from . import linalg, random  # noqa: F401

# later modules win: native ops over numpy fallbacks
for _module in (fallback, utils, io, arrayprint, function_base, stride_tricks, creation, _op):
    for _name in _module.__all__:
        globals()[_name] = getattr(_module, _name)

__all__ = [n for m in (fallback, utils, io, arrayprint, function_base, stride_tricks, creation, _op)
           for n in m.__all__] + ["array", "asarray", "empty", "full", "ndarray", "ones", "zeros", "random",
                                  "linalg", "fallback", "fallback_linalg", "arrayprint", "function_base", "io",
                                  "stride_tricks", "utils"]
