"""Symbol: MXNet 1.x symbolic graphs (composition, introspection, inference, binding).

A Symbol is a list of output entries `(node, index)` over a DAG of `SymNode`s, exactly as
MXNet's nnvm Symbol: a node is a variable (`op is None`) or an op application carrying its
attributes as MXNet strings (what the JSON format stores, round-tripped verbatim) and the
parsed values the op's schema gives for them. Composition validates attributes at once
(`Op.parse`), so a bad attribute fails where it is written.

Execution, shape/type inference and autodiff do not live here: a Symbol is lowered to the IR
(`symjit.symbol.lower`) and the passes / Executor work on that.
"""
from __future__ import annotations

import numbers
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..base import MXNetError, canonical_dtype
from ..util import is_np_shape
from ..ops.registry import Op, find_op, get_op
from .naming import HIDDEN_KEYS, AttrScope, NameManager, hidden_key

__all__ = ["Symbol", "SymNode", "Variable", "var", "Group", "create_op_symbol", "attr_string",
           "DTYPE_MX_TO_NAME", "DTYPE_NAME_TO_MX"]

#: MXNet's numeric dtype codes (the `__dtype__` attribute) and their names
DTYPE_MX_TO_NAME = {0: "float32", 1: "float64", 2: "float16", 3: "uint8", 4: "int32", 5: "int8",
                    6: "int64", 7: "bool", 8: "int16", 9: "uint16", 10: "uint32", 11: "uint64"}
DTYPE_NAME_TO_MX = {v: k for k, v in DTYPE_MX_TO_NAME.items()}


class SymNode:
    """One node of a symbolic graph: a variable (`op is None`) or an op application."""
    __slots__ = ("op", "name", "attrs", "inputs", "_parsed")

    def __init__(self, op: Op | None, name: str, attrs: dict | None = None,
                 inputs: list | None = None, parsed: dict | None = None):
        self.op = op
        self.name = name
        self.attrs: dict[str, str] = dict(attrs or {})
        self.inputs: list[tuple[SymNode, int]] = list(inputs or [])
        self._parsed = parsed

    @property
    def is_variable(self) -> bool:
        return self.op is None

    @property
    def parsed(self) -> dict:
        """The op's canonical attribute values (parsed once from the strings)."""
        if self._parsed is None:
            try:
                self._parsed = self.op.parse(self.attrs)
            except MXNetError as e:
                raise MXNetError(f"node {self.name!r} ({self.op.name}): {e}") from None
        return self._parsed

    def num_outputs(self) -> int:
        return 1 if self.op is None else self.op.num_outputs(self.parsed)

    def num_visible_outputs(self) -> int:
        return 1 if self.op is None else self.op.num_visible_outputs(self.parsed)

    def output_name(self, index: int) -> str:
        if self.op is None:
            return self.name
        return f"{self.name}_{self.op.output_names(self.parsed)[index]}"

    def input_names(self) -> list[str]:
        return [] if self.op is None else self.op.input_names(self.parsed)

    def aux_positions(self) -> set[int]:
        if self.op is None:
            return set()
        names = self.input_names()
        aux = set(self.op.aux_input_names(self.parsed))
        return {i for i, n in enumerate(names) if n in aux}

    def __repr__(self):
        return f"<SymNode {self.name} {'null' if self.op is None else self.op.name}>"


def topo_nodes(heads: Iterable[tuple[SymNode, int]]) -> list[SymNode]:
    """Every node reachable from `heads`, inputs before users, in nnvm's DFS post-order
    (heads in order, inputs in order). Iterative, so deep graphs are fine; a cycle raises."""
    order: list[SymNode] = []
    state: dict[int, int] = {}  # id -> 1 visiting, 2 done
    for head, _ in heads:
        if state.get(id(head)) == 2:
            continue
        stack = [(head, 0)]
        state[id(head)] = 1
        while stack:
            node, i = stack.pop()
            if i < len(node.inputs):
                stack.append((node, i + 1))
                child = node.inputs[i][0]
                st = state.get(id(child))
                if st is None:
                    state[id(child)] = 1
                    stack.append((child, 0))
                elif st == 1:
                    raise MXNetError(f"the graph has a cycle through node {child.name!r}")
            else:
                state[id(node)] = 2
                order.append(node)
    return order


def attr_string(value) -> str:
    """A Python attribute value in MXNet's string form (what MXNet's frontends send)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, (type, np.dtype)) and value is not bool:
        try:
            return np.dtype(canonical_dtype(value)).name
        except MXNetError:
            return str(value)
    if isinstance(value, np.generic):
        return str(value.item())
    if isinstance(value, np.ndarray):
        return attr_string(value.tolist() if value.ndim else value.item())
    if isinstance(value, (tuple, list)):
        # numpy 2 prints numpy scalars as np.int64(0): write the plain values
        items = [attr_string(v) if isinstance(v, (np.generic, np.ndarray, tuple, list)) else repr(v)
                 if isinstance(v, str) else str(v) for v in value]
        if isinstance(value, tuple):
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        return "[" + ", ".join(items) + "]"
    return str(value)


class Symbol:
    """A symbolic expression with one or more outputs (MXNet 1.x `mx.sym.Symbol`)."""
    __slots__ = ("_outputs", "__weakref__")

    def __init__(self, outputs: Sequence[tuple[SymNode, int]]):
        self._outputs = list(outputs)

    # ---- identity ---------------------------------------------------------------------------
    @property
    def name(self) -> str | None:
        """The head node's name when the symbol has one output, else None."""
        return self._outputs[0][0].name if len(self._outputs) == 1 else None

    def __repr__(self) -> str:
        name = self.name
        if name is None:
            return f"<Symbol group [{', '.join(s.name for s in self)}]>"
        return f"<Symbol {name}>"

    __hash__ = object.__hash__

    def __iter__(self):
        return (Symbol([e]) for e in self._outputs)

    def __len__(self) -> int:
        return len(self._outputs)

    def __getitem__(self, index) -> "Symbol":
        names = self.list_outputs()
        if isinstance(index, str):
            hits = [i for i, n in enumerate(names) if n == index]
            if not hits:
                raise ValueError(f"Cannot find output that matches name {index!r}; outputs are {names}")
            if len(hits) > 1:
                raise ValueError(f"There are multiple outputs with name {index!r}")
            index = hits[0]
        if isinstance(index, slice):
            return Symbol(self._outputs[index])
        if not isinstance(index, (int, np.integer)):
            raise TypeError(f"Symbol indices must be integers, slices or output names, not {type(index).__name__}")
        if not -len(names) <= index < len(names):
            raise IndexError(f"Symbol index {index} out of range for {len(names)} outputs")
        return Symbol([self._outputs[int(index)]])

    # ---- copy and composition ----------------------------------------------------------------
    def __copy__(self) -> "Symbol":
        return self.__deepcopy__(None)

    def __deepcopy__(self, memo) -> "Symbol":
        remap: dict[int, SymNode] = {}
        for n in topo_nodes(self._outputs):
            remap[id(n)] = SymNode(n.op, n.name, dict(n.attrs),
                                   [(remap[id(c)], i) for c, i in n.inputs], n._parsed)
        return Symbol([(remap[id(n)], i) for n, i in self._outputs])

    def copy(self) -> "Symbol":
        return self.__deepcopy__(None)

    def __reduce__(self):
        """Pickle through MXNet's JSON form (as MXNet does)."""
        from .json_io import load_json
        return (load_json, (self.tojson(),))

    def __call__(self, *args, **kwargs) -> "Symbol":
        """Compose: a copy with arguments replaced by the given symbols (positional in
        `list_arguments()` order, or by name)."""
        s = self.__deepcopy__(None)
        s._compose(*args, **kwargs)
        return s

    def _compose(self, *args, **kwargs) -> None:
        name = kwargs.pop("name", None)
        if args and kwargs:
            raise TypeError("compose only accepts input Symbols either as positional or keyword arguments, not both")
        for s in list(args) + list(kwargs.values()):
            if not isinstance(s, Symbol):
                raise TypeError(f"Compose expects Symbols as inputs, got {type(s).__name__}")
            if len(s._outputs) != 1:
                raise MXNetError("Compose: an input symbol must have exactly one output")
        nodes = topo_nodes(self._outputs)
        variables = [n for n in nodes if n.is_variable]
        aux = _aux_variable_ids(nodes)
        arg_vars = [v for v in variables if id(v) not in aux]
        replace: dict[int, tuple[SymNode, int]] = {}
        if args:
            if len(args) > len(arg_vars):
                raise MXNetError(f"Compose: {len(args)} inputs given, the symbol has {len(arg_vars)} arguments")
            for v, s in zip(arg_vars, args):
                replace[id(v)] = s._outputs[0]
        else:
            by_name: dict[str, list[SymNode]] = {}
            for v in variables:
                by_name.setdefault(v.name, []).append(v)
            for key, s in kwargs.items():
                for v in by_name.get(key, []):
                    replace[id(v)] = s._outputs[0]
        if replace:
            for n in nodes:
                n.inputs = [replace.get(id(c), (c, i)) for c, i in n.inputs]
            self._outputs = [replace.get(id(n), (n, i)) for n, i in self._outputs]
        if name is not None and len(self._outputs) == 1 and not self._outputs[0][0].is_variable:
            self._outputs[0][0].name = name

    # ---- introspection -------------------------------------------------------------------------
    def _nodes(self) -> list[SymNode]:
        return topo_nodes(self._outputs)

    def list_outputs(self) -> list[str]:
        return [n.output_name(i) for n, i in self._outputs]

    def list_arguments(self) -> list[str]:
        nodes = self._nodes()
        aux = _aux_variable_ids(nodes)
        return [n.name for n in nodes if n.is_variable and id(n) not in aux]

    def list_auxiliary_states(self) -> list[str]:
        nodes = self._nodes()
        aux = _aux_variable_ids(nodes)
        return [n.name for n in nodes if n.is_variable and id(n) in aux]

    def list_inputs(self) -> list[str]:
        return [n.name for n in self._nodes() if n.is_variable]

    def get_internals(self) -> "Symbol":
        """Every output of every node (variables included), in topological order."""
        entries = []
        for n in self._nodes():
            entries.extend((n, i) for i in range(n.num_outputs()))
        return Symbol(entries)

    def get_children(self) -> "Symbol | None":
        """The inputs of the head node(s), grouped; None for a variable."""
        heads = list({id(n): n for n, _ in self._outputs}.values())   # each node once
        entries = [e for n in heads for e in n.inputs]
        return Symbol(entries) if entries else None

    # ---- attributes ----------------------------------------------------------------------------
    def _head_node(self, what: str) -> SymNode:
        if len(self._outputs) != 1:
            raise MXNetError(f"{what}: the symbol has {len(self._outputs)} outputs; use a single-output symbol")
        return self._outputs[0][0]

    def attr(self, key: str) -> str | None:
        """The head node's attribute `key` (MXNet hidden keys such as lr_mult are found too)."""
        attrs = self._head_node("attr").attrs
        if key in attrs:
            return attrs[key]
        return attrs.get(hidden_key(key))

    def list_attr(self, recursive: bool = False) -> dict:
        """The head node's attributes (op parameters included, as MXNet strings)."""
        if recursive:
            raise DeprecationWarning("Symbol.list_attr with recursive=True has been deprecated. "
                                     "Please use attr_dict instead.")
        return dict(self._head_node("list_attr").attrs)

    def attr_dict(self) -> dict:
        """{node name: {key: value}} for every node with attributes."""
        return {n.name: dict(n.attrs) for n in self._nodes() if n.attrs}

    def _set_attr(self, **kwargs) -> None:
        node = self._head_node("_set_attr")
        new = dict(node.attrs)
        for k, v in kwargs.items():
            if not isinstance(v, str):
                raise ValueError("Set Attr only accepts string values")
            new[hidden_key(k)] = v
        if node.op is not None:
            try:
                parsed = node.op.parse(new)
            except MXNetError as e:
                raise MXNetError(f"node {node.name!r} ({node.op.name}): {e}") from None
            node._parsed = parsed
        node.attrs = new

    # ---- arithmetic ----------------------------------------------------------------------------
    def _binary(self, other, sym_fn: str, scalar_fn: str, reverse_scalar: str | None = None,
                reverse: bool = False) -> "Symbol":
        if isinstance(other, Symbol):
            args = (other, self) if reverse else (self, other)
            return create_op_symbol(sym_fn, list(args), {})
        if isinstance(other, numbers.Number) or (isinstance(other, np.generic) and np.ndim(other) == 0):
            fn = reverse_scalar if reverse else scalar_fn
            return create_op_symbol(fn, [self], {"scalar": other})
        raise TypeError(f"type {type(other).__name__} not supported for Symbol arithmetic")

    def __add__(self, o): return self._binary(o, "_Plus", "_PlusScalar")
    def __radd__(self, o): return self._binary(o, "_Plus", "_PlusScalar")
    def __sub__(self, o): return self._binary(o, "_Minus", "_MinusScalar")
    def __rsub__(self, o): return self._binary(o, "_Minus", "_MinusScalar", "_RMinusScalar", reverse=True)
    def __mul__(self, o): return self._binary(o, "_Mul", "_MulScalar")
    def __rmul__(self, o): return self._binary(o, "_Mul", "_MulScalar")
    def __truediv__(self, o): return self._binary(o, "_Div", "_DivScalar")
    def __rtruediv__(self, o): return self._binary(o, "_Div", "_DivScalar", "_RDivScalar", reverse=True)
    def __mod__(self, o): return self._binary(o, "_Mod", "_ModScalar")
    def __rmod__(self, o): return self._binary(o, "_Mod", "_ModScalar", "_RModScalar", reverse=True)
    def __pow__(self, o): return self._binary(o, "_Power", "_PowerScalar")
    def __rpow__(self, o): return self._binary(o, "_Power", "_PowerScalar", "_RPowerScalar", reverse=True)
    def __neg__(self): return self.__mul__(-1.0)
    def __abs__(self): return create_op_symbol("abs", [self], {})
    def __eq__(self, o): return self._binary(o, "_equal", "_equal_scalar")
    def __ne__(self, o): return self._binary(o, "_not_equal", "_not_equal_scalar")
    def __gt__(self, o): return self._binary(o, "_greater", "_greater_scalar")
    def __ge__(self, o): return self._binary(o, "_greater_equal", "_greater_equal_scalar")
    def __lt__(self, o): return self._binary(o, "_lesser", "_lesser_scalar")
    def __le__(self, o): return self._binary(o, "_lesser_equal", "_lesser_equal_scalar")
    __div__ = __truediv__
    __rdiv__ = __rtruediv__

    def __bool__(self):
        from ..base import NotImplementedForSymbol
        raise NotImplementedForSymbol(self.__bool__, "bool")

    def as_np_ndarray(self) -> "Symbol":
        """The same graph with NumPy semantics (`mx.sym.np._Symbol`)."""
        from .numpy import as_np
        return as_np(self)

    def as_nd_ndarray(self) -> "Symbol":
        """The same graph with MXNet's legacy semantics."""
        return Symbol(self._outputs)

    def astype(self, dtype) -> "Symbol":
        return create_op_symbol("Cast", [self], {"dtype": dtype}, hint="cast")

    def __getattr__(self, name: str):
        from ..ndarray.ndarray import FLUENT_METHODS
        if name.startswith("_") or name not in FLUENT_METHODS:
            raise AttributeError(f"'Symbol' object has no attribute {name!r}")
        # the method's own name when it is an op name too (x.split names its node 'split...')
        op_name = name if find_op(name) is not None else FLUENT_METHODS[name]

        def method(*args, **kwargs):
            from . import op_function
            return op_function(op_name)(self, *args, **kwargs)
        method.__name__ = name
        return method

    def split_v2(self, indices_or_sections, axis=0, squeeze_axis=False) -> "Symbol":
        """`sym.split_v2(self, ...)`."""
        from . import split_v2
        return split_v2(self, indices_or_sections, axis, squeeze_axis)

    def _gen_atomic_symbol(self) -> "Symbol":
        """A symbol of the head node's op and attributes alone (its inputs new variables)."""
        heads = list({id(n): n for n, _ in self._outputs}.values())
        if len(heads) != 1:
            raise MXNetError("_gen_atomic_symbol: the symbol has more than one head node")
        node = heads[0]
        if node.op is None:
            return Symbol([(SymNode(None, node.name, dict(node.attrs)), 0)])
        return create_op_symbol(node.op.name, [], dict(node.attrs), name=node.name)

    def reshape(self, *shape, **kwargs) -> "Symbol":
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = tuple(shape[0])
        if shape:
            kwargs["shape"] = tuple(shape)
        return create_op_symbol("Reshape", [self], kwargs)

    # ---- inference ------------------------------------------------------------------------------
    def _inferred(self, args, kwargs, what: str):
        """The lowered graph after inference from the given per-argument values (positional
        in `list_arguments()` order or by input name); `what` selects shapes or dtypes."""
        from ..passes.infer import infer_types
        from .lower import lower
        names = self.list_arguments()
        if len(args) > len(names):
            raise MXNetError(f"infer_{what}: {len(args)} positional values for {len(names)} arguments")
        given = {n: a for n, a in zip(names, args) if a is not None}
        given.update({k: v for k, v in kwargs.items() if v is not None})
        shapes = {}
        if what == "shape":
            # inference marks an unknown dim 0: MXNet's legacy spelling; numpy semantics spell it -1
            shapes = {k: tuple(max(int(d), 0) for d in (v if isinstance(v, (tuple, list)) else (v,)))
                      for k, v in given.items()}
        # a given shape replaces the variable's declared one (MXNet)
        graph, _ = lower(self, allow_duplicate_names=True, input_shapes=shapes)
        inputs = {v.name for v in graph.inputs}
        for k in given:
            if k not in inputs:
                raise MXNetError(f"infer_{what}: {k!r} is not an input of the symbol; inputs are {sorted(inputs)}")
        if what == "shape":
            return infer_types(graph)[0]
        return infer_types(graph, dtypes={k: np.dtype(canonical_dtype(v)).name for k, v in given.items()})[0]

    def infer_shape(self, *args, **kwargs):
        """(arg_shapes, out_shapes, aux_shapes) in list order; (None, None, None) when the
        given shapes do not determine every shape (see `infer_shape_partial`)."""
        arg, out, aux = self.infer_shape_partial(*args, **kwargs)
        complete = all(s and all(d > 0 for d in s) for s in arg + out + aux)
        if is_np_shape():   # a scalar's () is a known shape there
            complete = all(s is not None and all(d > 0 for d in s) for s in arg + out + aux)
        if not complete:
            return None, None, None
        return arg, out, aux

    def infer_shape_partial(self, *args, **kwargs):
        """Like `infer_shape`, with unknown shapes as () and unknown dims as 0 — or, with numpy
        shape semantics on (`mx.np_shape()`), unknown shapes as None and unknown dims as -1
        (given shapes use the same spelling)."""
        g = self._inferred(args, kwargs, "shape")
        np_shape = is_np_shape()

        def sh(v):
            if v.type.shape is None:
                return None if np_shape else ()
            return tuple(-1 if np_shape and d == 0 else int(d) for d in v.type.shape)
        return [sh(v) for v in g.args], [sh(v) for v in g.outputs], [sh(v) for v in g.aux]

    def infer_type(self, *args, **kwargs):
        """(arg_types, out_types, aux_types) as numpy types, or (None, None, None) when the
        given dtypes do not determine every dtype (see `infer_type_partial`)."""
        arg, out, aux = self.infer_type_partial(*args, **kwargs)
        if any(t is None for t in arg + out + aux):
            return None, None, None
        return arg, out, aux

    def infer_type_partial(self, *args, **kwargs):
        """Like `infer_type`, with None for unknown dtypes."""
        g = self._inferred(args, kwargs, "type")

        def ty(v):
            return None if v.type.dtype is None else np.dtype(v.type.dtype).type
        return [ty(v) for v in g.args], [ty(v) for v in g.outputs], [ty(v) for v in g.aux]

    # ---- serialization --------------------------------------------------------------------------
    def tojson(self, remove_amp_cast: bool = True) -> str:
        from .json_io import to_json
        return to_json(self)

    def save(self, fname: str, remove_amp_cast: bool = True) -> None:
        with open(fname, "w") as f:
            f.write(self.tojson())

    def debug_str(self) -> str:
        """The lowered graph in the IR's text form."""
        from .lower import lower
        from ..ir.printer import format_graph
        return format_graph(lower(self)[0])

    # ---- execution --------------------------------------------------------------------------------
    def bind(self, ctx, args, args_grad=None, grad_req="write", aux_states=None, group2ctx=None,
             shared_exec=None):
        from ..executor import Executor
        return Executor.bind(self, ctx, args, args_grad, grad_req, aux_states)

    def simple_bind(self, ctx, grad_req="write", type_dict=None, stype_dict=None, group2ctx=None,
                    shared_arg_names=None, shared_exec=None, shared_buffer=None, **kwargs):
        from ..executor import Executor
        return Executor.simple_bind(self, ctx, grad_req, type_dict, group2ctx=group2ctx, stype_dict=stype_dict,
                                    **kwargs)

    def eval(self, ctx=None, **kwargs) -> list:
        """Bind to `kwargs` (NDArrays by argument name), run forward, return the outputs.
        As MXNet's `eval`, names that are not arguments of this symbol are ignored (one feed
        dict serves every output of a larger graph)."""
        from ..context import current_context
        args = set(self.list_arguments())
        exe = self.bind(ctx or current_context(), {k: v for k, v in kwargs.items() if k in args},
                        grad_req="null")
        return exe.forward()

    def gradient(self, wrt):
        raise MXNetError("Symbol.gradient is not supported (as in MXNet 1.x); bind and call backward")


def _aux_variable_ids(nodes: Iterable[SymNode]) -> set[int]:
    """Variables feeding an auxiliary-state input of some op."""
    out: set[int] = set()
    for n in nodes:
        for pos in n.aux_positions():
            if pos < len(n.inputs) and n.inputs[pos][0].is_variable:
                out.add(id(n.inputs[pos][0]))
    return out


# --------------------------------------------------------------------------------------------
# Construction
# --------------------------------------------------------------------------------------------

def Variable(name: str, attr: Mapping | None = None, shape=None, lr_mult=None, wd_mult=None, dtype=None,
             init=None, stype=None, **kwargs) -> Symbol:
    """A placeholder (argument) symbol; shape/dtype/init/lr_mult/wd_mult become `__x__` attributes."""
    if not isinstance(name, str):
        raise TypeError("Expect a string for variable `name`")
    attrs = AttrScope.current.get(attr)
    if shape is not None:
        attrs["__shape__"] = str(shape)
    if lr_mult is not None:
        attrs["__lr_mult__"] = str(lr_mult)
    if wd_mult is not None:
        attrs["__wd_mult__"] = str(wd_mult)
    if dtype is not None:
        attrs["__dtype__"] = str(DTYPE_NAME_TO_MX[np.dtype(canonical_dtype(dtype)).name])
    if init is not None:
        attrs["__init__"] = init if isinstance(init, str) else init.dumps()
    if stype is not None:
        attrs["__storage_type__"] = str({"default": 0, "row_sparse": 1, "csr": 2}.get(stype, stype))
    for k, v in kwargs.items():
        if k.startswith("__") and k.endswith("__"):
            attrs[k] = str(v)
        else:
            raise ValueError(f"Attribute name={k} is not supported. Additional attributes must start and "
                             "end with double underscores, e.g, __yourattr__")
    for k, v in attrs.items():
        if not isinstance(v, str):
            raise ValueError("Attributes need to be string")
    node = SymNode(None, name, {hidden_key(k): v for k, v in attrs.items()})
    return Symbol([(node, 0)])


var = Variable


def Group(symbols: Sequence[Symbol]) -> Symbol:
    """One symbol whose outputs are the outputs of `symbols`, in order."""
    if not symbols or any(not isinstance(s, Symbol) for s in symbols):
        raise TypeError("Expected a list of symbols as input")
    return Symbol([e for s in symbols for e in s._outputs])


def create_op_symbol(func_name: str, inputs: Sequence[Symbol], attrs: Mapping[str, Any],
                     named_inputs: Mapping[str, Symbol] | None = None, name: str | None = None,
                     attr: Mapping | None = None, hint: str | None = None) -> Symbol:
    """Apply op `func_name` (registered name or alias) to symbols, MXNet-style.

    Attributes are converted to MXNet strings and validated by the op's schema; the node is
    named by `name` or the current NameManager (hint: the lower-cased function name); inputs
    not given become variables named `<node>_<input>` (e.g. `fc1_weight`, `bn0_moving_mean`)
    that carry a copy of the node's attributes, as MXNet does.
    """
    op = get_op(func_name)
    if op.compiler_internal:
        raise MXNetError(f"{func_name}: operator {op.name!r} is internal to the compiler; "
                         "graphs cannot use it directly")
    str_attrs = {k: attr_string(v) for k, v in attrs.items() if v is not None}
    for k, v in AttrScope.current.get(attr).items():
        str_attrs[k] = v if isinstance(v, str) else attr_string(v)
    for k in HIDDEN_KEYS:   # MXNet keeps a hidden key given to an op under both spellings
        if k in str_attrs:
            str_attrs[hidden_key(k)] = str_attrs[k]
    try:
        parsed = op.parse(str_attrs)
    except MXNetError as e:
        raise MXNetError(f"{func_name}: {e}" if not str(e).startswith(op.name) else str(e)) from None
    node_name = NameManager.current.get(name, hint or func_name.lower())
    input_names = op.input_names(parsed)
    named = dict(named_inputs or {})
    if len(inputs) > len(input_names):
        raise MXNetError(f"{op.name}: too many input symbols: got {len(inputs)}, inputs are {input_names}")
    entries = []
    for i, in_name in enumerate(input_names):
        s = inputs[i] if i < len(inputs) else named.pop(in_name, None)
        if s is None:
            var_attrs = dict(str_attrs)
            if in_name in op.input_init:
                var_attrs.setdefault("__init__", op.input_init[in_name])
            var_node = SymNode(None, f"{node_name}_{in_name}", var_attrs)
            entries.append((var_node, 0))
            continue
        if not isinstance(s, Symbol):
            raise TypeError(f"{op.name}: input {in_name!r} must be a Symbol, got {type(s).__name__}")
        if len(s._outputs) != 1:
            raise MXNetError(f"{op.name}: input {in_name!r} must be a single-output symbol, got one with "
                             f"{len(s._outputs)} outputs {s.list_outputs()}")
        entries.append(s._outputs[0])
    if named:
        raise MXNetError(f"{op.name}: unexpected input symbols {sorted(named)} (inputs are {input_names})")
    node = SymNode(op, node_name, str_attrs, entries, parsed)
    n_vis = node.num_visible_outputs()
    return Symbol([(node, i) for i in range(n_vis)])
