"""MXNet's JSON graph format (nnvm): writing it byte-compatibly and reading every variant.

Format (written as dmlc's JSONWriter does, so a graph MXNet saved re-serialises identically):
```
{"nodes": [{"op": "null" | OPNAME, "name": ..., "attrs": {str: str}, "inputs": [[nid, index, version]]}],
 "arg_nodes": [nid of every variable], "node_row_ptr": [cumulative output counts],
 "heads": [[nid, index, version]], "attrs": {"mxnet_version": ["int", 10901]}}
```
Reading accepts older variants: per-node "param" / "attr" instead of "attrs" (merged, hidden
keys such as `lr_mult` renamed to `__lr_mult__`), two-element input entries, no
`node_row_ptr` / `arg_nodes` / top-level `attrs`, and nodes listed out of order. Anything
malformed (missing keys, wrong types, unknown ops, bad attribute strings, references out of
range, cycles) raises MXNetError; loading never loops or crashes.
"""
from __future__ import annotations

import json

from ..base import MXNetError
from ..ops.registry import find_op, format_names
from ..util import is_np_shape
from .naming import HIDDEN_KEYS
from .symbol import Symbol, SymNode, topo_nodes

__all__ = ["to_json", "load_json", "MXNET_VERSION"]

MXNET_VERSION = 10901


# --------------------------------------------------------------------------------------------
# Writing (dmlc::JSONWriter layout)
# --------------------------------------------------------------------------------------------

def _str(s: str) -> str:
    out = ['"']
    for ch in s:
        out.append({"\r": "\\r", "\n": "\\n", "\\": "\\\\", "\t": "\\t", '"': '\\"'}.get(ch, ch))
    out.append('"')
    return "".join(out)


class _Writer:
    """dmlc::JSONWriter: multi-line containers put each item on a new line indented two spaces
    per level, items separated by ', '. Arrays of numbers / entries are multi-line above 10
    items, arrays of objects always; maps are multi-line above one key."""

    def __init__(self):
        self.parts: list[str] = []
        self.multi: list[bool] = []
        self.count: list[int] = []

    def sep(self):
        if not self.multi or self.multi[-1]:
            self.parts.append("\n" + " " * (2 * len(self.multi)))

    def begin(self, ch: str, multi: bool):
        self.parts.append(ch)
        self.multi.append(multi)
        self.count.append(0)

    def end(self, ch: str):
        multi, n = self.multi.pop(), self.count.pop()
        if multi and n:
            self.sep()
        self.parts.append(ch)

    def key(self, k: str):
        if self.count[-1]:
            self.parts.append(", ")
        self.sep()
        self.parts.append(_str(k) + ": ")
        self.count[-1] += 1

    def item(self):
        if self.count[-1]:
            self.parts.append(", ")
        self.count[-1] += 1
        self.sep()

    def int_array(self, xs):
        self.begin("[", len(xs) > 10)
        for x in xs:
            self.item()
            self.parts.append(str(int(x)))
        self.end("]")

    def str_map(self, d: dict):
        self.begin("{", len(d) > 1)
        for k in sorted(d):
            self.key(k)
            self.parts.append(_str(d[k]))
        self.end("}")

    def entries(self, es):
        self.begin("[", len(es) > 10)
        for e in es:
            self.item()
            self.int_array(e)
        self.end("]")


def _entry_versions(nodes) -> dict:
    """nnvm's variable versions: an op that mutates a variable (an auxiliary state) bumps its
    version; every entry reading a variable records the version current at that point.
    Returns {(id(node), input position): version} for non-zero versions."""
    current: dict[int, int] = {}
    out = {}
    for n in nodes:
        aux = n.aux_positions()
        for k, (c, _) in enumerate(n.inputs):
            if not c.is_variable:
                continue
            if k in aux:
                current[id(c)] = current.get(id(c), 0) + 1
            if current.get(id(c)):
                out[(id(n), k)] = current[id(c)]
    return out


def to_json(sym: Symbol) -> str:
    """The symbol in MXNet's JSON format (see the module docstring)."""
    nodes = topo_nodes(sym._outputs)
    index = {id(n): i for i, n in enumerate(nodes)}
    versions = _entry_versions(nodes)
    w = _Writer()
    w.begin("{", True)
    w.key("nodes")
    w.begin("[", True)  # dmlc: arrays of non-POD elements are always multi-line
    for n in nodes:
        w.item()
        w.begin("{", True)
        w.key("op")
        w.parts.append(_str("null" if n.op is None else n.op.name))
        w.key("name")
        w.parts.append(_str(n.name))
        if n.attrs:
            w.key("attrs")
            w.str_map(n.attrs)
        w.key("inputs")
        w.entries([(index[id(c)], i, versions.get((id(n), k), 0)) for k, (c, i) in enumerate(n.inputs)])
        w.end("}")
    w.end("]")
    w.key("arg_nodes")
    w.int_array([i for i, n in enumerate(nodes) if n.op is None])
    w.key("node_row_ptr")
    ptr = [0]
    for n in nodes:
        ptr.append(ptr[-1] + n.num_outputs())
    w.int_array(ptr)
    w.key("heads")
    w.entries([(index[id(n)], i, 0) for n, i in sym._outputs])
    w.key("attrs")
    w.begin("{", False)
    graph_attrs = [("mxnet_version", MXNET_VERSION)]
    if is_np_shape():   # MXNet marks graphs saved with numpy shape semantics
        graph_attrs.insert(0, ("is_np_shape", 1))
    for key, value in graph_attrs:
        w.key(key)
        w.begin("[", False)
        w.item()
        w.parts.append('"int"')
        w.item()
        w.parts.append(str(value))
        w.end("]")
    w.end("}")
    w.end("}")
    return "".join(w.parts)


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------

def _fail(msg: str):
    raise MXNetError(f"load_json: {msg}")


def _node_attrs(i: int, raw: dict) -> dict:
    attrs: dict[str, str] = {}
    for key in ("param", "attr", "attrs"):
        d = raw.get(key)
        if d is None:
            continue
        if not isinstance(d, dict):
            _fail(f"node {i}: {key!r} must be an object, got {type(d).__name__}")
        for k, v in d.items():
            if isinstance(v, (dict, list)) or v is None:
                _fail(f"node {i}: attribute {k!r} must be a string, got {v!r}")
            attrs[f"__{k}__" if k in HIDDEN_KEYS else k] = v if isinstance(v, str) else str(v)
    return attrs


def _subgraph_attrs(i: int, op_name: str, subgraphs) -> dict:
    """MXNet's per-node "subgraphs" (control flow bodies, in the op's `subgraph_attrs` order) as
    the subgraph attributes symjit's ops parse: {"inputs": the subgraph's variables in node order
    (MXNet's list_inputs order, which its *_locs attributes index), "graph": the graph}."""
    op = find_op(op_name)
    names = getattr(op, "subgraph_attrs", ()) if op is not None else ()
    if not isinstance(subgraphs, list) or len(subgraphs) != len(names):
        _fail(f"node {i} ({op_name}): expected {len(names)} subgraphs {list(names)}, got "
              f"{len(subgraphs) if isinstance(subgraphs, list) else type(subgraphs).__name__}")
    out = {}
    for name, graph in zip(names, subgraphs):
        nodes = graph.get("nodes") if isinstance(graph, dict) else None
        if not isinstance(nodes, list):
            _fail(f"node {i} ({op_name}): subgraph {name!r} has no 'nodes' list")
        order = graph.get("arg_nodes") or [k for k, n in enumerate(nodes) if n.get("op") == "null"]
        inputs = [nodes[k]["name"] for k in order]
        out[name] = json.dumps({"inputs": inputs, "graph": graph})
    return out


def _entry(where: str, e, n_nodes: int) -> tuple[int, int]:
    if (not isinstance(e, list) or len(e) not in (2, 3)
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in e)):
        _fail(f"{where}: an entry must be [node_id, output_index(, version)], got {e!r}")
    nid, idx = e[0], e[1]
    if not 0 <= nid < n_nodes:
        _fail(f"{where}: node id {nid} out of range (the graph has {n_nodes} nodes)")
    if idx < 0:
        _fail(f"{where}: negative output index {idx}")
    return nid, idx


def load_json(text: str) -> Symbol:
    """Parse MXNet JSON (any supported variant) into a Symbol."""
    if not isinstance(text, str):
        _fail(f"expected a JSON string, got {type(text).__name__}")
    try:
        data = json.loads(text, strict=False)
    except (json.JSONDecodeError, RecursionError) as e:
        raise MXNetError(f"load_json: invalid JSON: {e}") from None
    if not isinstance(data, dict):
        _fail("the top level must be an object")
    raw_nodes = data.get("nodes")
    if not isinstance(raw_nodes, list):
        _fail("missing or invalid 'nodes' list")
    if "heads" not in data or not isinstance(data["heads"], list):
        _fail("missing or invalid 'heads' list")
    n = len(raw_nodes)
    nodes: list[SymNode] = []
    for i, raw in enumerate(raw_nodes):
        if not isinstance(raw, dict):
            _fail(f"node {i} must be an object")
        op_name, name = raw.get("op"), raw.get("name")
        if not isinstance(op_name, str) or not isinstance(name, str):
            _fail(f"node {i} needs string 'op' and 'name' keys")
        if not isinstance(raw.get("inputs", []), list):
            _fail(f"node {i} ({name!r}): 'inputs' must be a list")
        attrs = _node_attrs(i, raw)
        if "subgraphs" in raw and op_name != "null":
            attrs.update(_subgraph_attrs(i, op_name, raw["subgraphs"]))
        if op_name == "null":
            nodes.append(SymNode(None, name, attrs))
            continue
        op = find_op(op_name)
        if op is None:
            _fail(f"node {i} ({name!r}): unknown operator {op_name!r}")
        if op.compiler_internal:
            _fail(f"node {i} ({name!r}): operator {op_name!r} is internal to the compiler and "
                  "cannot appear in a symbol file")
        node = SymNode(op, name, attrs)
        node.parsed  # noqa: B018 - validates the attribute strings now (MXNetError naming the node)
        nodes.append(node)
    for i, raw in enumerate(raw_nodes):
        node = nodes[i]
        entries = [_entry(f"node {i} ({node.name!r}) input", e, n) for e in raw.get("inputs", [])]
        if node.op is None:
            if entries:
                _fail(f"node {i} ({node.name!r}): a variable cannot have inputs")
            continue
        expected = node.input_names()
        if len(entries) != len(expected):
            _fail(f"node {i} ({node.name!r}, {node.op.name}): expected {len(expected)} inputs "
                  f"{format_names(expected)}, got {len(entries)}")
        node.inputs = [(nodes[nid], idx) for nid, idx in entries]
    for node in nodes:
        for src, idx in node.inputs:
            if idx >= src.num_outputs():
                _fail(f"node {node.name!r} reads output {idx} of {src.name!r}, which has "
                      f"{src.num_outputs()} outputs")
    heads = [_entry("heads", e, n) for e in data["heads"]]
    if not heads:
        _fail("'heads' is empty")
    outputs = []
    for nid, idx in heads:
        if idx >= nodes[nid].num_outputs():
            _fail(f"head reads output {idx} of {nodes[nid].name!r}, which has {nodes[nid].num_outputs()} outputs")
        outputs.append((nodes[nid], idx))
    try:
        topo_nodes(outputs)
    except MXNetError as e:
        _fail(str(e))
    return Symbol(outputs)
