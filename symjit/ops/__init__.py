"""symjit.ops — the single operator registry (see DESIGN.md and `registry.py`).

Importing this package registers every operator module listed in `_load_all`.
"""
from .registry import (OPS, ComputeContext, Emitter, Op, apply_numpy, find_op, get_op, list_ops, numpy_emitter,  # noqa: F401
                       register, shape_known, merge_shape)
from . import _load_all  # noqa: F401
