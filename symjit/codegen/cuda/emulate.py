"""Run generated CUDA sources on the host CPU: the numerics check without a GPU.

`build_emulated(plan, dir)` compiles the exact text `source.render(plan)` produces (the same
`OUT.cu` the AOT build hands to nvcc) with the host C++ compiler, `-DSYMJIT_CUDA_EMULATION`
and `runtime/cuda_host_emu.h` (CUDA keywords, thread indices, launches as loops or per-thread
fibers with real barriers, the CUDA runtime calls as host memory operations), links the
embedded parameter blob and the runtime's errors.c, and returns the shared library. It exports
the same ABI as the real library, so `symjit.runtime.load` runs it: inputs are copied into the
emulated device block, every launch of the plan runs, outputs are copied back.

What this verifies: the generated code's logic -- expression lowering, index arithmetic,
tiling and boundary handling, shared-memory use across barriers, the launch plan, the arena
layout and the host entry. What it cannot: GPU execution itself (concurrency between
threads, memory ordering, resource limits, CUDA's math library). See runtime/cuda_host_emu.h.
"""
from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from ...base import MXNetError
from ..aot import C_ERRORS, runtime_dir
from .aot import blob_source, param_blob
from .plan import LaunchPlan
from .source import render

__all__ = ["build_emulated", "load_emulated", "host_compiler"]


def host_compiler() -> str:
    """The host C++ compiler (`CXX`, else c++)."""
    return os.environ.get("CXX", "c++")


def _run(cmd: list[str], what: str) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        raise MXNetError(f"cuda emulation: {cmd[0]!r} was not found") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-12:]
        raise MXNetError(f"cuda emulation: {what} failed: " + " | ".join(tail))


def build_emulated(plan: LaunchPlan, out_dir: str | os.PathLike, opt: str = "-O1", strict: bool = True) -> Path:
    """Compile `plan`'s CUDA source for the host into `out_dir`/NAME_emu.so (see the module
    docstring); returns the library path. The .cu file is left beside it. `strict`: compile
    the generated source with -Wall -Wextra -Werror (generated code stays warning-free)."""
    out_dir = Path(out_dir)
    rt = runtime_dir()
    cxx = host_compiler()
    cc = os.environ.get("CC", "cc")
    base = "".join(c if c.isalnum() else "_" for c in plan.name) or "graph"
    cu = out_dir / f"{base}.cu"
    cu.write_text(render(plan))
    blob = out_dir / f"{base}.params.bin"
    blob.write_bytes(param_blob(plan))
    blob_c = out_dir / f"{base}_blob.c"
    blob_c.write_text(blob_source(str(blob)))
    objs = []
    for src, lang in ((cu, "c++"), (blob_c, "c"), (rt / "errors.c", "c")):
        obj = out_dir / f"{base}_{src.stem}.o"
        if lang == "c++":
            warn = ["-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror"] if strict else []
            cmd = [cxx, "-std=c++17", opt, *warn, "-fPIC", "-fvisibility=hidden", "-DSYMJIT_CUDA_EMULATION",
                   f"-I{rt}", "-include", str(rt / "cuda_host_emu.h"), "-x", "c++", str(src), "-c", "-o", str(obj)]
        else:
            cmd = [cc, "-O1", "-fPIC", "-fvisibility=hidden", *C_ERRORS, f"-I{rt}", str(src), "-c", "-o", str(obj)]
        _run(cmd, f"compiling {src.name}")
        objs.append(str(obj))
    lib = out_dir / f"{base}_emu.so"
    _run([cxx, "-shared", "-o", str(lib), *objs, "-lpthread", "-lm"], "linking")
    return lib


def load_emulated(plan: LaunchPlan, out_dir: str | os.PathLike | None = None, opt: str = "-O1"):
    """(runtime Library, its one graph Entry) of the emulated build of `plan`; `out_dir`
    defaults to a fresh temporary directory (kept while the library is loaded). `opt`: the
    host compiler's optimization flag (-O0 compiles fastest, -O1 runs large graphs faster)."""
    from ... import runtime
    if out_dir is None:
        out_dir = tempfile.mkdtemp(prefix="symjit-cuda-emu-")
    lib = runtime.load(build_emulated(plan, out_dir, opt))
    return lib, lib[plan.name]
