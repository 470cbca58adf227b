"""JIT compilation of LLVM IR text into callable machine code, with cacheable objects.

One code path for fresh and cached code: IR text is parsed, verified, optimised with the
new pass manager (O3, loop and SLP vectorisation) for the host TargetMachine, lowered to a
relocatable object (`compile_to_object`), and the object is loaded into the process-wide
MCJIT engine (`load_object`). A disk cache stores the object bytes and later calls only
`load_object` (no LLVM optimisation or code generation), which takes milliseconds.

Symbols are process-global: every kernel name must be unique (names carry a hash of what
they compute, see `elementwise.kernel_name`). Loading an object whose symbols are already
loaded reuses the loaded code.
"""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from typing import Sequence

import llvmlite.binding as llvm
import numpy as np

from ...base import MXNetError
from .nontemporal import STREAM_SUFFIX, mark_streaming_stores
from .target import OPT_LEVEL, ensure_initialized, host_target

__all__ = ["parse_and_verify", "optimize", "compile_to_object", "load_object", "compile_ir",
           "optimized_ir", "assembly", "CompiledCode", "KERNEL_CFUNCTYPE", "ElementwiseKernel"]

_LOCK = threading.RLock()      # LLVM's global context and the engine are not thread-safe

#: C signature of every generated kernel: void kernel(int64 begin, int64 end, void **args)
KERNEL_CFUNCTYPE = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p))


def parse_and_verify(ir_text: str, target=None) -> llvm.ModuleRef:
    """Parse IR text into a verified module carrying the target's (default: host's) triple and data layout."""
    ensure_initialized()
    try:
        mod = llvm.parse_assembly(ir_text)
        mod.verify()
    except RuntimeError as e:
        raise MXNetError(f"codegen: generated LLVM IR is invalid: {e}") from e
    t = target or host_target()
    mod.triple = t.triple
    mod.data_layout = t.data_layout
    return mod


def optimize(mod: llvm.ModuleRef, target=None) -> llvm.ModuleRef:
    """Run LLVM's O3 module pipeline (inlining, loop vectorisation, SLP) for the target (default:
    host), then make the vector stores of streaming kernel copies non-temporal (nontemporal.py).
    Returns the optimised module (a new one when stores were rewritten)."""
    t = target or host_target()
    pto = llvm.create_pipeline_tuning_options(speed_level=OPT_LEVEL)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pb = llvm.create_pass_builder(t.machine, pto)
    pb.getModulePassManager().run(mod, pb)
    if not any(f.name.endswith(STREAM_SUFFIX) for f in mod.functions):
        return mod
    text, rewritten = mark_streaming_stores(str(mod))
    return parse_and_verify(text, target) if rewritten else mod


def optimized_ir(ir_text: str, target=None) -> str:
    """The optimised IR of a module for `target` (default: host); for tests and `symjit inspect`."""
    with _LOCK:
        mod = optimize(parse_and_verify(ir_text, target), target)
        return str(mod)


def assembly(ir_text: str, target=None) -> str:
    """Assembly of an optimised module for `target` (default: host)."""
    with _LOCK:
        mod = optimize(parse_and_verify(ir_text, target), target)
        return (target or host_target()).machine.emit_assembly(mod)


def compile_to_object(ir_text: str, pic: bool = False, target=None) -> bytes:
    """Optimise IR text and return a relocatable object file for `target` (a HostTarget from
    target.py; default: the host), the cacheable form.

    `pic=True` gives position-independent code for ahead-of-time shared libraries.
    """
    with _LOCK:
        mod = optimize(parse_and_verify(ir_text, target), target)
        t = target or host_target()
        return bytes((t.pic_machine if pic else t.machine).emit_object(mod))


class _Engine:
    """The process-wide MCJIT engine that owns all loaded kernel objects."""

    def __init__(self):
        ensure_initialized()
        t = host_target()
        target = llvm.Target.from_triple(t.triple)
        tm = target.create_target_machine(cpu=t.cpu, features=t.features, opt=OPT_LEVEL, jit=True)
        empty = llvm.parse_assembly(f'target triple = "{t.triple}"\n')
        self.engine = llvm.create_mcjit_compiler(empty, tm)
        self.objects: list = []            # keep object files alive with the engine
        self.symbols: dict[str, int] = {}


_ENGINE: _Engine | None = None


def _engine() -> _Engine:
    global _ENGINE
    if _ENGINE is None:
        _ENGINE = _Engine()
    return _ENGINE


@dataclass
class CompiledCode:
    """Loaded machine code: the object bytes (cacheable) and the address of each symbol."""
    object_bytes: bytes
    addresses: dict[str, int] = field(default_factory=dict)

    def function(self, name: str, cfunctype=KERNEL_CFUNCTYPE):
        """A ctypes callable for symbol `name` (ctypes releases the GIL during the call)."""
        return cfunctype(self.addresses[name])


def load_object(object_bytes: bytes, symbols: Sequence[str]) -> CompiledCode:
    """Load an object produced by `compile_to_object` and resolve `symbols`."""
    with _LOCK:
        eng = _engine()
        missing = [s for s in symbols if s not in eng.symbols]
        if missing:
            obj = llvm.ObjectFileRef.from_data(object_bytes)
            eng.engine.add_object_file(obj)
            eng.objects.append(obj)
            eng.engine.finalize_object()
            for s in missing:
                addr = eng.engine.get_function_address(s)
                if not addr:
                    raise MXNetError(f"codegen: symbol {s!r} not found in the compiled object")
                eng.symbols[s] = addr
        return CompiledCode(object_bytes, {s: eng.symbols[s] for s in symbols})


def compile_ir(ir_text: str, symbols: Sequence[str]) -> CompiledCode:
    """Optimise, lower and load IR text; returns the object bytes and symbol addresses.

    When every symbol is already loaded in this process the loaded code is reused and
    `object_bytes` is empty (use `compile_to_object` to get bytes for a disk cache).
    """
    with _LOCK:
        eng = _engine()
        if all(s in eng.symbols for s in symbols):   # already loaded in this process
            return CompiledCode(b"", {s: eng.symbols[s] for s in symbols})
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
