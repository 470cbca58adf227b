"""Which execution backend runs compiled graphs, and the native runtime it needs.

`SYMJIT_BACKEND=auto` (the default) and `llvm` run native code: the LLVM backend and the C
runtime (`symjit.runtime`, the `symjit._runtime` extension). A runtime that is not built or
fails to load (say, built against a numpy C API the installed numpy lacks) is an error naming
the reason wherever native code would run, never a silent fallback to the reference
interpreter; only an explicit `SYMJIT_BACKEND=interp` runs without it.
"""
from __future__ import annotations

import os

from .base import MXNetError

__all__ = ["backend_choice", "native_runtime"]


def backend_choice() -> str:
    """The backend SYMJIT_BACKEND asks for: 'auto' (the default), 'llvm' or 'interp'."""
    choice = os.environ.get("SYMJIT_BACKEND", "auto").strip().lower()
    if choice not in ("auto", "interp", "llvm"):
        raise MXNetError(f"SYMJIT_BACKEND={choice!r} is not available; use 'auto', 'llvm' or 'interp'")
    return choice


def interpreted_calls() -> int:
    """How many first uses of a small executor graph (or of an eager kernel not compiled yet)
    run on the reference implementation before native code is compiled for it
    (`SYMJIT_JIT_AFTER`, default 1; 0 compiles on first use)."""
    raw = os.environ.get("SYMJIT_JIT_AFTER", "1").strip()
    try:
        n = int(raw)
    except ValueError:
        n = -1
    if n < 0:
        raise MXNetError(f"SYMJIT_JIT_AFTER={raw!r} must be a non-negative integer")
    return n


def native_runtime():
    """The native runtime module; None only when it cannot be loaded and SYMJIT_BACKEND=interp
    asks for the reference interpreter. Otherwise a runtime that cannot be loaded raises
    MXNetError with the reason and the two ways out."""
    try:
        from . import runtime  # loaded on first use: `import symjit` never needs it
    except ImportError as e:
        if backend_choice() == "interp":
            return None
        raise MXNetError(f"symjit's native runtime cannot be used: {e}. Rebuild it (`python -m pip install -e .`) "
                         "or set SYMJIT_BACKEND=interp to run everything on the reference interpreter") from e
    return runtime
