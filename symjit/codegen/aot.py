"""Ahead-of-time libraries: one compiled graph as a self-contained shared library.

`build_library(compiled, out_base, ...)` turns a fully native `CompiledGraph` (one entry
segment, see codegen/llvm/executable.py) into three files:

* `OUT.so`: the graph's position-independent object (`compile_to_object(pic=True)`), the
  runtime C sources (threadpool.c, arena.c, errors.c, and nnkernels.c when the code calls its
  kernels) and a generated C file with the `symjit_graphs` descriptor table
  (runtime/symjit_runtime.h), the embedded constants (`.incbin` of one 64-byte-aligned blob)
  and a CPU check. Only the C library is needed to run it (libc, libm, pthreads): no Python,
  no LLVM. The library exports the `symjit_*` runtime ABI and nothing else. GEMM-shaped work
  (dense layers, convolutions) uses runtime/nnkernels.c's built-in loop nests, or a BLAS the
  user names at run time with `SYMJIT_BLAS=/path/libopenblas.so` (bound when the library loads).
* `OUT.h`: a C header declaring the entry points and the tensor signature.
* `OUT.json`: the manifest (inputs, outputs, shapes, dtypes, target CPU and features, symjit
  version, graph hash, workspace size, embedded parameters).

Graph inputs that were bound to constants at compile time (the weights) and the graph's
constants are the descriptor's *parameters*, embedded in the library; its *inputs* are the
inputs left free (e.g. `data`). The exported entry maps parameters back into the compiled
code's argument order.

CPU features: the code is compiled for the host CPU. A library constructor checks with
`__builtin_cpu_supports` every x86 vector/bit-manipulation feature the code may use; on a CPU
lacking one, `symjit_graphs` returns no table (`*count = -1`), the last error and
`symjit_aot_check()` name the missing features, and nothing of the compiled code runs.

Files are written to temporary names in the destination directory and renamed at the end:
a failed build leaves no partial output.
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

from .. import __symjit_version__ as __version__
from ..base import MXNetError

__all__ = ["build_library", "runtime_dir", "DTYPE_CODES", "cpu_feature_checks", "AotResult", "non_native_ops"]

#: MXNet type flags, as in runtime/symjit_runtime.h
DTYPE_CODES = {"float32": 0, "float64": 1, "float16": 2, "uint8": 3, "int32": 4, "int8": 5, "int64": 6,
               "bool": 7, "int16": 8, "uint16": 9, "uint32": 10, "uint64": 11}

#: LLVM feature name -> GCC `__builtin_cpu_supports` name, for the features generated code uses
_CPU_FEATURES = {
    "sse3": "sse3", "ssse3": "ssse3", "sse4.1": "sse4.1", "sse4.2": "sse4.2", "popcnt": "popcnt",
    "avx": "avx", "avx2": "avx2", "fma": "fma", "bmi": "bmi", "bmi2": "bmi2", "f16c": "f16c",
    "avx512f": "avx512f", "avx512vl": "avx512vl", "avx512bw": "avx512bw", "avx512dq": "avx512dq",
    "avx512cd": "avx512cd", "avx512vbmi": "avx512vbmi", "avx512ifma": "avx512ifma",
    "avx512vnni": "avx512vnni", "avx512vpopcntdq": "avx512vpopcntdq", "avx512vbmi2": "avx512vbmi2",
    "avx512bitalg": "avx512bitalg", "avx512bf16": "avx512bf16", "gfni": "gfni",
    "vpclmulqdq": "vpclmulqdq",
}

_RUNTIME_SOURCES = ("threadpool.c", "arena.c", "errors.c")


@dataclass
class AotResult:
    """Paths of the built files and the manifest written beside them."""
    library: str
    header: str
    manifest_path: str
    manifest: dict


def runtime_dir() -> Path:
    """The runtime C sources (`SYMJIT_RUNTIME_DIR`, else runtime/ next to the package)."""
    env = os.environ.get("SYMJIT_RUNTIME_DIR")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "runtime"
    if not (path / "symjit_runtime.h").is_file():
        raise MXNetError(f"AOT: runtime sources not found in {path} (set SYMJIT_RUNTIME_DIR)")
    return path


def non_native_ops(compiled) -> list[str]:
    """Ops of a CompiledGraph that have no native lowering (sorted, unique)."""
    return sorted({n.op.name for n in compiled.module.python_nodes})


def cpu_feature_checks(features: str) -> list[str]:
    """GCC cpu-feature names of the enabled features in an LLVM feature string ('+avx2,-sse4a,...')."""
    enabled = [f[1:] for f in features.split(",") if f.startswith("+")]
    return sorted({_CPU_FEATURES[f] for f in enabled if f in _CPU_FEATURES})


def _c_string(text: str) -> str:
    return json.dumps(text)  # a valid C string literal for printable ASCII/UTF-8


def _tensor_table(var: str, specs: list) -> list[str]:
    """C definitions of the shapes and the symjit_tensor_desc array for (name, shape, dtype)s."""
    lines = []
    for i, (_, shape, _) in enumerate(specs):
        dims = ", ".join(str(int(d)) for d in shape) or "0"
        lines.append(f"static const int64_t {var}_shape{i}[] = {{{dims}}};")
    entries = []
    for i, (name, shape, dtype) in enumerate(specs):
        code = DTYPE_CODES.get(np.dtype(dtype).name)
        if code is None:
            raise MXNetError(f"AOT: tensor {name!r} has dtype {np.dtype(dtype).name}, which the AOT ABI lacks")
        entries.append(f"    {{{_c_string(name)}, {code}, {len(shape)}, {var}_shape{i}}}")
    body = ",\n".join(entries) or "    {0}"
    lines.append(f"static const symjit_tensor_desc {var}[] = {{\n{body}\n}};")
    return lines


def _layout_blob(arrays: list[np.ndarray]) -> tuple[bytes, list[int]]:
    """One blob with every array at a 64-byte-aligned offset; (bytes, offsets)."""
    chunks, offsets, pos = [], [], 0
    for a in arrays:
        pad = (-pos) % 64
        chunks.append(b"\0" * pad)
        pos += pad
        offsets.append(pos)
        data = np.ascontiguousarray(a).tobytes()
        chunks.append(data)
        pos += len(data)
    return b"".join(chunks), offsets


#: C code binding an optional BLAS at load time (libraries that contain runtime/nnkernels.c)
_BLAS_BINDING = r"""
#include <dlfcn.h>
#include <stdlib.h>
extern void symjit_nn_set_blas(void *sgemm, void *set_threads_local, int64_t small_gemm);

/* SYMJIT_BLAS=/path/to/libopenblas.so (any BLAS exporting Fortran sgemm_): GEMM-shaped work
 * of at least SYMJIT_BLAS_MIN_GEMM multiply-adds goes to it; unset: built-in loop nests only,
 * so by default the library depends on nothing but the C library. */
__attribute__((constructor)) static void sj_bind_blas(void) {
    const char *path = getenv("SYMJIT_BLAS");
    if (path == NULL || path[0] == '\0') return;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) return;
    void *sgemm = dlsym(lib, "sgemm_");
    if (sgemm == NULL) sgemm = dlsym(lib, "scipy_sgemm_");
    if (sgemm == NULL) return;
    const char *min = getenv("SYMJIT_BLAS_MIN_GEMM");
    symjit_nn_set_blas(sgemm, dlsym(lib, "openblas_set_num_threads_local"),
                       min != NULL && min[0] != '\0' ? strtoll(min, NULL, 10) : %(small)d);
}
"""


def _descriptor_source(name: str, segment: str, inputs: list, outputs: list, params: list, arg_map: list,
                       n_consts: int, offsets: list[int], blob_path: str, workspace: int,
                       checks: list[str], blas: bool = False) -> str:
    """The generated C file: blob, CPU check, entry wrapper and the descriptor table.

    `arg_map[i]` says where the compiled code's input i comes from: ('input', k), ('param', k) or
    ('null', 0) for a bound input the optimized code no longer reads."""
    L = ['#include <stdio.h>', '#include <string.h>', '#include "symjit_runtime.h"', "",
         "/* the embedded parameters: one 64-byte-aligned blob */",
         '__asm__(".section .rodata\\n.balign 64\\n.hidden sj_param_blob\\n.type sj_param_blob, @object\\n"',
         f'        "sj_param_blob:\\n.incbin \\"{blob_path}\\"\\n.byte 0\\n.previous\\n");',
         'extern const unsigned char sj_param_blob[] __attribute__((visibility("hidden")));', "",
         f"extern int32_t {segment}(void **inputs, void **outputs, void **params, void *workspace);", ""]
    L += _tensor_table("sj_inputs", inputs) + _tensor_table("sj_outputs", outputs) + _tensor_table("sj_params", params)
    data = ",\n".join(f"    sj_param_blob + {off}" for off in offsets) or "    0"
    L += [f"static const void *const sj_param_data[] = {{\n{data}\n}};", ""]
    # CPU check
    L += ["static char sj_cpu_problem[512];", "",
          "__attribute__((constructor)) static void sj_check_cpu(void) {",
          "#if defined(__x86_64__) || defined(__i386__)",
          "    __builtin_cpu_init();",
          "    size_t used = 0;"]
    for f in checks:
        L.append(f'    if (!__builtin_cpu_supports("{f}") && used + 16 < sizeof sj_cpu_problem)\n'
                 f'        used += (size_t)snprintf(sj_cpu_problem + used, sizeof sj_cpu_problem - used, "%s{f}", '
                 f'used ? ", " : "");')
    L += ["    if (used) {",
          "        char features[512];",
          "        memcpy(features, sj_cpu_problem, sizeof features);",
          f'        snprintf(sj_cpu_problem, sizeof sj_cpu_problem, "symjit AOT library {name}: this CPU lacks '
          f'%s, which the code was compiled for; rebuild it on this machine with symjit compile", features);',
          "    }",
          "#endif",
          "}", "",
          "/* NULL when the library may run here, else why not */",
          "SYMJIT_API const char *symjit_aot_check(void) { return sj_cpu_problem[0] ? sj_cpu_problem : NULL; }", ""]
    if blas:
        from .llvm.lower_gemm import SMALL_GEMM
        L.append(_BLAS_BINDING % {"small": int(SMALL_GEMM)})
    # entry wrapper
    L.append("static int32_t sj_entry(void **inputs, void **outputs, void **params, void *workspace) {")
    L.append("    if (sj_cpu_problem[0]) return symjit_set_error_str(SYMJIT_ERR_UNSUPPORTED, sj_cpu_problem);")
    L.append(f"    void *args[{max(len(arg_map), 1)}];")
    for i, (kind, k) in enumerate(arg_map):
        src = {"input": f"inputs[{k}]", "param": f"params[{k}]", "null": "0  /* unused by the code */"}[kind]
        L.append(f"    args[{i}] = {src};")
    n_bound = len(params) - n_consts
    L.append(f"    int32_t rc = {segment}(args, outputs, params + {n_bound}, workspace);")
    L.append('    if (rc != 0 && symjit_last_error_code() == SYMJIT_OK)')
    L.append(f'        return symjit_set_error_str(SYMJIT_ERR_INTERNAL, "graph {name}: native code failed");')
    L.append("    return rc;")
    L += ["}", "",
          "static const symjit_graph_desc sj_graphs[] = {{",
          f"    SYMJIT_ABI_VERSION, {_c_string(name)}, {len(inputs)}, {len(outputs)}, {len(params)},",
          "    sj_inputs, sj_outputs, sj_params,",
          f"    {'sj_param_data' if params else '0'}, {int(workspace)}, sj_entry, symjit_last_error", "}};", "",
          "SYMJIT_API const symjit_graph_desc *symjit_graphs(int32_t *count) {",
          "    if (sj_cpu_problem[0]) {",
          "        symjit_set_error_str(SYMJIT_ERR_UNSUPPORTED, sj_cpu_problem);",
          "        *count = -1;",
          "        return NULL;",
          "    }",
          "    *count = 1;",
          "    return sj_graphs;",
          "}", ""]
    return "\n".join(L)


def _ctype(dtype) -> str:
    return {"float32": "float", "float64": "double", "float16": "uint16_t", "uint8": "uint8_t", "int32": "int32_t",
            "int8": "int8_t", "int64": "int64_t", "bool": "uint8_t", "int16": "int16_t", "uint16": "uint16_t",
            "uint32": "uint32_t", "uint64": "uint64_t"}[np.dtype(dtype).name]


def c_macro_token(text: str) -> str:
    """`text` upper-cased with every non-alphanumeric character as '_' (header guards, macros)."""
    return "".join(c if c.isalnum() else "_" for c in text.upper())


def _header_source(base: str, name: str, inputs: list, outputs: list, workspace: int) -> str:
    """OUT.h: the library's exported functions and its tensor signature as macros."""
    guard, tok = c_macro_token(base) + "_H", c_macro_token(name)
    L = [f"/* {base}.h -- generated by symjit {__version__} (symjit compile): graph {name!r}. */",
         f"#ifndef {guard}", f"#define {guard}", "", '#include "symjit_runtime.h"', "",
         "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
         "/* The library's graphs (one); the table lives as long as the library is loaded.",
         " * Returns NULL with *count = -1 when this CPU lacks a feature the code needs. */",
         "const symjit_graph_desc *symjit_graphs(int32_t *count);",
         "/* NULL when the library can run on this CPU, else a message naming the missing features. */",
         "const char *symjit_aot_check(void);", "",
         f"#define {tok}_WORKSPACE_SIZE {int(workspace)}",
         f"#define {tok}_NUM_INPUTS {len(inputs)}", f"#define {tok}_NUM_OUTPUTS {len(outputs)}"]
    for kind, specs in (("INPUT", inputs), ("OUTPUT", outputs)):
        for i, (tname, shape, dtype) in enumerate(specs):
            count = int(np.prod(shape, dtype=np.int64))
            L.append(f"/* {kind.lower()} {i} {tname!r}: {_ctype(dtype)}[{']['.join(str(d) for d in shape)}] */")
            L.append(f"#define {tok}_{kind}{i}_SIZE {count}")
    L += ["", "#ifdef __cplusplus", "}", "#endif", f"#endif /* {guard} */", ""]
    return "\n".join(L)


def _run(cmd: list[str], what: str) -> None:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        raise MXNetError(f"AOT: the C compiler {cmd[0]!r} was not found (set CC)") from None
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-8:]
        raise MXNetError(f"AOT: {what} failed: " + " | ".join(tail))


_CFLAGS = ("-O3", "-fPIC", "-pthread", "-fvisibility=hidden", "-DSYMJIT_AOT=1")


def _compile_c(cc: str, rt: Path, src: str, out: str, cached: bool) -> None:
    """Compile one C file to a PIC object; runtime sources are cached on disk (key: compiler,
    flags, the source and the runtime headers), so later builds only compile the descriptor."""
    from . import cache
    key = None
    if cached:
        headers = b"".join(p.read_bytes() for p in sorted(rt.glob("*.h")))
        key = cache.make_key("aot-c-object", cc, " ".join(_CFLAGS), Path(src).read_bytes(), headers)
        obj = cache.get(key)
        if obj is not None:
            Path(out).write_bytes(obj)
            return
    _run([cc, *_CFLAGS, f"-I{rt}", "-c", src, "-o", out], f"compiling {os.path.basename(src)}")
    if key is not None:
        cache.put(key, Path(out).read_bytes())


def _pic_object(ir: str) -> bytes:
    """compile_to_object(ir, pic=True), cached on disk like the JIT's objects."""
    from .. import __symjit_version__ as version
    from . import cache
    from .llvm.jit import compile_to_object
    from .llvm.target import target_description
    key = cache.make_key("aot-pic-object", ir, target_description(), version)
    obj = cache.get(key)
    if obj is None:
        obj = compile_to_object(ir, pic=True)
        cache.put(key, obj)
    return obj


def build_library(compiled, out_base: str, name: str = "model", graph_hash: str = "",
                  bound: dict | None = None, progress: Callable[[str], None] | None = None) -> AotResult:
    """Build OUT.so, OUT.h and OUT.json (`out_base` = OUT) from a native CompiledGraph.

    `bound`: graph inputs bound to constants (name -> array), embedded as parameters; the
    other graph inputs stay inputs of the library."""
    from .llvm.target import host_target
    step = progress or (lambda _msg: None)
    if not compiled.native:
        raise MXNetError("AOT: the graph is not fully native; ops without a native lowering: "
                         + ", ".join(non_native_ops(compiled)))
    if compiled.state_specs:
        raise MXNetError("AOT: the graph updates its inputs (training-mode state); compile for inference")
    module = compiled.module
    if len(module.segment_names) != 1:
        raise MXNetError("AOT: the graph has no native code (it computes nothing)")
    bound = dict(bound or {})
    g = compiled.graph
    used = {v.name for n in g.nodes for v in n.inputs} | {v.name for v in g.outputs}
    inputs, arg_map, params, arrays = [], [], [], []
    for name_, shape, dtype in compiled.input_specs:
        if name_ in bound and name_ not in used:
            arg_map.append(("null", 0))     # bound, and folded away by the passes: not embedded
        elif name_ in bound:
            arg_map.append(("param", len(params)))
            params.append((name_, shape, dtype))
            arrays.append(np.ascontiguousarray(bound[name_], dtype=dtype).reshape(shape))
        else:
            arg_map.append(("input", len(inputs)))
            inputs.append((name_, shape, dtype))
    for pname, array in zip((n for n, _ in module.placement.params), compiled.params):
        params.append((pname, tuple(array.shape), array.dtype))
        arrays.append(np.ascontiguousarray(array))
    n_consts = len(compiled.params)
    outputs = list(compiled.output_specs)
    target = host_target()
    checks = cpu_feature_checks(target.features)
    rt = runtime_dir()
    cc = os.environ.get("CC", "cc")
    out_base = os.path.abspath(out_base)
    out_dir = os.path.dirname(out_base) or "."
    if not os.path.isdir(out_dir):
        raise MXNetError(f"AOT: output directory {out_dir} does not exist")
    base_name = os.path.basename(out_base)
    with tempfile.TemporaryDirectory(prefix="symjit-aot-") as tmp:
        step("generating machine code")
        Path(tmp, "graph.o").write_bytes(_pic_object(module.ir))
        blob, offsets = _layout_blob(arrays)
        blob_path = os.path.join(tmp, "params.bin")
        Path(blob_path).write_bytes(blob)
        uses_nn = "@symjit_nn_" in module.ir
        desc = _descriptor_source(name, module.segment_names[0], inputs, outputs, params, arg_map, n_consts,
                                  offsets, blob_path, module.workspace_size, checks, blas=uses_nn)
        Path(tmp, "graphs.c").write_text(desc)
        Path(tmp, "exports.map").write_text("{ global: symjit_*; local: *; };\n")
        sources = [str(rt / s) for s in _RUNTIME_SOURCES]
        if uses_nn:
            if not (rt / "nnkernels.c").is_file():
                raise MXNetError("AOT: the code calls runtime/nnkernels.c, which is missing")
            sources.append(str(rt / "nnkernels.c"))
        objects = [os.path.join(tmp, "graph.o")]
        for k, src in enumerate(sources + [os.path.join(tmp, "graphs.c")]):
            step(f"compiling {os.path.basename(src)}")
            o = os.path.join(tmp, f"c{k}.o")
            _compile_c(cc, rt, src, o, cached=src in sources)
            objects.append(o)
        step("linking")
        tmp_so = os.path.join(tmp, "lib.so")
        _run([cc, "-shared", "-pthread", "-o", tmp_so, *objects, "-lm", "-ldl", "-Wl,-z,defs", "-Wl,-z,noexecstack",
              f"-Wl,--version-script={os.path.join(tmp, 'exports.map')}"], "linking the library")
        manifest = {
            "format": "symjit-aot-1", "symjit_version": __version__, "abi_version": 1, "graph": name,
            "graph_hash": graph_hash,
            "inputs": [{"name": n, "shape": list(s), "dtype": np.dtype(d).name} for n, s, d in inputs],
            "outputs": [{"name": n, "shape": list(s), "dtype": np.dtype(d).name} for n, s, d in outputs],
            "params": {"count": len(params), "bytes": int(sum(a.nbytes for a in arrays)), "embedded": True},
            "workspace_bytes": int(module.workspace_size),
            "target": {"triple": target.triple, "cpu": target.cpu, "required_features": checks,
                       "llvm_features": target.features},
            "library": base_name + ".so", "header": base_name + ".h",
            "library_sha256": hashlib.sha256(Path(tmp_so).read_bytes()).hexdigest(),
        }
        header = _header_source(base_name, name, inputs, outputs, module.workspace_size)
        finals = {out_base + ".so": None, out_base + ".h": header, out_base + ".json": json.dumps(manifest, indent=2)}
        staged = []
        try:
            for path, text in finals.items():
                fd, tmp_path = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=out_dir)
                os.close(fd)
                staged.append((tmp_path, path))
                if text is None:
                    shutil.copyfile(tmp_so, tmp_path)
                    os.chmod(tmp_path, 0o755)
                else:
                    Path(tmp_path).write_text(text + ("" if text.endswith("\n") else "\n"))
            for tmp_path, path in staged:
                os.replace(tmp_path, path)
        except BaseException:
            for tmp_path, _ in staged:
                if os.path.exists(tmp_path):
                    os.unlink(tmp_path)
            raise
    return AotResult(out_base + ".so", out_base + ".h", out_base + ".json", manifest)
