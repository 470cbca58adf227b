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
code's argument order. Weights that the kernel library reads in a packed layout (convolution
panels, Winograd transforms: `Placement.packings`) are not embedded twice: the library holds
their source and packs them with the same kernel-library function at its first use (the
`symjit_graphs` call), into memory freed when the library is unloaded.

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
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .._version import __version__
from ..base import MXNetError
from .plan_cache import used_params

__all__ = ["build_library", "runtime_dir", "DTYPE_CODES", "cpu_feature_checks", "AotResult", "non_native_ops",
           "check_output_dir", "write_files_atomically", "signature_macros",
           "C_ERRORS"]

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


def _umask() -> int:
    """The process's file-creation mask (read without changing it where /proc allows)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_output_dir(path: str, what: str = "output") -> str:
    """The absolute directory that will hold output `path`, after checking (by creating and
    removing a temporary file there) that files can be written in it; MXNetError naming `path`
    otherwise. Run it before slow work, so that a bad destination is reported at once."""
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise MXNetError(f"{what} {path!r}: directory {d!r} does not exist")
    try:
        fd, probe = tempfile.mkstemp(prefix=".symjit-probe-", dir=d)
    except OSError as e:
        raise MXNetError(f"{what} {path!r}: cannot write in directory {d!r} ({e.strerror})") from None
    os.close(fd)
    os.unlink(probe)
    return d


def write_files_atomically(files: dict, executable: tuple[str, ...] = (".so",)) -> None:
    """Write {path: bytes or str} through temporary names beside each path, then rename them
    all: either every file is replaced or none is (a failure removes the temporary files).
    Permissions follow the umask as for any new file (0666 & ~umask), and 0777 & ~umask for
    paths ending in one of `executable` (shared libraries). Errors name the user's path."""
    mask = _umask()
    staged = []
    try:
        for path, data in files.items():
            path = os.path.abspath(path)
            try:
                fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=os.path.dirname(path))
            except OSError as e:
                raise MXNetError(f"cannot write {path!r} ({e.strerror})") from None
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(data.encode() if isinstance(data, str) else data)
            os.chmod(tmp, (0o777 if path.endswith(executable) else 0o666) & ~mask)
        for tmp, path in staged:
            try:
                os.replace(tmp, path)
            except OSError as e:
                raise MXNetError(f"cannot write {path!r} ({e.strerror})") from None
    except BaseException:
        for tmp, _ in staged:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise


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
                       n_consts: int, offsets: list, blob_path: str, workspace: int,
                       checks: list[str], blas: bool = False, packings: dict | None = None,
                       unread: frozenset = frozenset()) -> str:
    """The generated C file: blob, CPU check, load-time packing, entry wrapper and the
    descriptor table.

    `arg_map[i]` says where the compiled code's input i comes from: ('input', k), ('param', k) or
    ('null', 0) for a bound input the optimized code no longer reads. `offsets[k]` is param k's
    place in the blob, or None for a param in `packings` ({k: (source param, descriptor,
    floats)}): the kernel library packs it from its source when the library is first used, or
    in `unread` (a constant the code never reads, e.g. weights it reads only packed): NULL."""
    packings = packings or {}
    L = ['#include <stdio.h>', '#include <string.h>', '#include "symjit_runtime.h"', "",
         "/* the embedded parameters: one 64-byte-aligned blob */",
         '__asm__(".section .rodata\\n.balign 64\\n.hidden sj_param_blob\\n.type sj_param_blob, @object\\n"',
         f'        "sj_param_blob:\\n.incbin \\"{blob_path}\\"\\n.byte 0\\n.previous\\n");',
         'extern const unsigned char sj_param_blob[] __attribute__((visibility("hidden")));', "",
         f"extern int32_t {segment}(void **inputs, void **outputs, void **params, void *workspace);", ""]
    L += _tensor_table("sj_inputs", inputs) + _tensor_table("sj_outputs", outputs) + _tensor_table("sj_params", params)
    data = ",\n".join(f"    sj_param_blob + {off}" if off is not None
                      else "    0  /* not read by the code */" if k in unread else "    0  /* packed when loaded */"
                      for k, off in enumerate(offsets)) or "    0"
    L += [f"static const void *{'' if packings else 'const '}sj_param_data[] = {{\n{data}\n}};", ""]
    L += _packing_source(name, packings)
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
    L.append("    if (!sj_packed()) return symjit_set_error_str(SYMJIT_ERR_OUT_OF_MEMORY, sj_pack_problem);")
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
          "    if (!sj_packed()) {",
          "        symjit_set_error_str(SYMJIT_ERR_OUT_OF_MEMORY, sj_pack_problem);",
          "        *count = -1;",
          "        return NULL;",
          "    }",
          "    *count = 1;",
          "    return sj_graphs;",
          "}", ""]
    return "\n".join(L)


def _packing_source(name: str, packings: dict) -> list[str]:
    """C code that packs weights once, at the library's first use (`sj_packed()`: 1 when the
    packed params are in place), with the kernel library's `symjit_nn_conv_pack`, the function
    that packed them at compile time; freed when the library is unloaded."""
    L = ["static char sj_pack_problem[512];"]
    if not packings:
        return L + ["static int sj_packed(void) { return 1; }", ""]
    from .llvm.lower_conv import ConvDesc
    from .llvm.lower_gemm import desc_c_initializer
    L += ["#include <pthread.h>", '#include "nnkernels.h"']
    rows = []
    for i, (k, (src, desc, floats)) in enumerate(sorted(packings.items())):
        typed = ConvDesc.from_buffer_copy(np.asarray(desc, dtype=np.int64).tobytes())
        L.append(f"static const symjit_conv_desc sj_pack_desc{i} = {desc_c_initializer(typed)};")
        rows.append(f"    {{{k}, {src}, {int(floats)}, &sj_pack_desc{i}}}")
    L += ["static const struct { int32_t param, source; int64_t floats; const symjit_conv_desc *desc; } "
          "sj_packings[] = {",
          ",\n".join(rows), "};",
          "static pthread_once_t sj_pack_once = PTHREAD_ONCE_INIT;", "",
          "static void sj_pack(void) {",
          "    for (size_t i = 0; i < sizeof sj_packings / sizeof sj_packings[0]; i++) {",
          "        const float *w = (const float *)sj_param_data[sj_packings[i].source];",
          "        int64_t n = symjit_nn_conv_pack(sj_packings[i].desc, w, NULL);",
          "        if (n != sj_packings[i].floats) {",
          "            snprintf(sj_pack_problem, sizeof sj_pack_problem, \"symjit AOT library %s: parameter %d packs to "
          "%lld floats on this CPU, %lld when the library was built; rebuild it on this machine with symjit "
          f"compile\", {_c_string(name)}, (int)sj_packings[i].param, (long long)n, (long long)sj_packings[i].floats);",
          "            return;",
          "        }",
          "        float *packed = symjit_arena_alloc((size_t)n * sizeof(float));",
          "        if (packed == NULL) {",
          "            snprintf(sj_pack_problem, sizeof sj_pack_problem, \"symjit AOT library %s: cannot allocate %lld "
          f"bytes for packed weights\", {_c_string(name)}, (long long)n * 4);",
          "            return;",
          "        }",
          "        symjit_nn_conv_pack(sj_packings[i].desc, w, packed);",
          "        sj_param_data[sj_packings[i].param] = packed;",
          "    }",
          "}", "",
          "static int sj_packed(void) {",
          "    pthread_once(&sj_pack_once, sj_pack);",
          "    return sj_pack_problem[0] == 0;",
          "}", "",
          "__attribute__((destructor)) static void sj_free_packed(void) {",
          "    for (size_t i = 0; i < sizeof sj_packings / sizeof sj_packings[0]; i++)",
          "        symjit_arena_free((void *)sj_param_data[sj_packings[i].param]);",
          "}", ""]
    return L


def c_type_name(dtype) -> str:
    return {"float32": "float", "float64": "double", "float16": "uint16_t", "uint8": "uint8_t", "int32": "int32_t",
            "int8": "int8_t", "int64": "int64_t", "bool": "uint8_t", "int16": "int16_t", "uint16": "uint16_t",
            "uint32": "uint32_t", "uint64": "uint64_t"}[np.dtype(dtype).name]


def c_macro_token(text: str) -> str:
    """`text` upper-cased with every non-alphanumeric character as '_' (header guards, macros)."""
    return "".join(c if c.isalnum() else "_" for c in text.upper())


def signature_macros(tok: str, workspace: int, inputs: list, outputs: list) -> list[str]:
    """The header's tensor-signature macros for (name, shape, dtype) inputs and outputs.
    Sizes say their unit in the name: `_ELEMS` counts elements, `_BYTES` counts bytes."""
    L = ["/* Sizes: *_ELEMS are element counts, *_BYTES are byte counts. */",
         f"#define {tok}_WORKSPACE_BYTES {int(workspace)}",
         f"#define {tok}_NUM_INPUTS {len(inputs)}", f"#define {tok}_NUM_OUTPUTS {len(outputs)}"]
    for kind, specs in (("INPUT", inputs), ("OUTPUT", outputs)):
        for i, (tname, shape, dtype) in enumerate(specs):
            count = int(np.prod(shape, dtype=np.int64))
            L.append(f"/* {kind.lower()} {i} {tname!r}: {c_type_name(dtype)}[{']['.join(str(d) for d in shape)}] */")
            L.append(f"#define {tok}_{kind}{i}_ELEMS {count}")
            L.append(f"#define {tok}_{kind}{i}_BYTES {count * np.dtype(dtype).itemsize}")
    return L


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
         "const char *symjit_aot_check(void);", ""]
    L += signature_macros(tok, workspace, inputs, outputs)
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


#: C warnings that are errors wherever symjit compiles C: a call to an undeclared function
#: must never become an implicit declaration (it links against whatever symbol has the name)
C_ERRORS = ("-Werror=implicit-function-declaration",)
_CFLAGS = ("-O3", "-fPIC", "-pthread", "-fvisibility=hidden", "-DSYMJIT_AOT=1", *C_ERRORS)


def kernel_library_flags(target) -> tuple[str, ...]:
    """C compiler flags that build the runtime and kernel library for an llvm Target (None or
    the host: none, the library picks its AVX-512 paths at run time). A named CPU gets its
    -march, and without AVX-512 kernels `-DSYMJIT_NO_AVX512` leaves those paths out of the
    object code altogether."""
    from ..ir.target import AVX512_KERNELS
    from .llvm.target import NAMED_CPUS, is_host
    if target is None or is_host(target):
        return ()
    if target.cpu not in NAMED_CPUS:
        raise MXNetError(f"AOT: no C compiler flags for CPU {target.cpu!r}; expected one of {sorted(NAMED_CPUS)}")
    flags = NAMED_CPUS[target.cpu][1]
    return flags if AVX512_KERNELS in target.kernels else flags + ("-DSYMJIT_NO_AVX512",)


def runtime_included_files(rt: Path) -> list[Path]:
    """The files a runtime source may include, in a stable order: the headers and the kernel
    library's family files (runtime/nn/, compiled as part of nnkernels.c)."""
    return sorted(rt.glob("*.h")) + sorted(p for p in (rt / "nn").glob("*") if p.suffix in (".c", ".h"))


def _compile_c(cc: str, rt: Path, src: str, out: str, cached: bool, extra: tuple = (),
               step: Callable[..., None] = lambda _msg, notice=False: None) -> None:
    """Compile one C file to a PIC object (`extra`: target flags); runtime sources are cached
    on disk (key: compiler, flags, the source and every file it may include,
    runtime_included_files), so later builds only compile the descriptor. A cache miss of a
    runtime source is announced through `step(..., notice=True)` (the kernel library takes
    tens of seconds, once per CPU target and version)."""
    from . import cache
    flags = (*_CFLAGS, *extra)
    key = None
    if cached:
        included = b"".join(p.read_bytes() for p in runtime_included_files(rt))
        key = cache.make_key("aot-c-object", cc, " ".join(flags), Path(src).read_bytes(), included)
        obj = cache.get(key)
        if obj is not None:
            Path(out).write_bytes(obj)
            return
        big = os.path.basename(src) == "nnkernels.c"
        step(f"building the kernel library ({os.path.basename(src)}, {' '.join(extra) or 'this CPU'}): "
             f"first build for this target and version, cached for later builds" if big
             else f"compiling {os.path.basename(src)}", notice=big)
    _run([cc, *flags, f"-I{rt}", "-c", src, "-o", out], f"compiling {os.path.basename(src)}")
    if key is not None:
        cache.put(key, Path(out).read_bytes())


def _pic_object(ir: str, machine) -> bytes:
    """compile_to_object(ir, pic=True) for `machine` (a HostTarget), cached on disk like the
    JIT's objects."""
    from . import cache
    from .llvm.jit import compile_to_object
    key = cache.make_key("aot-pic-object", ir, machine.description, __version__)
    obj = cache.get(key)
    if obj is None:
        obj = compile_to_object(ir, pic=True, target=machine)
        cache.put(key, obj)
    return obj


def build_library(compiled, out_base: str, name: str = "model", graph_hash: str = "",
                  bound: dict | None = None, progress: Callable[[str], None] | None = None) -> AotResult:
    """Build OUT.so, OUT.h and OUT.json (`out_base` = OUT) from a native CompiledGraph.

    `bound`: graph inputs bound to constants (name -> array), embedded as parameters; the
    other graph inputs stay inputs of the library."""
    from .llvm.target import is_host, machine_for
    step = progress or (lambda _msg, notice=False: None)
    rebuilt = getattr(compiled, "rebuilt", None)   # a plan from the plan cache (codegen/plan_cache.py)
    if rebuilt is not None:                         # carries no module to embed: compile it
        compiled = rebuilt()
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
    n_bound = len(params) - n_consts
    # weights packed by the kernel library are packed again when the library is loaded, from
    # their embedded source: the file holds each weight once (not its packed copy as well)
    packings = {n_bound + k: (n_bound + src, desc, int(arrays[n_bound + k].size))
                for k, (src, desc) in getattr(module.placement, "packings", {}).items()}
    # constants the code never reads (weights it reads only in a packed copy, e.g. the blocked
    # layout's panels) are not embedded either, unless a load-time packing reads them
    read = used_params(compiled)
    sources = {src for src, _desc, _floats in packings.values()}
    unread = frozenset() if read is None else frozenset(
        n_bound + k for k in range(n_consts) if k not in read and n_bound + k not in packings
        and n_bound + k not in sources)
    # the library's table gives them no elements (a loader then makes no view of a NULL address)
    params = [(p, (0,), d) if k in unread else (p, s, d) for k, (p, s, d) in enumerate(params)]
    outputs = list(compiled.output_specs)
    spec = compiled.target                 # None: the host
    target = machine_for(spec)
    checks = cpu_feature_checks(target.features)
    cflags = kernel_library_flags(spec)
    rt = runtime_dir()
    cc = os.environ.get("CC", "cc")
    out_base = os.path.abspath(out_base)
    check_output_dir(out_base + ".so")
    base_name = os.path.basename(out_base)
    with tempfile.TemporaryDirectory(prefix="symjit-aot-") as tmp:
        step("generating machine code")
        Path(tmp, "graph.o").write_bytes(_pic_object(module.ir, target))
        embedded = [k not in packings and k not in unread for k in range(len(arrays))]
        blob, blob_offsets = _layout_blob([a for k, a in enumerate(arrays) if embedded[k]])
        spots = iter(blob_offsets)
        offsets = [next(spots) if embedded[k] else None for k in range(len(arrays))]
        blob_path = os.path.join(tmp, "params.bin")
        Path(blob_path).write_bytes(blob)
        uses_nn = "@symjit_nn_" in module.ir
        desc = _descriptor_source(name, module.segment_names[0], inputs, outputs, params, arg_map, n_consts,
                                  offsets, blob_path, module.workspace_size, checks, blas=uses_nn,
                                  packings=packings, unread=unread)
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
            _compile_c(cc, rt, src, o, cached=src in sources, extra=cflags, step=step)
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
            "params": {"count": len(params), "embedded": True,
                       "bytes": int(sum(a.nbytes for k, a in enumerate(arrays) if embedded[k])),
                       "unread": {"count": len(unread), "bytes": int(sum(arrays[k].nbytes for k in unread))},
                       "packed_when_loaded": {"count": len(packings),
                                              "bytes": int(sum(arrays[k].nbytes for k in packings))}},
            "workspace_bytes": int(module.workspace_size),
            "target": {"triple": target.triple, "cpu": target.cpu, "required_features": checks,
                       "llvm_features": target.features, "host": spec is None or is_host(spec),
                       "kernels": sorted(spec.kernels) if spec is not None else None,
                       "kernel_library_cflags": list(cflags)},
            "library": base_name + ".so", "header": base_name + ".h",
            "library_sha256": hashlib.sha256(Path(tmp_so).read_bytes()).hexdigest(),
        }
        header = _header_source(base_name, name, inputs, outputs, module.workspace_size)
        write_files_atomically({out_base + ".so": Path(tmp_so).read_bytes(), out_base + ".h": header,
                                out_base + ".json": json.dumps(manifest, indent=2) + "\n"})
    return AotResult(out_base + ".so", out_base + ".h", out_base + ".json", manifest)
