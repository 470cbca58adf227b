"""`symjit.compile` and `symjit.inspect`: the compiler as a library.

    model = symjit.compile(sym, shapes={"data": (1, 3, 224, 224)}, params=arg_and_aux_params)
    y, = model(data=x)                      # numpy or NDArray inputs, numpy outputs
    print(symjit.inspect(sym, shapes={"data": (8, 784)}))

`compile` accepts a Symbol, a HybridBlock (traced with symbolic inputs, its parameters as
the `params` default) or an IR Graph; `params` (name -> array, MXNet's `arg:`/`aux:`
prefixes accepted) are bound as compile-time constants, so the inference pipeline folds
BatchNorm into convolutions and precomputes what depends only on them. Inputs not bound
stay arguments of the compiled model.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from .base import MXNetError, real_array
from .ir.graph import Graph
from .ir.printer import format_graph
from .ir.target import Target
from .ops.fused import FUSED_OPS
from .passes.infer import infer_types
from .passes.manager import PassManager

__all__ = ["compile", "inspect", "CompiledModel", "InspectReport"]


def _as_numpy(a) -> np.ndarray:
    return a.asnumpy() if hasattr(a, "asnumpy") else real_array(a, "compile")


def _strip(params: Mapping | None) -> dict:
    out = {}
    for k, v in (params or {}).items():
        if k.startswith(("arg:", "aux:")):
            k = k[4:]
        out[k] = _as_numpy(v)
    return out


def _to_graph(obj, shapes, dtypes) -> tuple[Graph, dict]:
    """(typed graph, default params) for a Symbol, a HybridBlock or a Graph."""
    params: dict = {}
    if isinstance(obj, Graph):
        g = obj
    else:
        from .symbol import Symbol
        sym = obj
        if not isinstance(obj, Symbol):
            get_graph = getattr(obj, "_get_graph", None)
            if get_graph is None:
                raise MXNetError(f"compile: expected a Symbol, a HybridBlock or a Graph, got {type(obj).__name__}")
            names = sorted(shapes or {})
            if not names:
                raise MXNetError("compile: a block needs `shapes` for its inputs (e.g. {'data': (1, 784)})")
            from . import symbol as _sym
            _, sym = get_graph(*[_sym.var(n) for n in names])
            params = {p.name: p.data().asnumpy() for p in obj.collect_params().values()
                      if p._data is not None}
        from .symbol.lower import lower
        g, _ = lower(sym)
    g, _ = infer_types(g, shapes={k: tuple(v) for k, v in (shapes or {}).items()},
                       dtypes=dict(dtypes or {}))
    defaults = {v.name: "float32" for v in g.inputs if v.type.dtype is None}
    if defaults:
        g, _ = infer_types(g, dtypes=defaults)
    return g, params


@dataclass
class CompiledModel:
    """A compiled graph with its remaining (unbound) inputs, callable by name or position."""
    graph: Graph
    compiled: object
    manager: PassManager
    input_names: list

    def __call__(self, *args, **kwargs) -> list:
        if args and kwargs:
            raise MXNetError("compiled model: pass inputs either by position or by name")
        if kwargs:
            missing = [n for n in self.input_names if n not in kwargs]
            extra = [k for k in kwargs if k not in self.input_names]
            if missing or extra:
                raise MXNetError(f"compiled model: inputs are {self.input_names}; missing {missing}, "
                                 f"unexpected {extra}")
            args = [kwargs[n] for n in self.input_names]
        arrays = [np.ascontiguousarray(_as_numpy(a)) for a in args]
        specs = {n: (s, d) for n, s, d in self.compiled.input_specs}
        fed = []
        for name, a in zip(self.input_names, arrays):
            shape, dtype = specs[name]
            if a.dtype != dtype and a.shape == shape:
                a = a.astype(dtype)
            fed.append(a)
        by_name = dict(zip(self.input_names, fed))
        full = [by_name.get(n) if n in by_name else self._bound[n] for n, _, _ in self.compiled.input_specs]
        return self.compiled(full)

    @property
    def native(self) -> bool:
        return self.compiled.native

    def profile(self, reset: bool = True) -> list:
        """Each native node's time inside the compiled code since compiling or the last reset
        (`NodeTime`s in graph order); needs `compile(..., profile=True)`."""
        return self.compiled.profile(reset)

    def report(self) -> str:
        return self.manager.report()


def llvm_target(target: Target | str | None) -> Target:
    """The llvm Target `target` names: None or "native" (the host), a CPU name of
    `codegen.llvm.target.NAMED_CPUS` ("x86-64-v3", "x86-64-v4", "znver4"), or a Target."""
    from .codegen.llvm.target import compile_target
    if isinstance(target, Target):
        if target.kind != "llvm":
            raise MXNetError(f"compile: target kind {target.kind!r} is not llvm (CUDA builds: symjit compile --target cuda)")
        return target
    try:
        return compile_target(target or "native")
    except ValueError as e:
        raise MXNetError(f"compile: {e}") from None


def compile(obj, shapes: Mapping | None = None, params: Mapping | None = None, dtypes: Mapping | None = None,
            pipeline: str = "inference", disabled=(), name: str = "model", profile: bool = False,
            target: Target | str | None = None) -> CompiledModel:
    """Compile a Symbol, HybridBlock or Graph for a CPU (see the module docstring).
    `profile`: time every native node inside the compiled code (`CompiledModel.profile()`).
    `target`: the CPU the code is for (`llvm_target`; default the host). Code for another CPU
    runs here only where this CPU has its features; it is what `symjit compile --cpu` embeds."""
    from .codegen.llvm.executable import compile_planned
    target = llvm_target(target)
    g, default_params = _to_graph(obj, shapes, dtypes)
    consts = dict(default_params)
    consts.update(_strip(params))
    consts = {k: v for k, v in consts.items() if k in {i.name for i in g.inputs}}
    pm = PassManager(pipeline, disabled=set(disabled), target=target)
    opt = pm.run(g, consts if pipeline == "inference" else None)
    compiled = compile_planned(opt, name, profile=profile, target=target)
    bound = consts if pipeline == "inference" else {}
    names = [n for n, _, _ in compiled.input_specs if n not in bound]
    model = CompiledModel(opt, compiled, pm, names)
    model._bound = {k: np.ascontiguousarray(v) for k, v in bound.items()}
    return model


@dataclass
class InspectReport:
    """What the compiler did: pass statistics, fusion groups and the memory plan."""
    before: str
    after: str
    passes: str
    groups: list
    memory: str
    unoptimized_bytes: int
    nodes_before: int
    nodes_after: int
    #: nodes of the optimized graph that would run in Python on the llvm target, and why
    python_nodes: list = None

    def __str__(self) -> str:
        lines = [f"nodes: {self.nodes_before} before, {self.nodes_after} after optimization", "",
                 "passes:", self.passes, "", f"fusion groups ({len(self.groups)}):"]
        for name, op, members in self.groups:
            lines.append(f"  {name} [{op}]: {', '.join(members)}")
        lines += ["", f"memory plan: {self.memory}",
                  f"unoptimized intermediates (each in its own buffer): {self.unoptimized_bytes} B", "",
                  f"nodes without native code ({len(self.python_nodes or [])}):"]
        lines += [f"  {f}" for f in self.python_nodes or []]
        lines += ["", "optimized graph:", self.after]
        return "\n".join(lines)


def inspect(obj, shapes: Mapping | None = None, params: Mapping | None = None, dtypes: Mapping | None = None,
            pipeline: str = "inference") -> InspectReport:
    """Run the pass pipeline and report it, with the nodes the llvm target would run in Python
    (lowered to LLVM IR, not compiled)."""
    from .codegen.llvm.graph import lower_graph
    g, default_params = _to_graph(obj, shapes, dtypes)
    consts = dict(default_params)
    consts.update(_strip(params))
    consts = {k: v for k, v in consts.items() if k in {i.name for i in g.inputs}}
    pm = PassManager(pipeline, target=llvm_target(None))
    opt = pm.run(g, consts or None)
    groups = [(n.name, n.op.name, list(n.attrs.get("members", ()))) for n in opt.nodes
              if n.op.name in FUSED_OPS]
    plan = opt.annotations.get("memory_plan")
    fallbacks = lower_graph(opt, "inspect", strict=False).fallbacks if plan else []
    return InspectReport(format_graph(g), format_graph(opt), pm.report(), groups,
                         plan.summary() if plan else "(none)", pm.unoptimized_bytes, len(g.nodes),
                         len(opt.nodes), fallbacks)
