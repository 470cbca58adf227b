"""symjit.passes — one file per pass over `symjit.ir` graphs (see DESIGN.md).

Each pass is a function `Graph -> (Graph, stats)` whose docstring states its guarantee:
  infer.py     infer_types: shape and dtype inference (partial shapes, errors naming the node)
  autodiff.py  autodiff: the backward graph from the ops' gradient rules
"""
from .infer import InferStats, infer_types  # noqa: F401
from .autodiff import AutodiffStats, autodiff  # noqa: F401
