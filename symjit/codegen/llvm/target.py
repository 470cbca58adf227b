"""Targets of the LLVM backend: the host (one cached TargetMachine per process) and named CPUs.

By default kernels are compiled for the exact host CPU (name and feature string from LLVM), so
the loop vectorizer uses the widest profitable vectors (AVX2/FMA, AVX-512 where present).
`compile_target(cpu)` describes a compilation as data (`symjit.ir.target.Target`): the host
(`"native"`) or one of `NAMED_CPUS`, for ahead-of-time libraries that must run on another
machine; `machine_for(target)` gives its TargetMachines. Lowering happens inside
`target_scope(target)`, and the few lowering choices that depend on the CPU read
`current_target()`. `target_description()` is the part of compiled-code cache keys that
identifies the target: code compiled for one CPU is never loaded on another.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
from dataclasses import dataclass

import llvmlite.binding as llvm

from ...ir.target import AVX512_KERNELS, Target

__all__ = ["HostTarget", "host_target", "codegen_options", "make_target", "target_description", "ensure_initialized",
           "target_feature_set", "NAMED_CPUS", "compile_target", "machine_for", "target_scope", "current_target",
           "current_machine", "is_host"]

#: optimisation level used for both the IR pipeline and machine code generation
OPT_LEVEL = 3

#: LLVM code generator options in force while symjit emits machine code (`codegen_options`),
#: each as (set, restore). Loop strength reduction is off: on the generated kernels (short
#: vectorized loops, x86 addressing modes already fold the induction arithmetic) it changes no
#: result and no measured run time, but it took a third of the code generation time of graphs
#: with many kernels (DenseNet-121: 62 fused BatchNorm+ReLU kernels, 0.8 of 2.1 s).
CODEGEN_OPTIONS = (("-disable-lsr", "-disable-lsr=false"),)

#: relocation model and code model of JIT-compiled objects: position-independent code with the
#: small code model, as in any shared library. Calls to the runtime go through jump slots and its
#: addresses through a GOT, both made by the loader (RuntimeDyld), and the object's own code and
#: data are one allocation, so 32-bit PC-relative references reach. LLVM's default JIT code model
#: (large) makes x86 fast instruction selection give up at every call, so the optnone segment
#: functions (one call per node) went through the full selector: a third of their machine code
#: time (Inception v3: 18 -> 12 ms of emission).
JIT_RELOC, JIT_CODE_MODEL = "pic", "default"


@contextlib.contextmanager
def codegen_options():
    """Apply CODEGEN_OPTIONS around one machine code emission (caller holds jit._LOCK), then
    put LLVM's defaults back: the options are process-wide, and other llvmlite users in the
    process keep LLVM's behaviour."""
    for on, _ in CODEGEN_OPTIONS:
        llvm.set_option("symjit", on)
    try:
        yield
    finally:
        for _, off in CODEGEN_OPTIONS:
            llvm.set_option("symjit", off)


@functools.lru_cache(maxsize=None)
def ensure_initialized() -> None:
    """Initialise LLVM's native target and asm printer once (llvmlite >= 0.45 has no initialize())."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@dataclass(frozen=True)
class HostTarget:
    """The host CPU as LLVM sees it, plus TargetMachines for JIT and for position-independent code."""
    triple: str
    cpu: str
    features: str
    machine: llvm.TargetMachine          # static relocation model, for the in-process JIT
    pic_machine: llvm.TargetMachine      # PIC, for ahead-of-time shared libraries
    data_layout: str

    @property
    def description(self) -> str:
        options = ",".join(on for on, _ in CODEGEN_OPTIONS)
        return f"{self.triple};{self.cpu};{self.features};O{OPT_LEVEL};{JIT_RELOC}/{JIT_CODE_MODEL};{options}"


@functools.lru_cache(maxsize=None)
def make_target(cpu: str, features: str = "", triple: str | None = None) -> HostTarget:
    """A target for a named CPU (empty features: that CPU's defaults). Used for the host and
    to check code generation for other CPUs (e.g. AVX2-only parts) without running it."""
    ensure_initialized()
    triple = triple or llvm.get_process_triple()
    target = llvm.Target.from_triple(triple)
    tm = target.create_target_machine(cpu=cpu, features=features, opt=OPT_LEVEL,
                                      reloc=JIT_RELOC, codemodel=JIT_CODE_MODEL, jit=True)
    pic = target.create_target_machine(cpu=cpu, features=features, opt=OPT_LEVEL,
                                       reloc="pic", codemodel="default")
    return HostTarget(triple, cpu, features, tm, pic, str(tm.target_data))


@functools.lru_cache(maxsize=None)
def host_target() -> HostTarget:
    """The cached host target: host CPU name and its exact feature string."""
    ensure_initialized()
    return make_target(llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())


def target_feature_set(t: HostTarget) -> frozenset:
    """The features enabled in `t`'s explicit feature string ("+avx512f", ...). A target made
    with CPU defaults (empty string) has none: code generation then assumes only the generic
    x86-64/AVX2 instructions, which is correct on every CPU of that family."""
    return frozenset(f for f in t.features.split(",") if f.startswith("+"))


def target_description() -> str:
    """A string naming the target (triple, CPU, features, opt level) for cache keys."""
    return host_target().description


_X86_64_V3 = ("+sse3,+ssse3,+sse4.1,+sse4.2,+popcnt,+cx16,+avx,+avx2,+fma,+bmi,+bmi2,+f16c,+lzcnt,+movbe,"
              "+xsave,-avx512f")
_X86_64_V4 = _X86_64_V3.replace(",-avx512f", "") + ",+avx512f,+avx512vl,+avx512bw,+avx512dq,+avx512cd"

#: CPUs an ahead-of-time build may target besides the host: LLVM CPU name -> (LLVM feature
#: string, C compiler flags for the kernel library). The features are spelled out (rather than
#: left to the CPU's defaults) because the AOT library's load-time CPU check and the manifest
#: list them. GCC 12 has no `znver4`: its kernel library is built for x86-64-v4 tuned for Zen 3.
NAMED_CPUS = {
    "x86-64-v3": (_X86_64_V3, ("-march=x86-64-v3",)),
    "x86-64-v4": (_X86_64_V4, ("-march=x86-64-v4",)),
    "znver4": (_X86_64_V4 + ",+avx512vbmi,+avx512vbmi2,+avx512vnni,+avx512bitalg,+avx512vpopcntdq,"
               "+avx512ifma,+avx512bf16,+gfni,+vpclmulqdq,+vaes,+sha,+adx,+clzero",
               ("-march=x86-64-v4", "-mtune=znver3")),
}


def compile_target(cpu: str = "native") -> Target:
    """The llvm Target for `cpu`: "native" (the host, with the kernel paths the in-process
    kernel library uses now) or a name in NAMED_CPUS (AVX-512 kernels where it has AVX-512F)."""
    if cpu == "native":
        from ...runtime import native_kernels_in_use
        h = host_target()
        return Target("llvm", h.cpu, h.features, kernels={AVX512_KERNELS} if native_kernels_in_use() else ())
    if cpu not in NAMED_CPUS:
        raise ValueError(f"unknown CPU {cpu!r}; expected 'native' or one of {sorted(NAMED_CPUS)}")
    features = NAMED_CPUS[cpu][0]
    return Target("llvm", cpu, features, kernels={AVX512_KERNELS} if "+avx512f" in features.split(",") else ())


def is_host(target: Target) -> bool:
    h = host_target()
    return target.cpu == h.cpu and target.features == h.features


def machine_for(target: Target | None) -> HostTarget:
    """The TargetMachines of an llvm Target (None: the host)."""
    if target is None or is_host(target):
        return host_target()
    return make_target(target.cpu, target.features)


_CURRENT: contextvars.ContextVar = contextvars.ContextVar("symjit_llvm_target", default=None)


@contextlib.contextmanager
def target_scope(target: Target | None):
    """Lower for `target` (None: the host) inside the block."""
    token = _CURRENT.set(target)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current_target() -> Target | None:
    """The target being lowered for; None: the host (outside any `target_scope`)."""
    return _CURRENT.get()


def current_machine() -> HostTarget:
    """The TargetMachines of the target being lowered for."""
    return machine_for(_CURRENT.get())
