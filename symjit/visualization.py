"""Pictures and summaries of networks: MXNet's `mx.viz` plus views of what the compiler did.

* `plot_network(symbol, ...)` returns a `graphviz.Digraph` drawn as MXNet 1.9.1 draws it:
  one box per operator (labels such as ``Convolution\\n7x7/2x2, 64``, ``FullyConnected\\n10``,
  ``Activation\\nrelu``), ovals for data inputs, weight-like variables hidden, every edge pointing
  from a node back to its input (``dir=back``), labelled with the input's shape (without the
  batch dimension) when `shape` is given and with its dtype when `dtype` is given.
  `optimized=True` draws the graph after the inference pass pipeline instead, one cluster per
  fusion group (its member operators inside).
* `print_summary(symbol, shape)` prints MXNet's layer table: layer (type), output shape,
  parameter count, previous layer(s), and the total parameter count.
* `memory_plan_svg(plan)` / `memory_plan_png(plan)` / `plot_memory_plan(...)`: the memory plan
  as buffers over time (x: step of the schedule, y: arena offset), one rectangle per value.

The MXNet-compatible functions work on the Symbol's MXNet JSON (`Symbol.tojson()`), exactly the
data MXNet's own functions read, so node names, labels and edges agree with MXNet's.
"""
from __future__ import annotations

import copy
import json
import re
import struct
import warnings
import zlib
from typing import Mapping, Sequence

import numpy as np

from .base import MXNetError

__all__ = ["plot_network", "print_summary", "plot_memory_plan", "memory_plan_svg", "memory_plan_png"]

#: MXNet's fill colours (inputs, conv/fc, activations, batchnorm, pooling, reshape-like, softmax, other)
_COLORS = ("#8dd3c7", "#fb8072", "#ffffb3", "#bebada", "#80b1d3", "#fdb462", "#b3de69", "#fccde5")

#: variables whose names end like this are parameters, hidden by default
_WEIGHT_SUFFIXES = ('_weight', '_bias', '_beta', '_gamma', '_moving_var', '_moving_mean',
                    '_running_var', '_running_mean')

_DEFAULT_NODE_ATTR = {"shape": "box", "fixedsize": "true", "width": "1.3", "height": "0.8034",
                      "style": "filled"}


def _ints(text: str) -> list[str]:
    """The decimal numbers of an MXNet tuple attribute such as '(7, 7)', as strings."""
    return re.findall(r"\d+", text)


def _check_symbol(symbol) -> None:
    from .symbol import Symbol
    if not isinstance(symbol, Symbol):
        raise TypeError("symbol must be a Symbol")


def _shape_table(symbol, shape: Mapping) -> dict:
    """Output name ('fc1_output', 'data', ...) -> inferred shape, for every internal output."""
    internals = symbol.get_internals()
    _, out_shapes, _ = internals.infer_shape(**shape)
    if out_shapes is None:
        raise ValueError("Input shape is incomplete")
    return dict(zip(internals.list_outputs(), out_shapes))


def _type_table(symbol, dtype: Mapping) -> dict:
    """Output name -> inferred dtype name, for every internal output."""
    internals = symbol.get_internals()
    _, out_types, _ = internals.infer_type(**dtype)
    if out_types is None:
        raise ValueError("Input type is incomplete")
    return {k: np.dtype(t).name for k, t in zip(internals.list_outputs(), out_types)}


def _output_key(node: dict) -> str:
    """The internal-output name of the (last) output of a JSON node."""
    if node["op"] == "null":
        return node["name"]
    key = node["name"] + "_output"
    attrs = node.get("attrs") or {}
    if "num_outputs" in attrs:
        key += str(int(attrs["num_outputs"]) - 1)
    return key


def _node_style(node: dict) -> tuple[str, str]:
    """(label, fill colour) of an operator node, as MXNet 1.9.1 draws it."""
    op, attrs = node["op"], node.get("attrs") or {}
    if op == "Convolution":
        kernel = "x".join(_ints(attrs["kernel"]))
        stride = "x".join(_ints(attrs["stride"])) if "stride" in attrs else "1"
        return f"Convolution\n{kernel}/{stride}, {attrs['num_filter']}", _COLORS[1]
    if op == "FullyConnected":
        return f"FullyConnected\n{attrs['num_hidden']}", _COLORS[1]
    if op == "BatchNorm":
        return node["name"], _COLORS[3]
    if op == "Activation":
        return f"Activation\n{attrs['act_type']}", _COLORS[2]
    if op == "LeakyReLU":
        return f"LeakyReLU\n{attrs.get('act_type', 'Leaky')}", _COLORS[2]
    if op == "Pooling":
        kernel = "x".join(_ints(attrs["kernel"])) if "kernel" in attrs else "[]"
        stride = "x".join(_ints(attrs["stride"])) if "stride" in attrs else "1"
        return f"Pooling\n{attrs['pool_type']}, {kernel}/{stride}", _COLORS[4]
    if op in ("Concat", "Flatten", "Reshape"):
        return node["name"], _COLORS[5]
    if op == "Softmax":
        return node["name"], _COLORS[6]
    if op == "Custom":
        return attrs["op_type"], _COLORS[7]
    return node["name"], _COLORS[7]


def plot_network(symbol, title: str = "plot", save_format: str = "pdf", shape: Mapping | None = None,
                 dtype: Mapping | None = None, node_attrs: Mapping | None = None, hide_weights: bool = True,
                 optimized: bool = False, params: Mapping | None = None):
    """A `graphviz.Digraph` of the computation graph of `symbol` (see the module docstring).

    `shape`: input name -> shape, to label edges with shapes; `dtype`: input name -> dtype, to
    label them with types; `node_attrs`: graphviz attributes overriding the node defaults;
    `hide_weights`: hide variables named like parameters (`*_weight`, `*_bias`, ...).
    `optimized=True` (needs `shape`) draws the graph after symjit's inference pipeline, with
    `params` (name -> array) bound as constants, fusion groups as clusters.
    """
    try:
        from graphviz import Digraph
    except ImportError:
        raise ImportError("Draw network requires graphviz library") from None
    _check_symbol(symbol)
    if optimized:
        return _plot_optimized(symbol, title, save_format, shape, dtype, node_attrs, params)
    shape_dict = _shape_table(symbol, shape) if shape is not None else None
    type_dict = _type_table(symbol, dtype) if dtype is not None else None
    nodes = json.loads(symbol.tojson(), strict=False)["nodes"]
    names = [n["name"] for n in nodes]
    if len(names) != len(set(names)):
        seen: set = set()
        repeated = {n for n in names if n in seen or seen.add(n)}
        warnings.warn("There are multiple variables with the same name in your graph, this may result in "
                      "cyclic graph. Repeated names: " + ",".join(repeated), RuntimeWarning)
    base_attr = dict(_DEFAULT_NODE_ATTR)
    base_attr.update(node_attrs or {})
    dot = Digraph(name=title, format=save_format)
    hidden: set = set()
    for node in nodes:
        attr = copy.deepcopy(base_attr)
        if node["op"] == "null":
            if node["name"].endswith(_WEIGHT_SUFFIXES):
                if hide_weights:
                    hidden.add(node["name"])
                continue   # not drawn; when shown (hide_weights=False) graphviz draws a plain oval
            attr["shape"] = "oval"
            label, attr["fillcolor"] = node["name"], _COLORS[0]
        else:
            label, attr["fillcolor"] = _node_style(node)
        dot.node(name=node["name"], label=label, **attr)
    for node in nodes:
        if node["op"] == "null":
            continue
        inputs = node["inputs"]
        if node["op"] == "_contrib_BilinearResize2D":
            inputs = inputs[:1]
        for item in inputs:
            src = nodes[item[0]]
            if src["name"] in hidden:
                continue
            attr = {"dir": "back", "arrowtail": "open", "label": ""}
            key = _output_key(src)
            if shape_dict is not None:
                attr["label"] = "x".join(str(d) for d in shape_dict[key][1:])
            if type_dict is not None:
                attr["label"] += f"({type_dict[key]})"
            dot.edge(tail_name=node["name"], head_name=src["name"], **attr)
    return dot


# --------------------------------------------------------------------------------------------
# print_summary
# --------------------------------------------------------------------------------------------

def _layer_params(node: dict, pre_filter: int, shape_dict: dict | None) -> int:
    """Parameter count MXNet's summary attributes to a layer (from its attributes and the
    channel count of its inputs)."""
    op, attrs = node["op"], node.get("attrs") or {}
    no_bias = attrs.get("no_bias") == "True"
    if op == "Convolution":
        count = pre_filter * int(attrs["num_filter"]) // int(attrs.get("num_group", "1"))
        for k in _ints(attrs["kernel"]):
            count *= int(k)
        return count if no_bias else count + int(attrs["num_filter"])
    if op == "FullyConnected":
        return (pre_filter if no_bias else pre_filter + 1) * int(attrs["num_hidden"])
    if op == "BatchNorm":
        return int(shape_dict[node["name"] + "_output"][1]) * 2 if shape_dict is not None else 0
    if op == "Embedding":
        return int(attrs["input_dim"]) * int(attrs["output_dim"])
    return 0


def print_summary(symbol, shape: Mapping | None = None, line_length: int = 120,
                  positions: Sequence[float] = (.44, .64, .74, 1.)) -> None:
    """Print MXNet's summary table of `symbol` (layer, output shape, parameters, previous
    layer) and the total parameter count; `shape` (input name -> shape) enables shapes and
    the shape-dependent counts."""
    _check_symbol(symbol)
    shape_dict = _shape_table(symbol, shape) if shape is not None else None
    conf = json.loads(symbol.tojson(), strict=False)
    nodes = conf["nodes"]
    heads = set(conf["heads"][0])
    positions = list(positions)
    if positions[-1] <= 1:
        positions = [int(line_length * p) for p in positions]

    def row(fields) -> None:
        line = ""
        for field, stop in zip(fields, positions):
            line = (line + str(field))[:stop]
            line += " " * (stop - len(line))
        print(line)

    print("_" * line_length)
    row(["Layer (type)", "Output Shape", "Param #", "Previous Layer"])
    print("=" * line_length)
    total = 0
    for i, node in enumerate(nodes):
        op = node["op"]
        if op == "null" and i > 0:
            continue
        out_shape: Sequence = []
        if (op != "null" or i in heads) and shape_dict is not None:
            key = node["name"] + "_output" if op != "null" else node["name"]
            out_shape = shape_dict.get(key, [])[1:] if key in shape_dict else []
        previous, pre_filter = [], 0
        if op != "null":
            for item in node["inputs"]:
                src = nodes[item[0]]
                if src["op"] == "null" and item[0] not in heads:
                    continue
                previous.append(src["name"])
                if shape_dict is not None:
                    key = src["name"] + "_output" if src["op"] != "null" else src["name"]
                    if key in shape_dict and len(shape_dict[key]) > 1:
                        pre_filter += int(shape_dict[key][1])
        count = _layer_params(node, pre_filter, shape_dict)
        total += count
        row([f"{node['name']}({op})", "x".join(str(d) for d in out_shape), count,
             previous[0] if previous else ""])
        for extra in previous[1:]:
            row(["", "", "", extra])
        print("=" * line_length if i == len(nodes) - 1 else "_" * line_length)
    print(f"Total params: {total}")
    print("_" * line_length)


# --------------------------------------------------------------------------------------------
# The optimized graph
# --------------------------------------------------------------------------------------------

def _optimized_graph(symbol, shape: Mapping, dtype: Mapping | None, params: Mapping | None):
    """The graph after the inference pipeline (params bound as constants)."""
    from .compiler import _bound_constants, _to_graph, llvm_target
    from .passes.manager import PassManager
    g, _ = _to_graph(symbol, shape, {k: np.dtype(v).name for k, v in (dtype or {}).items()})
    consts = _bound_constants(g, {}, params)
    return PassManager("inference", target=llvm_target(None)).run(g, consts or None)


def _ir_label(node) -> str:
    return f"{node.op.name}\n{node.name}"


def _plot_optimized(symbol, title, save_format, shape, dtype, node_attrs, params):
    """Digraph of the optimized IR: graph inputs as ovals, constants hidden, one box per node,
    each fusion group (ops/fused.py FUSED_OPS) a cluster listing its members."""
    from graphviz import Digraph
    from .ops.fused import FUSED_OPS
    if shape is None:
        raise MXNetError("plot_network(optimized=True) needs `shape` (input name -> shape) to run the passes")
    g = _optimized_graph(symbol, shape, dtype, params)
    base_attr = dict(_DEFAULT_NODE_ATTR, fixedsize="false")
    base_attr.update(node_attrs or {})
    dot = Digraph(name=title, format=save_format)
    dot.attr(compound="true")
    producer: dict = {}
    for v in g.inputs:
        dot.node(name=v.name, label=v.name, **dict(base_attr, shape="oval", fillcolor=_COLORS[0]))
        producer[v] = v.name
    for n in g.nodes:
        if n.op.name == "_const":
            continue
        members = list(n.attrs.get("members") or ())
        if n.op.name in FUSED_OPS and members:
            with dot.subgraph(name=f"cluster_{n.name}") as c:
                c.attr(label=f"{n.op.name} {n.name}", style="rounded,dashed", color="#555555")
                prev = None
                for k, m in enumerate(members):
                    mid = f"{n.name}/m{k}"
                    c.node(name=mid, label=m, **dict(base_attr, fillcolor=_COLORS[1] if k == 0 and
                                                      n.op.name != "_fused_elemwise" else _COLORS[7]))
                    if prev is not None:
                        c.edge(mid, prev, dir="back", arrowtail="open", style="dotted")
                    prev = mid
            anchor = f"{n.name}/m{len(members) - 1}"
            head = f"{n.name}/m0"
        else:
            anchor = head = n.name
            color = _COLORS[1] if n.op.kernel in ("gemm", "conv") else _COLORS[7]
            dot.node(name=n.name, label=_ir_label(n), **dict(base_attr, fillcolor=color))
        for v in n.inputs:
            if v in producer:
                dot.edge(head, producer[v], dir="back", arrowtail="open", label=_type_label(v))
        for v in n.outputs:
            producer[v] = anchor
    for j, v in enumerate(g.outputs):
        if v in producer:
            out = f"__output{j}"
            dot.node(name=out, label=f"output {j}", **dict(base_attr, shape="oval", fillcolor=_COLORS[6]))
            dot.edge(out, producer[v], dir="back", arrowtail="open", label=_type_label(v))
    return dot


def _type_label(v) -> str:
    shape = v.type.shape
    return "" if shape is None else "x".join(str(d) for d in shape)


# --------------------------------------------------------------------------------------------
# Memory plan pictures
# --------------------------------------------------------------------------------------------

_PALETTE = ("#8dd3c7", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#bebada", "#ffffb3")


def _plan_boxes(g) -> tuple[list, int, int]:
    """([(name, offset, size, first step, end step)], arena bytes, steps) of a planned graph."""
    plan = g.annotations.get("memory_plan")
    if plan is None:
        raise MXNetError("memory plan picture: the graph has no memory plan; run the pass pipeline first")
    by_name = {v.name: off for v, off in plan.offsets.items()}
    boxes = [(iv.key, int(by_name[iv.key]), int(iv.size), int(iv.start), int(iv.end))
             for iv in plan.intervals if iv.key in by_name]
    steps = max([b[4] for b in boxes], default=1)
    return boxes, max(int(plan.arena_bytes), 1), max(steps, 1)


def memory_plan_svg(g, width: int = 800, height: int = 480, title: str = "memory plan") -> str:
    """SVG of the memory plan of an optimized graph: x = schedule step, y = arena offset; each
    value a rectangle from its first to one past its last step, as high as its size."""
    boxes, arena, steps = _plan_boxes(g)
    left, top, right, bottom = 70, 30, 10, 30
    pw, ph = width - left - right, height - top - bottom
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<title>{_xml(title)}</title>',
           f'<text x="{left}" y="18" font-size="13">{_xml(title)}: arena {arena} B, {len(boxes)} values, '
           f'{steps} steps</text>',
           f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>']
    for k, (name, off, size, s, e) in enumerate(boxes):
        x = left + pw * s / steps
        w = max(pw * (e - s) / steps, 1.0)
        y = top + ph * off / arena
        h = max(ph * size / arena, 1.0)
        out.append(f'<rect x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" height="{h:.2f}" '
                   f'fill="{_PALETTE[k % len(_PALETTE)]}" stroke="#333" stroke-width="0.5">'
                   f'<title>{_xml(name)}: {size} B at offset {off}, steps {s}..{e - 1}</title></rect>')
    out.append(f'<text x="{left}" y="{height - 10}">step 0</text>')
    out.append(f'<text x="{left + pw}" y="{height - 10}" text-anchor="end">step {steps}</text>')
    out.append(f'<text x="{left - 4}" y="{top + 10}" text-anchor="end">0 B</text>')
    out.append(f'<text x="{left - 4}" y="{top + ph}" text-anchor="end">{arena} B</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _rgb(color: str) -> tuple[int, int, int]:
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


def memory_plan_png(g, width: int = 800, height: int = 480) -> bytes:
    """PNG bytes of the same picture as `memory_plan_svg` (rectangles only, no text; written
    with zlib, no imaging library needed)."""
    boxes, arena, steps = _plan_boxes(g)
    img = np.full((height, width, 3), 255, dtype=np.uint8)
    left, top, pw, ph = 10, 10, width - 20, height - 20
    for k, (_, off, size, s, e) in enumerate(boxes):
        x0 = left + int(pw * s / steps)
        x1 = max(left + int(pw * e / steps), x0 + 1)
        y0 = top + int(ph * off / arena)
        y1 = max(top + int(ph * (off + size) / arena), y0 + 1)
        img[y0:y1, x0:x1] = _rgb(_PALETTE[k % len(_PALETTE)])
        img[y0:y1, [x0, x1 - 1]] = 51
        img[[y0, y1 - 1], x0:x1] = 51
    img[top, left:left + pw] = img[top + ph - 1, left:left + pw] = 0
    img[top:top + ph, left] = img[top:top + ph, left + pw - 1] = 0
    return _encode_png(img)


def _encode_png(img: np.ndarray) -> bytes:
    """An 8-bit RGB PNG of an (h, w, 3) uint8 array."""
    h, w, _ = img.shape
    raw = b"".join(b"\x00" + img[y].tobytes() for y in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def plot_memory_plan(symbol, shape: Mapping, path: str | None = None, params: Mapping | None = None,
                     dtype: Mapping | None = None, fmt: str = "svg"):
    """The memory-plan picture of `symbol` compiled for `shape`: SVG text or PNG bytes
    (`fmt`), also written to `path` when given."""
    if fmt not in ("svg", "png"):
        raise MXNetError(f"plot_memory_plan: format must be 'svg' or 'png', got {fmt!r}")
    _check_symbol(symbol)
    g = _optimized_graph(symbol, shape, dtype, params)
    data = memory_plan_svg(g) if fmt == "svg" else memory_plan_png(g)
    if path is not None:
        mode = "w" if fmt == "svg" else "wb"
        with open(path, mode) as f:
            f.write(data)
    return data
