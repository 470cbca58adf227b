"""The LLVM execution backend for executors: pass pipeline, lowering, JIT, per-call dispatch.

`compile_for_executor(graph)` returns `fn(feeds, is_train=False, keep=()) -> RunResult`, the
function an executor backend (`symjit.executor.LLVMBackend`) hands to its executors. Each (is_train, keep) combination is compiled
once: the values to keep (forward activations a backward graph reads) are appended to the
graph's outputs so that optimization preserves them; inference uses the `inference`
pipeline (Dropout removed, BatchNorm on moving statistics as per-channel scale/shift fused
into the previous layer), training the `training` pipeline. Parameters stay graph inputs
(the executor's arrays may change between calls).

`fn.bind(constants)` compiles the inference variant with some inputs bound as compile-time
constants, through the pipeline `symjit.compile(..., params=...)` runs (BatchNorm folded into
weights, packed and Winograd-transformed filters, constant subgraphs precomputed); the bound
inputs stay in the compiled signature and are ignored. Bound variants are not cached here: the
caller owns them (and the memory their constants take) and decides when they are stale.
"""
from __future__ import annotations

import numpy as np

from ...ir.graph import Graph
from ...ir.interpreter import RunResult
from ...passes.manager import compile_graph
from .executable import CompiledGraph, compile_planned
from .target import compile_target

__all__ = ["compile_for_executor", "cached_plan", "symbol_plan_key", "load_plan"]

_UNSEEN = object()


def compile_for_executor(graph: Graph):
    """The per-call function over `graph` (see the module docstring)."""
    return _Compiler().compile(graph)


class _Compiler:
    def compile(self, graph: Graph):
        variants: dict = {}
        by_keep_ids: dict = {}     # (is_train, ids of the kept Values) -> variant (same Values each call)
        aux_by_name = {v.name: v for v in graph.aux}

        def variant(is_train: bool, keep: list) -> tuple:
            """(CompiledGraph, number of graph outputs, kept names), built on first use."""
            key = (bool(is_train), tuple(v.name for v in keep))
            if key not in variants:
                variants[key] = self._build(graph, bool(is_train), keep)
            return variants[key]

        def fn(feeds, is_train: bool = False, keep=(), rng=None, out=None) -> RunResult:
            """`out`: arrays for the graph outputs, written in place when they fit (None entries,
            and every array that does not fit: fresh arrays; the kept values are always fresh)."""
            keep = list(keep)
            fast_key = (bool(is_train), tuple(map(id, keep)))
            found = by_keep_ids.get(fast_key)   # ids are unique: the entry holds the Values
            if found is None:
                if len(by_keep_ids) > 64:
                    by_keep_ids.clear()
                found = by_keep_ids[fast_key] = variant(is_train, keep) + (keep,)
            cg, n_out, keep_names, _ = found
            by_name = {(k if k.__class__ is str else k.name): a for k, a in feeds.items()}
            arrays = []
            for name, shape, dtype in cg.input_specs:
                a = by_name[name]
                if a.__class__ is not np.ndarray or a.dtype != dtype or not a.flags.c_contiguous:
                    a = np.ascontiguousarray(a, dtype=dtype)
                arrays.append(a)
            targets = None
            if out is not None:
                targets = [t if t is not None and t.shape == shape and t.dtype == dtype
                           and t.flags.c_contiguous and t.flags.writeable else None
                           for t, (_, shape, dtype) in zip(out, cg.output_specs)]
                targets += [None] * (len(cg.output_specs) - len(targets))
                if all(t is None for t in targets):
                    targets = None
            outs, updates = cg.run(arrays, is_train, rng, out=targets)
            aux_updates = {aux_by_name[v.name]: a for v, a in updates.items() if v.name in aux_by_name}
            kept = {v: outs[n_out + i] for i, v in enumerate(keep)}
            return RunResult(outs[:n_out], aux_updates, kept)
        # state of `fast` in its closure, not as attributes of it: a function holding itself
        # is a reference cycle, which kept every compiled plan (and its arena) alive until the
        # next cyclic garbage collection
        fast_cg = None
        orders: dict = {}
        keep_alive: list = []

        def fast(arrays: list, out: list, names: list) -> bool:
            """Inference without kept values: `arrays` are the graph inputs in `names` order,
            `out` the output arrays written in place. One native call when the graph is native."""
            nonlocal fast_cg
            if fast_cg is None:
                fast_cg = variant(False, [])[0]
            cg = fast_cg
            order = orders.get(id(names), _UNSEEN)
            if order is _UNSEEN:
                spec_names = [n for n, _, _ in cg.input_specs]
                if sorted(spec_names) != sorted(names):
                    return False
                pos = {n: i for i, n in enumerate(names)}
                order = [pos[n] for n in spec_names]
                order = None if order == list(range(len(order))) else order  # None: same order
                orders[id(names)] = order
                keep_alive.append(names)  # keeps id(names) unique while cached
            ins = arrays if order is None else [arrays[i] for i in order]
            if cg.entry is not None:
                cg.entry(*ins, out=out)
            else:
                cg.run(ins, False, None, out=out)
            return True
        def native_variant(is_train: bool, keep) -> CompiledGraph | None:
            """The compiled variant for (is_train, keep) when one call of its native Entry is
            the whole run (no random seeds to draw, no state outputs), else None. Callers may
            then call `cg.entry` with the inputs in `cg.input_specs` order; it returns the
            graph outputs followed by the kept values."""
            cg = variant(is_train, list(keep))[0]
            if cg.entry is None or cg.module.seed_params or cg.state_specs:
                return None
            return cg

        def bind(constants: dict, plan_key: str | None = None, cache: bool = True) -> CompiledGraph:
            """The inference variant with `constants` (graph input name -> array) bound, through
            the passes `symjit.compile` runs for this host (its target-specific ones too), and
            the plan cache (under `plan_key`, default a key of the graph; `cache=False`: compile)."""
            target = compile_target("native")

            def build() -> CompiledGraph:
                opt, _ = compile_graph(graph.copy(), "inference", constants=constants, target=target)
                return compile_planned(opt, graph.name, False)
            return cached_plan(graph, constants, target, build, plan_key) if cache else build()

        fn.native_variant = native_variant
        fn.variants = variants
        fn.accepts_out = True
        fn.fast = fast
        fn.bind = bind
        return fn

    def _build(self, graph: Graph, is_train: bool, keep: list):
        g = graph.copy()
        by_name = {v.name: v for v in g.values()}
        n_out = len(g.outputs)
        g.outputs = list(g.outputs) + [by_name[v.name] for v in keep]
        opt, _ = compile_graph(g, "training" if is_train else "inference", target=compile_target("native"))
        cg = compile_planned(opt, graph.name, is_train)
        return cg, n_out, [v.name for v in keep]


def cached_plan(graph: Graph, constants: dict, target, build, key: str | None = None) -> CompiledGraph:
    """`build()` (the bound inference plan of `graph` with `constants`), through the plan
    cache (codegen/plan_cache.py) under `key` (default: a key of the graph, the constants and
    the target): loaded when a previous process stored it, stored after building otherwise."""
    from .. import plan_cache
    if not plan_cache.enabled():
        return build()
    if key is None:
        try:
            graph_text = plan_cache.graph_fingerprint(graph)
        except plan_cache.Uncacheable:
            return build()
        key = plan_cache.plan_key("bind", graph_text, constants, name=graph.name, is_train=False,
                                  target=plan_cache.target_text(target))
    found = plan_cache.load(key, build)
    if found is not None:
        return found[0]
    cg = build()
    plan_cache.store(key, cg)
    return cg


def symbol_plan_key(symbol_text: str, inputs: list, device: str, constants: dict, **how) -> str | None:
    """The plan-cache key of the bound inference plan of a Symbol (`symbol_text`: its
    `symbol.fingerprint.symbol_fingerprint`) for inputs `(name, shape, dtype)` (every graph
    input, in order) on `device`, with `constants` bound on this host: what
    `bind(constants, plan_key=...)` stores under, found again without building the graph
    (None: the plan cache is off). `how`: anything else that changes how the Symbol becomes
    a graph (canonical values)."""
    from .. import plan_cache
    if not plan_cache.enabled():
        return None
    signature = [[str(n), [int(d) for d in s], np.dtype(dt).str] for n, s, dt in inputs]
    return plan_cache.plan_key("bind-symbol", symbol_text, constants, inputs=signature, device=device,
                               is_train=False, target=plan_cache.target_text(compile_target("native")), **how)


def load_plan(key: str | None, rebuild) -> CompiledGraph | None:
    """The plan stored under `key`, or None (see `plan_cache.load`)."""
    from .. import plan_cache
    found = plan_cache.load(key, rebuild)
    return None if found is None else found[0]
