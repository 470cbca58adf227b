"""Text form of a graph: one line per input group, one line per node, stable enough to diff.

```
graph mlp(%data: float32[8,784], %fc1_weight: float32[128,784]) aux() {
  %fc1: float32[8,128] = FullyConnected(%data, %fc1_weight) {no_bias=True, num_hidden=128}
  %bn:output: float32[8,128], %bn:mean: float32[128], %bn:var: float32[128] = BatchNorm(...)
  return %fc1
}
```
Only attributes that differ from the op's defaults are shown, sorted by name; scalar
expressions (fused elementwise ops) print in their text form; array values (a `_const`'s
weights) print in full up to ARRAY_PRINT_LIMIT elements, larger ones as `<dtype[shape], N B>`
(the text of a large model stays one line per node). Types print as
`dtype[d0,d1]` with `?` for unknown parts.
"""
from __future__ import annotations

import math

import numpy as np

from ..ops import scalar as S
from ..ops.attrs import REQUIRED, format_attr
from .graph import Graph, Node, Value

__all__ = ["format_graph", "format_node", "format_attrs", "ARRAY_PRINT_LIMIT"]

#: arrays with more elements print as a summary
ARRAY_PRINT_LIMIT = 16


def _val(v: Value) -> str:
    return f"%{v.name}"


def _typed(v: Value) -> str:
    return f"%{v.name}: {v.type}"


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable values are different
        return False


def format_attrs(n: Node) -> str:
    """`{k=v, ...}` for attributes that differ from the op's defaults ('' if none)."""
    items = []
    for key in sorted(n.attrs):
        value = n.attrs[key]
        p = n.op.params.get(key)
        if p is not None and p.default is not REQUIRED and _same(p.default, value):
            continue
        if isinstance(value, S.Expr):
            text = S.to_text(value)
        elif isinstance(value, np.ndarray) and value.size > ARRAY_PRINT_LIMIT:
            text = f"<{value.dtype.name}[{','.join(str(d) for d in value.shape)}], {value.nbytes} B>"
        elif isinstance(value, np.ndarray):
            text = np.array2string(value, max_line_width=1 << 30).replace("\n", "")
        else:
            text = format_attr(value)
        items.append(f"{key}={text}")
    return "{" + ", ".join(items) + "}" if items else ""


def format_node(n: Node) -> str:
    outs = ", ".join(_typed(v) for v in n.outputs)
    attrs = format_attrs(n)
    return f"{outs} = {n.op.name}({', '.join(_val(v) for v in n.inputs)})" + (f" {attrs}" if attrs else "")


def format_graph(g: Graph) -> str:
    """The whole graph as text (see the module docstring)."""
    lines = [f"graph {g.name}({', '.join(_typed(v) for v in g.args)}) "
             f"aux({', '.join(_typed(v) for v in g.aux)}) {{"]
    lines += ["  " + format_node(n) for n in g.nodes]
    lines.append(f"  return {', '.join(_val(v) for v in g.outputs)}")
    lines.append("}")
    return "\n".join(lines)
