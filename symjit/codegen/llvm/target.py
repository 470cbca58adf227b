"""The host target for the LLVM backend: one cached TargetMachine per process.

Kernels are compiled for the exact host CPU (name and feature string from LLVM), so the
loop vectorizer uses the widest profitable vectors (AVX2/FMA, AVX-512 where present).
`target_description()` is the part of compiled-code cache keys that identifies the target:
code compiled for one CPU is never loaded on another.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import llvmlite.binding as llvm

__all__ = ["HostTarget", "host_target", "make_target", "target_description", "ensure_initialized",
           "target_feature_set"]

#: optimisation level used for both the IR pipeline and machine code generation
OPT_LEVEL = 3


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
        return f"{self.triple};{self.cpu};{self.features};O{OPT_LEVEL}"


@functools.lru_cache(maxsize=None)
def make_target(cpu: str, features: str = "", triple: str | None = None) -> HostTarget:
    """A target for a named CPU (empty features: that CPU's defaults). Used for the host and
    to check code generation for other CPUs (e.g. AVX2-only parts) without running it."""
    ensure_initialized()
    triple = triple or llvm.get_process_triple()
    target = llvm.Target.from_triple(triple)
    tm = target.create_target_machine(cpu=cpu, features=features, opt=OPT_LEVEL,
                                      reloc="default", codemodel="jitdefault", jit=True)
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
