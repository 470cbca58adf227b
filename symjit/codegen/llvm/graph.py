"""Lowering a planned Graph to one LLVM module: kernels plus entry functions over the arena.

Input: an optimized graph (`passes.manager` pipeline) whose `annotations['memory_plan']`
gives every intermediate value its arena offset. Each node is lowered by the lowering
registered for its op (`LOWERINGS`, filled by the `lower_*.py` modules of this package):
a lowering adds kernel functions to the shared `ModuleBuilder` and returns the `Call`s the
entry makes. Runs of natively lowered nodes become one *segment* function with the stable
entry ABI of runtime/symjit_runtime.h:

    int32_t segment(void **inputs, void **outputs, void **params, void *workspace)

where `inputs` are the graph inputs, `outputs` the graph outputs, `params` the constants
(`_const` nodes, passed by pointer, never copied into the module), and `workspace` the arena.
A node without a native lowering (none registered, or the lowering declined it) runs its
reference `compute` from Python between segments, on numpy views of the same buffers, so a
graph is always executable; `CompiledGraph.native` says whether the whole graph is one native
call (the fast path through `symjit.runtime`). Such nodes are listed in
`GraphModule.fallbacks` (compile stats, `symjit inspect`); with `SYMJIT_STRICT=1` they are an
error.

Where values live: graph input i -> inputs[i]; a value returned as graph output j (its first
occurrence) -> outputs[j]; a constant -> params[k]; any other value -> workspace + offset.
Outputs that repeat a value, or are inputs or constants, are copied at the end.
New values of graph inputs that an op updates (`updates_aux`) are extra output slots after
the graph's outputs (`LoweringContext.state_output`); a kernel that needs random numbers
reads a seed parameter that `CompiledGraph.run` refreshes on every call
(`LoweringContext.random_seed`).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import threading
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ...base import MXNetError
from ...ir.builder import describe_node
from ...ir.graph import Graph, Node, Value
from ...ir.target import Target
from ...ops.registry import ComputeContext
from ..lowering import lowering_table
from .elementwise import ModuleBuilder
from .profile import allocate_slots
from .target import current_machine, target_scope

__all__ = ["ParallelCall", "MemcpyCall", "DirectCall", "LOWERINGS", "register_lowering", "LoweringContext",
           "GraphModule", "lower_graph", "ENTRY_CFUNCTYPE"]

#: ctypes signature of a segment / entry function
ENTRY_CFUNCTYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_void_p)


@dataclass
class ParallelCall:
    """`symjit_parallel_for(kernel, n, grain, args)` with args = the values' data pointers (a
    `ModuleConstant` passes the address of that constant of the module)."""
    kernel: str
    n: int
    grain: int
    args: list


@dataclass(frozen=True)
class ModuleConstant:
    """A constant global of the module under construction, passed by address (e.g. the table
    of extents of a shape-generic elementwise nest)."""
    name: str


@dataclass
class MemcpyCall:
    """Copy `nbytes` from value `src` to value `dst`."""
    dst: Value
    src: Value
    nbytes: int


@dataclass
class DirectCall:
    """Call `fn` (declared in the module by the lowering) with arguments that are values
    (passed as data pointers), Python ints (i64) or floats (double), in order; the callee
    returns void."""
    fn: str
    args: list


Call = ParallelCall | MemcpyCall | DirectCall


@dataclass
class LoweringContext:
    """What a lowering may use: the module under construction, a naming helper, the
    execution mode the graph is compiled for (`is_train`: None when the mode is only known
    per call, so a mode-dependent op must not lower natively) and `state_output`."""
    mb: ModuleBuilder
    graph: Graph
    placement: "Placement | None" = None
    is_train: bool | None = None
    state_updates: list = field(default_factory=list)   # graph input Values, in slot order
    seed_params: list = field(default_factory=list)     # param slots refreshed with a seed per call
    #: work that fills parameter arrays (weight packing), run before the code can run: by
    #: `lower_graph` itself, or by `compile_planned` while LLVM generates the code
    deferred: list = field(default_factory=list)

    def defer(self, fill: Callable[[], None]) -> None:
        """Run `fill()` (which writes a parameter array this lowering allocated, from constant
        data only, and releases the GIL for its work) before the compiled code first runs."""
        self.deferred.append(fill)

    def unique(self, base: str, key: str) -> str:
        """A process-unique symbol name for a kernel determined by `key`."""
        return f"{base}_{hashlib.sha1(key.encode()).hexdigest()[:16]}"

    def state_output(self, target: Value) -> Value:
        """Storage for the new value of graph input `target` (an op's `updates_aux` result,
        e.g. BatchNorm's moving statistics in training). It is an extra output slot after the
        graph's outputs; `CompiledGraph.run` returns it as a state update for `target`."""
        v = Value(f"__state{len(self.state_updates)}", target.type)
        self.placement.where[v] = ("output", len(self.graph.outputs) + len(self.state_updates))
        self.state_updates.append(target)
        return v

    def random_seed(self) -> Value:
        """A uint64 scalar parameter that holds a fresh random seed on every call (drawn by
        `CompiledGraph.run` from the call's generator, else `symjit.random`), for kernels
        with counter-based random numbers (Dropout in training)."""
        from ...ir.graph import TensorType
        v = Value(f"__seed{len(self.seed_params)}", TensorType((1,), "uint64"))
        self.placement.where[v] = ("param", len(self.placement.params))
        self.seed_params.append(len(self.placement.params))
        self.placement.params.append((v.name, np.zeros(1, np.uint64)))
        return v


Lowering = Callable[[Node, LoweringContext], "list | None"]

#: the LLVM target's lowerings (codegen/lowering.py): a lowering returns the Calls for the node,
#: or None if it cannot lower this particular instance (e.g. an unsupported dtype), in which
#: case the node runs in Python (reported; an error with SYMJIT_STRICT=1)
TABLE = lowering_table("llvm")
LOWERINGS = TABLE.by_op
register_lowering = TABLE.register


def _load_lowerings() -> None:
    """Import every `lower_*.py` module of this package once (each registers its lowerings);
    adding a lowering module needs no change here."""
    import importlib
    import pkgutil
    from pathlib import Path
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
        if info.name.startswith("lower_"):
            importlib.import_module(f"{__package__}.{info.name}")


TABLE.add_loader(_load_lowerings)


def find_lowering(node: Node) -> Lowering | None:
    return TABLE.find(node.op)


# --------------------------------------------------------------------------------------------
# Where values live
# --------------------------------------------------------------------------------------------

@dataclass
class Placement:
    """Storage of every value: ('input', i), ('output', j), ('param', k) or ('arena', offset)."""
    where: dict = field(default_factory=dict)
    params: list = field(default_factory=list)       # (name, array) for each constant
    output_copies: list = field(default_factory=list)  # (output index, source Value)
    #: params computed from other params by the kernel library: packed param index ->
    #: (source param index, int64 descriptor) for `symjit_nn_conv_pack(desc, source, out)`,
    #: so that an AOT library can embed the source alone and pack when it is loaded
    packings: dict = field(default_factory=dict)


def place_values(g: Graph) -> Placement:
    plan = g.annotations.get("memory_plan")
    if plan is None:
        raise MXNetError("codegen: the graph has no memory plan; run the pass pipeline first")
    p = Placement()
    for i, v in enumerate(g.inputs):
        p.where[v] = ("input", i)
    for n in g.nodes:
        if n.op.name == "_const":
            p.where[n.outputs[0]] = ("param", len(p.params))
            p.params.append((n.outputs[0].name, n.attrs["value"]))
    for j, v in enumerate(g.outputs):
        if v in p.where:  # an input, a constant, or a value already returned by an earlier slot
            p.output_copies.append((j, v))
        else:
            p.where[v] = ("output", j)
    for v, off in plan.offsets.items():
        if v not in p.where:
            p.where[v] = ("arena", int(off))
    return p


# --------------------------------------------------------------------------------------------
# Emitting segments
# --------------------------------------------------------------------------------------------

def _nbytes(v: Value) -> int:
    return int(np.prod(v.type.shape, dtype=np.int64)) * np.dtype(v.type.dtype).itemsize


#: segments are compiled without optimisation (`optnone`; the always-inline library-call
#: wrappers are still inlined): a segment is a straight line of calls whose own instructions
#: cost nanoseconds per graph call, while optimising and selecting instructions for it took
#: half of LLVM's time for a 120-layer network (benchmarks/bench_ew_generic.py --models
#: measures run time with it off)
SEGMENTS_UNOPTIMIZED = True


class _SegmentEmitter:
    """Builds the body of one segment function (entry ABI)."""

    def __init__(self, name: str, placement: Placement):
        self.name = name
        self.placement = placement
        self.lines: list[str] = []
        self.n = 0
        self.ptr_cache: dict[Value, str] = {}
        self.profiled = False

    def tmp(self) -> str:
        self.n += 1
        return f"%t{self.n}"

    def ptr(self, v: Value) -> str:
        if v in self.ptr_cache:
            return self.ptr_cache[v]
        kind, idx = self.placement.where[v]
        t = self.tmp()
        if kind == "arena":
            self.lines.append(f"  {t} = getelementptr inbounds i8, ptr %ws, i64 {idx}")
        else:
            base = {"input": "%inputs", "output": "%outputs", "param": "%params"}[kind]
            slot = self.tmp()
            self.lines.append(f"  {slot} = getelementptr inbounds ptr, ptr {base}, i64 {idx}")
            self.lines.append(f"  {t} = load ptr, ptr {slot}, align 8")
        self.ptr_cache[v] = t
        return t

    def emit(self, call: Call) -> None:
        L = self.lines.append
        if isinstance(call, MemcpyCall):
            if self.placement.where[call.dst] == self.placement.where[call.src]:
                return  # the planner gave both the same buffer (in place)
            L(f"  call void @llvm.memcpy.p0.p0.i64(ptr {self.ptr(call.dst)}, ptr {self.ptr(call.src)}, "
              f"i64 {call.nbytes}, i1 false)")
        elif isinstance(call, ParallelCall):
            ptrs = [f"@{v.name}" if isinstance(v, ModuleConstant) else self.ptr(v) for v in call.args]
            arr = self.tmp()
            L(f"  {arr} = alloca [{max(len(ptrs), 1)} x ptr], align 8")
            for k, p in enumerate(ptrs):
                slot = self.tmp()
                L(f"  {slot} = getelementptr inbounds [{len(ptrs)} x ptr], ptr {arr}, i64 0, i64 {k}")
                L(f"  store ptr {p}, ptr {slot}, align 8")
            rc = self.tmp()
            L(f"  {rc} = call i32 @symjit_parallel_for(ptr @{call.kernel}, i64 {call.n}, "
              f"i64 {call.grain}, ptr {arr})")
            self._return_if_error(rc)
        elif isinstance(call, DirectCall):
            args = []
            for a in call.args:
                if isinstance(a, Value):
                    args.append(f"ptr {self.ptr(a)}")
                elif isinstance(a, (int, np.integer)):
                    args.append(f"i64 {int(a)}")
                else:
                    from .vecmath import float_literal
                    args.append(f"double {float_literal(float(a), 'double')}")
            L(f"  call void @{call.fn}({', '.join(args)})")
            # library kernels report failures (e.g. out of memory) through the runtime's error
            rc = self.tmp()
            L(f"  {rc} = call i32 @symjit_last_error_code()")
            self._return_if_error(rc)
        else:
            raise MXNetError(f"codegen: unknown call {call!r}")

    def _return_if_error(self, rc: str) -> None:
        """Return `rc` from the segment when it is not 0 (the runtime holds the message)."""
        bad = self.tmp()
        self.lines.append(f"  {bad} = icmp ne i32 {rc}, 0")
        fail, ok = f"fail{self.n}", f"ok{self.n}"
        self.lines += [f"  br i1 {bad}, label %{fail}, label %{ok}", f"{fail}:", f"  ret i32 {rc}", f"{ok}:"]

    def mark(self, slot: int) -> None:
        """Profiling: charge the time since the previous mark (or the segment's start) to `slot`."""
        self.profiled = True
        self.lines.append(f"  call void @symjit_profile_mark(i32 {slot})")

    def render(self) -> str:
        body = "\n".join(self.lines)
        start = "  call void @symjit_profile_start()\n" if self.profiled else ""
        attr = 4 if SEGMENTS_UNOPTIMIZED else 1
        return (f"define i32 @{self.name}(ptr %inputs, ptr %outputs, ptr %params, ptr %ws) #{attr} {{\n"
                f"entry:\n  call void @symjit_clear_error()\n{start}{body}\n  ret i32 0\n}}\n")


@dataclass(frozen=True)
class Fallback:
    """A node that runs its reference implementation in Python: the target has no lowering for
    its op, or the lowering declined this instance (dtype, shape or mode it does not handle)."""
    node: str
    op: str
    reason: str          # "no lowering" | "lowering declined"

    def __str__(self) -> str:
        return f"node {self.node!r} ({self.op}): {self.reason} on the llvm target"


@dataclass
class Step:
    """One step of execution: a native segment (by symbol) or a node run from Python."""
    segment: str | None = None
    node: Node | None = None


@dataclass
class GraphModule:
    """The lowered graph: LLVM IR text, the execution steps and the buffer placement."""
    ir: str
    steps: list
    placement: Placement
    workspace_size: int
    segment_names: list
    python_nodes: list
    state_updates: list = field(default_factory=list)  # graph inputs updated by extra output slots
    seed_params: list = field(default_factory=list)    # indices of per-call seed parameters
    #: profiling: (counter slot, node) of every native node, in order (empty when not profiled)
    profile_slots: list = field(default_factory=list)
    #: the nodes that run in Python, and why (`Fallback`), in graph order
    fallbacks: list = field(default_factory=list)
    #: parameter fills still to run (`LoweringContext.defer`; empty unless lowered with
    #: `defer=True`): the parameters hold no data until `run_deferred(module.deferred)`
    deferred: list = field(default_factory=list)


def run_deferred(jobs: list, meanwhile: Callable | None = None):
    """Run the independent callables `jobs` on worker threads while this thread runs
    `meanwhile()`, then help with what is left and wait for all; returns meanwhile's result
    (None without one). The first exception of a job is raised after every job has ended."""
    jobs = list(jobs)
    lock = threading.Lock()
    errors: list = []

    def work():
        while True:
            with lock:
                if not jobs:
                    return
                job = jobs.pop(0)
            try:
                job()
            except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread
                errors.append(e)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    n_workers = min(len(jobs), max(1, cpus - 1), 4) if jobs else 0
    workers = [threading.Thread(target=work, name="symjit-pack", daemon=True) for _ in range(n_workers)]
    for t in workers:
        t.start()
    try:
        result = meanwhile() if meanwhile is not None else None
    finally:
        work()
        for t in workers:
            t.join()
    if errors:
        raise errors[0]
    return result


def lower_graph(g: Graph, name: str = "graph", is_train: bool | None = None,
                profile: bool = False, strict: bool | None = None, target: Target | None = None,
                defer: bool = False) -> GraphModule:
    """Lower every node (see the module docstring) into one module and a list of steps.
    `defer`: leave the parameter fills (weight packing) in `module.deferred` for the caller
    to run (`run_deferred`), e.g. while LLVM compiles; otherwise they are done on return.
    `is_train`: the mode the graph will run in, or None when it is chosen per call.
    `profile`: after each native node's calls, charge the time to the node's counter slot
    (profile.py; slots listed in `GraphModule.profile_slots`).
    `strict`: raise MXNetError when a node would run in Python (None: `SYMJIT_STRICT`).
    `target`: the llvm Target to generate code for (None: the host)."""
    with target_scope(target):
        module = _lower_graph(g, name, is_train, profile, strict)
    if not defer:
        run_deferred(module.deferred)
        module.deferred = []
    return module


def _lower_graph(g: Graph, name: str, is_train: bool | None, profile: bool, strict: bool | None) -> GraphModule:
    placement = place_values(g)
    first_slot = allocate_slots(len(g.nodes) + 1) if profile else 0
    profile_slots = []
    mb = ModuleBuilder()
    ctx = LoweringContext(mb, g, placement, is_train)
    steps: list[Step] = []
    current: _SegmentEmitter | None = None
    segments: list[_SegmentEmitter] = []
    python_nodes = []
    fallbacks: list[Fallback] = []
    key = hashlib.sha1()
    for n in g.nodes:
        if n.op.name == "_const":
            continue
        fn = find_lowering(n)
        calls = fn(n, ctx) if fn is not None else None
        if calls is None:
            if current is not None:
                current = None
            steps.append(Step(node=n))
            python_nodes.append(n)
            fallbacks.append(Fallback(n.name, n.op.name, "no lowering" if fn is None else "lowering declined"))
            key.update(f"py:{n.op.name}:{n.name};".encode())
            continue
        if current is None:
            current = _SegmentEmitter("", placement)
            segments.append(current)
            steps.append(Step(segment=current))
        for c in calls:
            current.emit(c)
        if profile:
            profile_slots.append((first_slot + len(profile_slots), n))
            current.mark(profile_slots[-1][0])
    if placement.output_copies:
        if current is None:
            current = _SegmentEmitter("", placement)
            segments.append(current)
            steps.append(Step(segment=current))
        for j, v in placement.output_copies:
            dst = Value(f"__out{j}", v.type)  # the storage of output slot j
            placement.where[dst] = ("output", j)
            current.emit(MemcpyCall(dst, v, _nbytes(v)))
        if profile:
            profile_slots.append((first_slot + len(profile_slots), None))   # the output copies
            current.mark(profile_slots[-1][0])
    bodies = "".join(s.render() for s in segments)
    machine = current_machine()
    digest = hashlib.sha1((mb.render(machine) + bodies + key.hexdigest()).encode()).hexdigest()[:16]
    names = []
    for i, s in enumerate(segments):
        s.name = f"sj_{name_token(name)}_{digest}_s{i}"
        names.append(s.name)
    decls = ["declare i32 @symjit_parallel_for(ptr, i64, i64, ptr)",
             "declare i32 @symjit_last_error_code()", "declare void @symjit_clear_error()",
             "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)"]
    if profile:
        decls += ["declare void @symjit_profile_start()", "declare void @symjit_profile_mark(i32)"]
    ir = mb.render(machine) + "\n" + "".join(s.render() for s in segments) + "\n".join(decls) + "\n"
    if fallbacks and (strict_lowering() if strict is None else strict):
        raise MXNetError(f"graph {name!r}: SYMJIT_STRICT=1 and {len(fallbacks)} node(s) would run in Python: "
                         + "; ".join(map(str, fallbacks)))
    steps = [Step(segment=s.segment.name if s.segment is not None else None, node=s.node) for s in steps]
    plan = g.annotations["memory_plan"]
    return GraphModule(ir, steps, placement, int(plan.arena_bytes), names, python_nodes, list(ctx.state_updates),
                       list(ctx.seed_params), profile_slots, fallbacks, list(ctx.deferred))


def strict_lowering() -> bool:
    """SYMJIT_STRICT=1: a node without a native lowering is an error instead of a Python step."""
    return os.environ.get("SYMJIT_STRICT", "").strip() not in ("", "0")


def name_token(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)[:24] or "graph"


def run_python_node(n: Node, views: dict, is_train: bool, rng) -> list:
    """Run one node's reference implementation into its placed buffers (hybrid execution).

    Returns [(input Value, new array)] for the inputs the op overwrites (`state_targets`:
    BatchNorm's moving statistics in training, optimizer states), for the caller to apply."""
    try:
        ctx = ComputeContext(is_train, rng, tuple(v.type.shape for v in n.outputs))
        results = n.op.compute(n.attrs, [views[v] for v in n.inputs], ctx)
    except MXNetError as e:
        raise MXNetError(f"{describe_node(n.name, n.op)}: {e}") from None
    except Exception as e:  # noqa: BLE001 - bad input never crashes the caller
        raise MXNetError(f"{describe_node(n.name, n.op)}: {type(e).__name__}: {e}") from None
    for v, r in zip(n.outputs, results):
        if v in views:
            r = np.asarray(r)
            if r.size != views[v].size:
                raise MXNetError(f"{describe_node(n.name, n.op)}: computed an output of shape {r.shape} "
                                 f"where inference planned {views[v].shape}")
            np.copyto(views[v], r.reshape(views[v].shape), casting="unsafe")
    extra = results[len(n.outputs):]
    if not extra or (n.op.updates_aux and not is_train):
        return []
    names = n.op.input_names(n.attrs)
    return [(n.inputs[names.index(a)], np.asarray(r)) for a, r in zip(n.op.state_targets(n.attrs), extra)
            if a in names]
