"""JIT compilation of LLVM IR text into callable machine code, with cacheable objects.

One code path for fresh and cached code: IR text is parsed, verified, optimised with the
new pass manager (O3, loop and SLP vectorisation) for the host TargetMachine, lowered to a
relocatable object (`compile_to_object`), and the object is loaded into an MCJIT engine of
its own (`load_object`), owned by the returned `CompiledCode`: the machine code is freed when
the last holder of that object goes. A disk cache stores the object bytes and later calls
only `load_object` (no LLVM optimisation or code generation), which takes milliseconds.

Symbol names are unique by construction (they carry a hash of what they compute, see
`elementwise.kernel_name`); loading an object whose symbols a live CompiledCode already
defines returns that CompiledCode.
"""
from __future__ import annotations

import ctypes
import threading
import weakref
from typing import Sequence

import llvmlite.binding as llvm
import numpy as np

from ...base import MXNetError
from .nontemporal import STREAM_SUFFIX, mark_streaming_stores
from .target import OPT_LEVEL, codegen_options, ensure_initialized, host_target

__all__ = ["parse_and_verify", "optimize", "compile_to_object", "load_object", "compile_ir",
           "optimized_ir", "assembly", "CompiledCode", "KERNEL_CFUNCTYPE", "ElementwiseKernel", "live_engines"]

_LOCK = threading.RLock()      # LLVM (contexts, engines, their disposal) is not thread-safe

#: C signature of every generated kernel: void kernel(int64 begin, int64 end, void **args)
KERNEL_CFUNCTYPE = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p))


def dispose_module(mod: llvm.ModuleRef | None) -> None:
    """Free a module made by `parse_and_verify`, then its own context, in that order.

    Left to the garbage collector, a module and its context that become unreachable together
    (say, in the traceback of an interrupted compilation) may be freed context first, and
    freeing the module afterwards reads freed memory (a crash at some later collection)."""
    if mod is None or mod.closed:
        return
    context = mod._context
    mod.close()
    if context is not llvm.get_global_context() and not context.closed:
        context.close()


def parse_and_verify(ir_text: str, target=None) -> llvm.ModuleRef:
    """Parse IR text into a verified module carrying the target's (default: host's) triple and
    data layout, in a context of its own; callers free both with `dispose_module`."""
    ensure_initialized()
    # a context per module: types and constants LLVM uniques in a context live as long as
    # the context, so parsing into the global one would keep every module's for good
    context = llvm.create_context()
    mod = None
    try:
        mod = llvm.parse_assembly(ir_text, context=context)
        mod.verify()
    except BaseException as e:
        if mod is not None:
            dispose_module(mod)
        else:
            context.close()
        if isinstance(e, RuntimeError):
            raise MXNetError(f"codegen: generated LLVM IR is invalid: {e}") from e
        raise
    t = target or host_target()
    mod.triple = t.triple
    mod.data_layout = t.data_layout
    return mod


def optimize(mod: llvm.ModuleRef, target=None) -> llvm.ModuleRef:
    """Run LLVM's O3 module pipeline (inlining, loop vectorisation, SLP) for the target (default:
    host), then make the vector stores of streaming kernel copies non-temporal (nontemporal.py).
    Returns the optimised module: `mod` itself, or a new one when stores were rewritten, in
    which case `mod` is disposed."""
    t = target or host_target()
    pto = llvm.create_pipeline_tuning_options(speed_level=OPT_LEVEL)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    # a fresh pass builder per module: llvmlite registers each run's instrumentation callbacks
    # into the builder, so a reused builder would call into a finished run's state
    pb = llvm.create_pass_builder(t.machine, pto)
    pb.getModulePassManager().run(mod, pb)
    if not any(f.name.endswith(STREAM_SUFFIX) for f in mod.functions):
        return mod
    text, rewritten = mark_streaming_stores(str(mod))
    if not rewritten:
        return mod
    new = parse_and_verify(text, target)
    dispose_module(mod)
    return new


def _optimized(ir_text: str, target, use):
    """`use(optimised module)` for IR text, the module (and its context) freed afterwards in
    the right order whatever happens (caller holds _LOCK)."""
    mod = parse_and_verify(ir_text, target)
    try:
        mod = optimize(mod, target)
        return use(mod)
    finally:
        dispose_module(mod)


def optimized_ir(ir_text: str, target=None) -> str:
    """The optimised IR of a module for `target` (default: host); for tests and `symjit inspect`."""
    with _LOCK:
        return _optimized(ir_text, target, str)


def assembly(ir_text: str, target=None) -> str:
    """Assembly of an optimised module for `target` (default: host)."""
    machine = (target or host_target()).machine
    with _LOCK:
        return _optimized(ir_text, target, lambda mod: _emit(machine.emit_assembly, mod))


def _emit(emit, mod):
    """`emit(mod)` (a TargetMachine's emit_object or emit_assembly) with symjit's code
    generator options (target.codegen_options; caller holds _LOCK)."""
    with codegen_options():
        return emit(mod)


def compile_to_object(ir_text: str, pic: bool = False, target=None) -> bytes:
    """Optimise IR text and return a relocatable object file for `target` (a HostTarget from
    target.py; default: the host), the cacheable form.

    `pic=True` gives position-independent code for ahead-of-time shared libraries.
    """
    t = target or host_target()
    machine = t.pic_machine if pic else t.machine
    with _LOCK:
        return _optimized(ir_text, target, lambda mod: bytes(_emit(machine.emit_object, mod)))


class _Engine:
    """One MCJIT engine holding one loaded object file. MCJIT cannot unload single objects,
    so each object gets its own engine and freeing the engine frees its machine code."""

    def __init__(self, object_bytes: bytes):
        ensure_initialized()
        t = host_target()
        target = llvm.Target.from_triple(t.triple)
        tm = target.create_target_machine(cpu=t.cpu, features=t.features, opt=OPT_LEVEL, jit=True)
        empty = llvm.parse_assembly(f'target triple = "{t.triple}"\n')
        self.engine = llvm.create_mcjit_compiler(empty, tm)   # owns the module and the target machine
        self.object = llvm.ObjectFileRef.from_data(object_bytes)
        self.engine.add_object_file(self.object)
        self.engine.finalize_object()

    def address(self, symbol: str) -> int:
        addr = self.engine.get_function_address(symbol)
        if not addr:
            raise MXNetError(f"codegen: symbol {symbol!r} not found in the compiled object")
        return addr

    def close(self) -> None:
        self.engine.close()


#: engines of collected CompiledCode objects, disposed under _LOCK (a finalizer may run in
#: any thread at any allocation, possibly while another thread is inside LLVM)
_RETIRED: list[_Engine] = []
#: live CompiledCode objects by the symbols they define (symbols are unique by construction)
_BY_SYMBOL: "weakref.WeakValueDictionary[str, CompiledCode]" = weakref.WeakValueDictionary()
_LIVE: "weakref.WeakSet[CompiledCode]" = weakref.WeakSet()


def _retire(engine: _Engine) -> None:
    """Finalizer of a CompiledCode: its engine goes now if LLVM is free, else at the next load."""
    _RETIRED.append(engine)
    if _LOCK.acquire(blocking=False):
        try:
            _dispose_retired()
        finally:
            _LOCK.release()


def _dispose_retired() -> None:
    """Dispose retired engines (caller holds _LOCK)."""
    while _RETIRED:
        _RETIRED.pop().close()


def live_engines() -> int:
    """How many JIT engines (one per loaded object) are not yet disposed."""
    return len(_LIVE) + len(_RETIRED)


class CompiledCode:
    """Loaded machine code: the object bytes (cacheable) and the address of each symbol.

    Lifetime: the code stays loaded exactly as long as this object is reachable; every
    holder of an address (a CompiledGraph, a runtime Entry via `owner`, an ElementwiseKernel)
    keeps a reference to it, and when the last one goes the engine and its code are freed.
    """

    def __init__(self, object_bytes: bytes, engine: _Engine, symbols: Sequence[str]):
        self.object_bytes = object_bytes
        self.addresses = {s: engine.address(s) for s in symbols}
        self._engine = engine
        _LIVE.add(self)
        # at interpreter exit the code stays: the process's memory goes with it anyway
        weakref.finalize(self, _retire, engine).atexit = False

    def function(self, name: str, cfunctype=KERNEL_CFUNCTYPE):
        """A ctypes callable for symbol `name` (ctypes releases the GIL during the call); the
        caller keeps this CompiledCode alive while it may call it."""
        return cfunctype(self.addresses[name])


def _loaded(symbols: Sequence[str]) -> CompiledCode | None:
    """A live CompiledCode that defines every one of `symbols` (caller holds _LOCK)."""
    found = {_BY_SYMBOL.get(s) for s in symbols}
    if len(found) == 1:
        (code,) = found
        if code is not None:
            code.addresses.update((s, code._engine.address(s)) for s in symbols if s not in code.addresses)
            return code
    return None


def load_object(object_bytes: bytes, symbols: Sequence[str]) -> CompiledCode:
    """Load an object produced by `compile_to_object` and resolve `symbols`; a live
    CompiledCode that already defines all of them is returned instead of loading again."""
    with _LOCK:
        _dispose_retired()
        code = _loaded(symbols)
        if code is None:
            code = CompiledCode(object_bytes, _Engine(object_bytes), symbols)
            for s in symbols:
                _BY_SYMBOL[s] = code
        return code


def compile_ir(ir_text: str, symbols: Sequence[str]) -> CompiledCode:
    """Optimise, lower and load IR text; returns the object bytes and symbol addresses.

    When a live CompiledCode already defines every symbol it is returned (no compilation).
    """
    with _LOCK:
        code = _loaded(symbols)
        if code is not None:
            return code
        return load_object(compile_to_object(ir_text), symbols)


class ElementwiseKernel:
    """Python-callable wrapper of an elementwise kernel: `kernel(*inputs, out=...)`.

    Checks the arrays against the kernel's dtypes and shapes (inputs must be C-contiguous),
    fills the `void **args` array (inputs, then outputs) and calls fn(0, n, args) from the
    calling thread. `call_range` runs a sub-range (used to split work over threads).
    """

    def __init__(self, address: int, in_dtypes, in_shapes, out_dtypes, out_shape, name: str = "kernel"):
        self.fn = KERNEL_CFUNCTYPE(address)
        self.address = address
        self.name = name
        self.in_dtypes = tuple(np.dtype(d) for d in in_dtypes)
        self.in_shapes = tuple(tuple(s) for s in in_shapes)
        self.out_dtypes = tuple(np.dtype(d) for d in out_dtypes)
        self.out_shape = tuple(out_shape)
        self.size = int(np.prod(self.out_shape, dtype=np.int64))

    def _check(self, what: str, i: int, a: np.ndarray, dtype: np.dtype, shape: tuple) -> None:
        if not isinstance(a, np.ndarray):
            raise MXNetError(f"{self.name}: {what} {i} must be a numpy array, got {type(a).__name__}")
        if a.dtype != dtype:
            raise MXNetError(f"{self.name}: {what} {i} expected dtype {dtype}, got {a.dtype}")
        if tuple(a.shape) != shape:
            raise MXNetError(f"{self.name}: {what} {i} expected shape {shape}, got {tuple(a.shape)}")
        if not a.flags.c_contiguous:
            raise MXNetError(f"{self.name}: {what} {i} must be C-contiguous")

    def pack_args(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]):
        """The `void **args` array for these arrays (validated)."""
        if len(inputs) != len(self.in_dtypes):
            raise MXNetError(f"{self.name}: expected {len(self.in_dtypes)} inputs, got {len(inputs)}")
        if len(outputs) != len(self.out_dtypes):
            raise MXNetError(f"{self.name}: expected {len(self.out_dtypes)} outputs, got {len(outputs)}")
        for i, (a, d, s) in enumerate(zip(inputs, self.in_dtypes, self.in_shapes)):
            self._check("input", i, a, d, s)
        for i, (a, d) in enumerate(zip(outputs, self.out_dtypes)):
            self._check("output", i, a, d, self.out_shape)
            if not a.flags.writeable:
                raise MXNetError(f"{self.name}: output {i} is read-only")
        arr = (ctypes.c_void_p * (len(inputs) + len(outputs)))()
        for i, a in enumerate(list(inputs) + list(outputs)):
            arr[i] = a.ctypes.data
        return arr

    def call_range(self, begin: int, end: int, args) -> None:
        """Run the kernel on flat output indices [begin, end) with packed `args`."""
        self.fn(int(begin), int(end), ctypes.cast(args, ctypes.POINTER(ctypes.c_void_p)))

    def __call__(self, *inputs: np.ndarray, out=None):
        outs = out if isinstance(out, (list, tuple)) else ([out] if out is not None else None)
        if outs is None:
            outs = [np.empty(self.out_shape, d) for d in self.out_dtypes]
        args = self.pack_args(inputs, outs)
        self.call_range(0, self.size, args)
        return outs[0] if len(outs) == 1 else list(outs)
