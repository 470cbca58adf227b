"""symjit.symbol.contrib (`mx.sym.contrib`): MXNet 1.x symbolic contrib functions.

  * `rand_zipfian(true_classes, num_sampled, range_max)` — MXNet's composition of registered
    ops (a log-uniform draw, expected counts in float64); each run samples anew.
  * `while_loop(cond, func, loop_vars, max_iterations)` — one `_while_loop` node (named
    `_while_loop0`, ...) whose `cond` and `func` attributes are subgraphs built by calling the
    Python functions once on fresh variables, as MXNet does. Symbols from the enclosing graph
    that the functions capture are cut out of the subgraphs and become inputs of the node.
  * `cond(pred, then_func, else_func)` (`_cond`) and `foreach(body, data, init_states)`
    (`_foreach`) are built the same way.
  * every registered `_contrib_<name>` op as `mx.sym.contrib.<name>` (node hint `<name>`).

`SymbolSubgraph` is the symbolic implementation of the ops layer's `Subgraph` protocol: a
Symbol with an ordered list of input names, run by the reference interpreter, differentiated
by the autodiff pass (`vjp`, used by the control-flow ops' backward ops); its text form is
JSON and the loader installed here rebuilds it, so graphs with control flow round-trip.
"""
from __future__ import annotations

import itertools
import json
import math
import threading
from typing import Callable, Sequence

import numpy as np

from ..base import MXNetError
from ..ops.contrib import set_subgraph_loader
from ..ops.registry import ComputeContext, find_op, list_ops
from . import op_function
from . import random as _random
from .naming import AttrScope
from .symbol import Group, Symbol, SymNode, Variable, create_op_symbol, topo_nodes
from ..nested import flatten, regroup as _regroup

__all__ = ["rand_zipfian", "while_loop", "cond", "foreach", "SymbolSubgraph"]

_PREFIX = "_contrib_"


# ------------------------------------------------------------------------------------------
# rand_zipfian
# ------------------------------------------------------------------------------------------

def rand_zipfian(true_classes: Symbol, num_sampled: int, range_max: int):
    """Draw `num_sampled` classes from the approximately log-uniform (Zipfian) distribution on
    [0, range_max): P(class) = log((class + 2) / (class + 1)) / log(range_max + 1).

    Returns (sampled classes as int64, expected count of each true class, expected count of
    each sampled class), the counts in float64: num_sampled * P(class)."""
    if not isinstance(true_classes, Symbol):
        raise MXNetError(f"rand_zipfian: true_classes must be a Symbol, got {type(true_classes).__name__}")
    log_range = math.log(range_max + 1)
    rand = _random.uniform(0, log_range, shape=(num_sampled,), dtype="float64")
    sampled_classes = (rand.exp() - 1).astype("int64") % range_max
    true_cls = true_classes.astype("float64")
    expected_count_true = ((true_cls + 2.0) / (true_cls + 1.0)).log() / log_range * num_sampled
    sampled_fp64 = sampled_classes.astype("float64")
    expected_prob_sampled = ((sampled_fp64 + 2.0) / (sampled_fp64 + 1.0)).log() / log_range
    return sampled_classes, expected_count_true, expected_prob_sampled * num_sampled


# ------------------------------------------------------------------------------------------
# Subgraphs
# ------------------------------------------------------------------------------------------

class SymbolSubgraph:
    """A Symbol run as a subgraph: inputs are fed by position in `input_names` order (names
    the symbol does not read are accepted and ignored); outputs in `list_outputs()` order."""

    def __init__(self, symbol: Symbol, input_names: Sequence[str]):
        self.symbol = symbol
        self.input_names = list(input_names)
        if len(set(self.input_names)) != len(self.input_names):
            raise MXNetError(f"subgraph input names must be unique, got {self.input_names}")
        if symbol.list_auxiliary_states():
            raise MXNetError("control-flow subgraphs with auxiliary states (e.g. BatchNorm moving "
                             f"statistics {symbol.list_auxiliary_states()}) are not supported")
        args = symbol.list_arguments()
        missing = [a for a in args if a not in self.input_names]
        if missing:
            raise MXNetError(f"subgraph reads {missing}, which are not among its inputs {self.input_names}")
        self._args = set(args)
        self.num_inputs = len(self.input_names)
        self.num_outputs = len(symbol.list_outputs())
        self._graph = None
        self._vjp_cache: dict = {}

    def _lowered(self):
        if self._graph is None:
            from .lower import lower
            self._graph, _ = lower(self.symbol)
        return self._graph

    def infer(self, shapes: Sequence, dtypes: Sequence) -> tuple[list, list]:
        """Output shapes and dtypes (partial) from the inputs' (partial) types."""
        from ..passes.infer import infer_types
        given_s = {n: tuple(s) for n, s in zip(self.input_names, shapes) if s is not None and n in self._args}
        given_d = {n: d for n, d in zip(self.input_names, dtypes) if d is not None and n in self._args}
        g, _ = infer_types(self._lowered(), shapes=given_s, dtypes=given_d)
        return [v.type.shape for v in g.outputs], [v.type.dtype for v in g.outputs]

    def run(self, arrays: Sequence[np.ndarray], ctx: ComputeContext) -> list:
        """The outputs on these inputs (fresh arrays)."""
        from ..ir.interpreter import run
        if len(arrays) != self.num_inputs:
            raise MXNetError(f"subgraph expects {self.num_inputs} inputs {self.input_names}, got {len(arrays)}")
        feeds = {n: a for n, a in zip(self.input_names, arrays) if n in self._args}
        result = run(self._lowered(), feeds, is_train=ctx.is_train, rng=ctx.rng)
        return [np.array(r, copy=True) for r in result.outputs]

    def vjp(self, arrays: Sequence[np.ndarray], out_grads: Sequence[np.ndarray], ctx: ComputeContext) -> list:
        """Gradients of sum_k <output_k, out_grads[k]> with respect to each input (zeros for
        inputs that are unused or not floating point). The forward is recomputed from
        `arrays`: random ops inside the subgraph draw anew."""
        from ..ir.interpreter import run
        args = {n: a for n, a in zip(self.input_names, arrays) if n in self._args}
        g, bwd, stats = self._backward(args)
        fwd = run(g, args, is_train=ctx.is_train, rng=ctx.rng, keep=[f for f, _ in stats.saved])
        feeds = {b: fwd.kept[f] for f, b in stats.saved}
        for head, og, out in zip(stats.head_grads, out_grads, fwd.outputs):
            feeds[head] = np.asarray(og, dtype=np.asarray(out).dtype)
        res = run(bwd, feeds, is_train=ctx.is_train, rng=ctx.rng)
        by_name = {v.name: r for (v, _), r in zip(stats.grad_outputs, res.outputs)}
        return [np.asarray(by_name[n]) if n in by_name else np.zeros_like(np.asarray(a))
                for n, a in zip(self.input_names, arrays)]

    def _backward(self, args: dict):
        """(typed forward graph, backward graph, autodiff stats) for these input types (cached)."""
        from ..passes.autodiff import autodiff
        from ..passes.infer import infer_types
        key = tuple(sorted((n, a.shape, a.dtype.str) for n, a in args.items()))
        cached = self._vjp_cache.get(key)
        if cached is None:
            g, _ = infer_types(self._lowered(), shapes={n: a.shape for n, a in args.items()},
                               dtypes={n: a.dtype.name for n, a in args.items()})
            wrt = [v for v in g.args if v.type.dtype is not None and np.issubdtype(np.dtype(v.type.dtype), np.floating)]
            bwd, stats = autodiff(g, wrt, ["write"] * len(wrt))
            cached = self._vjp_cache[key] = (g, bwd, stats)
        return cached

    def __str__(self) -> str:
        return json.dumps({"inputs": self.input_names, "graph": json.loads(self.symbol.tojson(), strict=False)})

    def __repr__(self) -> str:
        return f"<SymbolSubgraph ({', '.join(self.input_names)}) -> {self.num_outputs} outputs>"

    @classmethod
    def from_text(cls, text: str) -> "SymbolSubgraph":
        """Rebuild a subgraph from `str(subgraph)`."""
        from .json_io import load_json
        try:
            spec = json.loads(text, strict=False)
            names, graph = spec["inputs"], spec["graph"]
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            raise ValueError(f"not a subgraph description: {type(e).__name__}: {e}") from None
        return cls(load_json(json.dumps(graph)), names)


set_subgraph_loader(SymbolSubgraph.from_text)


# ------------------------------------------------------------------------------------------
# Nested lists of symbols (MXNet's _flatten / _regroup)
# ------------------------------------------------------------------------------------------

def _flatten(args, what: str):
    """A nested list of Symbols -> (flat list, format to regroup it)."""
    return flatten(args, Symbol, what)


# ------------------------------------------------------------------------------------------
# Building subgraphs from Python functions
# ------------------------------------------------------------------------------------------

_SUBGRAPH_COUNTER = itertools.count()
_LOCK = threading.Lock()


def _entry_name(entry) -> str:
    node, i = entry
    return node.name if node.is_variable else node.output_name(i)


class _Built:
    """A subgraph and, for each of its inputs, the outer entry feeding it (None: loop var j)."""

    def __init__(self, sub: SymbolSubgraph, feeds: list, out_fmt):
        self.sub, self.feeds, self.out_fmt = sub, feeds, out_fmt


def _build_subgraph(loop_vars: list, fn: Callable, label: str) -> _Built:
    """Call `fn` on fresh variables standing for `loop_vars` inside an attribute scope, then cut
    every edge into a node created outside it: those become subgraph inputs."""
    with _LOCK:
        scope = f"{label}{next(_SUBGRAPH_COUNTER)}"
    names = _unique_names([_entry_name(v._outputs[0]) for v in loop_vars])
    with AttrScope(__subgraph_name__=scope):
        new_vars = [Variable(n) for n in names]
        outs, out_fmt = fn(new_vars)
        var_nodes = {id(v._outputs[0][0]) for v in new_vars}

        def inner(node: SymNode) -> bool:
            return id(node) in var_nodes or (not node.is_variable and node.attrs.get("__subgraph_name__") == scope)
        # outputs that are variables or outer symbols get an identity node inside the scope
        outs = [create_op_symbol("identity", [o], {}) if o._outputs[0][0].is_variable or not inner(o._outputs[0][0])
                else o for o in outs]
    heads = [o._outputs[0] for o in outs]
    cut: dict[tuple, SymNode] = {}
    outer: dict[str, tuple] = {}
    taken = set(names)
    for node in topo_nodes(heads):
        if node.is_variable or not inner(node):
            continue
        new_inputs = []
        for c, i in node.inputs:
            if inner(c) or (c.is_variable and c.attrs.get("__subgraph_name__") == scope):
                new_inputs.append((c, i))
                continue
            key = (id(c), i)
            if key not in cut:
                name = _unique_names([_entry_name((c, i))], taken)[0]
                taken.add(name)
                cut[key] = SymNode(None, name, {})
                outer[name] = (c, i)
            new_inputs.append((cut[key], 0))
        node.inputs = new_inputs
    graph = Group(outs)
    input_names = graph.list_inputs() + [n for n in names if n not in graph.list_inputs()]
    feeds = []
    for n in input_names:
        if n in names:
            feeds.append(names.index(n))
        elif n in outer:
            feeds.append(outer[n])
        else:  # a variable created inside the functions (e.g. a layer's weight): a free input
            feeds.append(n)
    return _Built(SymbolSubgraph(graph, input_names), feeds, out_fmt)


def _unique_names(names: list, taken: set | None = None) -> list:
    out, seen = [], set(taken or ())
    for n in names:
        cand, k = n, 1
        while cand in seen:
            cand, k = f"{n}_{k}", k + 1
        seen.add(cand)
        out.append(cand)
    return out


def _union_inputs(loop_vars: list, built: Sequence[_Built]):
    """Node inputs (outer entries, deduplicated) and each subgraph's input locations."""
    entries: list[tuple] = []
    index: dict = {}
    free_vars: dict[str, tuple] = {}

    def loc(key, entry) -> int:
        if key not in index:
            index[key] = len(entries)
            entries.append(entry)
        return index[key]
    all_locs = []
    for b in built:
        locs = []
        for feed in b.feeds:
            if isinstance(feed, int):  # a loop variable: its own input, even if also captured
                entry, key = loop_vars[feed]._outputs[0], ("var", feed)
            elif isinstance(feed, str):
                entry = free_vars.setdefault(feed, (SymNode(None, feed, {}), 0))
                key = (id(entry[0]), 0)
            else:
                entry, key = feed, (id(feed[0]), feed[1])
            locs.append(loc(key, entry))
        all_locs.append(tuple(locs))
    return entries, all_locs


# ------------------------------------------------------------------------------------------
# while_loop
# ------------------------------------------------------------------------------------------

def while_loop(cond: Callable, func: Callable, loop_vars, max_iterations=None, name: str = "while_loop"):
    """Symbolic while loop (MXNet's `mx.sym.contrib.while_loop`).

    `cond(*loop_vars)` returns a one-element Symbol; `func(*loop_vars)` returns
    (step outputs, new loop variables), each a Symbol or a (nested) list of Symbols. Returns
    (outputs, final loop variables): every step output stacked over the iterations and padded
    to `max_iterations` rows; outputs of one `_while_loop` node.
    """
    if max_iterations is None:
        raise ValueError("max_iterations should be specified")
    try:
        max_iterations = int(max_iterations)
    except (TypeError, ValueError):
        raise ValueError(f"Cannot convert max_iteration to python int: {max_iterations!r}") from None
    flat_vars, var_fmt = _flatten(loop_vars, "while loop_vars")
    if not flat_vars:
        raise ValueError("loop_vars should contain at least one element")
    for v in flat_vars:
        if len(v._outputs) != 1:
            raise MXNetError(f"while_loop: every loop variable must be a single-output Symbol, got {v}")

    def cond_body(new_vars):
        out = cond(*_regroup(new_vars, var_fmt)[0]) if isinstance(var_fmt, list) else cond(new_vars[0])
        flat, _ = _flatten(out, "Return value of cond")
        if len(flat) != 1:
            raise ValueError(f"Return value of cond must be a single Symbol, got {len(flat)}")
        return flat, 0

    def func_body(new_vars):
        args = _regroup(new_vars, var_fmt)[0] if isinstance(var_fmt, list) else [new_vars[0]]
        step_output, new_loop_vars = func(*args)
        step_output = [] if step_output is None else step_output
        new_loop_vars = [] if new_loop_vars is None else new_loop_vars
        flat_out, out_fmt = _flatten(step_output, "while output")
        flat_new, _ = _flatten(new_loop_vars, "while loop_vars")
        if len(flat_new) != len(flat_vars):
            raise ValueError("The length of loop_vars should be consistent during the loop")
        return flat_out + flat_new, (out_fmt, len(flat_out))

    cond_b = _build_subgraph(flat_vars, cond_body, f"{name}_cond")
    func_b = _build_subgraph(flat_vars, func_body, f"{name}_func")
    out_fmt, num_out_data = func_b.out_fmt
    entries, (cond_locs, func_locs) = _union_inputs(flat_vars, [cond_b, func_b])
    func_var_locs = tuple(func_b.feeds.index(j) for j in range(len(flat_vars)))
    result = create_op_symbol("_while_loop", [Symbol([e]) for e in entries], {
        "cond": cond_b.sub, "func": func_b.sub, "num_args": len(entries),
        "num_outputs": num_out_data + len(flat_vars), "num_out_data": num_out_data,
        "max_iterations": max_iterations, "cond_input_locs": cond_locs,
        "func_input_locs": func_locs, "func_var_locs": func_var_locs}, hint="_while_loop")
    outputs = [result[i] for i in range(num_out_data)]
    outputs, _ = _regroup(outputs, out_fmt)
    states = [result[i] for i in range(num_out_data, num_out_data + len(flat_vars))]
    states, _ = _regroup(states, var_fmt)
    return outputs, states


# ------------------------------------------------------------------------------------------
# cond, foreach
# ------------------------------------------------------------------------------------------

def cond(pred: Symbol, then_func: Callable, else_func: Callable, name: str = "cond"):
    """Symbolic if-then-else (MXNet's `mx.sym.contrib.cond`): one `_cond` node computing
    `then_func()` when the one-element `pred` is true at run time, else `else_func()`. Both
    functions take no arguments (they capture symbols) and return the same number of outputs."""
    if not isinstance(pred, Symbol) or len(pred._outputs) != 1:
        raise MXNetError(f"cond: pred must be a single-output Symbol, got {pred!r}")

    def branch(fn: Callable, what: str) -> Callable:
        def body(_new_vars):
            flat, fmt = _flatten(fn(), f"cond {what} outputs")
            return flat, (fmt, len(flat))
        return body
    pred_b = _build_subgraph([], lambda _v: ([pred], (0, 1)), f"{name}_pred")
    then_b = _build_subgraph([], branch(then_func, "then"), f"{name}_then")
    else_b = _build_subgraph([], branch(else_func, "else"), f"{name}_else")
    then_fmt, n_then = then_b.out_fmt
    if else_b.out_fmt[1] != n_then:
        raise ValueError("Number of outputs differs between then-branch and else-branch")
    entries, (cond_locs, then_locs, else_locs) = _union_inputs([], [pred_b, then_b, else_b])
    result = create_op_symbol("_cond", [Symbol([e]) for e in entries], {
        "cond": pred_b.sub, "then_branch": then_b.sub, "else_branch": else_b.sub,
        "num_args": len(entries), "num_outputs": n_then, "cond_input_locs": cond_locs,
        "then_input_locs": then_locs, "else_input_locs": else_locs}, hint="_cond")
    outputs, _ = _regroup([result[i] for i in range(n_then)], then_fmt)
    return outputs


def foreach(body: Callable, data, init_states, name: str = "foreach"):
    """Symbolic scan (MXNet's `mx.sym.contrib.foreach`): `body(data_slice, states) ->
    (outputs, new_states)` over the first axis of `data`; one `_foreach` node. Returns
    (outputs stacked along a new first axis, final states)."""
    flat_data, data_fmt = _flatten(data, "foreach input")
    flat_states, state_fmt = _flatten(init_states, "foreach states")
    if not flat_data:
        raise ValueError("foreach needs at least one data input")
    n_data = len(flat_data)

    def step(new_vars):
        eles = _regroup(new_vars[:n_data], data_fmt)[0]
        states = _regroup(new_vars[n_data:], state_fmt)[0] if flat_states else []
        outs, new_states = body(eles, states)
        flat_out, out_fmt = _flatten(outs, "foreach output")
        flat_new, new_fmt = _flatten(new_states, "foreach loop_vars")
        if len(flat_new) != len(flat_states):
            raise ValueError("The input and output loop_vars have different format")
        return flat_out + flat_new, (out_fmt, len(flat_out))

    built = _build_subgraph(flat_data + flat_states, step, name)
    out_fmt, num_out_data = built.out_fmt
    n_vars = n_data + len(flat_states)
    var_loc = {j: built.feeds.index(j) for j in range(n_vars)}
    remain_locs = [k for k, f in enumerate(built.feeds) if not isinstance(f, int)]
    free_vars: dict[str, tuple] = {}
    remains = []
    for k in remain_locs:
        f = built.feeds[k]
        remains.append(free_vars.setdefault(f, (SymNode(None, f, {}), 0)) if isinstance(f, str) else f)
    inputs = [v._outputs[0] for v in flat_data + flat_states] + remains
    result = create_op_symbol("_foreach", [Symbol([e]) for e in inputs], {
        "body": built.sub, "num_args": len(inputs), "num_outputs": num_out_data + len(flat_states),
        "num_out_data": num_out_data, "in_data_locs": tuple(var_loc[j] for j in range(n_data)),
        "in_state_locs": tuple(var_loc[j] for j in range(n_data, n_vars)),
        "remain_locs": tuple(remain_locs)}, hint="_foreach")
    outs, _ = _regroup([result[i] for i in range(num_out_data)], out_fmt)
    states = [result[i] for i in range(num_out_data, num_out_data + len(flat_states))]
    states = _regroup(states, state_fmt)[0] if flat_states else []
    return outs, states


# ------------------------------------------------------------------------------------------
# Registered `_contrib_*` ops
# ------------------------------------------------------------------------------------------

def _function(name: str) -> Callable:
    fn = op_function(_PREFIX + name, hint=name.lower())
    fn.__name__ = name
    return fn


def __getattr__(name: str) -> Callable:
    if not name.startswith("__") and find_op(_PREFIX + name) is not None:
        fn = globals()[name] = _function(name)   # one function object per op, as a module attribute
        return fn
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted({*globals(), *(n[len(_PREFIX):] for n in list_ops() if n.startswith(_PREFIX))})
