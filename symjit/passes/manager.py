"""The PassManager: named pipelines of passes, statistics, dumps, and switches to bisect.

A pass is a function `Graph -> (Graph, stats dict)` that never mutates its input. The
manager runs a pipeline in order, records each pass's statistics and node counts, verifies
the graph after every pass in debug mode, can dump the graph text after any pass, and can
skip passes by name (API: `disabled=`; environment: `SYMJIT_DISABLE_PASSES=cse,fusion`).

Pipelines
  inference: bind constants -> infer -> inference rewrites -> simplify -> fold constants ->
             CSE -> DCE -> fusion -> convolution + max pooling -> channel padding -> blocked layout ->
             in-place -> memory plan
  training:  infer -> simplify (BlockGrad kept) -> CSE -> DCE -> fusion -> BatchNorm + relu -> in-place ->
             memory plan (the autodiff pass builds the backward graph before this pipeline)
"""
from __future__ import annotations

import contextlib
import gc
import os
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, Mapping, Sequence

from ..base import MXNetError
from ..ir.graph import Graph
from ..ir.printer import format_graph
from ..ir.target import Target, applies_to
from ..ir.verify import verify
from .blocked_layout import blocked_layout
from .channel_pad import pad_channels
from .conv_pool import fuse_conv_pool
from .cse import eliminate_common_subexpressions
from .dce import eliminate_dead_code
from .fold_constants import bind_constants, fold_constants
from .fusion import fuse
from .norm_relu import fuse_batch_norm_relu
from .inference import inference_rewrites
from .infer import infer_types
from .concat_in_place import plan_concat_in_place
from .inplace import plan_inplace
from .memory_plan import naive_bytes, plan_memory
from .simplify import simplify

__all__ = ["PassManager", "PassRecord", "PIPELINES", "compile_graph"]

Pass = Callable[[Graph], tuple]


def _infer(g: Graph):
    g2, stats = infer_types(g)
    return g2, {"shapes_known": getattr(stats, "shapes_known", 0)}


PIPELINES: dict[str, list[tuple[str, Pass]]] = {
    "inference": [
        ("infer", _infer),
        ("inference_rewrites", inference_rewrites),
        ("simplify", simplify),
        ("fold_constants", fold_constants),
        ("cse", eliminate_common_subexpressions),
        ("dce", eliminate_dead_code),
        ("fusion", fuse),
        ("conv_pool", fuse_conv_pool),
        ("channel_pad", pad_channels),
        ("blocked_layout", blocked_layout),
        ("inplace", plan_inplace),
        ("concat_in_place", plan_concat_in_place),
        ("memory_plan", plan_memory),
    ],
    "training": [
        ("infer", _infer),
        ("simplify", partial(simplify, training=True)),
        ("cse", eliminate_common_subexpressions),
        ("dce", partial(eliminate_dead_code, training=True)),
        ("fusion", fuse),
        ("bn_relu", fuse_batch_norm_relu),
        ("inplace", plan_inplace),
        ("concat_in_place", plan_concat_in_place),
        ("memory_plan", plan_memory),
    ],
}


@dataclass
class PassRecord:
    """What one pass did: its statistics, node counts and time."""
    name: str
    stats: dict
    nodes_before: int
    nodes_after: int
    seconds: float
    skipped: bool = False
    note: str = ""       # why it was skipped: "disabled" or the targets it applies to


@dataclass
class PassManager:
    """Runs a named pipeline (or an explicit list of (name, pass)) for a target: a pass marked
    `only_for` some targets (ir/target.py) is skipped, and reported so, for the others. The
    default target is a generic CPU (llvm) without the kernel library's optional paths; the
    code generators hand in the target they compile for (codegen/llvm/target.py)."""
    pipeline: str | Sequence[tuple[str, Pass]] = "inference"
    disabled: set = field(default_factory=set)
    debug: bool = False
    dump: set = field(default_factory=set)  # pass names (or "all") whose output is printed
    records: list = field(default_factory=list)
    dumps: dict = field(default_factory=dict)
    #: bytes of the intermediates of the graph as it came in (after type inference), each in its
    #: own buffer: the baseline the memory plan is measured against
    unoptimized_bytes: int = 0
    #: what the graph is compiled for (chooses the target-specific passes)
    target: Target = field(default_factory=Target)

    def __post_init__(self):
        requested = set(self.disabled)
        env = os.environ.get("SYMJIT_DISABLE_PASSES", "")
        self.disabled = requested | {p.strip() for p in env.split(",") if p.strip()}
        if "blocked_layout" in self.disabled:   # padding channels only serves the blocked layout
            self.disabled.add("channel_pad")
        dump_env = os.environ.get("SYMJIT_DUMP_PASSES", "")
        self.dump = set(self.dump) | {p.strip() for p in dump_env.split(",") if p.strip()}
        self.debug = self.debug or os.environ.get("SYMJIT_DEBUG", "") not in ("", "0")
        if isinstance(self.pipeline, str):
            if self.pipeline not in PIPELINES:
                raise MXNetError(f"unknown pass pipeline {self.pipeline!r}; expected one of {sorted(PIPELINES)}")
            self.passes = list(PIPELINES[self.pipeline])
        else:
            self.passes = list(self.pipeline)
        unknown = requested - {n for n, _ in self.passes}
        if unknown:
            raise MXNetError(f"cannot disable unknown passes {sorted(unknown)}; pipeline has "
                             f"{[n for n, _ in self.passes]}")

    def run(self, g: Graph, constants: Mapping | None = None) -> Graph:
        """Run the pipeline; `constants` (input name -> array) are bound first (inference)."""
        with gc_paused():
            return self._run(g, constants)

    def _run(self, g: Graph, constants: Mapping | None) -> Graph:
        self.records = []
        self.dumps = {}
        if constants:
            g = self._run_one("bind_constants", partial(bind_constants, constants=constants), g)
        for name, fn in self.passes:
            if name in self.disabled or not applies_to(fn, self.target):
                note = "disabled" if name in self.disabled else f"only for {fn.targets}"
                self.records.append(PassRecord(name, {}, len(g.nodes), len(g.nodes), 0.0, skipped=True, note=note))
                continue
            g = self._run_one(name, fn, g)
            if name == "infer":
                self.unoptimized_bytes = naive_bytes(g)
        return g

    def _run_one(self, name: str, fn: Pass, g: Graph) -> Graph:
        before = len(g.nodes)
        t0 = time.perf_counter()
        out = fn(g)
        g2, stats = out if isinstance(out, tuple) else (out, {})
        dt = time.perf_counter() - t0
        if self.debug:
            try:
                verify(g2)
            except MXNetError as e:
                raise MXNetError(f"pass {name!r} produced an invalid graph: {e}") from None
        self.records.append(PassRecord(name, dict(stats), before, len(g2.nodes), dt))
        if "all" in self.dump or name in self.dump:
            self.dumps[name] = format_graph(g2)
            print(f"# ---- after {name} ----\n{self.dumps[name]}")
        return g2

    def report(self) -> str:
        """One line per pass: name, nodes before -> after, statistics, time."""
        lines = [f"unoptimized intermediates: {self.unoptimized_bytes} B"] if self.unoptimized_bytes else []
        for r in self.records:
            if r.skipped:
                lines.append(f"{r.name:20s} ({r.note})")
                continue
            st = ", ".join(f"{k}={v}" for k, v in r.stats.items())
            lines.append(f"{r.name:20s} {r.nodes_before:5d} -> {r.nodes_after:5d} nodes  "
                         f"{r.seconds * 1e3:7.1f} ms  {st}")
        return "\n".join(lines)


_GC_LOCK = threading.Lock()
_gc_pausers = 0           # compilations inside gc_paused now (any thread)
_gc_was_enabled = False   # whether the first of them found the collector on


@contextlib.contextmanager
def gc_paused():
    """Pause Python's cyclic garbage collector while a graph is compiled, then restore it.

    Passes and lowering allocate many small objects (Values, Nodes, dicts) that stay alive
    until the pass ends, so the collector's periodic full scans find nothing to free and cost
    a quarter of the compile time of a large graph. Nothing is leaked: cycles made meanwhile are
    collected at the next collection after the pause. Nested and concurrent pauses count: the
    collector is turned back on by the last one to leave, and only if it was on before."""
    global _gc_pausers, _gc_was_enabled
    with _GC_LOCK:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()


def compile_graph(g: Graph, pipeline: str = "inference", constants: Mapping | None = None,
                  **kwargs) -> tuple[Graph, PassManager]:
    """Run a pipeline over `g`; returns the optimized graph and the manager (for its report)."""
    pm = PassManager(pipeline, **kwargs)
    return pm.run(g, constants), pm
