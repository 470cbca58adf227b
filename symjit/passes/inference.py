"""Inference rewrites: what training-only machinery becomes when the graph only predicts.

  * every op with an `inference_rewrite` (ops/registry.py) becomes what it says: Dropout (mode
    'training'), MakeLoss, LinearRegressionOutput, MAERegressionOutput -> identity;
    LogisticRegressionOutput -> sigmoid; SoftmaxOutput -> softmax over MXNet's axis.
  * BatchNorm with global statistics that follows a Convolution or FullyConnected (whose
    output nothing else reads), when the layer's weight and the BatchNorm parameters are
    compile-time constants (`bind_constants`), is folded into that layer: w' = w * s,
    b' = (b - mean) * s + beta with s = gamma / sqrt(var + eps) (gamma = 1 when fix_gamma);
    constant folding then computes the new weights once.
  * Any other BatchNorm becomes y = x * s + t with per-channel s = gamma / sqrt(var + eps) and
    t = beta - mean * s, broadcast along its axis: elementwise ops that fuse into the
    preceding layer's epilogue, costing one pass over C values per call instead of a pass
    over the weights.
"""
from __future__ import annotations

from ..ir.graph import Graph, Node, Value
from ..ops import scalar as S
from ..ops.registry import Emitter
from .rewrite import NameSource, make_node, replace_uses, use_counts


def _inference_form(n: Node, names: NameSource, sink: list) -> list | None:
    """The op's `inference_rewrite` of node `n` (new nodes appended to `sink`), or None."""
    def apply(op_name, inputs, attrs):
        node = make_node(names, op_name, inputs, attrs, base=n.name)
        sink.append(node)
        return node.outputs
    return n.op.inference_rewrite(Emitter(apply), n.attrs, list(n.inputs), [v.type.shape for v in n.inputs])


def _fold_batchnorm(conv: Node, bn: Node, names: NameSource) -> list[Node]:
    """Nodes computing the folded layer; the last one's output replaces bn's output."""
    data, w = conv.inputs[0], conv.inputs[1]
    gamma, beta, mean, var = bn.inputs[1:5]
    eps = bn.attrs["eps"]
    g_, v_ = S.Input(0), S.Input(1)
    if bn.attrs["fix_gamma"]:
        scale = make_node(names, "_elemwise_expr", [var], {"expr": 1.0 / S.call("sqrt", S.Input(0) + eps),
                                                            "num_args": 1}, base=f"{bn.name}_scale")
    else:
        scale = make_node(names, "_elemwise_expr", [gamma, var],
                          {"expr": g_ / S.call("sqrt", v_ + eps), "num_args": 2}, base=f"{bn.name}_scale")
    nd_w = len(w.type.shape)
    s_col = make_node(names, "Reshape", scale.outputs, {"shape": (-1,) + (1,) * (nd_w - 1)},
                      base=f"{bn.name}_scale_col")
    w2 = make_node(names, "broadcast_mul", [w, s_col.outputs[0]], base=f"{conv.name}_folded_weight")
    m_, s_, b_ = S.Input(0), S.Input(1), S.Input(2)
    if conv.attrs.get("no_bias"):
        bias = make_node(names, "_elemwise_expr", [mean, scale.outputs[0], beta],
                         {"expr": b_ - m_ * s_, "num_args": 3}, base=f"{conv.name}_folded_bias")
    else:
        c_ = S.Input(3)
        bias = make_node(names, "_elemwise_expr", [mean, scale.outputs[0], beta, conv.inputs[2]],
                         {"expr": (c_ - m_) * s_ + b_, "num_args": 4}, base=f"{conv.name}_folded_bias")
    attrs = dict(conv.attrs, no_bias=False)
    new_conv = make_node(names, conv.op.name, [data, w2.outputs[0], bias.outputs[0]], attrs, base=conv.name)
    return [scale, s_col, w2, bias, new_conv]


def _bn_elementwise(bn: Node, names: NameSource) -> list[Node] | None:
    """BatchNorm (global statistics) as per-channel scale and shift; None if shapes are unknown."""
    x = bn.inputs[0]
    if x.type.shape is None:
        return None
    gamma, beta, mean, var = bn.inputs[1:5]
    eps = bn.attrs["eps"]
    nd = len(x.type.shape)
    axis = bn.attrs.get("axis", 1) % nd
    g_, b_, m_, v_ = (S.Input(i) for i in range(4))
    inv = 1.0 / S.call("sqrt", v_ + eps)
    s_expr = inv if bn.attrs["fix_gamma"] else g_ * inv
    scale = make_node(names, "_elemwise_expr", [gamma, beta, mean, var], {"expr": s_expr, "num_args": 4},
                      base=f"{bn.name}_scale")
    shift = make_node(names, "_elemwise_expr", [gamma, beta, mean, var],
                      {"expr": b_ - m_ * s_expr, "num_args": 4}, base=f"{bn.name}_shift")
    shape = tuple(-1 if d == axis else 1 for d in range(nd))
    s_r = make_node(names, "Reshape", scale.outputs, {"shape": shape}, base=f"{bn.name}_scale_b")
    t_r = make_node(names, "Reshape", shift.outputs, {"shape": shape}, base=f"{bn.name}_shift_b")
    mul = make_node(names, "broadcast_mul", [x, s_r.outputs[0]], base=f"{bn.name}_mul")
    add = make_node(names, "broadcast_add", [mul.outputs[0], t_r.outputs[0]], base=bn.name)
    return [scale, shift, s_r, t_r, mul, add]


def _is_const(v: Value, producers: dict) -> bool:
    p = producers.get(v)
    return p is not None and p[0].op.name == "_const"


def _bn_foldable(bn: Node, producers: dict, uses: dict) -> Node | None:
    if bn.op.name != "BatchNorm" or bn.attrs.get("axis", 1) != 1 or bn.attrs.get("output_mean_var"):
        return None
    if any(uses.get(v, 0) for v in bn.outputs[1:]):
        return None
    if not all(_is_const(v, producers) for v in bn.inputs[1:5]):
        return None
    p = producers.get(bn.inputs[0])
    if p is None or p[0].op.name not in ("Convolution", "FullyConnected") or uses.get(bn.inputs[0], 0) != 1:
        return None
    conv = p[0]
    if not all(_is_const(v, producers) for v in conv.inputs[1:]):
        return None
    if conv.op.name == "FullyConnected" and not conv.attrs.get("flatten", True):
        return None
    if conv.op.name == "Convolution" and conv.attrs.get("layout") not in (None, "NCW", "NCHW", "NCDHW"):
        return None
    if any(v.type.shape is None for v in conv.inputs[1:2]):
        return None
    return conv


def inference_rewrites(g: Graph) -> tuple[Graph, dict]:
    """Apply the rewrites of the module docstring. Guarantee: in inference mode (is_train
    False) every graph output keeps its value; training-only nodes become dead (left for DCE)."""
    g = g.copy()
    names = NameSource(g)
    uses = use_counts(g)
    producers = {v: (n, i) for n in g.nodes for i, v in enumerate(n.outputs)}
    stats = {"bn_folded": 0, "bn_to_elementwise": 0, "dropout_removed": 0, "heads_rewritten": 0}
    new_nodes: list[Node] = []
    mapping: dict[Value, Value] = {}
    for n in g.nodes:
        n.inputs = [mapping.get(v, v) for v in n.inputs]
        new_nodes.append(n)
        made: list[Node] = []
        form = _inference_form(n, names, made)
        if form is not None:
            new_nodes.extend(made)
            mapping.update(zip(n.outputs, form))
            stats["dropout_removed" if n.op.is_random else "heads_rewritten"] += 1
        elif n.op.name == "BatchNorm" and not any(uses.get(v, 0) for v in n.outputs[1:]):
            conv = _bn_foldable(n, producers, uses)
            reps = _fold_batchnorm(conv, n, names) if conv is not None else _bn_elementwise(n, names)
            if reps is not None:
                new_nodes.extend(reps)
                mapping[n.outputs[0]] = reps[-1].outputs[0]
                stats["bn_folded" if conv is not None else "bn_to_elementwise"] += 1
    g.nodes = new_nodes
    replace_uses(g, mapping)
    return g, stats
