"""`symjit compile --target cuda`: a planned graph as a CUDA shared library.

`build_library(g, OUT, ...)` writes four files (to temporary names, renamed at the end, so a
failed build leaves nothing behind):

* `OUT.cu` -- the generated source (source.py), kept for inspection and rebuilding;
* `OUT.so` -- built with nvcc: host code plus a fatbin with machine code for every arch in
  `source.ARCHS` (sm_80, sm_90) and PTX of the last (compute_90, JIT-compiled by the driver on
  newer GPUs); the CUDA runtime is linked statically, so the library needs only the NVIDIA
  driver (libcuda) at run time. The weights are embedded (`.incbin` of one blob, as the llvm
  target). Exports: the runtime ABI (`symjit_graphs`, whose entry takes host pointers, so
  `symjit run OUT.so` and `symjit.runtime.load` work unchanged on a machine with a GPU) and the
  device-pointer entry `symjit_cuda_run` (see the header);
* `OUT.h` -- declarations and the tensor signature;
* `OUT.json` -- the manifest (target "cuda", archs, nvcc version, kernels, sizes, ...).

The compiler is `SYMJIT_NVCC`, else `nvcc` on PATH, else `$CUDA_HOME/bin/nvcc`; without one the
build fails with a one-line MXNetError before anything is written.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..._version import __version__
from ...base import MXNetError
from ...ir.graph import Graph
from ..aot import (C_ERRORS, AotResult, c_macro_token, check_output_dir, runtime_dir, signature_macros,
                   write_files_atomically)
from .graph import lower_graph
from .plan import LaunchPlan
from .source import ARCHS, MIN_COMPUTE_CAPABILITY, render

__all__ = ["build_library", "find_nvcc", "nvcc_version", "blob_source", "header_source", "compile_cuda",
           "CudaAotResult", "nvcc_arch_flags"]


@dataclass
class CudaAotResult(AotResult):
    """AotResult plus the generated CUDA source kept beside the library."""
    source: str


def find_nvcc() -> str:
    """Path of the CUDA compiler (see the module docstring), or MXNetError."""
    env = os.environ.get("SYMJIT_NVCC")
    if env:
        path = shutil.which(env)
        if path is None:
            raise MXNetError(f"--target cuda: SYMJIT_NVCC={env!r} is not an executable")
        return path
    path = shutil.which("nvcc")
    if path is None:
        home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
        cand = os.path.join(home, "bin", "nvcc")
        path = cand if os.access(cand, os.X_OK) else None
    if path is None:
        raise MXNetError("--target cuda needs the CUDA compiler nvcc: not found on PATH or in $CUDA_HOME/bin "
                         "(install the CUDA toolkit or set SYMJIT_NVCC)")
    return path


def nvcc_version(nvcc: str) -> str:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = [ln for ln in out.splitlines() if "release" in ln]
    return lines[-1].strip() if lines else "unknown"


def nvcc_arch_flags(archs=ARCHS) -> list[str]:
    """-gencode flags: machine code for every arch, PTX for the last one."""
    flags = []
    for a in archs:
        num = a.split("_", 1)[1]
        flags += ["-gencode", f"arch=compute_{num},code=sm_{num}"]
    last = archs[-1].split("_", 1)[1]
    flags += ["-gencode", f"arch=compute_{last},code=compute_{last}"]
    return flags


def blob_source(blob_path: str) -> str:
    """C source defining `sj_param_blob` as the bytes of `blob_path` (64-byte aligned, hidden)."""
    return "\n".join([
        "/* the embedded parameters (see codegen/cuda/source.py) */",
        '__asm__(".section .rodata\\n.balign 64\\n.globl sj_param_blob\\n.hidden sj_param_blob\\n'
        '.type sj_param_blob, @object\\n"',
        f'        "sj_param_blob:\\n.incbin \\"{blob_path}\\"\\n.byte 0\\n.previous\\n");', ""])


def param_blob(plan: LaunchPlan) -> bytes:
    """The parameters of `plan` laid out at their offsets (the device parameter block's image)."""
    p = plan.placement
    out = bytearray(p.param_bytes)
    for (_, a), off in zip(p.params, p.param_offsets):
        out[off:off + a.nbytes] = np.ascontiguousarray(a).tobytes()
    return bytes(out)


def _run(cmd: list[str], what: str, cwd: str | None = None) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    except FileNotFoundError:
        raise MXNetError(f"--target cuda: {cmd[0]!r} was not found") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-8:]
        raise MXNetError(f"--target cuda: {what} failed: " + " | ".join(tail))


def compile_cuda(nvcc: str, cu: str, obj: str, archs=ARCHS, extra: tuple = ()) -> None:
    """nvcc -c of one generated source into a position-independent object."""
    _run([nvcc, "-O3", "-std=c++17", "--threads", "0", "-Xcompiler", "-fPIC,-fvisibility=hidden",
          f"-I{runtime_dir()}", *nvcc_arch_flags(archs), *extra, "-c", cu, "-o", obj],
         f"nvcc compiling {os.path.basename(cu)}")


def header_source(base: str, name: str, plan: LaunchPlan) -> str:
    """OUT.h: the exported functions, their contract, and the tensor signature."""
    guard, tok = c_macro_token(base) + "_H", c_macro_token(name)
    p = plan.placement
    L = [f"/* {base}.h -- generated by symjit {__version__} (symjit compile --target cuda): graph {name!r}. */",
         f"#ifndef {guard}", f"#define {guard}", "", '#include "symjit_runtime.h"', "",
         "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
         "/* The runtime ABI (symjit_runtime.h): one graph whose entry takes HOST pointers. The entry copies",
         " * the inputs to the GPU, runs the kernels, copies the outputs back and synchronizes; its workspace",
         " * argument is unused (workspace_size 0). Calls are serialized. Parameters are embedded and copied to",
         " * the device on the first call (again if the entry is given other parameter pointers). The library",
         " * binds to the CUDA device current at its first call. */",
         "const symjit_graph_desc *symjit_graphs(int32_t *count);", "",
         "/* NULL when a usable GPU is present, else a message saying why the library cannot run. */",
         "const char *symjit_aot_check(void);", "",
         "/* The DEVICE-pointer entry: inputs/outputs are device buffers (C-contiguous, the shapes and dtypes",
         " * below), workspace a device buffer of symjit_cuda_workspace_size() bytes, 256-byte aligned (NULL only",
         " * when that size is 0), stream a cudaStream_t (NULL: the default stream). Work is enqueued",
         " * asynchronously on the stream; the return value reports launch errors only (execution errors",
         " * appear at the caller's next synchronization). Concurrent calls need distinct workspaces. */",
         "int32_t symjit_cuda_run(void *const *inputs, void *const *outputs, void *workspace, void *stream);",
         "int64_t symjit_cuda_workspace_size(void);",
         "/* Bind to the current device and upload the parameters now (otherwise done by the first call). */",
         "int32_t symjit_cuda_init(void);",
         "/* Free the library's device memory (the next call initializes again). */",
         "void symjit_cuda_release(void);", ""]
    L += signature_macros(tok, int(plan.workspace_size),
                          [(v.name, tuple(int(d) for d in v.type.shape), v.type.dtype) for v in p.inputs],
                          [(v.name, tuple(int(d) for d in v.type.shape), v.type.dtype) for v in p.outputs])
    L += ["", "#ifdef __cplusplus", "}", "#endif", f"#endif /* {guard} */", ""]
    return "\n".join(L)


def _spec(v) -> dict:
    return {"name": v.name, "shape": [int(d) for d in v.type.shape], "dtype": np.dtype(v.type.dtype).name}


def build_library(g: Graph, out_base: str, name: str = "model", graph_hash: str = "", bound: dict | None = None,
                  progress: Callable[[str], None] | None = None, archs=ARCHS) -> CudaAotResult:
    """Build OUT.cu, OUT.so, OUT.h and OUT.json (`out_base` = OUT) from planned graph `g`.

    `bound`: graph inputs bound to constants (name -> array), embedded as parameters; the other
    graph inputs stay inputs of the library."""
    step = progress or (lambda _msg: None)
    out_base = os.path.abspath(out_base)
    check_output_dir(out_base + ".so")
    nvcc = find_nvcc()
    cc = os.environ.get("CC", "cc")
    rt = runtime_dir()
    step("lowering to CUDA")
    plan = lower_graph(g, bound, name)
    src = render(plan)
    base_name = os.path.basename(out_base)
    with tempfile.TemporaryDirectory(prefix="symjit-cuda-") as tmp:
        cu = os.path.join(tmp, f"{base_name}.cu")
        Path(cu).write_text(src)
        blob = os.path.join(tmp, "params.bin")
        Path(blob).write_bytes(param_blob(plan))
        Path(tmp, "blob.c").write_text(blob_source(blob))
        Path(tmp, "exports.map").write_text("{ global: symjit_*; local: *; };\n")
        step(f"nvcc: {len(plan.kernels)} kernels for {', '.join(archs)}")
        compile_cuda(nvcc, cu, os.path.join(tmp, "graph.o"), archs)
        step("compiling the runtime")
        objs = [os.path.join(tmp, "graph.o")]
        for k, c_src in enumerate([os.path.join(tmp, "blob.c"), str(rt / "errors.c")]):
            o = os.path.join(tmp, f"c{k}.o")
            _run([cc, "-O2", "-fPIC", "-fvisibility=hidden", "-DSYMJIT_AOT=1", *C_ERRORS, f"-I{rt}",
                  "-c", c_src, "-o", o],
                 f"compiling {os.path.basename(c_src)}")
            objs.append(o)
        step("linking")
        so = os.path.join(tmp, "lib.so")
        _run([nvcc, "-shared", *nvcc_arch_flags(archs), "-o", so, *objs, "-lpthread",
              "-Xlinker", f"--version-script={os.path.join(tmp, 'exports.map')}", "-Xlinker", "-z,noexecstack"],
             "linking the library")
        lib_bytes = Path(so).read_bytes()
        p = plan.placement
        last = archs[-1].split("_", 1)[1]
        manifest = {
            "format": "symjit-aot-1", "symjit_version": __version__, "abi_version": 1, "graph": name,
            "graph_hash": graph_hash,
            "inputs": [_spec(v) for v in p.inputs],
            "outputs": [_spec(v) for v in p.outputs],
            "params": {"count": len(p.params), "bytes": int(sum(a.nbytes for _, a in p.params)), "embedded": True},
            "workspace_bytes": int(plan.workspace_size),
            "target": {"name": "cuda", "archs": list(archs), "ptx": f"compute_{last}",
                       "min_compute_capability": ".".join(str(x) for x in MIN_COMPUTE_CAPABILITY),
                       "nvcc": nvcc_version(nvcc), "cudart": "static"},
            "entry": {"symjit_graphs": "host pointers (copies in and out, synchronous)",
                      "symjit_cuda_run": "device pointers (asynchronous on the caller's stream)"},
            "kernels": len(plan.kernels), "launches": len(plan.launches),
            "library": base_name + ".so", "header": base_name + ".h", "source": base_name + ".cu",
            "library_sha256": hashlib.sha256(lib_bytes).hexdigest(),
        }
        finals = {out_base + ".so": lib_bytes, out_base + ".cu": src.encode(),
                  out_base + ".h": header_source(base_name, name, plan).encode(),
                  out_base + ".json": (json.dumps(manifest, indent=2) + "\n").encode()}
        write_files_atomically(finals)
    return CudaAotResult(out_base + ".so", out_base + ".h", out_base + ".json", manifest, source=out_base + ".cu")
