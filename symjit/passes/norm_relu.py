"""BatchNorm + relu as one node in training graphs, forward and backward.

Forward pattern (after elementwise fusion): a `BatchNorm` whose output 0 is read only by a
`_fused_elemwise` computing exactly relu of it (ops/elemwise.py `relu_expr`), and is not a
graph output. Both become one `_batch_norm_relu` node (ops/norm_relu.py) with BatchNorm's
inputs and attributes; its outputs are the relu's output, then BatchNorm's mean and inverse
std (and its moving-average updates, as BatchNorm's).

Backward pattern: a `_backward_BatchNorm` whose incoming gradient is read only from a
`_fused_elemwise` computing exactly relu's gradient from relu's output y and the gradient
above it (dy * relu'(y), ops/elemwise.py `relu_grad_expr`), and is not a graph output. Both
become one `_backward_batch_norm_relu` node reading dy and y directly.

Why: a convolutional network's training step writes BatchNorm's output and reads it back for
the relu, and writes relu's gradient and reads it back twice in BatchNorm's backward; fused,
the relu is applied as BatchNorm stores and the mask as its backward loads, saving one pass
over the activation each way.

Guarantees: the graph computes the same values bit for bit (the fused kernels apply the same
scalar operations to the same rounded values); the node list stays topologically sorted;
idempotent.
"""
from __future__ import annotations

from ..ir.graph import Graph, Node
from ..ir.target import only_for
from ..ops import scalar as S
from ..ops.elemwise import relu_expr, relu_grad_expr
from .rewrite import NameSource, make_node, replace_uses

_RELU = (relu_expr(S.Input(0)),)
#: relu's gradient node: (expressions, which input is relu's output) for both input orders
_RELU_GRADS = (((S.Input(1) * relu_grad_expr(S.Input(0)),), 0),
               ((S.Input(0) * relu_grad_expr(S.Input(1)),), 1))


def _readers(g: Graph) -> dict:
    readers: dict = {}
    for n in g.nodes:
        for v in n.inputs:
            readers.setdefault(v, []).append(n)
    return readers


def _sole_reader(v, readers: dict, graph_outputs: set) -> Node | None:
    rs = readers.get(v, [])
    return rs[0] if len(rs) == 1 and v not in graph_outputs else None


def _is_relu_of(f: Node, v) -> bool:
    return (f.op.name == "_fused_elemwise" and list(f.inputs) == [v] and tuple(f.attrs["exprs"]) == _RELU
            and f.outputs[0].type.known and v.type.known and f.outputs[0].type.shape == v.type.shape
            and f.outputs[0].type.dtype == v.type.dtype)


def _relu_grad_parts(f: Node):
    """(gradient above, relu output) if `f` is exactly relu's gradient node, else None."""
    if f.op.name != "_fused_elemwise" or len(f.inputs) != 2 or len(f.outputs) != 1:
        return None
    for exprs, y_index in _RELU_GRADS:
        if tuple(f.attrs["exprs"]) == exprs:
            y, dy = f.inputs[y_index], f.inputs[1 - y_index]
            o = f.outputs[0].type
            if (o.known and y.type.known and dy.type.known and y.type.shape == dy.type.shape == o.shape
                    and y.type.dtype == dy.type.dtype == o.dtype):
                return dy, y
    return None


@only_for(lambda t: t.kind == "llvm", "llvm targets (their BatchNorm kernels implement the fused nodes)")
def fuse_batch_norm_relu(g: Graph) -> tuple[Graph, dict]:
    """The module docstring's rewrites; stats: `bn_relu_forward`, `bn_relu_backward`."""
    g = g.copy()
    names = NameSource(g)
    readers = _readers(g)
    producer = {v: n for n in g.nodes for v in n.outputs}
    graph_outputs = set(g.outputs)
    replaced: dict[int, Node] = {}   # id(node kept in place) -> fused node
    absorbed: set[int] = set()
    mapping: dict = {}
    forward = backward = 0
    for n in g.nodes:
        if n.op.name == "BatchNorm":
            f = _sole_reader(n.outputs[0], readers, graph_outputs)
            if f is None or id(f) in replaced or not _is_relu_of(f, n.outputs[0]):
                continue
            node = make_node(names, "_batch_norm_relu", list(n.inputs), dict(n.attrs), base=f"{n.name}_relu")
            replaced[id(n)] = node
            absorbed.add(id(f))
            mapping[f.outputs[0]] = node.outputs[0]
            mapping.update(zip(n.outputs[1:], node.outputs[1:]))
            forward += 1
        elif n.op.name == "_backward_BatchNorm":
            f = producer.get(n.inputs[0])
            if f is None or id(f) in absorbed or _sole_reader(n.inputs[0], readers, graph_outputs) is not n:
                continue
            parts = _relu_grad_parts(f)
            if parts is None:
                continue
            dy, y = parts
            node = make_node(names, "_backward_batch_norm_relu", [dy, y] + list(n.inputs[1:]), dict(n.attrs),
                             base=f"{n.name}_relu")
            replaced[id(n)] = node
            absorbed.add(id(f))
            mapping.update(zip(n.outputs, node.outputs))
            backward += 1
    g.nodes = [replaced.get(id(n), n) for n in g.nodes if id(n) not in absorbed]
    replace_uses(g, mapping)
    return g, {"bn_relu_forward": forward, "bn_relu_backward": backward}
