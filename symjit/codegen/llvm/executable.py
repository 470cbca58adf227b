"""Compiled graphs: lowering, JIT with the object cache, and calling convention.

`compile_planned(g)` takes an optimized graph with a memory plan and returns a
`CompiledGraph`, a callable `cg(inputs, is_train=False) -> list of numpy outputs`:
  * when every node lowered natively the whole graph is one `symjit.runtime.Entry` call
    (validation of count, shape, dtype and layout happens in C before any native code runs);
  * otherwise native segments and reference steps alternate over shared buffers.
Compiled objects are cached in memory while in use and on disk (`codegen.cache`) under the
SHA-256 of the module text, the target description and the symjit version: a second process
loads the object instead of running LLVM. A CompiledGraph (and its runtime Entry) holds its
CompiledCode, so machine code is freed with the last compiled graph that can run it.
"""
from __future__ import annotations

import ctypes
import threading
import time
import weakref
from dataclasses import dataclass

import llvmlite.binding as llvm
import numpy as np

from ..._version import __version__
from ...base import MXNetError
from ...ops import rng as global_rng
from ...passes.manager import gc_paused
from .. import cache
from .graph import ENTRY_CFUNCTYPE, GraphModule, lower_graph, run_deferred, run_python_node
from .jit import CompiledCode, compile_to_object, load_object
from .profile import NodeTime, read_slots
from .target import target_description

__all__ = ["CompiledGraph", "compile_planned", "bind_runtime_symbols", "CompileStats", "set_profile_by_default", "node_times_of", "NodeCounters"]

_BOUND = threading.Lock()
_bound_symbols = False


def bind_runtime_symbols() -> None:
    """Make the runtime's C functions visible to generated code (once per process)."""
    global _bound_symbols
    with _BOUND:
        if _bound_symbols:
            return
        from ... import runtime
        for name, addr in runtime.symbols().items():
            llvm.add_symbol(name, addr)
        _bound_symbols = True


class CompileStats:
    """Where compile time went, and whether the object came from a cache."""

    def __init__(self):
        self.lower_s = 0.0
        self.llvm_s = 0.0
        self.load_s = 0.0
        self.cache = "none"   # "memory", "disk" or "none"
        #: nodes that run in Python (codegen/llvm/graph.py `Fallback`s): none in a native graph
        self.python_nodes: list = []

    def __repr__(self):
        return (f"CompileStats(lower={self.lower_s * 1e3:.1f} ms, llvm={self.llvm_s * 1e3:.1f} ms, "
                f"load={self.load_s * 1e3:.1f} ms, cache={self.cache}, python_nodes={len(self.python_nodes)})")


#: whether graphs compiled with `profile=None` time their nodes (`set_profile_by_default`)
_profile_by_default = False
#: node counters of profiled graphs by id of their runner (the native Entry, or the CompiledGraph
#: when it runs Python steps), so a graph-call hook that receives the runner finds them
#: (`node_times_of`); an entry leaves with its runner (the runner may outlive its CompiledGraph)
_PROFILED: dict = {}


def set_profile_by_default(on: bool) -> bool:
    """Whether graphs compiled from now on without an explicit `profile=` time each node (what
    `symjit.profiler` turns on while it profiles symbolic execution); returns the previous value.
    Graphs compiled before keep their code."""
    global _profile_by_default
    previous, _profile_by_default = _profile_by_default, bool(on)
    return previous


@dataclass(frozen=True)
class NodeCounters:
    """The counter slots of a profiled graph's nodes: (slot, node name, op label) in graph order."""
    name: str
    slots: tuple

    def read(self, reset: bool = True) -> list[NodeTime]:
        """Each node's time over the calls since compiling (or the last reset)."""
        ns, calls = read_slots(self.slots[0][0], len(self.slots), reset)
        return [NodeTime(node, label, int(c), t * 1e-9) for (_, node, label), t, c in zip(self.slots, ns, calls)]


def node_times_of(runner) -> "NodeCounters | None":
    """The node counters of the profiled graph that `runner` (an Entry or a CompiledGraph) runs;
    None when it was compiled without profiling."""
    return _PROFILED.get(id(runner))


def _register_profiled(runner, counters: NodeCounters) -> None:
    key = id(runner)
    _PROFILED[key] = counters
    weakref.finalize(runner, _PROFILED.pop, key, None)


#: live compiled objects by cache key: a graph compiled again while another compiled graph
#: with the same module text is alive shares its code; entries go with their last user
_MEMORY: "weakref.WeakValueDictionary[str, CompiledCode]" = weakref.WeakValueDictionary()


def _object_for(module: GraphModule, stats: CompileStats):
    key = cache.make_key(module.ir, target_description(), __version__)
    code = _MEMORY.get(key)
    if code is not None:
        stats.cache = "memory"
        return code
    t0 = time.perf_counter()
    obj = None if module.profile_slots else cache.get(key)
    if obj is not None:
        try:
            code = load_object(obj, module.segment_names)
            stats.cache = "disk"
        except Exception:  # noqa: BLE001 - a bad cached object is recompiled, never trusted
            code = None
    if code is None:
        obj = compile_to_object(module.ir)
        stats.llvm_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        code = load_object(obj, module.segment_names)
        if not module.profile_slots:   # profiled code names this process's counter slots
            cache.put(key, obj)
    stats.load_s = time.perf_counter() - t0
    _MEMORY[key] = code
    return code


def _op_label(n) -> str:
    """A profiled node's operation: its op, the fused op (+ "epilogue") for a compute node
    carrying an elementwise epilogue, "memcpy" for the output copies (n is None)."""
    if n is None:
        return "memcpy"
    if n.op.name == "_with_epilogue":
        return f"{n.attrs['inner']}+epilogue"
    return n.op.name


def _spec(v):
    return (v.name, tuple(int(d) for d in v.type.shape), np.dtype(v.type.dtype))


class CompiledGraph:
    """A callable over numpy arrays in the graph's input order (see the module docstring)."""

    #: the llvm Target the code was generated for (None: the host)
    target = None

    def __init__(self, g, module: GraphModule, code, stats: CompileStats, name: str):
        self.graph = g
        self.module = module
        self.code = code
        self.stats = stats
        self.name = name
        self.input_specs = [_spec(v) for v in g.inputs]
        self.output_specs = [_spec(v) for v in g.outputs]
        #: extra output slots holding new values of graph inputs (native `updates_aux` ops)
        self.state_specs = [(f"__state_{v.name}",) + _spec(v)[1:] for v in module.state_updates]
        self.params = [np.ascontiguousarray(a) for _, a in module.placement.params]
        self.native = not module.python_nodes and len(module.segment_names) <= 1
        self.entry = None
        if self.native and module.segment_names:
            from ... import runtime
            addr = code.addresses[module.segment_names[0]]
            self.entry = runtime.make_entry(
                addr, self.input_specs, self.output_specs + self.state_specs,
                params=[(n, a) for (n, _), a in zip(module.placement.params, self.params)],
                workspace_size=module.workspace_size, name=name, owner=code)
        self._segments = {s: ENTRY_CFUNCTYPE(code.addresses[s]) for s in module.segment_names}
        self._lock = threading.Lock()
        if module.profile_slots:
            self.counters = NodeCounters(name, tuple(
                (slot, n.name if n is not None else "(output copies)", _op_label(n))
                for slot, n in module.profile_slots))
            _register_profiled(self.entry if self.entry is not None else self, self.counters)

    def __call__(self, inputs, is_train: bool = False, rng=None, out=None) -> list:
        return self.run(inputs, is_train, rng, out)[0]

    def profile(self, reset: bool = True) -> list[NodeTime]:
        """Time spent in each native node over the calls since compiling (or the last reset),
        in graph order; the last entry ("(output copies)") is copying results to the outputs.
        Needs a graph compiled with `profile=True`."""
        if not self.module.profile_slots:
            raise MXNetError(f"{self.name}: compiled without profiling; compile with profile=True")
        return self.counters.read(reset)

    def run(self, inputs, is_train: bool = False, rng=None, out=None) -> tuple[list, dict]:
        """(outputs, state updates {graph input Value: new array}) for one call. `out`: arrays
        for the outputs, in output order (a None entry: a fresh array for that output)."""
        if self.module.seed_params:
            self._draw_seeds(rng)
        if out is not None and self.state_specs:
            out = list(out) + [None] * len(self.state_specs)
        if self.entry is not None:
            res = list(self.entry(*inputs) if out is None else self.entry(*inputs, out=out))
            n = len(self.output_specs)
            return res[:n], dict(zip(self.module.state_updates, res[n:]))
        hook = runtime_module().call_hook
        if hook is None:
            return self._run_hybrid(list(inputs), is_train, rng, out)
        start = time.monotonic_ns()
        result = self._run_hybrid(list(inputs), is_train, rng, out)
        hook(self, start, time.monotonic_ns())
        return result

    def _draw_seeds(self, rng) -> None:
        """Fresh seeds for the random kernels of this call (written into their parameters,
        which the native code reads by pointer)."""
        if rng is None:
            rng = global_rng.generator()
        for k in self.module.seed_params:
            self.params[k][0] = rng.integers(0, 2**63, dtype=np.uint64)

    def _check(self, inputs) -> list:
        if len(inputs) != len(self.input_specs):
            raise MXNetError(f"{self.name}: expected {len(self.input_specs)} inputs, got {len(inputs)}")
        out = []
        for (name, shape, dtype), a in zip(self.input_specs, inputs):
            if not isinstance(a, np.ndarray):
                raise MXNetError(f"{self.name}: input {name!r} must be a numpy array, got {type(a).__name__}")
            if a.shape != shape:
                raise MXNetError(f"{self.name}: input {name!r} has shape {a.shape}, expected {shape}")
            if a.dtype != dtype:
                raise MXNetError(f"{self.name}: input {name!r} has dtype {a.dtype}, expected {dtype}")
            if not a.flags.c_contiguous:
                raise MXNetError(f"{self.name}: input {name!r} is not C-contiguous")
            out.append(a)
        return out

    def _run_hybrid(self, inputs, is_train, rng, out=None) -> tuple[list, dict]:
        inputs = self._check(inputs)
        specs = self.output_specs + self.state_specs
        outputs = [o if o is not None else np.empty(shape, dtype)
                   for o, (_, shape, dtype) in zip(out if out is not None else [None] * len(specs), specs)]
        ws_raw = np.empty(self.module.workspace_size + 64, dtype=np.uint8)
        shift = (-ws_raw.ctypes.data) % 64
        ws = ws_raw[shift:shift + self.module.workspace_size]
        views = {}
        for v, (kind, idx) in self.module.placement.where.items():
            if kind == "input":
                views[v] = inputs[idx]
            elif kind == "output":
                views[v] = outputs[idx]
            elif kind == "param":
                views[v] = self.params[idx]
            elif v.type.known:
                nbytes = int(np.prod(v.type.shape, dtype=np.int64)) * np.dtype(v.type.dtype).itemsize
                views[v] = ws[idx:idx + nbytes].view(v.type.dtype).reshape(v.type.shape)

        def table(arrays):
            t = (ctypes.c_void_p * max(len(arrays), 1))()
            for i, a in enumerate(arrays):
                t[i] = a.ctypes.data
            return t
        tin, tout, tpar = table(inputs), table(outputs), table(self.params)
        wptr = ctypes.c_void_p(ws.ctypes.data if ws.size else ws_raw.ctypes.data)
        inputs_set = {v: i for i, v in enumerate(self.graph.inputs)}
        updates = {}
        for step in self.module.steps:
            if step.segment is not None:
                rc = self._segments[step.segment](ctypes.addressof(tin), ctypes.addressof(tout),
                                                  ctypes.addressof(tpar), wptr)
                if rc != 0:
                    from ... import runtime
                    raise MXNetError(f"{self.name}: native segment failed: {runtime.last_error()}")
            else:
                for target, new in run_python_node(step.node, views, is_train, rng):
                    if target in inputs_set:
                        updates[target] = new
        n = len(self.output_specs)
        updates.update(zip(self.module.state_updates, outputs[n:]))
        return outputs[:n], updates


def runtime_module():
    """symjit.runtime (imported on first use: importing the compiler never loads the runtime)."""
    from ... import runtime
    return runtime


def compile_planned(g, name: str = "graph", is_train: bool | None = None, profile: bool | None = None,
                    target=None) -> CompiledGraph:
    """Lower and JIT-compile an optimized, memory-planned graph. `is_train` fixes the mode
    the graph runs in (mode-dependent ops such as BatchNorm in training then lower
    natively); None keeps such ops as reference steps that take the mode per call.
    `profile`: time every native node inside the graph (`CompiledGraph.profile()`); None: as
    `set_profile_by_default` says (off unless a profiler turned it on).
    `target`: the llvm `Target` the code is generated for (None: the host; another CPU's code
    runs here only where this CPU has that CPU's features, and is what AOT libraries embed)."""
    with gc_paused():
        return _compile_planned(g, name, is_train, profile, target)


def _compile_planned(g, name, is_train, profile, target) -> CompiledGraph:
    stats = CompileStats()
    t0 = time.perf_counter()
    if profile is None:
        profile = _profile_by_default and target is None
    module = lower_graph(g, name, is_train, profile, target=target, defer=True)
    stats.lower_s = time.perf_counter() - t0
    stats.python_nodes = list(module.fallbacks)
    bind_runtime_symbols()
    # the weights are packed on other threads while LLVM makes (or the cache gives) the code
    code = run_deferred(module.deferred, lambda: _object_for(module, stats) if module.segment_names else None)
    module.deferred = []
    cg = CompiledGraph(g, module, code, stats, name)
    cg.target = target
    return cg
