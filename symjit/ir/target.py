"""What a graph is compiled for, as data: the pass manager chooses its pipeline from it and the
code generators their instructions and kernels. Nothing below the code generators asks the
host machine; the host is one `Target` among others (codegen/llvm/target.py builds it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

__all__ = ["Target", "AVX512_KERNELS", "only_for", "applies_to"]

#: the kernel library's AVX-512 paths (register tiles, the channel-blocked convolutions)
AVX512_KERNELS = "avx512"


@dataclass(frozen=True)
class Target:
    """kind: "llvm" (CPUs) or "cuda" (NVIDIA GPUs).
    cpu, features: for llvm, the LLVM CPU name ("x86-64-v3", "znver4", the host's name) and
    feature string ("+avx2,+fma,..."; empty: the CPU's defaults).
    sm: for cuda, the SM versions machine code is built for (80 = sm_80).
    kernels: the optional kernel-library paths the compiled code may rely on (`AVX512_KERNELS`).
    """
    kind: str = "llvm"
    cpu: str = "generic"
    features: str = ""
    sm: tuple = ()
    kernels: frozenset = field(default_factory=frozenset)

    def __post_init__(self):
        if self.kind not in ("llvm", "cuda"):
            raise ValueError(f"target kind must be 'llvm' or 'cuda', got {self.kind!r}")
        object.__setattr__(self, "kernels", frozenset(self.kernels))

    def has_feature(self, name: str) -> bool:
        """Whether the feature string enables `name` (e.g. "avx512f")."""
        return f"+{name}" in self.features.split(",")

    def describe(self) -> str:
        if self.kind == "cuda":
            return "cuda " + ",".join(f"sm_{s}" for s in self.sm)
        return f"llvm {self.cpu}" + (f" [{', '.join(sorted(self.kernels))} kernels]" if self.kernels else "")


def only_for(predicate: Callable[[Target], bool], what: str):
    """Decorator of a target-specific pass: the pass manager runs it only for targets where
    `predicate` holds; `what` names them in reports."""
    def deco(fn):
        fn.applies_to = predicate
        fn.targets = what
        return fn
    return deco


def applies_to(fn, target: Target) -> bool:
    """Whether pass `fn` runs for `target` (passes without `only_for` run for every target)."""
    return getattr(fn, "applies_to", lambda t: True)(target)
