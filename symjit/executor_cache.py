"""Compiled programs of bound symbols, shared by executors that bind the same symbol to arrays
of the same shapes and dtypes with gradients for the same arguments.

MXNet binds in microseconds; symjit lowers, infers, differentiates and compiles. Programs
that bind one symbol many times (a training loop rebinding for each bucket, a test binding
every grad_req combination) reuse the `BoundProgram` of an earlier executor instead of building
it again. A program holds no arrays: executors feed their own on every call.

The key is the symbol's structure (its JSON without operator node names), the device, the
arguments' and auxiliary states' shapes and dtypes, which arguments get a gradient, and the
settings that change compilation (backend, MXNet's graph CSE switch, NumPy shape semantics). 'write' and 'add' share a program: the backward graph computes the
gradients and the executor writes or adds them. Symbols with `Custom` operators are never
shared (their Python classes may be registered again under the same name).
"""
from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

from .base import MXNetError
from .ir.graph import Graph
from .ir.verify import verify
from .passes.autodiff import AutodiffStats, autodiff
from .passes.infer import infer_types

__all__ = ["BoundProgram", "bound_program", "clear_bound_programs"]

#: programs kept (least recently used dropped first)
CAPACITY = 64

_PROGRAMS: "OrderedDict[tuple, BoundProgram]" = OrderedDict()


@dataclass
class BoundProgram:
    """The typed forward graph, the backend that runs it and its compiled function; with
    gradients, the backward graph (every gradient 'write'), its autodiff bookkeeping and
    compiled function."""
    graph: Graph
    backend: object
    forward_fn: Callable
    backward_graph: Graph | None = None
    bstats: AutodiffStats | None = None
    backward_fn: Callable | None = None


def zero_size_allowed(graph: Graph) -> bool:
    """Whether values of unknown static shape are zero-size arrays rather than missing
    information: under NumPy shape semantics (`mx.np_shape()`) a 0 dim is a real size, which the
    IR's types (0 = unknown dim) do not express; every dtype must still be known."""
    from .util import is_np_shape
    return is_np_shape() and all(v.type.dtype is not None and v.type.shape is not None for v in graph.values())


def _build(symbol, device: str, backend, compile_fn: Callable, shapes: dict, dtypes: dict,
           wants_grad: tuple) -> BoundProgram:
    from .symbol.lower import lower
    graph, _ = lower(symbol, device=device, input_dtypes=dtypes)
    graph, _ = infer_types(graph, shapes=shapes, dtypes=dtypes)
    unknown = [f"%{v.name}" for v in graph.values() if not v.type.known]
    if unknown and not zero_size_allowed(graph):
        raise MXNetError(f"bind: cannot infer the type of {unknown[:8]} from the bound arrays")
    verify(graph)
    if unknown:
        # zero-size values (NumPy shape semantics) have no static shape: the reference
        # interpreter runs them, every op computing its shape from its inputs
        from .executor import InterpreterBackend
        backend = InterpreterBackend()
    program = BoundProgram(graph, backend, compile_fn(backend, graph))
    if any(wants_grad):
        wrt = [v for v, g in zip(graph.args, wants_grad) if g]
        bwd, stats = autodiff(graph, wrt, ["write"] * len(wrt))
        verify(bwd)
        program.backward_graph, program.bstats = bwd, stats
        program.backward_fn = compile_fn(backend, bwd)
    return program


def _structure(symbol) -> str | None:
    """The symbol's JSON without operator node names (automatic names such as `_plus3` differ
    between otherwise identical symbols; variables keep theirs: they name the inputs); None
    for symbols that must not be shared (`Custom` operators)."""
    graph = json.loads(symbol.tojson(), strict=False)
    for node in graph["nodes"]:
        if node["op"] == "Custom":
            return None
        if node["op"] != "null":
            node["name"] = ""
    return json.dumps(graph, sort_keys=True, separators=(",", ":"))


def bound_program(symbol, device: str, backend, compile_fn: Callable, settings: tuple, shapes: dict,
                  dtypes: dict, wants_grad: tuple) -> BoundProgram:
    """The program for `symbol` bound on `device` with inputs of `shapes` / `dtypes` (name ->
    value) and gradients for the arguments flagged in `wants_grad` (list_arguments order),
    compiled by `compile_fn(backend, graph)`; `settings`: whatever else changes compilation."""
    structure = _structure(symbol)
    if structure is None:
        return _build(symbol, device, backend, compile_fn, shapes, dtypes, wants_grad)
    key = (structure, device, type(backend).__name__, settings, tuple(sorted(shapes.items())),
           tuple(sorted(dtypes.items())), wants_grad)
    program = _PROGRAMS.get(key)
    if program is None:
        program = _build(symbol, device, backend, compile_fn, shapes, dtypes, wants_grad)
        _PROGRAMS[key] = program
        while len(_PROGRAMS) > CAPACITY:
            _PROGRAMS.popitem(last=False)
    else:
        _PROGRAMS.move_to_end(key)
    return program


def clear_bound_programs() -> None:
    """Forget every shared program (their executors keep theirs)."""
    _PROGRAMS.clear()
