"""Lowering a Symbol to the IR: the one bridge between the Symbol frontend and `symjit.ir`.

`lower(sym)` returns a Graph whose `args` are the symbol's arguments in `list_arguments()`
order, `aux` its auxiliary states in `list_auxiliary_states()` order and `outputs` its
outputs in `list_outputs()` order. Variable attributes `__shape__` / `__dtype__` become the
inputs' initial types; the other variable attributes travel as opaque `input_meta`, node
attributes the op does not declare as node `meta`. Op attributes are the parsed values the op
schema gave (`Op.parse`), never re-parsed here.
"""
from __future__ import annotations

from ..base import MXNetError
from ..ir.builder import GraphBuilder
from ..ir.graph import Graph, TensorType
from ..ops.attrs import Int, Shape
from .symbol import DTYPE_MX_TO_NAME, Symbol, _aux_variable_ids, topo_nodes

__all__ = ["lower", "variable_type"]


def variable_type(name: str, attrs: dict, device: str = "cpu(0)") -> TensorType:
    """The initial type of a variable from its `__shape__` / `__dtype__` attributes."""
    shape = dtype = None
    try:
        if "__shape__" in attrs:
            shape = Shape(attrs["__shape__"])
            if not shape:  # MXNet 1.x: () is an unknown shape
                shape = None
            else:          # -1 (NumPy shape semantics' spelling) is an unknown dim, as 0
                shape = tuple(max(int(d), 0) for d in shape)
        if "__dtype__" in attrs:
            code = Int(attrs["__dtype__"])
            if code not in DTYPE_MX_TO_NAME:
                raise ValueError(f"unknown dtype code {code}")
            dtype = DTYPE_MX_TO_NAME[code]
    except (ValueError, TypeError) as e:
        raise MXNetError(f"variable {name!r}: invalid attribute: {e}") from None
    return TensorType(shape, dtype, device)


def lower(sym: Symbol, device: str = "cpu(0)", name: str | None = None,
          allow_duplicate_names: bool = False, input_shapes: dict | None = None,
          input_dtypes: dict | None = None) -> tuple[Graph, dict]:
    """Lower `sym` to a Graph; also returns {id(SymNode): [output Values]}.

    Raises MXNetError if two distinct variables share a name (they could not be bound by name),
    unless allow_duplicate_names (shape/type inference, which MXNet allows on such graphs): the
    k-th repeat of NAME then becomes input `NAME#k`, in the same argument position.
    `input_shapes` (name -> partial shape, 0 = unknown dim) replace the shapes variables declare,
    `input_dtypes` (name -> dtype name) their dtypes (MXNet: a bound array's dtype wins over the
    variable's `dtype` attribute, which only fills inputs nothing else determines).
    """
    nodes = topo_nodes(sym._outputs)
    aux_ids = _aux_variable_ids(nodes)
    b = GraphBuilder(name=name or (sym.name or "graph"), device=device)
    values: dict[int, list] = {}
    seen: dict[str, int] = {}
    variables = [n for n in nodes if n.is_variable]
    for n in [v for v in variables if id(v) not in aux_ids] + [v for v in variables if id(v) in aux_ids]:
        input_name = n.name
        if n.name in seen:
            if not allow_duplicate_names:
                raise MXNetError(f"the symbol has two different variables named {n.name!r}")
            repeat = 1
            while f"{n.name}#{repeat}" in seen:
                repeat += 1
            input_name = f"{n.name}#{repeat}"
        seen[input_name] = id(n)
        meta = {k: v for k, v in n.attrs.items() if k not in ("__shape__", "__dtype__")}
        vtype = variable_type(n.name, n.attrs, device)
        if input_shapes and input_name in input_shapes:
            vtype = vtype.with_shape(input_shapes[input_name])
        if input_dtypes and input_name in input_dtypes:
            vtype = vtype.with_dtype(input_dtypes[input_name])
        values[id(n)] = [b.add_input(input_name, vtype,
                                     aux=id(n) in aux_ids, meta=meta)]
    for n in nodes:
        if n.is_variable:
            continue
        params = n.op.params
        meta = {k: v for k, v in n.attrs.items() if k not in params}
        ins = [values[id(c)][i] for c, i in n.inputs]
        values[id(n)] = b.add_node(n.op, ins, n.parsed, name=n.name, meta=meta, already_parsed=True)
    return b.build([values[id(n)][i] for n, i in sym._outputs]), values
