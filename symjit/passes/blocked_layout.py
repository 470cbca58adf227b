"""Channel-blocked layout: chains of convolutions run in NCHW16c.

Candidates (after epilogue fusion): 2-D channel-first float32 convolutions -- `Convolution`,
or a `_with_epilogue` of one whose epilogue is exactly relu or relu6 (clip to [0, 6]) of the
result -- with compile-time constant weights (and bias), input and output channels multiples
of 16, no dilation, that are either
  * pointwise: 1x1, stride 1, no padding, one group;
  * depthwise: 3x3, groups == input channels == output channels, padding 1, stride 1 or 2;
  * general: one group, any kernel (1x7, 7x1, 5x5, 3x3, strided 1x1 ...), padding and stride
    (equal in both directions);
pointwise and general ones also with an epilogue that adds one array of the output's shape
before the optional activation (a residual connection: MobileNetV2's linear bottleneck + x,
ResNet's block). Candidates joined producer -> consumer (one reads the other's output as its
data or as its residual) form chains; the residual enters the kernel blocked (converted if no
chain member produces it). A chain of at least MIN_CHAIN convolutions moves when it has a
depthwise one (measured below); any chain, a lone convolution too, moves when the cost rule
`chain_pays` says its convolutions' estimated savings exceed the conversions it adds (an entry
convolution's output costs none); it becomes
`_conv_blocked` nodes (ops/blocked.py) whose data and outputs are blocked, with one
`_to_blocked` for each value that enters the chain and one `_from_blocked` for each chain
output that something else reads (another node, or the graph's outputs). A value entering a
chain that only the chain reads and that an entry convolution produces (`entry_candidate`:
fewer than 16 input channels, one group, no dilation, equal strides, constant weights, output
channels a multiple of 16 -- a network's stem; also one followed by a max pooling, `_conv_pool`,
with ENTRY_POOL_MIN_FILTERS filters or more, its pooling then blocked) needs no conversion: that convolution becomes a
`_conv_blocked` with NCHW data (`data_blocked` false) that stores the blocked layout directly.

Why: in NCHW a 3x3 depthwise output vector runs along a row, so its taps are shifted, masked,
line-crossing loads (stride 2: permutes too); in NCHW16c each tap is one aligned vector of 16
channels and stride 2 costs what stride 1 does. Measured in mobilenet1.0 on a Zen 5 (AVX-512)
host, in graph, one thread (benchmarks/bench_blocked_layout.py, blocked / NCHW time): the 3x3
depthwise layers 0.23-0.40 from 56x56 down, 0.97 at 64 channels 112x112 stride 2, 0.80 at 32
channels 112x112 stride 1; the pointwise layers between them 0.76-0.99 (tiles of pixels x
filter vectors here, of filters x pixel vectors in NCHW), 1.05-1.07 at 7x7; the stem as an
entry convolution 0.65 (it also saves the conversion into the layout, 2-4% of the call);
the whole call 0.89. A lone pointwise convolution would only pay for the conversions. General
convolutions (Inception v3, batch 8): see the *_SAVING constants.

Elementwise nodes (a fused group or a registry op) whose output is such a value and whose other
inputs are of its shape or constants broadcasting against it (per channel: a pre-activation
BatchNorm's scale and shift, DenseNet's; per pixel; scalars) join chains too, their constants
rearranged (`blocked_constant`): a DenseNet block then stays in the layout from its entry to its
exit instead of converting around every BatchNorm + relu (DenseNet-121, whole call, in one
process, 2 threads, Zen 5: 0.91 at batch 1, 0.90 at batch 8; benchmarks/bench_blocked_layout.py
style A/B). Such a node saves nothing itself; the cost rule counts only the conversions.

Targets: the pass manager runs it only for llvm targets whose kernel library has its AVX-512
kernels (`Target.kernels`); elsewhere the NCHW paths (the BLAS) are faster, although the
blocked kernels have portable loops too, and the CUDA target has no blocked kernels at all.

Guarantees: the graph computes the same values up to float reassociation (the blocked kernels
sum each output's products in another order than the NCHW ones; the interpreter's reference
runs the original ops); the node list stays topologically sorted; idempotent
(`_conv_blocked` nodes are not candidates).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.graph import Graph, Node, Value
from ..ir.target import AVX512_KERNELS, only_for
from ..ops.blocked import BLOCK, blocked_shape
from ..ops.conv_method import WINOGRAD, forward_conv_method
from ..ops.nn_conv import conv_geometry
from ..ops.registry import Elementwise, get_op
from .rewrite import NameSource, const_node, convolution_activation, is_constant, make_node, replace_uses

#: the fewest convolutions of a chain with a depthwise one that moves whatever the cost rule
#: says (a lone convolution moves where the cost rule says it pays)
MIN_CHAIN = 2

#: Estimated saving of a convolution in the layout per multiply-add, in units of the time of
#: converting one element between the layouts (chain_pays: ~1.5 ns). From Inception v3 batch 8
#: with every chain moved, one thread, in graph, on a Zen 5 (benchmarks/bench_blocked_layout.py,
#: blocked / NCHW time; noisy at load 4): pointwise 768 -> 128-192 at 17x17 0.54-0.60 (~0.026
#: ns saved per multiply-add), 1x7 0.57-0.67 and 7x1 0.8-1.0, 5x5 0.65-0.85 (~0.012), 3x3
#: stride 2 0.34-0.62 (~0.028), 3x3 stride 1 where NCHW runs Winograd 0.94-1.43 (a loss of up to
#: ~0.013 ns: such a convolution stays in NCHW when its loss exceeds converting its input and
#: output); depthwise 3x3 0.23-0.40 in mobilenet1.0 (NCHW depthwise runs at a few
#: multiply-adds per ns).
#: A convolution + max pooling (`_conv_pool`) becomes an entry convolution (its pooling then
#: blocked) only with at least this many filters: the entry kernel's tiles of one filter vector
#: do one multiply-add per broadcast input and lose to the fused NCHW kernel. Measured in graph,
#: one thread, Zen 5 (benchmarks/bench_layout_rule.py, entry + blocked pooling / `_conv_pool` +
#: conversion): LeNet's 1 -> 16 5x5 + 2x2 pooling at batch 8 0.35 / 0.17 ms; SqueezeNet 1.1's
#: 3 -> 64 3x3 stride 2 + 3x3 pooling stem, whole call 0.86-0.99.
ENTRY_POOL_MIN_FILTERS = 32

DEPTHWISE_SAVING = 0.1
POINTWISE_SAVING = 0.015
GENERAL_SAVING = 0.01
WINOGRAD_SAVING = -0.009


@dataclass(frozen=True)
class Candidate:
    """A convolution the blocked kernels can run: its attrs, activation (ops/fused.py ACT_*),
    kind, whether it adds a residual (its node's last input) before the activation, and its
    estimated saving in the layout (`saving`, in NCHW input elements moved; see `chain_pays`)."""
    conv_attrs: dict | None
    act: int
    depthwise: bool
    residual: bool = False
    saving: float = 0.0
    kind: str = "conv"      # "conv", "conv_pool", or "pool" / "concat" (module docstring; attrs None)


def layout_inputs(n: Node, c: Candidate) -> list[Value]:
    """The inputs of a candidate node that it reads in the blocked layout."""
    if c.kind == "concat":
        return list(n.inputs)
    if c.kind == "eltwise":   # the inputs of the output's shape (the others are constants)
        return [v for v in n.inputs if v.type.shape == n.outputs[0].type.shape]
    return [n.inputs[0], n.inputs[-1]] if c.residual else [n.inputs[0]]


def _nchw16(v: Value) -> bool:
    """A known float32 4-D value whose channels are a positive multiple of 16."""
    t = v.type
    return t.known and t.dtype == "float32" and len(t.shape) == 4 and t.shape[1] > 0 and t.shape[1] % BLOCK == 0


def _pool_attrs_fit(a: dict) -> bool:
    """A 2-D max / avg / sum pooling in NCHW (the blocked pooling kernel's)."""
    return (a["layout"] in (None, "NCHW") and a["pool_type"] in ("max", "avg", "sum")
            and (a["global_pool"] or len(a["kernel"]) == 2))


def layout_candidate(n: Node, producer: dict) -> Candidate | None:
    """A convolution (`candidate`), a 2-D max / avg / sum Pooling in NCHW, or a channel
    Concat, that can run in the layout (channels multiples of 16, float32)."""
    if n.op.name == "Pooling" and len(n.outputs) == 1:
        if _pool_attrs_fit(n.attrs) and _nchw16(n.inputs[0]) and _nchw16(n.outputs[0]):
            return Candidate(None, 0, False, kind="pool")
        return None
    if n.op.name == "Concat" and len(n.outputs) == 1:
        if n.attrs["dim"] == 1 and all(_nchw16(v) for v in list(n.inputs) + list(n.outputs)):
            return Candidate(None, 0, False, kind="concat")
        return None
    if _elementwise(n):
        return Candidate(None, 0, False, kind="eltwise") if _eltwise_fits(n, producer) else None
    return candidate(n, producer)


def _elementwise(n: Node) -> bool:
    return n.op.name == "_fused_elemwise" or isinstance(n.op, Elementwise)


def _eltwise_fits(n: Node, producer: dict) -> bool:
    """An elementwise node (a fused group or a registry op) with one float32 NCHW output whose
    channels are a multiple of 16, each input either of the output's shape or a constant that
    broadcasts against it (per channel: BatchNorm's scale and shift; per pixel; a scalar)."""
    if len(n.outputs) != 1 or not _nchw16(n.outputs[0]):
        return False
    y = n.outputs[0].type.shape
    for v in n.inputs:
        t = v.type
        if not t.known or t.dtype != "float32":
            return False
        if t.shape == y:
            continue
        if not is_constant(v, producer) or len(t.shape) > 4:
            return False
        padded = (1,) * (4 - len(t.shape)) + tuple(t.shape)
        if any(d not in (1, full) for d, full in zip(padded, y)):
            return False
    return True


def blocked_constant(value: np.ndarray) -> np.ndarray:
    """A constant that broadcasts against an NCHW value (rank <= 4), rearranged to broadcast
    the same way against its NCHW16c twin: (a, C, h, w) -> (a, C/16, h, w, 16), and
    (a, 1, h, w) -> (a, 1, h, w, 1)."""
    a, c, h, w = (1,) * (4 - value.ndim) + value.shape
    v = value.reshape(a, c, h, w)
    if c == 1:
        return np.ascontiguousarray(v.reshape(a, 1, h, w, 1))
    return np.ascontiguousarray(v.reshape(a, c // BLOCK, BLOCK, h, w).transpose(0, 1, 3, 4, 2))


def _conv_part(n: Node):
    """(Convolution attrs, activation, residual, convolution output shape) of a convolution
    node (convolution_activation's), or of the convolution inside a `_conv_pool`, else None."""
    if n.op.name == "_conv_pool":
        attrs = n.attrs["conv_attrs"]
        shapes = [v.type.shape for v in n.inputs]
        if any(s is None for s in shapes):
            return None
        _, (y,) = get_op("Convolution").infer_shape(attrs, shapes)
        return attrs, int(n.attrs["relu"]), False, tuple(y)
    found = convolution_activation(n)
    return None if found is None else found + (n.outputs[0].type.shape,)


def _conv2d(n: Node, producer: dict):
    """(attrs, activation, residual, geometry, C, F, convolution output shape) of a 2-D NCHW
    float32 convolution with an optional activation (relu, relu6) epilogue, maybe of the result
    plus a residual, and constant weights (and bias), else None."""
    found = _conv_part(n)
    if found is None:
        return None
    attrs, act, residual, y_shape = found
    if len(attrs["kernel"]) != 2 or len(n.outputs) != 1:
        return None
    geo = conv_geometry("Convolution", attrs)
    if geo["layout"] not in (None, "NCHW"):
        return None
    x, y = n.inputs[0], n.outputs[0]
    if not all(v.type.known and v.type.dtype == "float32" and len(v.type.shape) == 4 for v in (x, y)):
        return None
    if not all(is_constant(v, producer) for v in n.inputs[1:len(n.inputs) - residual]):
        return None
    if residual and n.inputs[-1].type.shape != y.type.shape:
        return None
    return attrs, act, residual, geo, x.type.shape[1], y_shape[1], y_shape


def entry_candidate(n: Node, producer: dict, with_pool: bool = True) -> Candidate | None:
    """A convolution that can store the blocked layout from NCHW data (module docstring), also
    a `_conv_pool` (its pooling then runs blocked) unless `with_pool` is false."""
    found = _conv2d(n, producer)
    if found is None:
        return None
    attrs, act, residual, geo, c, f, _ = found
    kind = "conv"
    if n.op.name == "_conv_pool":
        if not with_pool or not _pool_attrs_fit(n.attrs["pool_attrs"]) or f < ENTRY_POOL_MIN_FILTERS:
            return None
        kind = "conv_pool"
    if (not residual and 0 < c < BLOCK and f % BLOCK == 0 and f > 0 and geo["num_group"] == 1
            and geo["dilate"] == (1, 1) and geo["stride"][0] == geo["stride"][1]):
        return Candidate(attrs, act, False, kind=kind)
    return None


def candidate(n: Node, producer: dict) -> Candidate | None:
    """The module docstring's conditions for one convolution node (a `_conv_pool`: its
    convolution, plain or general, and its pooling as `pool_candidate`'s)."""
    found = _conv2d(n, producer)
    if found is None:
        return None
    attrs, act, residual, geo, c, f, y_shape = found
    if c % BLOCK or f % BLOCK or c == 0 or f == 0 or geo["dilate"] != (1, 1):
        return None
    kind = "conv"
    if n.op.name == "_conv_pool":
        if not _pool_attrs_fit(n.attrs["pool_attrs"]) or geo["num_group"] != 1:
            return None
        kind = "conv_pool"
    macs = float(np.prod(y_shape)) * float(np.prod(n.inputs[1].type.shape[1:]))
    if geo["num_group"] == 1 and geo["kernel"] == (1, 1) and geo["stride"] == (1, 1) and geo["pad"] == (0, 0):
        return Candidate(attrs, act, False, residual, POINTWISE_SAVING * macs, kind)
    if (not residual and geo["num_group"] == c == f and geo["kernel"] == (3, 3) and geo["pad"] == (1, 1)
            and geo["stride"] in ((1, 1), (2, 2))):
        return Candidate(attrs, act, True, False, DEPTHWISE_SAVING * macs)
    if geo["num_group"] == 1 and geo["stride"][0] == geo["stride"][1]:
        saving = (WINOGRAD_SAVING if _winograd_in_nchw(geo, c, f, y_shape) else GENERAL_SAVING) * macs
        if saving < 0 and -saving > float(np.prod(n.inputs[0].type.shape)) + float(np.prod(y_shape)):
            return None   # it loses more in the layout than converting around it costs
        return Candidate(attrs, act, False, residual, saving, kind)
    return None


def _winograd_in_nchw(geo, c: int, f: int, out_shape) -> bool:
    """Whether the NCHW path runs this convolution with its Winograd kernel (the pass runs only
    for targets whose kernel library has the AVX-512 tiles)."""
    return forward_conv_method(out_shape[0], c, 1, f, geo["kernel"], geo["stride"], geo["dilate"], out_shape[2:],
                               tiles=True) == WINOGRAD


def chain_pays(chain: list[Node], found: dict, producer: dict, readers: dict, graph_outputs: set,
               entry_pool: bool = True) -> bool:
    """The cost rule: a chain moves into the layout when its convolutions' estimated savings
    (`Candidate.saving`, in the units of one element converted) exceed the conversions it adds:
    one per element of each value entering the chain (not produced by a chain member) and of
    each member output read outside the chain, except a value an entry convolution would store
    blocked (`entry_candidate`; read only by the chain). Values produced by another chosen
    chain are counted too (a slight overestimate: they may be converted once for both)."""
    members = {id(n) for n in chain}
    entering, leaving = set(), set()
    for n in chain:
        for x in layout_inputs(n, found[id(n)]):
            p = producer.get(x)
            if p is None or (id(p) not in members
                             and not _entry_for(x, p, members, producer, readers, graph_outputs, entry_pool)):
                entering.add(x)
        y = n.outputs[0]
        if y in graph_outputs or any(id(r) not in members for r in readers.get(y, [])):
            leaving.add(y)
    conversions = sum(float(np.prod(v.type.shape)) for v in entering | leaving)
    return sum(found[id(n)].saving for n in chain) > conversions


def _entry_for(x: Value, p: Node, members: set, producer: dict, readers: dict, graph_outputs: set,
               with_pool: bool = True) -> bool:
    """Whether x's producer p (outside the chosen nodes `members`) would become an entry
    convolution storing x blocked: x is no graph output, only chosen nodes read it, and p is
    an `entry_candidate`."""
    return (x not in graph_outputs and all(id(r) in members for r in readers[x])
            and entry_candidate(p, producer, with_pool) is not None)


def _chains(g: Graph, found: dict, producer: dict) -> list[list[Node]]:
    """Candidates grouped by producer -> consumer data edges (union-find), in graph order."""
    parent = {id(n): id(n) for n in g.nodes if id(n) in found}

    def root(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for n in g.nodes:
        if id(n) not in found:
            continue
        for x in layout_inputs(n, found[id(n)]):
            p = producer.get(x)
            if p is not None and id(p) in found:
                parent[root(id(n))] = root(id(p))
    groups: dict = {}
    for n in g.nodes:
        if id(n) in found:
            groups.setdefault(root(id(n)), []).append(n)
    return list(groups.values())


@only_for(lambda t: t.kind == "llvm" and AVX512_KERNELS in t.kernels,
          "llvm targets whose kernel library has its AVX-512 kernels")
def blocked_layout(g: Graph, enabled: bool = True, cost_rule: bool = True, lone: bool = True,
                   entry_pool: bool = True, eltwise: bool = True) -> tuple[Graph, dict]:
    """The module docstring's rewrite; stats: `blocked_convolutions`, `layout_conversions`.
    A chain of at least MIN_CHAIN convolutions with a depthwise one always moves (measured:
    module docstring); others where `chain_pays` (a lone convolution only with `lone`), or every
    chain when `cost_rule` is false (for tests). `entry_pool` false: no `_conv_pool` entry
    convolutions (`lone` and `entry_pool` false: the rule before both, benchmarks compare);
    `eltwise` false: elementwise nodes stay in NCHW (the rule before them, benchmarks compare)."""
    if not enabled:
        return g, {"blocked_convolutions": 0, "layout_conversions": 0}
    g = g.copy()
    producer = {v: n for n in g.nodes for v in n.outputs}
    found = {id(n): c for n in g.nodes if (c := layout_candidate(n, producer)) is not None
             and (eltwise or c.kind != "eltwise")}
    readers: dict = {}
    for n in g.nodes:
        for v in n.inputs:
            readers.setdefault(v, []).append(n)
    graph_outputs = set(g.outputs)
    chosen: set[int] = set()
    for chain in _chains(g, found, producer):
        convs = [n for n in chain if found[id(n)].kind in ("conv", "conv_pool")]
        if not convs or (len(convs) < MIN_CHAIN and not lone):
            continue
        if (not cost_rule or (len(convs) >= MIN_CHAIN and any(found[id(n)].depthwise for n in convs))
                or chain_pays(chain, found, producer, readers, graph_outputs, entry_pool)):
            chosen.update(id(n) for n in chain)
    if not chosen:
        return g, {"blocked_convolutions": 0, "layout_conversions": 0}
    entries = {}                         # id -> Candidate of the entry convolutions (docstring)
    for n in g.nodes:
        if id(n) in chosen:
            for x in layout_inputs(n, found[id(n)]):
                p = producer.get(x)
                if p is not None and id(p) not in chosen and _entry_for(x, p, chosen, producer, readers, graph_outputs,
                                                                          entry_pool):
                    entries[id(p)] = entry_candidate(p, producer, entry_pool)
    names = NameSource(g)
    blocked: dict[Value, Value] = {}     # NCHW value -> its blocked twin
    mapping: dict[Value, Value] = {}     # chain outputs read elsewhere -> their NCHW conversion
    nodes: list[Node] = []
    conversions = 0
    for n in g.nodes:
        if id(n) in entries:
            node = _blocked_node(names, n, entries[id(n)], n.inputs[0], data_blocked=False)
            if entries[id(n)].kind == "conv_pool":
                nodes.append(node)
                node = _pool_node(names, n, node.outputs[0])
            nodes.append(node)
            blocked[n.outputs[0]] = node.outputs[0]
            continue
        if id(n) not in chosen:
            nodes.append(n)
            continue
        c = found[id(n)]
        y = n.outputs[0]
        for x in layout_inputs(n, c):
            if x not in blocked:
                to = make_node(names, "_to_blocked", [x], {}, base=f"{n.name}_to_blocked")
                nodes.append(to)
                blocked[x] = to.outputs[0]
                conversions += 1
        if c.kind == "pool":
            node = make_node(names, "_pool_blocked", [blocked[n.inputs[0]]], {"pool_attrs": n.attrs, "members": (n.name,)},
                             base=f"{n.name}_blocked")
        elif c.kind == "concat":
            node = make_node(names, "Concat", [blocked[x] for x in n.inputs], {"dim": 1, "num_args": len(n.inputs)},
                             base=f"{n.name}_blocked")
        elif c.kind == "eltwise":
            inputs = []
            for x in n.inputs:
                if x.type.shape == y.type.shape:   # a layout input (converted above)
                    inputs.append(blocked[x])
                    continue
                const = const_node(names, blocked_constant(producer[x].attrs["value"]), f"{x.name}_blocked")
                nodes.append(const)
                inputs.append(const.outputs[0])
            node = make_node(names, n.op.name, inputs, n.attrs, base=f"{n.name}_blocked")
        else:
            node = _blocked_node(names, n, c, blocked[n.inputs[0]],
                                 residual=blocked[n.inputs[-1]] if c.residual else None)
            if c.kind == "conv_pool":
                nodes.append(node)
                node = _pool_node(names, n, node.outputs[0])
        if node.outputs[0].type.shape != blocked_shape("blocked_layout", y.type.shape):
            raise AssertionError(f"blocked_layout: {n.name}: blocked output {node.outputs[0].type.shape} "
                                 f"does not match {y.type.shape}")
        nodes.append(node)
        blocked[y] = node.outputs[0]
        if y in graph_outputs or any(id(r) not in chosen for r in readers.get(y, [])):
            back = make_node(names, "_from_blocked", [node.outputs[0]], {}, base=f"{n.name}_from_blocked")
            nodes.append(back)
            mapping[y] = back.outputs[0]
            conversions += 1
    g.nodes = nodes
    replace_uses(g, mapping)
    moved = sum(found[k].kind in ("conv", "conv_pool") for k in chosen)
    return g, {"blocked_convolutions": moved + len(entries), "layout_conversions": conversions}


def _pool_node(names: NameSource, n: Node, conv_out: Value) -> Node:
    """The `_pool_blocked` node of a `_conv_pool` n's pooling over its blocked convolution's
    output `conv_out`."""
    return make_node(names, "_pool_blocked", [conv_out], {"pool_attrs": n.attrs["pool_attrs"], "members": (n.name,)},
                     base=f"{n.name}_pool")


def _blocked_node(names: NameSource, n: Node, c: Candidate, data: Value, data_blocked: bool = True,
                  residual: Value | None = None) -> Node:
    """The `_conv_blocked` node computing n's convolution from `data` (plus the blocked
    `residual` when the candidate adds one)."""
    conv_inputs = list(n.inputs[1:len(n.inputs) - c.residual])
    extra = [residual] if c.residual else []
    return make_node(names, "_conv_blocked", [data] + conv_inputs + extra,
                     {"conv_attrs": c.conv_attrs, "relu": c.act, "num_args": 1 + len(conv_inputs),
                      "members": tuple(n.attrs.get("members", (n.name,))), "data_blocked": data_blocked,
                      "residual": c.residual},
                     base=f"{n.name}_blocked")
