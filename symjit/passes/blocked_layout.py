"""Channel-blocked layout: chains of pointwise and 3x3 depthwise convolutions run in NCHW16c.

Candidates (after epilogue fusion): 2-D channel-first float32 convolutions -- `Convolution`,
or a `_with_epilogue` of one whose epilogue is exactly relu or relu6 (clip to [0, 6]) of the
result -- with compile-time constant weights (and bias), input and output channels multiples
of 16, that are either
  * pointwise: 1x1, stride 1, no padding, one group; also with an epilogue that adds one
    array of the output's shape before the optional activation (a residual connection:
    MobileNetV2's linear bottleneck + x), or
  * depthwise: 3x3, groups == input channels == output channels, padding 1, stride 1 or 2,
    dilation 1.
Candidates joined producer -> consumer (one reads the other's output as its data or as its
residual) form chains; the residual enters the kernel blocked (converted if no chain member
produces it); each chain of at least MIN_CHAIN convolutions with a depthwise one among them becomes
`_conv_blocked` nodes (ops/blocked.py) whose data and outputs are blocked, with one
`_to_blocked` for each value that enters the chain and one `_from_blocked` for each chain
output that something else reads (another node, or the graph's outputs). A value entering a
chain that only the chain reads and that an entry convolution produces (`entry_candidate`:
fewer than 16 input channels, one group, no dilation, equal strides, constant weights, output
channels a multiple of 16 -- a network's stem) needs no conversion: that convolution becomes a
`_conv_blocked` with NCHW data (`data_blocked` false) that stores the blocked layout directly.

Why: in NCHW a 3x3 depthwise output vector runs along a row, so its taps are shifted, masked,
line-crossing loads (stride 2: permutes too); in NCHW16c each tap is one aligned vector of 16
channels and stride 2 costs what stride 1 does. Measured in mobilenet1.0 on a Zen 5 (AVX-512)
host, in graph, one thread (benchmarks/bench_blocked_layout.py, blocked / NCHW time): the 3x3
depthwise layers 0.23-0.40 from 56x56 down, 0.97 at 64 channels 112x112 stride 2, 0.80 at 32
channels 112x112 stride 1; the pointwise layers between them 0.76-0.99 (tiles of pixels x
filter vectors here, of filters x pixel vectors in NCHW), 1.05-1.07 at 7x7; the stem as an
entry convolution 0.65 (it also saves the conversion into the layout, 2-4% of the call);
the whole call 0.89. A lone pointwise convolution, or a chain without a depthwise one, would
only pay for the conversions.

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

from ..ir.graph import Graph, Node, Value
from ..ir.target import AVX512_KERNELS, only_for
from ..ops.blocked import BLOCK, blocked_shape
from ..ops.nn_conv import conv_geometry
from .rewrite import NameSource, convolution_activation, make_node, replace_uses

#: the fewest convolutions a chain needs to be worth its two layout conversions
MIN_CHAIN = 2


@dataclass(frozen=True)
class Candidate:
    """A convolution the blocked kernels can run: its attrs, activation (ops/fused.py ACT_*),
    kind, and whether it adds a residual (its node's last input) before the activation."""
    conv_attrs: dict
    act: int
    depthwise: bool
    residual: bool = False


def _const_input(v: Value, producer: dict) -> bool:
    n = producer.get(v)
    return n is not None and n.op.name == "_const"


def _conv2d(n: Node, producer: dict):
    """(attrs, activation, residual, geometry, C, F) of a 2-D NCHW float32 convolution with an
    optional activation (relu, relu6) epilogue, maybe of the result plus a residual, and
    constant weights (and bias), else None."""
    found = convolution_activation(n)
    if found is None:
        return None
    attrs, act, residual = found
    if len(attrs["kernel"]) != 2 or len(n.outputs) != 1:
        return None
    geo = conv_geometry("Convolution", attrs)
    if geo["layout"] not in (None, "NCHW"):
        return None
    x, y = n.inputs[0], n.outputs[0]
    if not all(v.type.known and v.type.dtype == "float32" and len(v.type.shape) == 4 for v in (x, y)):
        return None
    if not all(_const_input(v, producer) for v in n.inputs[1:len(n.inputs) - residual]):
        return None
    if residual and n.inputs[-1].type.shape != y.type.shape:
        return None
    return attrs, act, residual, geo, x.type.shape[1], y.type.shape[1]


def entry_candidate(n: Node, producer: dict) -> Candidate | None:
    """A convolution that can store the blocked layout from NCHW data (module docstring)."""
    found = _conv2d(n, producer)
    if found is None:
        return None
    attrs, act, residual, geo, c, f = found
    if (not residual and 0 < c < BLOCK and f % BLOCK == 0 and f > 0 and geo["num_group"] == 1
            and geo["dilate"] == (1, 1) and geo["stride"][0] == geo["stride"][1]):
        return Candidate(attrs, act, False)
    return None


def candidate(n: Node, producer: dict) -> Candidate | None:
    """The module docstring's conditions for one node."""
    found = _conv2d(n, producer)
    if found is None:
        return None
    attrs, act, residual, geo, c, f = found
    if c % BLOCK or f % BLOCK or c == 0 or f == 0:
        return None
    plain = geo["dilate"] == (1, 1)
    if plain and geo["num_group"] == 1 and geo["kernel"] == (1, 1) and geo["stride"] == (1, 1) and geo["pad"] == (0, 0):
        return Candidate(attrs, act, False, residual)
    if (not residual and plain and geo["num_group"] == c == f and geo["kernel"] == (3, 3) and geo["pad"] == (1, 1)
            and geo["stride"] in ((1, 1), (2, 2))):
        return Candidate(attrs, act, True)
    return None


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
        for x in (n.inputs[0], n.inputs[-1]) if found[id(n)].residual else (n.inputs[0],):
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
def blocked_layout(g: Graph, enabled: bool = True) -> tuple[Graph, dict]:
    """The module docstring's rewrite; stats: `blocked_convolutions`, `layout_conversions`."""
    if not enabled:
        return g, {"blocked_convolutions": 0, "layout_conversions": 0}
    g = g.copy()
    producer = {v: n for n in g.nodes for v in n.outputs}
    found = {id(n): c for n in g.nodes if (c := candidate(n, producer)) is not None}
    chosen: set[int] = set()
    for chain in _chains(g, found, producer):
        if len(chain) >= MIN_CHAIN and any(found[id(n)].depthwise for n in chain):
            chosen.update(id(n) for n in chain)
    if not chosen:
        return g, {"blocked_convolutions": 0, "layout_conversions": 0}
    readers: dict = {}
    for n in g.nodes:
        for v in n.inputs:
            readers.setdefault(v, []).append(n)
    graph_outputs = set(g.outputs)
    entries = {}                         # id -> Candidate of the entry convolutions (docstring)
    for n in g.nodes:
        if id(n) in chosen:
            x = n.inputs[0]
            p = producer.get(x)
            if (p is not None and id(p) not in chosen and x not in graph_outputs
                    and all(id(r) in chosen for r in readers[x])
                    and (e := entry_candidate(p, producer)) is not None):
                entries[id(p)] = e
    names = NameSource(g)
    blocked: dict[Value, Value] = {}     # NCHW value -> its blocked twin
    mapping: dict[Value, Value] = {}     # chain outputs read elsewhere -> their NCHW conversion
    nodes: list[Node] = []
    conversions = 0
    for n in g.nodes:
        if id(n) in entries:
            node = _blocked_node(names, n, entries[id(n)], n.inputs[0], data_blocked=False)
            nodes.append(node)
            blocked[n.outputs[0]] = node.outputs[0]
            continue
        if id(n) not in chosen:
            nodes.append(n)
            continue
        c = found[id(n)]
        y = n.outputs[0]
        for x in (n.inputs[0], n.inputs[-1]) if c.residual else (n.inputs[0],):
            if x not in blocked:
                to = make_node(names, "_to_blocked", [x], {}, base=f"{n.name}_to_blocked")
                nodes.append(to)
                blocked[x] = to.outputs[0]
                conversions += 1
        node = _blocked_node(names, n, c, blocked[n.inputs[0]],
                             residual=blocked[n.inputs[-1]] if c.residual else None)
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
    return g, {"blocked_convolutions": len(chosen) + len(entries), "layout_conversions": conversions}


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
