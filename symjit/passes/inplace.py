"""In-place reuse: a node's output takes over the buffer of an input that dies at that node."""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Value


def _candidates(n) -> list[tuple[int, int]]:
    """(output index, input index) pairs an op allows to share a buffer."""
    if n.op.name == "_fused_elemwise":
        # safe for several outputs too: kernels compute every output of an element before
        # storing any (codegen/llvm/elementwise.py), the reference computes whole arrays first
        return [(k, j) for k in range(len(n.outputs)) for j in range(len(n.inputs))]
    return list(n.op.inplace.items())


def nbytes(v: Value) -> int:
    """Bytes of a value with a fully known type."""
    return int(np.prod(v.type.shape, dtype=np.int64)) * np.dtype(v.type.dtype).itemsize


def plan_inplace(g: Graph) -> tuple[Graph, dict]:
    """Choose output->input buffer sharing; the result is `g.annotations['inplace']`
    ({output Value: input Value}).

    A pair is chosen only when the input is an intermediate (never a graph input, a constant
    or a graph output), this node is its last reader, it is read by no other input slot of
    the node, and shape and dtype are equal (so element i is read before element i is
    written). Guarantee: the graph is unchanged; sharing never makes two live values alias."""
    g = g.copy()
    last_reader: dict[Value, int] = {}
    for i, n in enumerate(g.nodes):
        for v in n.inputs:
            last_reader[v] = i
    protected = set(g.inputs) | set(g.outputs) | {v for n in g.nodes if n.op.name == "_const"
                                                  for v in n.outputs}
    chosen: dict[Value, Value] = {}
    taken: set[Value] = set()
    for i, n in enumerate(g.nodes):
        for k, j in _candidates(n):
            if k >= len(n.outputs) or j >= len(n.inputs):
                continue
            out, src = n.outputs[k], n.inputs[j]
            if out in chosen or src in taken or src in protected or out in set(g.outputs):
                continue
            if last_reader.get(src) != i or sum(1 for v in n.inputs if v is src) != 1:
                continue
            if not (out.type.known and src.type.known and out.type.shape == src.type.shape
                    and out.type.dtype == src.type.dtype):
                continue
            chosen[out] = src
            taken.add(src)
    g.annotations["inplace"] = chosen
    return g, {"inplace_pairs": len(chosen), "bytes_reused": sum(nbytes(v) for v in chosen)}
