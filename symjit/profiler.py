"""MXNet 1.x's `mxnet.profiler`: timelines (chrome://tracing JSON) and aggregate statistics.

What is recorded while the profiler runs (`set_state('run')`, not paused):

- imperative (`profile_imperative`, or `profile_all`): one event per eager op (`nd.*`, NDArray
  arithmetic, autograd's backward ops), category "operator", named by the registered op. A
  compiled kernel an eager op runs inside counts as part of that op's event.
- symbolic (`profile_symbolic`, or `profile_all`): one event per call of a compiled graph
  (hybridized blocks, executors, modules), category "graph", named by the graph. Graphs compiled
  while symbolic profiling is on time every node inside their native code (runtime/profile.c),
  and each call then also gives one "operator" event per node, laid end to end inside the call's
  event (their sum is the call's native time, the output copies included as "memcpy"). Graphs
  compiled before keep their code: their calls are recorded without a per-node breakdown.
- Domain / Task / Frame / Event / Counter / Marker objects: the user's own events.

- memory (`profile_memory`, or `profile_all`): the numpy buffers (NDArray data) the profiling
  thread allocates are counted by the runtime's allocator (`_runtime.count_numpy_memory`); after
  each recorded op or graph call whose allocations changed the live bytes, one counter event
  "Memory: cpu/0" (category "Device Storage") gives them, and `dumps` has MXNet's "Device
  Storage" table of the samples (kB = 1024 bytes).

`profile_api` is accepted and records nothing: there is no C API layer to time.

Off, the profiler costs one `is None` test per eager op and one pointer test per compiled graph
call (no hook installed, no counters compiled in); nothing else changes in the code that runs.

`set_config` takes MXNet's keys and, as MXNet, starts from the defaults at every call.
`dump()` writes every event recorded since the last `dump(finished=True)` to `filename`
(the chrome://tracing format: `{"traceEvents": [...], "displayTimeUnit": "ms"}`, times in
microseconds). `dumps()` returns the aggregate statistics (`aggregate_stats=True`) as MXNet prints
them: one table per category with count and total/min/max/avg milliseconds.
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import os
import threading
import time
from dataclasses import dataclass, field

from .base import MXNetError, MXNetValueError
from .ops.attrs import Bool

__all__ = ["set_config", "profiler_set_config", "set_state", "profiler_set_state", "state", "dump", "dump_profile",
           "dumps", "pause", "resume", "Domain", "Task", "Frame", "Event", "Counter", "Marker", "scope", "current_scope",
           "set_kvstore_handle"]

#: MXNet's configuration keys and defaults (src/profiler/profiler.h ProfileConfigParam)
DEFAULT_CONFIG = {
    "profile_all": False, "profile_symbolic": True, "profile_imperative": True, "profile_memory": True,
    "profile_api": True, "filename": "profile.json", "continuous_dump": False, "dump_period": 1.0,
    "aggregate_stats": False, "profile_process": "worker",
}
_BOOL_KEYS = {k for k, v in DEFAULT_CONFIG.items() if isinstance(v, bool)}
_ALIASES = {"contiguous_dump": "continuous_dump"}
_SORT_BY = ("total", "avg", "min", "max", "count")
_FORMATS = ("table", "json")
_MARKER_SCOPES = {"global": "g", "process": "p", "thread": "t", "task": "t", "marker": "t"}


def _as_bool(key: str, value) -> bool:
    """A boolean setting: bools and MXNet's strings ('True', 'false', '1', ...)."""
    try:
        return Bool(value)
    except ValueError:
        raise MXNetValueError(f"profiler.set_config: {key} expects a boolean, got {value!r}") from None


def _parse_config(kwargs: dict) -> dict:
    config = dict(DEFAULT_CONFIG)
    for key, value in kwargs.items():
        key = _ALIASES.get(key, key)
        if key not in DEFAULT_CONFIG:
            raise MXNetValueError(f"profiler.set_config: unknown argument {key!r}; expected one of "
                                  f"{sorted(DEFAULT_CONFIG)}")
        if key in _BOOL_KEYS:
            value = _as_bool(key, value)
        elif key == "dump_period":
            value = float(value)
            if value <= 0:
                raise MXNetValueError(f"profiler.set_config: dump_period must be > 0 seconds, got {value}")
        elif key == "profile_process":
            value = _check_process("set_config", value)
        else:
            value = os.fspath(value)
        config[key] = value
    return config


def _check_process(where: str, profile_process) -> str:
    if profile_process == "worker":
        return profile_process
    if profile_process == "server":
        raise MXNetValueError(f"profiler.{where}: profile_process='server' needs parameter-server processes; "
                              "symjit's distributed KVStore has none (its workers reduce among themselves)")
    raise MXNetValueError(f"profiler.{where}: profile_process must be 'worker' or 'server', got {profile_process!r}")


@dataclass
class _Stat:
    """Aggregate of one (category, name): durations in nanoseconds, or a counter's values."""
    count: int = 0
    total: float = 0          # durations: their sum; counters: the last value
    min: float = float("inf")
    max: float = float("-inf")
    counter: bool = False
    sum: float = 0

    def add(self, value: float) -> None:
        self.count += 1
        self.sum += value
        self.total = value if self.counter else self.total + value
        self.min = min(self.min, value)
        self.max = max(self.max, value)


@dataclass
class _Recorder:
    """The profiler's state: configuration, run state, events and aggregates."""
    config: dict = field(default_factory=lambda: dict(DEFAULT_CONFIG))
    state: str = "stop"
    paused: bool = False
    events: list = field(default_factory=list)       # (ph, name, cat, ts_ns, dur_ns, tid, args)
    stats: dict = field(default_factory=dict)        # category -> name -> _Stat
    lock: threading.Lock = field(default_factory=threading.Lock)
    tids: dict = field(default_factory=dict)         # thread ident -> small id
    local: threading.local = field(default_factory=threading.local)
    timer: threading.Timer | None = None
    installed: bool = False
    profile_default_before: bool = False
    memory: bool = False              # counting numpy buffers (profile_memory)
    imperative: bool = False          # recording eager ops (profile_imperative)
    last_live: int = -1               # live bytes at the last memory sample

    @property
    def recording(self) -> bool:
        return self.state == "run" and not self.paused

    def tid(self) -> int:
        ident = threading.get_ident()
        t = self.tids.get(ident)
        if t is None:
            t = self.tids.setdefault(ident, len(self.tids))
        return t

    def record(self, ph: str, name: str, cat: str, ts_ns: int, dur_ns: int = 0, args=None, value=None) -> None:
        scope_name = _scope.get()
        if scope_name != _DEFAULT_SCOPE and ph == "X":
            args = dict(args or {}, profiler_scope=scope_name)
        with self.lock:
            self.events.append((ph, name, cat, ts_ns, dur_ns, self.tid(), args))
            if self.config["aggregate_stats"] and ph in ("X", "C"):
                stat = self.stats.setdefault(cat, {}).get(name)
                if stat is None:
                    stat = self.stats[cat][name] = _Stat(counter=ph == "C")
                stat.add(value if ph == "C" else dur_ns)


_rec = _Recorder()
_DEFAULT_SCOPE = "<unk>:"
_scope: contextvars.ContextVar = contextvars.ContextVar("symjit_profiler_scope", default=_DEFAULT_SCOPE)
_op_names: dict = {}


def _op_name(name: str) -> str:
    """The registered name of op `name` (an alias resolves to its op)."""
    canonical = _op_names.get(name)
    if canonical is None:
        from .ops.registry import get_op
        try:
            canonical = get_op(name).name
        except MXNetError:
            canonical = name
        _op_names[name] = canonical
    return canonical


class _OpObserver:
    """Times eager ops (ndarray `set_op_observer`) when imperative profiling is on, and in any case
    marks the thread as inside an eager op: a compiled kernel an eager op runs is part of the op,
    never a "graph" event of its own."""

    @staticmethod
    def enter() -> int:
        local = _rec.local
        local.op_depth = getattr(local, "op_depth", 0) + 1
        return time.monotonic_ns()

    @staticmethod
    def leave(op_name: str, start: int) -> None:
        end = time.monotonic_ns()
        local = _rec.local
        local.op_depth -= 1
        if local.op_depth == 0 and _rec.imperative and _rec.recording:
            _rec.record("X", _op_name(op_name), "operator", start, end - start)
            if _rec.memory:
                _sample_memory(end)


def _on_graph_call(graph, start: int, end: int) -> None:
    """The runtime's graph-call hook: one "graph" event, plus its nodes' times when profiled."""
    if getattr(_rec.local, "op_depth", 0) or not _rec.recording:
        return
    name = graph.name
    _rec.record("X", name, "graph", start, end - start)
    if _rec.memory:
        _sample_memory(end)
    from .codegen.llvm.executable import node_times_of
    counters = node_times_of(graph)
    if counters is None:
        return
    t = start
    for node in counters.read(reset=True):
        if not node.calls:
            continue
        dur = int(node.seconds * 1e9 / node.calls)
        _rec.record("X", node.op, "operator", t, dur, {"graph": name, "node": node.node})
        t += dur


MEMORY_COUNTER = "Memory: cpu/0"
_MEMORY_CATEGORY = "Device Storage"


def _sample_memory(ts: int) -> None:
    """One "Memory: cpu/0" counter event with the live bytes, when they changed."""
    from . import _runtime
    live = _runtime.numpy_memory(False)[0]
    if live != _rec.last_live:
        _rec.last_live = live
        _rec.record("C", MEMORY_COUNTER, _MEMORY_CATEGORY, ts, args={MEMORY_COUNTER: live}, value=live)


def _install() -> None:
    """Install the hooks the configuration asks for (while running and not paused)."""
    from .codegen.llvm import executable
    from . import runtime
    from .ndarray import ndarray as nd_module
    cfg = _rec.config
    _rec.imperative = bool(cfg["profile_all"] or cfg["profile_imperative"])
    if _rec.imperative or cfg["profile_symbolic"]:
        nd_module.set_op_observer(_OpObserver)
    if cfg["profile_all"] or cfg["profile_symbolic"]:
        runtime.set_call_hook(_on_graph_call)
        _rec.profile_default_before = executable.set_profile_by_default(True)
    if cfg["profile_all"] or cfg["profile_memory"]:
        runtime._runtime.count_numpy_memory(True)
        _rec.memory = True
    _rec.installed = True


def _uninstall() -> None:
    if not _rec.installed:
        return
    from .codegen.llvm import executable
    from . import runtime
    from .ndarray import ndarray as nd_module
    nd_module.set_op_observer(None)
    runtime.set_call_hook(None)
    executable.set_profile_by_default(_rec.profile_default_before)
    if _rec.memory:
        runtime._runtime.count_numpy_memory(False)
        _rec.memory = False
    _rec.installed = False


def _sync_hooks() -> None:
    _uninstall()
    if _rec.recording:
        _install()


def _schedule_dump() -> None:
    """continuous_dump: write the file every dump_period seconds while running."""
    if _rec.timer is not None:
        _rec.timer.cancel()
        _rec.timer = None
    if _rec.state == "run" and _rec.config["continuous_dump"]:
        def tick():
            if _rec.state == "run":
                dump(finished=False)
                _schedule_dump()
        _rec.timer = threading.Timer(_rec.config["dump_period"], tick)
        _rec.timer.daemon = True
        _rec.timer.start()


# ------------------------------------------------------------------------------------------ API

def set_config(**kwargs) -> None:
    """Configure the profiler (keyword arguments only): filename, profile_all, profile_symbolic,
    profile_imperative, profile_memory, profile_api, continuous_dump, dump_period,
    aggregate_stats, profile_process. Unnamed keys take MXNet's defaults."""
    config = _parse_config(kwargs)
    with _rec.lock:
        _rec.config = config
    _sync_hooks()
    _schedule_dump()


def profiler_set_config(mode: str = "symbolic", filename: str = "profile.json") -> None:
    """Deprecated MXNet spelling: `set_config(profile_<mode>=True, filename=filename)`."""
    import warnings
    warnings.warn("profiler.profiler_set_config() is deprecated. Please use profiler.set_config() instead")
    if mode not in ("symbolic", "all", "imperative", "memory", "api"):
        raise MXNetValueError(f"profiler.profiler_set_config: mode must be 'symbolic' or 'all', got {mode!r}")
    set_config(**{"profile_" + mode: True, "filename": filename})


def set_state(state: str = "stop", profile_process: str = "worker") -> None:
    """Start ('run') or stop ('stop') profiling."""
    _check_process("set_state", profile_process)
    if state not in ("run", "stop"):
        raise MXNetValueError(f"profiler.set_state: state must be 'run' or 'stop', got {state!r}")
    _rec.state = state
    if state == "run":
        _rec.paused = False
    _sync_hooks()
    _schedule_dump()


def profiler_set_state(state: str = "stop") -> None:
    """Deprecated MXNet spelling of `set_state`."""
    import warnings
    warnings.warn("profiler.profiler_set_state() is deprecated. Please use profiler.set_state() instead")
    set_state(state)


def state() -> str:
    """'run' or 'stop' (symjit's addition: MXNet keeps it in the C library)."""
    return _rec.state


def pause(profile_process: str = "worker") -> None:
    """Stop recording until `resume()` (the state stays 'run')."""
    _check_process("pause", profile_process)
    _rec.paused = True
    _sync_hooks()


def resume(profile_process: str = "worker") -> None:
    """Record again after `pause()`."""
    _check_process("resume", profile_process)
    _rec.paused = False
    _sync_hooks()


def _trace_event(ev, pid: int) -> dict:
    ph, name, cat, ts, dur, tid, args = ev
    out = {"name": name, "cat": cat, "ph": ph, "ts": ts / 1e3, "pid": pid, "tid": tid}
    if ph == "X":
        out["dur"] = dur / 1e3
    elif ph == "i":
        out["s"] = args.pop("s") if args else "p"
    if args:
        out["args"] = args
    return out


def dump(finished: bool = True, profile_process: str = "worker") -> None:
    """Write the events recorded so far to the configured file (chrome://tracing JSON).
    `finished`: the events are then dropped (the next dump starts afresh) and continuous dumps
    stop; otherwise they are kept and the next dump writes them again with the newer ones."""
    _check_process("dump", profile_process)
    with _rec.lock:
        events = list(_rec.events)
        if finished:
            _rec.events.clear()
        names = {tid: f"thread {tid}" for tid in _rec.tids.values()}
    pid = os.getpid()
    trace = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": "symjit (cpu/0)"}}]
    trace += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": n}}
              for tid, n in names.items()]
    trace += [_trace_event((ph, name, cat, ts, dur, tid, dict(args) if args else None), pid)
              for ph, name, cat, ts, dur, tid, args in events]
    doc = {"traceEvents": trace, "displayTimeUnit": "ms", "otherData": {"version": "symjit (MXNet 1.9.1 API)"}}
    path = _rec.config["filename"]
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)
    if finished and _rec.timer is not None:
        _rec.timer.cancel()
        _rec.timer = None


def dump_profile() -> None:
    """Deprecated MXNet spelling of `dump(True)`."""
    import warnings
    warnings.warn("profiler.dump_profile() is deprecated. Please use profiler.dump() instead")
    dump(True)


def _sort_key(stat: _Stat, sort_by: str) -> float:
    if sort_by == "total":
        return stat.total
    if sort_by == "avg":
        return (stat.max - stat.min) / 2 if stat.counter else stat.total / stat.count
    return {"min": stat.min, "max": stat.max, "count": stat.count}[sort_by]


def _ms(stat: _Stat, value: float) -> float:
    """A duration in ms (counters keep their values)."""
    return value if stat.counter else value / 1e6


def _rows(stats: dict, sort_by: str, ascending: bool) -> list:
    return sorted(stats.items(), key=lambda kv: (_sort_key(kv[1], sort_by), kv[0]), reverse=not ascending)


def dumps(reset: bool = False, format: str = "table", sort_by: str = "total", ascending: bool = False) -> str:
    """The aggregate statistics (collected with `aggregate_stats=True`) as MXNet prints them:
    `format` 'table' or 'json', entries of each category ordered by `sort_by` ('total', 'avg',
    'min', 'max', 'count'), largest first unless `ascending`; `reset` clears them afterwards."""
    if format not in _FORMATS:
        raise MXNetValueError(f"profiler.dumps: invalid value provided for format: {format!r}. Support: 'table', 'json'")
    if sort_by not in _SORT_BY:
        raise MXNetValueError(f"profiler.dumps: invalid value provided for sort_by: {sort_by!r}. "
                              "Support: 'total', 'avg', 'min', 'max', 'count'")
    if ascending not in (False, True):
        raise MXNetValueError(f"profiler.dumps: invalid value provided for ascending: {ascending!r}. Support: False, True")
    if reset not in (False, True):
        raise MXNetValueError(f"profiler.dumps: invalid value provided for reset: {reset!r}. Support: False, True")
    with _rec.lock:
        stats = {cat: dict(names) for cat, names in _rec.stats.items()}
        if reset:
            _rec.stats.clear()
    memory = {cat: names for cat, names in stats.items() if cat == _MEMORY_CATEGORY}
    timed = {cat: names for cat, names in stats.items() if cat != _MEMORY_CATEGORY}
    if format == "json":
        def entry(s: _Stat, kb: bool) -> dict:
            if kb:
                return {"Count": s.count, "Min": s.min / 1024, "Max": s.max / 1024, "Avg": s.sum / s.count / 1024}
            return {"Count": s.count, "Total": _ms(s, s.total), "Min": _ms(s, s.min), "Max": _ms(s, s.max),
                    "Avg": (s.max - s.min) / 2 if s.counter else _ms(s, s.total) / s.count}

        def section(cats: dict, kb: bool) -> dict:
            return {cat: {name: entry(s, kb) for name, s in _rows(names, sort_by, ascending)}
                    for cat, names in cats.items()}
        return json.dumps({"Time": section(timed, False), "Memory": section(memory, True),
                           "Unit": {"Time": "ms", "Memory": "kb"}}, indent=4)
    lines = ["", "Profile Statistics:", "\tNote the difference in units for different entries."]
    for cat, names in stats.items():
        lines += [cat, "================="]
        if cat == _MEMORY_CATEGORY:
            lines.append(f"{'Name':<25}{'Total Count':>16} {'Min Use  (kb)':>16} {'Max Use  (kb)':>16} "
                         f"{'Avg Use  (kb)':>16}")
            lines.append(f"{'----':<25}{'-----------':>16} {'-------------':>16} {'-------------':>16} "
                         f"{'-------------':>16}")
            for name, s in _rows(names, sort_by, ascending):
                lines.append(f"{name:<25}{s.count:>16} {s.min / 1024:>16.4f} {s.max / 1024:>16.4f} "
                             f"{s.sum / s.count / 1024:>16.4f}")
        else:
            lines.append(f"{'Name':<25}{'Total Count':>16} {'Time (ms)':>16} {'Min Time (ms)':>16} "
                         f"{'Max Time (ms)':>16} {'Avg Time (ms)':>16}")
            lines.append(f"{'----':<25}{'-----------':>16} {'---------':>16} {'-------------':>16} "
                         f"{'-------------':>16} {'-------------':>16}")
            for name, s in _rows(names, sort_by, ascending):
                lines.append(f"{name:<25}{s.count:>16} {_ms(s, s.total):>16.4f} {_ms(s, s.min):>16.4f} "
                             f"{_ms(s, s.max):>16.4f} {_ms(s, s.total) / s.count:>16.4f}")
        lines.append("")
    return "\n".join(lines) + "\n"


def set_kvstore_handle(handle) -> None:
    """MXNet routes server-process profiling through a KVStore handle; symjit has no server
    processes, so the handle is kept only for programs that set it."""
    global profiler_kvstore_handle
    profiler_kvstore_handle = handle


profiler_kvstore_handle = None


# ------------------------------------------------------------------------------------------ objects

class Domain:
    """A category grouping tasks, frames, counters and markers (their events' "cat")."""

    def __init__(self, name: str):
        self.name = str(name)

    def __str__(self) -> str:
        return self.name

    def new_task(self, name: str) -> "Task":
        return Task(self, name)

    def new_frame(self, name: str) -> "Frame":
        return Frame(self, name)

    def new_counter(self, name: str, value=None) -> "Counter":
        return Counter(self, name, value)

    def new_marker(self, name: str) -> "Marker":
        return Marker(self, name)


class _Duration:
    """A timed scope: `start()` ... `stop()` records one event of the elapsed time while the
    profiler records (also usable as `with obj:`)."""
    _category = "event"

    def __init__(self, name: str, category: str):
        self.name = str(name)
        self._cat = category
        self._start = None

    def start(self) -> None:
        self._start = time.monotonic_ns()

    def stop(self) -> None:
        if self._start is None:
            raise MXNetError(f"profiler: {type(self).__name__} {self.name!r} stopped without start()")
        end = time.monotonic_ns()
        if _rec.recording:
            _rec.record("X", self.name, self._cat, self._start, end - self._start)
        self._start = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def __str__(self) -> str:
        return self.name


class Task(_Duration):
    """A unit of work of one thread, in a domain; all its passes aggregate into one entry."""

    def __init__(self, domain: Domain, name: str):
        super().__init__(name, domain.name)
        self.domain = domain


class Frame(_Duration):
    """A period of time (a frame of work), in a domain."""

    def __init__(self, domain: Domain, name: str):
        super().__init__(name, domain.name)
        self.domain = domain


class Event(_Duration):
    """A named timed region (category "event")."""

    def __init__(self, name: str):
        super().__init__(name, "event")


class Counter:
    """A value tracked over time (chrome://tracing counter events), in a domain."""

    def __init__(self, domain: Domain, name: str, value=None):
        self.domain = domain
        self.name = str(name)
        self.value = 0
        if value is not None:
            self.set_value(value)

    def set_value(self, value) -> None:
        self.value = int(value)
        if _rec.recording:
            _rec.record("C", self.name, self.domain.name, time.monotonic_ns(), args={self.name: self.value},
                        value=self.value)

    def increment(self, delta=1) -> None:
        self.set_value(self.value + int(delta))

    def decrement(self, delta=1) -> None:
        self.set_value(self.value - int(delta))

    def __iadd__(self, delta):
        self.increment(delta)
        return self

    def __isub__(self, delta):
        self.decrement(delta)
        return self

    def __str__(self) -> str:
        return self.name


class Marker:
    """An instant in time, in a domain."""

    def __init__(self, domain: Domain, name: str):
        self.domain = domain
        self.name = str(name)

    def mark(self, scope: str = "process") -> None:
        """Record the instant; `scope`: 'global', 'process', 'thread', 'task' or 'marker'."""
        if scope not in _MARKER_SCOPES:
            raise MXNetValueError(f"profiler.Marker.mark: scope must be one of {list(_MARKER_SCOPES)}, got {scope!r}")
        if _rec.recording:
            _rec.record("i", self.name, self.domain.name, time.monotonic_ns(), args={"s": _MARKER_SCOPES[scope]})

    def __str__(self) -> str:
        return self.name


@contextlib.contextmanager
def scope(name: str = "<unk>:", append_mode: bool = True):
    """The profiler scope (MXNet: the GPU memory profiler's allocation tags): within the `with`
    block it is `name` (':' appended when missing), after the enclosing scope's name with
    `append_mode` unless that is the default '<unk>:'. Yields the scope's name. symjit records
    it on the events of the block (`args.profiler_scope`)."""
    name = name if name.endswith(":") else name + ":"
    outer = _scope.get()
    if append_mode and outer != _DEFAULT_SCOPE:
        name = outer + name
    token = _scope.set(name)
    try:
        yield name
    finally:
        _scope.reset(token)


def current_scope() -> str:
    """The profiler scope in effect ('<unk>:' outside any `scope` block)."""
    return _scope.get()
