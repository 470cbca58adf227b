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


def _bare(name: str) -> str:
    """A parameter name without MXNet's `arg:`/`aux:` prefix."""
    return name[4:] if name.startswith(("arg:", "aux:")) else name


def _bound_constants(g: Graph, default_params: Mapping, params: Mapping | None) -> dict:
    """The constants to bind into `g`: `default_params` overridden by `params` (prefixes
    stripped), as numpy copies, keeping only names that are inputs of `g` (others are
    neither converted nor copied)."""
    inputs = {i.name for i in g.inputs}
    consts = {k: v for k, v in default_params.items() if k in inputs}
    for k, v in (params or {}).items():
        k = _bare(k)
        if k in inputs:
            consts[k] = _as_numpy(v)
    return consts


def _input_names(src) -> set:
    """The input names of a Symbol or Graph (its arguments and auxiliary states)."""
    if isinstance(src, Graph):
        return {v.name for v in src.inputs}
    return set(src.list_arguments()) | set(src.list_auxiliary_states())


def _with_param_shapes(src, shapes: Mapping | None, default_params: Mapping, params: Mapping | None) -> dict:
    """`shapes` plus the shape of every input of `src` it does not name but a parameter gives
    (MXNet's binding reads a parameter's shape from its array): inference cannot always work
    them out backwards (a broadcast operand)."""
    inputs = _input_names(src)
    out = {k: tuple(np.shape(v)) for k, v in default_params.items() if k in inputs}
    for k, v in (params or {}).items():
        k = _bare(k)
        if k in inputs:
            out[k] = tuple(v.shape) if hasattr(v, "shape") else tuple(np.shape(_as_numpy(v)))
    out.update({k: tuple(v) for k, v in (shapes or {}).items()})
    return out


def _check_known_shapes(g: Graph, what: str) -> None:
    """Raise a clear error naming the inputs whose shapes are still unknown after inference."""
    unknown = [v.name for v in g.inputs if not v.type.known]
    if unknown:
        raise MXNetError(f"{what}: the shapes of input(s) {unknown} cannot be inferred; give them in "
                         f"shapes= (or their values in params=)")


def _source(obj, shapes) -> tuple[object, dict]:
    """(Symbol or Graph, default params) for a Symbol, a HybridBlock (traced with symbolic
    inputs named by `shapes`; its parameters' values are the defaults) or a Graph."""
    if isinstance(obj, Graph):
        return obj, {}
    from .symbol import Symbol
    if isinstance(obj, Symbol):
        return obj, {}
    get_graph = getattr(obj, "_get_graph", None)
    if get_graph is None:
        raise MXNetError(f"compile: expected a Symbol, a HybridBlock or a Graph, got {type(obj).__name__}")
    names = sorted(shapes or {})
    if not names:
        raise MXNetError("compile: a block needs `shapes` for its inputs (e.g. {'data': (1, 784)})")
    from . import symbol as _sym
    _, sym = get_graph(*[_sym.var(n) for n in names])
    params = {p.name: p.data().asnumpy() for p in obj.collect_params().values() if p._data is not None}
    return sym, params


def _typed_graph(src, shapes, dtypes) -> Graph:
    """The typed IR graph of a Symbol or Graph (`_source`) for these input shapes and dtypes."""
    g = src
    if not isinstance(src, Graph):
        from .symbol.lower import lower
        g, _ = lower(src)
    g, _ = infer_types(g, shapes={k: tuple(v) for k, v in (shapes or {}).items()},
                       dtypes=dict(dtypes or {}))
    defaults = {v.name: "float32" for v in g.inputs if v.type.dtype is None}
    if defaults:
        g, _ = infer_types(g, dtypes=defaults)
    return g


def _to_graph(obj, shapes, dtypes) -> tuple[Graph, dict]:
    """(typed graph, default params) for a Symbol, a HybridBlock or a Graph."""
    src, params = _source(obj, shapes)
    return _typed_graph(src, shapes, dtypes), params


def _param_views(params: Mapping | None) -> dict:
    """The params by bare name (`arg:`/`aux:` stripped) as numpy arrays, without copying the
    data of NDArrays (for keys and for bound inputs the compiled code does not read)."""
    from .ndarray.ndarray import NDArray
    out = {}
    for k, v in (params or {}).items():
        k = _bare(k)
        data = getattr(v, "_data", None)
        if getattr(type(v), "asnumpy", None) is NDArray.asnumpy and isinstance(data, np.ndarray):
            out[k] = data
        else:
            out[k] = _as_numpy(v)
    return out


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
            target: Target | str | None = None, cache: bool = True) -> CompiledModel:
    """Compile a Symbol, HybridBlock or Graph for a CPU (see the module docstring).
    `profile`: time every native node inside the compiled code (`CompiledModel.profile()`).
    `target`: the CPU the code is for (`llvm_target`; default the host). Code for another CPU
    runs here only where this CPU has its features; it is what `symjit compile --cpu` embeds.
    `cache`: reuse the finished plan a previous compile of the same graph, shapes, parameter
    values and options stored on disk (codegen/plan_cache.py; inference on the host, native
    graphs), and store it after compiling; False always compiles."""
    target = llvm_target(target)
    src, default_params = _source(obj, shapes)
    shapes = _with_param_shapes(src, shapes, default_params, params)
    key = None
    if cache and not profile and pipeline == "inference":
        key, hit = _cached_model(src, shapes, dtypes, default_params, params, disabled, name, target)
        if hit is not None:
            return hit
    g = _typed_graph(src, shapes, dtypes)
    _check_known_shapes(g, "compile")
    opt, compiled, pm, consts = _compile_typed(g, default_params, params, pipeline, disabled, name, profile, target)
    bound = consts if pipeline == "inference" else {}
    names = [n for n, _, _ in compiled.input_specs if n not in bound]
    model = CompiledModel(opt, compiled, pm, names)
    model._bound = {k: np.ascontiguousarray(v) for k, v in bound.items()}
    if key is not None:
        from .codegen import plan_cache
        plan_cache.store(key, compiled, {"input_names": names, "bound": sorted(bound)})
    return model


def _compile_typed(g, default_params, params, pipeline, disabled, name, profile, target):
    """(optimized graph, CompiledGraph, PassManager, bound constants) of a typed graph."""
    from .codegen.llvm.executable import compile_planned
    consts = _bound_constants(g, default_params, params)
    pm = PassManager(pipeline, disabled=set(disabled), target=target)
    opt = pm.run(g, consts if pipeline == "inference" else None)
    compiled = compile_planned(opt, name, profile=profile, target=target)
    return opt, compiled, pm, consts


def _cached_model(src, shapes, dtypes, default_params, params, disabled, name, target):
    """(plan cache key or None, the CompiledModel from the plan cache or None)."""
    from .codegen import plan_cache
    if not plan_cache.enabled():
        return None, None
    views = dict(default_params)
    views.update(_param_views(params))
    try:
        if isinstance(src, Graph):
            graph_text = plan_cache.graph_fingerprint(src)
        else:
            from .symbol.fingerprint import symbol_fingerprint
            graph_text = symbol_fingerprint(src)
    except plan_cache.Uncacheable:
        return None, None
    how = {"shapes": {k: [int(d) for d in v] for k, v in (shapes or {}).items()},
           "dtypes": {k: np.dtype(v).str for k, v in (dtypes or {}).items()},
           "disabled": sorted(disabled), "name": name, "target": plan_cache.target_text(target),
           "np_modes": _np_modes()}
    key = plan_cache.plan_key("compile", graph_text, views, **how)
    state: dict = {}

    def rebuild():
        """The ordinary compile of this model (for what a cached plan does not carry)."""
        if not state:
            g = _typed_graph(src, shapes, dtypes)
            state["built"] = _compile_typed(g, default_params, params, "inference", disabled, name, False, target)
        return state["built"]
    found = plan_cache.load(key, lambda: rebuild()[1])
    if found is None:
        return key, None
    compiled, extra = found
    try:
        names = [str(n) for n in extra["input_names"]]
        bound = {k: np.ascontiguousarray(views[k]) for k in extra["bound"]}
    except (KeyError, TypeError):
        return key, None
    return key, _CachedModel(compiled, names, bound, rebuild)


def _np_modes() -> tuple:
    """The NumPy-semantics switches that change how a Symbol becomes a graph (part of plan keys)."""
    from .util import is_np_array, is_np_shape
    return (bool(is_np_shape()), bool(is_np_array()))


class _CachedModel(CompiledModel):
    """A CompiledModel whose plan came from the plan cache: `graph` and `manager` (the
    optimized graph and pass report) are made by compiling the model again on first use."""

    def __init__(self, compiled, input_names, bound, rebuild):
        self.compiled = compiled
        self.input_names = input_names
        self._bound = bound
        self._rebuild = rebuild

    @property
    def graph(self):
        return self._rebuild()[0]

    @property
    def manager(self):
        return self._rebuild()[2]


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
    src, default_params = _source(obj, shapes)
    g = _typed_graph(src, _with_param_shapes(src, shapes, default_params, params), dtypes)
    consts = _bound_constants(g, default_params, params)
    pm = PassManager(pipeline, target=llvm_target(None))
    opt = pm.run(g, consts or None)
    groups = [(n.name, n.op.name, list(n.attrs.get("members", ()))) for n in opt.nodes
              if n.op.name in FUSED_OPS]
    plan = opt.annotations.get("memory_plan")
    fallbacks = lower_graph(opt, "inspect", strict=False).fallbacks if plan else []
    return InspectReport(format_graph(g), format_graph(opt), pm.report(), groups,
                         plan.summary() if plan else "(none)", pm.unoptimized_bytes, len(g.nodes),
                         len(opt.nodes), fallbacks)
