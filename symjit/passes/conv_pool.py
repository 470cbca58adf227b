"""Convolution + max pooling: one `_conv_pool` node where only a max pooling reads a convolution.

Pattern (after epilogue fusion): a 2-D channel-first float32 `Convolution`, or a
`_with_epilogue` whose inner op is one and whose epilogue is exactly relu of the result,
whose output is read once, by a 2-D channel-first max `Pooling` (not global), and is not a
graph output. Both nodes become one `_conv_pool` node (ops/fused.py) with the convolution's
inputs and the pooling's output.

Why: a network's stem (resnet: 7x7 convolution, relu, 3x3 stride-2 max pooling) writes a
convolution output four times the size of the pooled one and the pooling reads it back; the
kernel library computes the convolution rows each block of pooled rows needs into a buffer
that stays in cache and pools them there (nnkernels.c `symjit_nn_conv_pool`), so only the
pooled output reaches memory. The CUDA target has no such kernel: the pass manager runs the
pass for llvm targets only.

Guarantees: the graph computes the same values (the same convolution tiles, relu and pooling,
in the same order); the node list stays topologically sorted; idempotent.
"""
from __future__ import annotations

from ..ir.graph import Graph, Node
from ..ir.target import only_for
from .rewrite import NameSource, convolution_relu, make_node, replace_uses


def _conv_of(n: Node) -> tuple[dict, bool] | None:
    """(convolution attrs, relu) if `n` is a fusable convolution, else None."""
    found = convolution_relu(n)
    if found is None:
        return None
    attrs, _ = found
    if len(attrs["kernel"]) != 2 or attrs["layout"] not in (None, "NCHW") or len(n.outputs) != 1:
        return None
    return found


def _is_max_pool_2d(n: Node) -> bool:
    a = n.attrs
    return (n.op.name == "Pooling" and a["pool_type"] == "max" and not a["global_pool"]
            and len(a["kernel"]) == 2 and a["layout"] in (None, "NCHW"))


@only_for(lambda t: t.kind == "llvm", "llvm targets (the kernel library implements `_conv_pool`)")
def fuse_conv_pool(g: Graph) -> tuple[Graph, dict]:
    """The module docstring's rewrite; stats: `conv_pool_fused`."""
    g = g.copy()
    names = NameSource(g)
    readers: dict = {}
    for n in g.nodes:
        for v in n.inputs:
            readers.setdefault(v, []).append(n)
    producer = {v: n for n in g.nodes for v in n.outputs}
    graph_outputs = set(g.outputs)
    replaced: dict[int, Node] = {}   # id(pool node) -> fused node
    absorbed: set[int] = set()
    mapping = {}
    for pool in g.nodes:
        if not _is_max_pool_2d(pool) or len(pool.inputs) != 1:
            continue
        y = pool.inputs[0]
        conv = producer.get(y)
        found = _conv_of(conv) if conv is not None else None
        if found is None or y in graph_outputs or len(readers.get(y, [])) != 1:
            continue
        if not (y.type.known and y.type.dtype == "float32" and pool.outputs[0].type.known):
            continue
        conv_attrs, relu = found
        node = make_node(names, "_conv_pool", list(conv.inputs),   # a relu epilogue has no extra inputs
                         {"conv_attrs": conv_attrs, "pool_attrs": pool.attrs, "relu": relu,
                          "num_args": len(conv.inputs),
                          "members": tuple(conv.attrs.get("members", (conv.name,))) + (pool.name,)},
                         base=f"{conv.name}_pool")
        if node.outputs[0].type.shape != pool.outputs[0].type.shape:
            continue
        replaced[id(pool)] = node
        absorbed.add(id(conv))
        mapping[pool.outputs[0]] = node.outputs[0]
    g.nodes = [replaced.get(id(n), n) for n in g.nodes if id(n) not in absorbed]
    replace_uses(g, mapping)
    return g, {"conv_pool_fused": len(replaced)}
