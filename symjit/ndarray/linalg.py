"""symjit.ndarray.linalg (`mx.nd.linalg`): every registered `_linalg_<name>` op as
`mx.nd.linalg.<name>` (gemm, gemm2, potrf, potri, trmm, trsm, syrk, gelqf, syevd, inverse, det,
slogdet, sumlogdiag, extractdiag, makediag, extracttrian, maketrian)."""
from __future__ import annotations

from ..ops.registry import list_ops
from . import _op_function

_PREFIX = "_linalg_"

for _name in list_ops():
    if _name.startswith(_PREFIX):
        globals()[_name[len(_PREFIX):]] = _op_function(_name)
