"""The BLAS that compiled GEMM/convolution kernels call: scipy's bundled OpenBLAS.

OpenBLAS picks its kernels when the library is loaded ("DYNAMIC_ARCH"), from the CPU it
recognises or from the `OPENBLAS_CORETYPE` environment variable. Releases that do not know a
newer AVX-512 CPU (e.g. AMD Zen 5) fall back to their AVX2 `Haswell` kernels, which run at
about half the speed of the `SkylakeX` (AVX-512) kernels on such a CPU
(`benchmarks/bench_gemm_choices.py --blas-cores` measures every core type on this machine).

`prefer_avx512_kernels()` runs once when symjit is imported: when the host has the AVX-512
subsets the SkylakeX kernels use and scipy's OpenBLAS is not loaded yet, it loads the library
with `OPENBLAS_CORETYPE=SkylakeX` and then restores the environment (child processes and other
libraries see what the user set). Like the LLVM code, which always targets the host's exact
features, symjit's GEMMs thus use the host's widest kernels by default, even where the
environment pins OpenBLAS in general (`OPENBLAS_CORETYPE=Haswell` affects numpy's own copy, not
this one). `SYMJIT_BLAS_CORETYPE` changes the choice: `auto` (default), `native` (OpenBLAS's
own detection and `OPENBLAS_CORETYPE`), or a core name such as `Haswell`.

Invariant: the library is loaded at most once per process; this module never changes the
kernels of an OpenBLAS that is already loaded.
"""
from __future__ import annotations

import ctypes
import glob
import os

__all__ = ["openblas_library", "openblas_loaded", "host_has_avx512", "prefer_avx512_kernels",
           "openblas_core_name", "sgemm_address", "set_threads_local_address"]

#: AVX-512 subsets that OpenBLAS's SkylakeX kernels require
AVX512_FLAGS = ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")

_LIB_GLOB = "libscipy_openblas*.so*"


def openblas_library() -> str | None:
    """Path of the OpenBLAS shared library bundled with scipy, or None without scipy."""
    import importlib.util
    spec = importlib.util.find_spec("scipy")
    if spec is None or not spec.submodule_search_locations:
        return None
    libs = os.path.join(os.path.dirname(list(spec.submodule_search_locations)[0]), "scipy.libs")
    found = sorted(glob.glob(os.path.join(libs, _LIB_GLOB)))
    return found[0] if found else None


def openblas_loaded(path: str) -> bool:
    """Whether the library at `path` is mapped into this process (Linux; elsewhere assume so)."""
    try:
        with open("/proc/self/maps") as f:
            name = os.path.basename(path)
            return any(name in line for line in f)
    except OSError:
        return True


def host_has_avx512() -> bool:
    """Whether the CPU (first processor in /proc/cpuinfo) has every subset in AVX512_FLAGS."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return all(fl in flags for fl in AVX512_FLAGS)
    except OSError:
        pass
    return False


def _wanted_core() -> str | None:
    """The core type to force, or None to leave OpenBLAS's detection alone."""
    choice = os.environ.get("SYMJIT_BLAS_CORETYPE", "auto").strip()
    if choice.lower() == "native":
        return None
    if choice.lower() != "auto":
        return choice
    return "SkylakeX" if host_has_avx512() else None


def prefer_avx512_kernels() -> str | None:
    """Load scipy's OpenBLAS with the fastest kernels for this CPU (see the module docstring).

    Returns the core type forced, or None when nothing was done (no scipy, already loaded, no
    AVX-512, or SYMJIT_BLAS_CORETYPE=native)."""
    core = _wanted_core()
    path = openblas_library() if core else None
    if not path or openblas_loaded(path):
        return None
    saved = os.environ.get("OPENBLAS_CORETYPE")
    os.environ["OPENBLAS_CORETYPE"] = core
    try:
        ctypes.CDLL(path)            # the library reads OPENBLAS_CORETYPE in its constructor
    except OSError:
        return None
    finally:
        if saved is None:
            del os.environ["OPENBLAS_CORETYPE"]
        else:
            os.environ["OPENBLAS_CORETYPE"] = saved
    return core


def _symbol(path: str, *names: str):
    lib = ctypes.CDLL(path)
    for n in names:
        if hasattr(lib, n):
            return getattr(lib, n)
    return None


def openblas_core_name() -> str | None:
    """The kernel set the loaded OpenBLAS uses (e.g. 'Haswell', 'SkylakeX'), or None."""
    path = openblas_library()
    fn = _symbol(path, "scipy_openblas_get_corename", "openblas_get_corename") if path else None
    if fn is None:
        return None
    fn.restype = ctypes.c_char_p
    return fn().decode()


def sgemm_address() -> int:
    """Address of the Fortran-interface sgemm of scipy's OpenBLAS (`scipy_sgemm_`, found in the
    library itself: no import of scipy.linalg, which costs a third of a second), or of scipy's
    `cython_blas.sgemm` wrapper of it when the library has no such symbol. Both take the
    Fortran arguments as pointers, without hidden string lengths."""
    path = openblas_library()
    fn = _symbol(path, "scipy_sgemm_", "sgemm_") if path else None
    if fn is not None:
        return int(ctypes.cast(fn, ctypes.c_void_p).value)
    from scipy.linalg import cython_blas
    cap = cython_blas.__pyx_capi__["sgemm"]
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    name = ctypes.pythonapi.PyCapsule_GetName
    name.restype = ctypes.c_char_p
    name.argtypes = [ctypes.py_object]
    return int(get(cap, name(cap)))


def set_threads_local_address() -> int:
    """Address of OpenBLAS's `openblas_set_num_threads_local`, or 0 when it has none."""
    path = openblas_library()
    fn = _symbol(path, "openblas_set_num_threads_local") if path else None
    return (ctypes.cast(fn, ctypes.c_void_p).value or 0) if fn is not None else 0
