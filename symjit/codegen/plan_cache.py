"""The whole-plan cache: finished compiled graphs with bound constants, on disk.

The object cache (`codegen.cache`, used by `executable._object_for`) spares LLVM; a second
process still re-runs the passes, lowering, constant folding and weight packing, which for
an ImageNet model costs 0.1-2 s. This cache stores the finished *plan* of a fully native
graph whose constants were bound at compile time (`symjit.compile(..., params=...)`, and
Gluon's bound-parameter plans after `hybridize()`): the object code of its one entry, its
signature, workspace size and the final constant buffers (folded and packed weights), so a
hit is: read one authenticated entry, map the constants, check them, load the object.

Key (`plan_key`): the sha256 of everything that determines the plan —
  * the graph: the Symbol's nodes (op, name, attribute strings, inputs;
    `symbol.fingerprint.symbol_fingerprint`) or an IR graph's nodes with parsed attributes and
    typed values (`graph_fingerprint`), the input shapes and dtypes;
  * the VALUES of the bound parameters: names, dtypes, shapes and a 128-bit fingerprint of
    their bytes (runtime `fingerprint`, near memory speed), so a changed weight misses;
  * how it is compiled: the entry point (compile or bound plan), pipeline, disabled passes,
    mode, graph name, the llvm target description (CPU, features), whether the kernel library's
    native paths are in use, the `SYMJIT_*` environment except settings read only at run time;
  * the code: symjit's version and a stamp of its installed files (`code_stamp`: every
    module's path, size and modification time, and the runtime extension's), so an edited or
    upgraded tree never reads an older tree's plans.
Attribute values that have no canonical text (objects without a stable representation) make
a graph uncacheable (no key) rather than risk two graphs sharing one.

Storage: the entry (`cache.put`, authenticated, atomic) holds a JSON header and the object
bytes; the constants are one blob (`cache.put_blob`, written before the entry, named by the
key and the constants' fingerprints, 64-byte-aligned arrays) that the header describes with a
fingerprint per array. Loading (`load`) never trusts a bad entry: a missing, truncated,
corrupt, foreign or other-format entry or blob, a fingerprint mismatch or an object that does
not load is a miss (None), and the caller compiles and stores the plan again. Only fully
native graphs without per-call seeds, state outputs or profiling are stored.

A plan loaded from the cache is a `CachedGraph`: it runs like the `CompiledGraph` it was
made from (one native Entry call), and anything else asked of it (the optimized graph, the
lowered module's IR and placement) rebuilds the plan the ordinary way on first use
(`CachedGraph.rebuilt`; an ahead-of-time build starts from that). Its `params` hold empty
arrays for the parameters its code never reads (the sources of packed copies).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from .._version import __version__
from . import cache
from .llvm.executable import CompileStats, CompiledGraph, bind_runtime_symbols
from .llvm.jit import load_object
from .llvm.target import is_host

__all__ = ["plan_key", "graph_fingerprint", "params_fingerprint", "code_stamp",
           "load", "store", "flush", "blob_limit", "enabled", "cacheable", "target_text", "CachedGraph", "Uncacheable", "FORMAT"]

#: the format of the entries this module writes; others are misses
FORMAT = 1
_ALIGN = 64
_HEAD = struct.Struct("<6sII")     # magic, format, header length
_MAGIC = b"SJPLAN"
#: `SYMJIT_*` settings read only when the code runs (or by this cache), not by the compiler
_RUNTIME_ONLY_ENV = {"SYMJIT_CACHE_DIR", "SYMJIT_CACHE", "SYMJIT_NUM_THREADS", "SYMJIT_DYNAMIC",
                     "SYMJIT_PLAN_CACHE", "SYMJIT_BLAS", "SYMJIT_BLAS_CORETYPE"}


class Uncacheable(Exception):
    """The graph has something without a canonical text (no key can be made)."""


def enabled() -> bool:
    """Whether plans are cached (`SYMJIT_PLAN_CACHE=0` or `SYMJIT_CACHE=0` turn it off)."""
    return os.environ.get("SYMJIT_PLAN_CACHE", "1") != "0" and os.environ.get("SYMJIT_CACHE", "1") != "0"


# --------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------

def fingerprint(buf) -> str:
    """32 hex digits: the runtime's 128-bit fingerprint of a contiguous buffer."""
    from ..runtime import fingerprint as runtime_fingerprint
    return runtime_fingerprint(buf).hex()


def _array_text(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a)
    return f"array({a.dtype.str},{a.shape},{fingerprint(a.view(np.uint8).reshape(-1))})"


def canonical(x) -> str:
    """A text that determines `x` (attribute values: None, bools, numbers, strings, numpy
    arrays, dtypes, and tuples, lists and dicts of them); Uncacheable for anything else."""
    if x is None or isinstance(x, (bool, int, str)):
        return repr(x)
    if isinstance(x, float):
        return repr(x)   # round-trips exactly (nan, inf, -0.0 included)
    if isinstance(x, np.generic):
        return f"{x.dtype.str}:{x.item()!r}"
    if isinstance(x, np.ndarray):
        return _array_text(x)
    if isinstance(x, np.dtype):
        return f"dtype({x.str})"
    if isinstance(x, (tuple, list)):
        inner = ",".join(canonical(v) for v in x)
        return f"({inner})" if isinstance(x, tuple) else f"[{inner}]"
    if isinstance(x, dict):
        return "{" + ",".join(f"{canonical(k)}:{canonical(v)}" for k, v in sorted(x.items(), key=lambda kv: repr(kv[0]))) + "}"
    raise Uncacheable(f"no canonical text for a {type(x).__name__}")


def _type_text(t) -> str:
    return f"{t.shape!r}/{t.dtype}/{t.device}"


def graph_fingerprint(g) -> str:
    """sha256 of an IR graph: typed inputs (arguments, then aux), every node (op, name, parsed
    attributes, inputs by position, typed outputs) and the outputs."""
    ids: dict = {}
    h = hashlib.sha256(b"graph\0")
    for v in g.inputs:
        ids[v] = len(ids)
        h.update(f"in|{v.name}|{_type_text(v.type)}\n".encode())
    h.update(f"args:{len(g.args)}\n".encode())
    for n in g.nodes:
        ins = ",".join(str(ids[v]) for v in n.inputs)
        outs = ";".join(f"{v.name}|{_type_text(v.type)}" for v in n.outputs)
        for v in n.outputs:
            ids[v] = len(ids)
        h.update(f"{n.op.name}|{n.name}|{canonical(n.attrs)}|{ins}|{outs}\n".encode())
    h.update(("out:" + ",".join(str(ids[v]) for v in g.outputs)).encode())
    return h.hexdigest()


def params_fingerprint(params: Mapping[str, np.ndarray]) -> str:
    """sha256 over the parameters' names, dtypes, shapes and value fingerprints."""
    names = sorted(params)
    arrays = [np.ascontiguousarray(params[n]) for n in names]
    fps = fingerprints([a.view(np.uint8).reshape(-1) for a in arrays])
    h = hashlib.sha256(b"params\0")
    for name, a, fp in zip(names, arrays, fps):
        h.update(f"{name}=array({a.dtype.str},{a.shape},{fp})\n".encode())
    return h.hexdigest()


_STAMP: list = []
_STAMP_LOCK = threading.Lock()


def code_stamp() -> str:
    """sha256 of the installed package: each module's relative path, size and modification
    time, and the runtime extension's (computed once per process)."""
    with _STAMP_LOCK:
        if not _STAMP:
            root = Path(__file__).resolve().parents[1]
            entries: list = []
            _stat_tree(str(root), "", entries)
            h = hashlib.sha256(__version__.encode())
            for e in sorted(entries):
                h.update(e.encode() + b"\n")
            _STAMP.append(h.hexdigest())
        return _STAMP[0]


def _stat_tree(path: str, rel: str, out: list) -> None:
    """Append 'relative path|size|mtime' of every .py and .so file under `path` to `out`."""
    try:
        with os.scandir(path) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    if e.name != "__pycache__":
                        _stat_tree(e.path, rel + e.name + "/", out)
                elif e.name.endswith((".py", ".so")):
                    try:
                        st = e.stat()
                    except OSError:
                        continue
                    out.append(f"{rel}{e.name}|{st.st_size}|{st.st_mtime_ns}")
    except OSError:
        pass


def _settings_text() -> str:
    from .llvm.target import target_description
    from .. import runtime
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("SYMJIT_") and k not in _RUNTIME_ONLY_ENV)
    return f"{target_description()}|native_kernels={runtime.native_kernels_in_use()}|env={env!r}"


def plan_key(entry: str, graph_text: str, params: Mapping[str, np.ndarray], **how) -> str | None:
    """The cache key of a plan (see the module docstring): `entry` names the entry point,
    `graph_text` is a graph fingerprint, `params` the bound values, `how` the compile options
    (canonical values). None when something has no canonical text."""
    try:
        options = canonical(dict(how))
        values = params_fingerprint(params)
    except Uncacheable:
        return None
    return cache.make_key("plan", str(FORMAT), __version__, code_stamp(), entry, graph_text, values, options,
                          _settings_text())


# --------------------------------------------------------------------------------------------
# Storing and loading
# --------------------------------------------------------------------------------------------

def cacheable(cg) -> bool:
    """Whether a CompiledGraph can be stored: one native entry, no per-call seeds, no state
    outputs, not profiled, made for this host."""
    m = cg.module
    return (cg.entry is not None and cg.native and len(m.segment_names) == 1 and not m.seed_params
            and not m.state_updates and not m.profile_slots and not cg.state_specs
            and (cg.target is None or is_host(cg.target)))


def target_text(target) -> str:
    """The canonical text of an llvm Target (None: the host) for `plan_key`'s options."""
    if target is None:
        return "host"
    return f"{target.kind}|{target.cpu}|{target.features}|{','.join(sorted(target.kernels))}"


def _spec_json(specs) -> list:
    return [[n, list(s), np.dtype(d).str] for n, s, d in specs]


def _spec_tuple(specs) -> list:
    return [(str(n), tuple(int(d) for d in s), np.dtype(d)) for n, s, d in specs]


_PARAM_SLOT = re.compile(r"ptr %params, i64 (\d+)")


def used_params(cg) -> set | None:
    """The parameter slots the compiled code reads: those its entry function loads from the
    `params` table (graph.py `_SegmentEmitter.ptr`); None when the module text refers to the
    table in any other way (then every parameter counts as read)."""
    ir = cg.module.ir
    found = _PARAM_SLOT.findall(ir)
    if ir.count("%params") != len(found) + len(cg.module.segment_names):   # + the signatures
        return None
    return {int(k) for k in found}


def fingerprints(buffers: list) -> list[str]:
    """`fingerprint` of each buffer, the work split over two threads when there is much."""
    total = sum(memoryview(b).nbytes for b in buffers)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if total < (8 << 20) or cpus < 2 or len(buffers) < 2:
        return [fingerprint(b) for b in buffers]
    out: list = [None] * len(buffers)
    # the second thread takes buffers from the end until it has about half of the bytes
    split, acc = len(buffers), 0
    while split > 1 and acc < total // 2:
        split -= 1
        acc += memoryview(buffers[split]).nbytes

    def tail():
        for i in range(split, len(buffers)):
            out[i] = fingerprint(buffers[i])
    worker = threading.Thread(target=tail, name="symjit-fingerprint", daemon=True)
    worker.start()
    for i in range(split):
        out[i] = fingerprint(buffers[i])
    worker.join()
    return out


def blob_limit() -> int:
    """The bytes the cached plans' constant blobs may take together (`SYMJIT_PLAN_CACHE_BYTES`,
    default 4 GiB); storing a plan removes the least recently used blobs beyond it."""
    try:
        return max(0, int(os.environ.get("SYMJIT_PLAN_CACHE_BYTES", 4 << 30)))
    except ValueError:
        return 4 << 30


_WRITERS: list = []
_WRITERS_LOCK = threading.Lock()


@dataclass
class _Plan:
    """What is stored of a CompiledGraph (no reference to its code, which may then be freed
    while the plan is written): the parameter arrays the code reads (None: an unread slot)
    and their fingerprints, taken when the plan was made: a buffer written after that (a
    constant that aliases a parameter the user then changed) is stored with a fingerprint it
    does not match, so loading it is a miss, never a plan with other weights."""
    name: str
    segment: str
    input_specs: list
    output_specs: list
    workspace: int
    params: list          # (name, dtype string, array or None)
    fingerprints: list    # of the arrays that are not None, in order
    object_bytes: bytes


def _plan_of(cg) -> _Plan:
    used = used_params(cg)
    params = [(name, np.dtype(a.dtype).str, np.ascontiguousarray(a) if used is None or i in used else None)
              for i, ((name, _), a) in enumerate(zip(cg.module.placement.params, cg.params))]
    fps = fingerprints([a.view(np.uint8).reshape(-1) for _, _, a in params if a is not None])
    return _Plan(cg.name, cg.module.segment_names[0], _spec_json(cg.input_specs), _spec_json(cg.output_specs),
                 int(cg.module.workspace_size), params, fps, cg.code.object_bytes)


def store(key: str | None, cg, extra: dict | None = None, wait: bool = False) -> bool:
    """Store CompiledGraph `cg` under `key` (with `extra`, JSON data the caller gets back from
    `load`); False when it will not be (no key, not cacheable, cache off). The files are
    written by a background thread at the lowest priority (the process waits for it at exit;
    `wait=True`: written before returning, and the result says whether they were). Parameters the code never reads
    (sources of packed copies) are stored as empty arrays."""
    if key is None or not enabled() or not cacheable(cg):
        return False
    try:
        plan = _plan_of(cg)
    except Exception:  # noqa: BLE001 - a plan that cannot be described is not stored
        return False
    if wait:
        return _write(key, plan, extra)
    t = threading.Thread(target=_write, args=(key, plan, extra, True), name="symjit-plan-store")
    with _WRITERS_LOCK:
        _WRITERS[:] = [w for w in _WRITERS if w.is_alive()]
        _WRITERS.append(t)
    t.start()
    return True


def flush() -> None:
    """Wait for the plans being stored in the background."""
    with _WRITERS_LOCK:
        writers = list(_WRITERS)
    for t in writers:
        t.join()


def _background_priority() -> None:
    """Lower the calling thread's scheduling priority (Linux: nice +5 for this thread alone),
    so a background store leaves the CPUs to the compiled code's first calls."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 5)
    except (AttributeError, OSError):
        pass


def _write(key: str, plan: _Plan, extra: dict | None, background: bool = False) -> bool:
    if background:
        _background_priority()
    try:
        raws = iter([a.view(np.uint8).reshape(-1) for _, _, a in plan.params if a is not None])
        fps = iter(plan.fingerprints)
        parts, layout, offset = [], [], 0
        for name, dtype, a in plan.params:
            if a is None:
                layout.append([name, dtype, None, 0, 0, ""])
                continue
            raw = next(raws)
            pad = (-offset) % _ALIGN
            if pad:
                parts.append(bytes(pad))
                offset += pad
            layout.append([name, dtype, list(a.shape), offset, int(raw.nbytes), next(fps)])
            parts.append(raw)
            offset += int(raw.nbytes)
        blob = f"{key}-{hashlib.sha256(repr(layout).encode()).hexdigest()[:16]}" if offset else None
        header = {"format": FORMAT, "key": key, "name": plan.name, "segment": plan.segment,
                  "inputs": plan.input_specs, "outputs": plan.output_specs, "workspace": plan.workspace,
                  "params": layout, "blob": blob, "blob_size": offset, "extra": extra or {}}
        text = json.dumps(header).encode()
        if blob is not None:
            if not cache.put_blob(blob, parts):
                return False
            cache.trim_blobs(blob_limit(), keep=blob)
        return cache.put(key, _HEAD.pack(_MAGIC, FORMAT, len(text)) + text + plan.object_bytes)
    except Exception:  # noqa: BLE001 - a plan that cannot be stored is compiled again next time
        return False


def _read_entry(key: str) -> tuple[dict, bytes] | None:
    payload = cache.get(key)
    if payload is None or len(payload) < _HEAD.size:
        return None
    magic, fmt, n = _HEAD.unpack_from(payload)
    if magic != _MAGIC or fmt != FORMAT or _HEAD.size + n > len(payload):
        return None
    try:
        header = json.loads(payload[_HEAD.size:_HEAD.size + n])
    except ValueError:
        return None
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("key") != key:
        return None
    return header, payload[_HEAD.size + n:]


def _map_params(header: dict) -> list | None:
    """The constant arrays of a plan, views of its mapped blob, each checked against its
    fingerprint (an unread parameter: an empty array); None when the blob is missing or any
    array differs."""
    layout, size = header["params"], int(header["blob_size"])
    buf = cache.map_blob(header["blob"], size) if size else None
    if size and buf is None:
        return None
    if size:
        cache.touch_blob(header["blob"])
    whole = np.frombuffer(buf, dtype=np.uint8) if size else np.zeros(0, np.uint8)
    arrays, views, expected = [], [], []
    for name, dtype, shape, offset, nbytes, fp in layout:
        dt = np.dtype(dtype)
        if shape is None:
            arrays.append((str(name), np.zeros(0, dt)))
            continue
        offset, nbytes = int(offset), int(nbytes)
        count = int(np.prod(shape, dtype=np.int64))
        if offset % _ALIGN or offset < 0 or offset + nbytes > size or count * dt.itemsize != nbytes:
            return None
        raw = whole[offset:offset + nbytes]
        views.append(raw)
        expected.append(fp)
        arrays.append((str(name), raw.view(dt).reshape(tuple(int(d) for d in shape))))
    if fingerprints(views) != expected:
        return None
    return arrays


def load(key: str | None, rebuild: Callable[[], object]):
    """(CachedGraph, extra) stored under `key`, or None (a miss: no entry, or anything about it
    wrong). `rebuild()` compiles the plan the ordinary way, for what a cached plan does not
    carry (see the module docstring)."""
    if key is None or not enabled():
        return None
    flush()   # a plan this process is still storing is found complete
    try:
        found = _read_entry(key)
        if found is None:
            return None
        header, obj = found
        params = _map_params(header)
        if params is None:
            return None
        from .llvm.lower_gemm import bind_native_kernels_once
        bind_runtime_symbols()
        bind_native_kernels_once()
        code = load_object(obj, [header["segment"]])
        return CachedGraph(header, code, params, rebuild), header.get("extra") or {}
    except Exception:  # noqa: BLE001 - a bad entry is a miss and is compiled again, never trusted
        return None


# --------------------------------------------------------------------------------------------
# Cached plans
# --------------------------------------------------------------------------------------------

class _Rebuilt:
    """Attributes a cached plan does not carry, from the plan rebuilt the ordinary way."""

    def __init__(self, owner: "CachedGraph", path: tuple):
        self._owner = owner
        self._path = path

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        obj = self._owner.rebuilt()
        for p in self._path:
            obj = getattr(obj, p)
        return getattr(obj, name)


class _Module(_Rebuilt):
    """What running a cached plan needs of its lowered module; the rest (`ir`, `placement`,
    ...) from the module rebuilt on first use."""

    def __init__(self, owner, header):
        super().__init__(owner, ("module",))
        self.segment_names = [header["segment"]]
        self.workspace_size = int(header["workspace"])
        self.seed_params = []
        self.state_updates = []
        self.profile_slots = []
        self.python_nodes = []
        self.fallbacks = []


class CachedGraph(CompiledGraph):
    """A plan loaded from the cache (see the module docstring); behaves as a CompiledGraph."""

    def __init__(self, header: dict, code, params: list, rebuild: Callable[[], object]):
        from ..runtime import make_entry
        self._rebuild = rebuild
        self._rebuilt = None
        self._rebuild_lock = threading.Lock()
        self.code = code
        self.name = header["name"]
        self.stats = CompileStats()
        self.stats.cache = "plan"
        self.input_specs = _spec_tuple(header["inputs"])
        self.output_specs = _spec_tuple(header["outputs"])
        self.state_specs = []
        self.params = [a for _, a in params]
        self.module = _Module(self, header)
        self.native = True
        self._segments = {}
        self._lock = threading.Lock()
        self.entry = make_entry(code.addresses[header["segment"]], self.input_specs, self.output_specs,
                                params=params, workspace_size=self.module.workspace_size, name=self.name,
                                owner=(code, params))

    def rebuilt(self):
        """The plan compiled the ordinary way (once; for what the cached plan does not carry)."""
        with self._rebuild_lock:
            if self._rebuilt is None:
                self._rebuilt = self._rebuild()
            return self._rebuilt

    def __getattr__(self, name: str):
        # only reached for attributes a cached plan lacks (`graph`, ...)
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.rebuilt(), name)
