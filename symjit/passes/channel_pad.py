"""Channel padding: convolution outputs whose channels are not a multiple of 16 get zero
channels up to the next multiple, so that the blocked layout (blocked_layout.py, next in the
pipeline) can take them in.

Candidates: a 4-D float32 value with C channels, C % 16 != 0 and the padded count C' (the next
multiple of 16) at most MAX_GROWTH x C, produced by a convolution the blocked kernels can run
(`convolution_activation`: a plain convolution, or one whose epilogue is relu / relu6 of the
result, maybe plus a residual) with constant weights (and bias), one group or depthwise. Such a
value is padded when its producer can make C' channels: the producer's extra filters (and bias
entries) are zeros, so the extra channels hold act(0 [+ the residual's extra channel]) -- a
depthwise producer also needs its data padded (its groups grow to C' with zero filters). Every
reader then sees the padded value:
  * a one-group convolution reading it as data: its weights get zero input channels, so the
    extra channels never reach a result;
  * a depthwise convolution reading it as data, or a convolution adding it as its residual,
    whose output is padded too: channel by channel, the extra ones stay extra;
  * anything else (a graph output, a concatenation, a pooling, a dense layer, a convolution
    whose output is not padded): reads `slice_axis(value, axis=1, 0, C)`, one per value.

Why: MobileNetV2's 24-channel stage (and the 24/40/56/88/120-channel layers of later mobile
networks) otherwise stays in NCHW between blocked chains: at batch 8, five 1x1 and one
depthwise convolution in NCHW plus two layout conversions, a third of the network's time.

Guarantees: the graph computes the same outputs (the extra channels are zeros or never read
into a result); the node list stays topologically sorted; idempotent (padded values have
channels multiple of 16).
"""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph, Node, Value
from ..ir.target import AVX512_KERNELS, only_for
from ..ops.blocked import BLOCK
from .rewrite import NameSource, const_node, convolution_activation, is_constant, make_node

#: the largest growth of a value's channels that padding accepts (24 -> 32: 1.33; 8 -> 16 is 2)
MAX_GROWTH = 1.5


def padded_channels(c: int) -> int:
    return -(-c // BLOCK) * BLOCK


def _conv_info(n: Node, producer: dict):
    """(attrs, residual, depthwise) of a convolution the pass can rewrite: 2-D NCHW float32
    data and output, constant weights (and bias), one group or depthwise; else None."""
    found = convolution_activation(n)
    if found is None or len(n.outputs) != 1:
        return None
    attrs, _, residual = found
    if len(attrs["kernel"]) != 2 or attrs.get("layout") not in (None, "NCHW"):
        return None
    x, y = n.inputs[0], n.outputs[0]
    if not all(v.type.known and v.type.dtype == "float32" and len(v.type.shape) == 4 for v in (x, y)):
        return None
    params = n.inputs[1:len(n.inputs) - residual]
    if not all(is_constant(v, producer) for v in params):
        return None
    groups = int(attrs.get("num_group", 1))
    c, f = x.type.shape[1], y.type.shape[1]
    depthwise = groups > 1 and groups == c == f
    if groups != 1 and not depthwise:
        return None
    return attrs, residual, depthwise


def _candidate(v: Value) -> bool:
    t = v.type
    if not (t.known and t.dtype == "float32" and len(t.shape) == 4):
        return False
    c = t.shape[1]
    return c % BLOCK != 0 and padded_channels(c) <= MAX_GROWTH * c


def _chosen_values(g: Graph, producer: dict, info: dict) -> set:
    """The values to pad: candidates produced by a rewritable convolution whose depthwise data
    (if any) is padded too (iterated to a fixed point)."""
    chosen = {n.outputs[0] for n in g.nodes if id(n) in info and _candidate(n.outputs[0])}
    changed = True
    while changed:
        changed = False
        for v in list(chosen):
            n = producer[v]
            _, residual, depthwise = info[id(n)]
            needs = [n.inputs[0]] if depthwise else []
            if residual and n.inputs[-1].type.shape[1] == v.type.shape[1] and _candidate(n.inputs[-1]):
                needs.append(n.inputs[-1])  # a residual of v's channels must be padded alike
            if any(x not in chosen for x in needs):
                chosen.discard(v)
                changed = True
    return chosen


def _padded(a: np.ndarray, axis: int, size: int) -> np.ndarray:
    widths = [(0, 0)] * a.ndim
    widths[axis] = (0, size - a.shape[axis])
    return np.pad(a, widths)


@only_for(lambda t: t.kind == "llvm" and AVX512_KERNELS in t.kernels,
          "llvm targets whose kernel library has its AVX-512 kernels (the blocked layout's)")
def pad_channels(g: Graph, enabled: bool = True) -> tuple[Graph, dict]:
    """The module docstring's rewrite; stats: `padded_values`, `slices`."""
    if not enabled:
        return g, {"padded_values": 0, "slices": 0}
    if not any(_candidate(v) for n in g.nodes for v in n.outputs):
        return g, {"padded_values": 0, "slices": 0}
    g = g.copy()
    producer = {v: n for n in g.nodes for v in n.outputs}
    info = {id(n): found for n in g.nodes if (found := _conv_info(n, producer)) is not None}
    chosen = _chosen_values(g, producer, info)
    names = NameSource(g)
    padded: dict[Value, Value] = {}     # original value -> its padded twin (more channels)
    sliced: dict[Value, Value] = {}     # original value -> its padded twin's first channels
    renamed: dict[Value, Value] = {}    # original value -> a rewritten node's output (same shape)
    nodes: list[Node] = []

    def read(v: Value) -> Value:
        """v as seen by a reader that needs its original channels (one slice per value)."""
        if v in padded:
            if v not in sliced:
                s = make_node(names, "slice_axis", [padded[v]], {"axis": 1, "begin": 0, "end": v.type.shape[1]},
                              base=f"{v.name}_unpad")
                nodes.append(s)
                sliced[v] = s.outputs[0]
            return sliced[v]
        return renamed.get(v, v)

    for n in g.nodes:
        found = info.get(id(n))
        if found is None:
            n.inputs = [read(v) for v in n.inputs]
            nodes.append(n)
            continue
        attrs, residual, depthwise = found
        x, y = n.inputs[0], n.outputs[0]
        out_pad = y in chosen
        data_pad = x in padded and (out_pad or not depthwise)   # a depthwise one pads both or neither
        if not out_pad and not data_pad:
            n.inputs = [read(v) for v in n.inputs]
            nodes.append(n)
            continue
        f = padded_channels(y.type.shape[1]) if out_pad else y.type.shape[1]
        c = padded[x].type.shape[1] if data_pad else x.type.shape[1]
        params = list(n.inputs[1:len(n.inputs) - residual])
        w = np.asarray(producer[params[0]].attrs["value"])
        w = _padded(w, 0, f) if depthwise else _padded(_padded(w, 0, f), 1, c)
        new_params = [w] + [_padded(np.asarray(producer[b].attrs["value"]), 0, f) for b in params[1:]]
        consts = [const_node(names, a, f"{p.name}_padded") for a, p in zip(new_params, params)]
        nodes.extend(consts)
        conv_attrs = dict(attrs, num_filter=f, num_group=f if depthwise else attrs.get("num_group", 1))
        inputs = [padded[x] if data_pad else read(x)] + [k.outputs[0] for k in consts]
        if residual:
            r = n.inputs[-1]
            if out_pad and r not in padded:
                raise AssertionError(f"pad_channels: {n.name}: residual {r.name} is not padded")
            inputs.append(padded[r] if out_pad else read(r))
        if n.op.name == "Convolution":
            node = make_node(names, "Convolution", inputs, conv_attrs, base=n.name)
        else:
            node = make_node(names, "_with_epilogue", inputs, dict(n.attrs, inner_attrs=conv_attrs), base=n.name)
        nodes.append(node)
        if out_pad:
            padded[y] = node.outputs[0]
        else:
            renamed[y] = node.outputs[0]
    g.outputs = [read(v) for v in g.outputs]
    used = {v for n in nodes for v in n.inputs} | set(g.outputs)
    g.nodes = [n for n in nodes if n.op.name != "_const" or any(v in used for v in n.outputs)]
    return g, {"padded_values": len(chosen), "slices": len(sliced)}
