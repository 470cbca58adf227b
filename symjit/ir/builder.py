"""Building graphs: a neutral, frontend-agnostic `GraphBuilder`.

Frontends (Symbol lowering in `symjit.symbol.lower`, autodiff, tracing) describe a graph as
inputs and op applications; the builder parses attributes with the op's own schema
(`Op.parse`, the only place MXNet attribute strings are read), checks arity, names values
uniquely and types each node's outputs from its inputs (`infer_node_types`).

Guarantee: a graph returned by `build()` satisfies `symjit.ir.verify.verify`.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from ..base import MXNetError
from ..ops.registry import Op, get_op, merge_shape
from .graph import Graph, Node, TensorType, Value

__all__ = ["GraphBuilder", "infer_node_types", "describe_node"]


def describe_node(name: str, op: Op) -> str:
    """How errors name a node: `node 'fc1' (FullyConnected)`."""
    return f"node {name!r} ({op.name})"


def _shapes_complete(shapes) -> bool:
    return all(s is not None for s in shapes)


def infer_node_types(node_name: str, op: Op, attrs: Mapping, in_types: Sequence[TensorType],
                     device: str = "cpu(0)") -> tuple[list[TensorType], list[TensorType]]:
    """Run `op`'s shape and dtype inference for one node.

    Returns (input types, output types), refined as far as the op can deduce; unknown parts
    stay None / 0. Errors are MXNetError naming the node, its op and the shapes involved.
    An op that fails on incomplete inputs (a limitation of its rule, not a conflict) leaves
    the outputs unknown; the same failure with complete inputs is reported as an error.
    """
    n_out = op.num_outputs(attrs)
    in_shapes = [t.shape for t in in_types]
    in_dtypes = [t.dtype for t in in_types]
    where = describe_node(node_name, op)
    shapes_in, shapes_out = list(in_shapes), [None] * n_out
    try:
        shapes_in, shapes_out = op.infer_shape_checked(attrs, list(in_shapes))
    except MXNetError as e:
        raise MXNetError(f"shape inference failed at {where} with input shapes "
                         f"{_fmt_shapes(op, attrs, in_shapes)}: {e}") from None
    except Exception as e:  # noqa: BLE001 - an op rule that cannot handle partial inputs
        if _shapes_complete(in_shapes):
            raise MXNetError(f"shape inference failed at {where} with input shapes "
                             f"{_fmt_shapes(op, attrs, in_shapes)}: {type(e).__name__}: {e}") from None
    dtypes_in, dtypes_out = list(in_dtypes), [None] * n_out
    try:
        dtypes_in, dtypes_out = op.infer_type(attrs, list(in_dtypes))
    except MXNetError as e:
        raise MXNetError(f"type inference failed at {where} with input dtypes {in_dtypes}: {e}") from None
    except Exception as e:  # noqa: BLE001
        if all(t is not None for t in in_dtypes):
            raise MXNetError(f"type inference failed at {where} with input dtypes {in_dtypes}: "
                             f"{type(e).__name__}: {e}") from None
    if len(shapes_in) != len(in_types) or len(shapes_out) != n_out or len(dtypes_out) != n_out:
        raise MXNetError(f"{where}: the op's inference returned {len(shapes_in)} input and "
                         f"{len(shapes_out)} output shapes for {len(in_types)} inputs and {n_out} outputs")
    names = op.input_names(attrs)
    new_in = []
    for i, t in enumerate(in_types):
        s = _merge(where, f"input {names[i]!r}", t.shape, shapes_in[i])
        d = _merge_dtype(where, f"input {names[i]!r}", t.dtype, dtypes_in[i] if i < len(dtypes_in) else None)
        new_in.append(TensorType(s, d, t.device))
    dev = in_types[0].device if in_types else device
    outs = [TensorType(None if s is None else tuple(int(x) for x in s), d, dev)
            for s, d in zip(shapes_out, dtypes_out)]
    return new_in, outs


def _fmt_shapes(op: Op, attrs, shapes) -> str:
    names = op.input_names(attrs)
    return "{" + ", ".join(f"{n}: {s}" for n, s in zip(names, shapes)) + "}"


def _merge(where: str, what: str, a, b):
    try:
        return merge_shape(where, what, a, b)
    except MXNetError:
        raise MXNetError(f"shape inference failed at {where}: conflicting shapes for {what}: "
                         f"{tuple(a)} vs {tuple(b)}") from None


def _merge_dtype(where: str, what: str, a, b):
    if a is None:
        return b
    if b is None or a == b:
        return a
    raise MXNetError(f"type inference failed at {where}: conflicting dtypes for {what}: {a} vs {b}")


class GraphBuilder:
    """Incrementally builds a `Graph`: inputs first or interleaved, nodes in dependency order."""

    def __init__(self, name: str = "graph", device: str = "cpu(0)", infer: bool = True):
        self.name = name
        self.device = device
        self.infer = infer
        self._args: list[Value] = []
        self._aux: list[Value] = []
        self._nodes: list[Node] = []
        self._names: set[str] = set()
        self._defined: set[Value] = set()
        self._meta: dict[Value, dict] = {}

    # ---- naming -----------------------------------------------------------------------------
    def unique(self, name: str) -> str:
        """`name`, or `name_1`, `name_2`, ... if taken."""
        if name not in self._names:
            self._names.add(name)
            return name
        k = 1
        while f"{name}_{k}" in self._names:
            k += 1
        self._names.add(f"{name}_{k}")
        return f"{name}_{k}"

    # ---- inputs -------------------------------------------------------------------------------
    def add_input(self, name: str, type: TensorType | None = None, aux: bool = False,
                  meta: Mapping[str, str] | None = None) -> Value:
        """Declare a graph argument (or auxiliary state when `aux`)."""
        t = type or TensorType(device=self.device)
        v = Value(self.unique(name), t)
        (self._aux if aux else self._args).append(v)
        self._defined.add(v)
        if meta:
            self._meta[v] = dict(meta)
        return v

    # ---- nodes ----------------------------------------------------------------------------------
    def add_node(self, op: str | Op, inputs: Sequence[Value], attrs: Mapping | None = None,
                 name: str | None = None, meta: Mapping[str, str] | None = None,
                 already_parsed: bool = False) -> list[Value]:
        """Apply `op` (name or Op) to `inputs`; returns every output Value (hidden ones included).

        `attrs` may be raw (MXNet strings) or canonical Python values; they are parsed by the
        op's schema unless `already_parsed`. Raises MXNetError on unknown ops, bad attributes,
        wrong arity or inference conflicts, naming the node.
        """
        op = get_op(op) if isinstance(op, str) else op
        node_name = self.unique(name or op.name.lower().lstrip("_") or "node")
        if already_parsed:  # already the op schema's canonical values (e.g. lowered from a Symbol)
            parsed = dict(attrs or {})
        else:
            try:
                parsed = op.parse(dict(attrs or {}))
            except MXNetError as e:
                raise MXNetError(f"{describe_node(node_name, op)}: {e}") from None
        expected = op.input_names(parsed)
        if len(inputs) != len(expected):
            raise MXNetError(f"{describe_node(node_name, op)}: expected {len(expected)} inputs "
                             f"{expected}, got {len(inputs)}")
        for v in inputs:
            if not isinstance(v, Value) or v not in self._defined:
                raise MXNetError(f"{describe_node(node_name, op)}: input {v!r} is not a value "
                                 "defined earlier in this graph")
        n_out = op.num_outputs(parsed)
        in_types = [v.type for v in inputs]
        if self.infer:
            new_in, out_types = infer_node_types(node_name, op, parsed, in_types, self.device)
            for v, t in zip(inputs, new_in):
                v.type = t
        else:
            out_types = [TensorType(device=self.device)] * n_out
        out_names = op.output_names(parsed)
        if n_out == 1:
            outs = [Value(node_name, out_types[0])]
        else:
            outs = [Value(self.unique(f"{node_name}:{out_names[i]}"), out_types[i]) for i in range(n_out)]
        node = Node(node_name, op, parsed, list(inputs), outs, dict(meta or {}))
        self._nodes.append(node)
        self._defined.update(outs)
        return outs

    def build(self, outputs: Sequence[Value]) -> Graph:
        """The graph returning `outputs`."""
        for v in outputs:
            if v not in self._defined:
                raise MXNetError(f"graph output {v!r} is not defined in this graph")
        return Graph(list(self._args), list(self._aux), list(self._nodes), list(outputs), self.name,
                     dict(self._meta))

