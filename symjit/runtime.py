"""The Python face of symjit's native runtime (the C sources in runtime/, built as `symjit._runtime`).

What it offers, and to whom:
- codegen binds generated LLVM code to the runtime's C functions through `symbols()`
  (`llvmlite.binding.add_symbol(name, address)` for each) and wraps each compiled graph's entry
  point with `make_entry(...)`, which returns an `Entry`: a native callable that validates numpy
  arrays against the graph's static signature and calls the code in well under a microsecond.
- users and benchmarks control the thread pool: `num_threads()`, `set_num_threads(n)`, and the
  `threads(n)` context manager. The default comes from SYMJIT_NUM_THREADS or the CPUs this
  process may run on.
- `load(path)` opens an ahead-of-time compiled library (see runtime/README.md for its ABI) and
  returns its graphs as Entries, without the compiler.

Every error the runtime raises is a `symjit.MXNetError` naming the graph, the argument and the
expected versus actual value.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .base import MXNetError

try:
    from . import _runtime
except ImportError as exc:
    if isinstance(exc, ModuleNotFoundError) and exc.name == f"{__package__}._runtime":
        raise ImportError("symjit's native runtime extension (symjit._runtime) is not built; install the "
                          "package with `python -m pip install -e .` to compile it") from exc
    # built but not loadable (say, an undefined symbol): the loader's reason, never hidden
    raise ImportError(f"symjit's native runtime extension (symjit._runtime) failed to load: {exc}; rebuild it "
                      "with `python -m pip install -e .` for this Python and numpy") from exc

_runtime.set_error_class(MXNetError)


def use_aligned_numpy_allocator(on: bool = True):
    """Make numpy allocate every data buffer ALIGNMENT-byte aligned (on) or with numpy's default
    policy (off) in the current context (NEP 49 handlers live in a context variable: threads
    started later begin with numpy's default). Returns the previous handler.

    NDArrays, compiled-graph outputs and arrays made by numpy itself then start on a cache line,
    so a kernel's 64-byte vector loads and stores never straddle two lines (numpy's default
    gives 16-byte alignment). Kernels accept any alignment either way: this is speed only.
    The buffers are not free()-compatible (see runtime/README.md): extensions must release
    numpy data through numpy's allocator, as NEP 49 requires."""
    return _runtime.use_aligned_numpy_allocator(bool(on))


# on by default for the importing context; SYMJIT_ALIGNED_NUMPY=0 keeps numpy's default allocator
if os.environ.get("SYMJIT_ALIGNED_NUMPY", "1").strip() != "0":
    use_aligned_numpy_allocator(True)

#: glibc mallopt parameters and the values `retain_freed_memory` sets
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
RETAIN_MMAP_THRESHOLD = 32 << 20    # glibc's upper limit for the mmap threshold on 64-bit
RETAIN_TRIM_THRESHOLD = 256 << 20


def retain_freed_memory() -> bool:
    """Ask glibc's malloc to keep freed memory for reuse instead of returning it to the OS, so
    buffers of the same sizes allocated every training step (the activations a compiled forward
    returns for its backward, gradients) reuse pages already mapped instead of faulting in new
    zeroed ones (a CIFAR-size CNN step otherwise takes ~1300 page faults, ~13% of its native time):
    blocks up to RETAIN_MMAP_THRESHOLD come from the heap (not mmap), and up to
    RETAIN_TRIM_THRESHOLD bytes of free heap top stay mapped. Fixed values (glibc's default
    raises the mmap threshold to the largest freed block but then trims anything over twice
    that, so a step's worth of activations is unmapped and faulted in again every step). The
    cost: up to RETAIN_TRIM_THRESHOLD of freed memory stays in the resident set, as a pooled
    allocator's would. True when applied (Linux with glibc), False elsewhere."""
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # glibc only: other C libraries' mallopt differs or is a stub
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, RETAIN_MMAP_THRESHOLD)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, RETAIN_TRIM_THRESHOLD))


# on by default; SYMJIT_RETAIN_FREED_MEMORY=0 keeps glibc's default policy
if os.environ.get("SYMJIT_RETAIN_FREED_MEMORY", "1").strip() != "0":
    retain_freed_memory()

__all__ = ["Entry", "Library", "retain_freed_memory", "ABI_VERSION", "ALIGNMENT", "num_threads", "set_num_threads", "threads",
           "symbols", "make_entry", "use_aligned_numpy_allocator", "parallel_for", "parallel_for_multi", "last_error", "arena_alloc", "arena_free", "load",
           "native_kernels_in_use", "native_library", "set_call_hook", "fingerprint"]

#: The graph-call hook (`set_call_hook`); None when unset. Graphs that run partly in Python
#: (`CompiledGraph` with reference steps) read it to report their calls the way Entries do.
call_hook = None


def set_call_hook(hook):
    """Call `hook(graph, start_ns, end_ns)` after every compiled-graph call (an `Entry`, or a
    compiled graph with Python steps), with the call's `time.monotonic_ns()` bounds; None
    removes it. Returns the previous hook. Unset (the default), a call pays one pointer test."""
    global call_hook
    previous = _runtime.set_call_hook(hook)
    call_hook = hook
    return previous


#: A compiled graph's entry point with its signature: `entry(*inputs, out=None) -> tuple of outputs`.
Entry = _runtime.Entry
#: Version of the C ABI in runtime/symjit_runtime.h.
ABI_VERSION: int = _runtime.ABI_VERSION
#: Alignment in bytes of every workspace and arena allocation.
ALIGNMENT: int = _runtime.ALIGNMENT

TensorSpec = tuple[str, tuple[int, ...], np.dtype]


def num_threads() -> int:
    """Threads that parallel kernels use (the calling thread included)."""
    return _runtime.get_num_threads()


def set_num_threads(n: int | None) -> int:
    """Use `n` threads from now on (None or n <= 0: the default); returns the previous count."""
    if n is None:
        n = 0
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise MXNetError(f"set_num_threads: expected an int, got {type(n).__name__}")
    return _runtime.set_num_threads(int(n))


#: `set_dynamic` modes: never (the default), while the machine is oversubscribed, always.
DYNAMIC_OFF, DYNAMIC_BY_LOAD, DYNAMIC_ALWAYS = 0, 1, 2


def set_dynamic(mode: int) -> int:
    """Choose when parallel kernels run all their chunks on the calling thread alone; returns the
    previous mode. DYNAMIC_BY_LOAD (env SYMJIT_DYNAMIC=1): while the 1-minute load average is at
    least the usable CPUs plus `num_threads()`, as OpenMP's OMP_DYNAMIC; DYNAMIC_ALWAYS (env
    SYMJIT_DYNAMIC=always): every call. The chunks are the same in every mode, so results do not
    depend on it."""
    if mode not in (DYNAMIC_OFF, DYNAMIC_BY_LOAD, DYNAMIC_ALWAYS) or isinstance(mode, bool):
        raise MXNetError(f"set_dynamic: expected 0, 1 or 2, got {mode!r}")
    return _runtime.set_dynamic(int(mode))


@contextlib.contextmanager
def threads(n: int | None) -> Iterator[int]:
    """Run the body with `n` threads, restoring the previous count afterwards."""
    previous = set_num_threads(n)
    try:
        yield num_threads()
    finally:
        set_num_threads(previous)


def native_library() -> ctypes.CDLL:
    """ctypes handle of the runtime extension: its C functions, the kernel library's
    (runtime/nnkernels.c) included, for code generators that bind or query them."""
    return ctypes.CDLL(_runtime.__file__)


_NATIVE_IN_USE = native_library().symjit_nn_native_in_use
_NATIVE_IN_USE.restype = ctypes.c_int64


_SET_FLUSH_DENORMALS = native_library().symjit_nn_set_flush_denormals
_SET_FLUSH_DENORMALS.argtypes = [ctypes.c_int64]
_SET_FLUSH_DENORMALS.restype = ctypes.c_int64


def set_flush_denormals(on: bool | None) -> bool | None:
    """Whether the kernel library's multiply-accumulate kernels (GEMM, convolutions forward and
    backward, recurrent cells) read denormal inputs as zero and flush denormal results to zero
    (x86 DAZ/FTZ, per task, restored afterwards). Off by default, as in MXNet (env
    SYMJIT_FLUSH_DENORMALS=1: on); None: back to the environment's choice. Turn it on when
    training slows down by orders of magnitude as gradients underflow (runtime/nn/common.c:
    a 64 x 512 by 512 product with denormal inputs takes 12-14 ms instead of 0.16 ms on a Zen 5).
    Elementwise code and the interpreter always keep IEEE denormals. Returns the previous
    setting (None: not decided yet)."""
    if on is not None and not isinstance(on, (bool, int, np.integer)):
        raise MXNetError(f"set_flush_denormals: expected a bool or None, got {type(on).__name__}")
    old = _SET_FLUSH_DENORMALS(-1 if on is None else int(bool(on)))
    return None if old < 0 else bool(old)


def fingerprint(buffer, seed: int = 0) -> bytes:
    """16 bytes: a fast non-cryptographic 128-bit fingerprint of a contiguous buffer (any
    one-word change, a different length or seed changes it; runtime/fingerprint.c). It detects
    accidental change, not forgery."""
    return _runtime.fingerprint(buffer, seed)


def native_kernels_in_use() -> bool:
    """Whether the kernel library (runtime/nnkernels.c) runs its AVX-512 paths now: the CPU has
    AVX-512 and they have not been switched off (codegen's `set_native_kernels(0)`)."""
    return bool(_NATIVE_IN_USE())


_SYMBOLS: dict[str, int] | None = None


def symbols() -> dict[str, int]:
    """Addresses of the runtime's C ABI functions by name, for binding generated code to them."""
    global _SYMBOLS
    if _SYMBOLS is None:
        _SYMBOLS = _runtime.symbols()
    return dict(_SYMBOLS)


def _spec(item: Any, role: str, index: int) -> TensorSpec:
    """Normalize a (name, shape, dtype) triple; shapes are static tuples of non-negative ints."""
    try:
        name, shape, dtype = item
    except (TypeError, ValueError):
        raise MXNetError(f"make_entry: {role} {index} must be a (name, shape, dtype) triple, got {item!r}") from None
    try:
        dims = tuple(int(d) for d in shape)
        dt = np.dtype(dtype)
    except (TypeError, ValueError) as exc:
        raise MXNetError(f"make_entry: {role} {index} ({name}): invalid shape or dtype: {exc}") from None
    if any(d < 0 for d in dims):
        raise MXNetError(f"make_entry: {role} {index} ({name}): shape dimensions must be >= 0, got {dims}")
    return str(name), dims, dt


def make_entry(address: int, inputs: Sequence[Any], outputs: Sequence[Any],
               params: Sequence[tuple[str, np.ndarray]] = (), workspace_size: int = 0, name: str = "graph",
               owner: Any = None, release_gil: bool | None = None, last_error: int | None = None) -> Entry:
    """Wrap a compiled entry point `int32_t entry(void **in, void **out, void **params, void *ws)`.

    inputs/outputs: (name, shape, dtype) per tensor, in the order the entry expects them.
    params: (name, array) per parameter, passed by pointer on every call (so in-place updates of
    the arrays are seen; `Entry.set_params` swaps them). workspace_size: bytes of the memory plan.
    owner: any object that must outlive the code (the JIT engine, the shared library).
    release_gil: None lets the runtime decide by the bytes moved.
    """
    ins = [_spec(item, "input", i) for i, item in enumerate(inputs)]
    outs = [_spec(item, "output", i) for i, item in enumerate(outputs)]
    prms = []
    for i, item in enumerate(params):
        try:
            pname, array = item
        except (TypeError, ValueError):
            raise MXNetError(f"make_entry: param {i} must be a (name, numpy.ndarray) pair, got {item!r}") from None
        if not isinstance(array, np.ndarray):
            raise MXNetError(f"make_entry: param {i} ({pname}) must be a numpy.ndarray, got {type(array).__name__}")
        prms.append((str(pname), array))
    if int(workspace_size) < 0:
        raise MXNetError(f"make_entry: workspace_size must be >= 0, got {workspace_size}")
    return Entry(int(address), ins, outs, prms, int(workspace_size), str(name), owner, release_gil,
                 None if last_error is None else int(last_error))


def parallel_for(kernel_address: int, n: int, grain: int, args: Sequence[Any]) -> None:
    """Run the kernel `void k(int64 begin, int64 end, void **args)` over [0, n) on the pool.

    args: ints (addresses), None or numpy arrays (their data pointers); the caller keeps any
    memory they point to alive. Raises MXNetError with the kernel's message if a chunk failed.
    """
    code = _runtime.parallel_for(int(kernel_address), int(n), int(grain), list(args))
    if code != 0:
        _, message = _runtime.last_error()
        raise MXNetError(f"parallel kernel failed: {message or 'no message'} (symjit error code {code})")


def parallel_for_multi(kernel_address: int, grain: int, sizes: Sequence[int],
                       arg_lists: Sequence[Sequence[Any]]) -> None:
    """One `parallel_for` of the kernel over several tensors (multi-tensor apply): tensor t's
    elements [0, sizes[t]) run with args `arg_lists[t]`, all tensors' ranges split together
    over the pool in chunks of at least `grain` elements (so small tensors share a chunk and
    large ones spread over every thread). Same args and errors as `parallel_for`."""
    code = _runtime.parallel_for_multi(int(kernel_address), int(grain), sizes, arg_lists)
    if code != 0:
        _, message = _runtime.last_error()
        raise MXNetError(f"parallel kernel failed: {message or 'no message'} (symjit error code {code})")


def raise_last_error(what: str, code: int):
    """Raise MXNetError for a failed native call that returned `code` (the runtime's message)."""
    _, message = _runtime.last_error()
    raise MXNetError(f"{what} failed: {message or 'no message'} (symjit error code {code})")


def last_error() -> tuple[int, str]:
    """(code, message) of the last error the runtime recorded on this thread (0, '' if none)."""
    return _runtime.last_error()


def arena_alloc(size: int) -> int:
    """Address of a fresh ALIGNMENT-aligned block of `size` bytes; free it with arena_free."""
    return _runtime.arena_alloc(int(size))


def arena_free(address: int) -> None:
    """Free a block from arena_alloc (0 is ignored)."""
    _runtime.arena_free(int(address))


# ---------------------------------------------------------------------------- AOT libraries


class Library:
    """An ahead-of-time compiled symjit library: its graphs as Entries, by name.

    The library stays loaded as long as this object or any of its Entries lives.
    """

    def __init__(self, path: str, handle: ctypes.CDLL, graphs: dict[str, Entry]):
        self.path = path
        self._handle = handle
        self.graphs = graphs

    def __getitem__(self, name: str) -> Entry:
        try:
            return self.graphs[name]
        except KeyError:
            raise MXNetError(f"library {self.path}: no graph named {name!r}; it has {sorted(self.graphs)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self.graphs

    def __iter__(self) -> Iterator[str]:
        return iter(self.graphs)

    def __len__(self) -> int:
        return len(self.graphs)

    def __repr__(self) -> str:
        return f"<symjit.runtime.Library {self.path!r}: graphs {sorted(self.graphs)}>"


def _embedded_param(address: int, shape: tuple[int, ...], dtype: str, handle: ctypes.CDLL) -> np.ndarray:
    """A read-only numpy view of a constant inside a loaded library (no copy)."""
    dt = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    if count == 0:
        return np.empty(shape, dt)
    if address == 0:
        raise MXNetError("AOT library: an embedded parameter has a NULL address")
    buffer = (ctypes.c_char * (count * dt.itemsize)).from_address(address)
    view = np.frombuffer(buffer, dtype=dt).reshape(shape)
    view.flags.writeable = False
    return view


def _elf_file_size(head: bytes) -> int | None:
    """The least size a complete ELF file with this header has (the end of its furthest
    program segment and of its section header table), or None if `head` is not 64-bit ELF.
    `head` must hold the ELF header and the program headers."""
    import struct
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2:
        return None
    endian = "<" if head[5] == 1 else ">"
    phoff, shoff = struct.unpack_from(endian + "QQ", head, 32)
    phentsize, phnum, shentsize, shnum = struct.unpack_from(endian + "HHHH", head, 54)
    need = shoff + shentsize * shnum if shoff else 64
    for i in range(phnum):
        at = phoff + i * phentsize
        if at + 56 > len(head):
            return max(need, at + 56)
        _type, _flags, offset, _vaddr, _paddr, filesz = struct.unpack_from(endian + "IIQQQQ", head, at)
        need = max(need, offset + filesz)
    return need


def check_library_file(path: str) -> None:
    """MXNetError unless `path` is a complete shared library: a truncated file would be mapped
    by the dynamic loader and kill the process with SIGBUS when its missing pages are read.
    Checks the size the ELF headers promise and, when the `symjit compile` manifest
    (OUT.json naming this library) lies beside it, the manifest's `library_sha256`."""
    import hashlib
    import json
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(65536)
    need = _elf_file_size(head)
    if need is None:
        raise MXNetError(f"load: cannot load {path!r}: not a 64-bit ELF shared library")
    if size < need:
        raise MXNetError(f"load: cannot load {path!r}: the file is truncated ({size} bytes, its headers need {need}); "
                         "rebuild it (symjit compile)")
    manifest = os.path.splitext(path)[0] + ".json"
    try:
        with open(manifest, "rb") as f:
            info = json.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return
    if not isinstance(info, dict) or info.get("library") != os.path.basename(path) or "library_sha256" not in info:
        return
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != info["library_sha256"]:
        raise MXNetError(f"load: cannot load {path!r}: it does not match its manifest {manifest!r} (library_sha256 differs: "
                         "the file was modified or is incomplete); rebuild it (symjit compile)")


def load(path: str | os.PathLike[str], params: Mapping[str, np.ndarray] | None = None) -> Library:
    """Load an AOT library (built against runtime/symjit_runtime.h) and wrap its graphs.

    Parameters embedded in the library are used as they are; graphs that expect their
    parameters from the caller take them from `params` by name.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise MXNetError(f"load: no such file {path!r}")
    check_library_file(path)
    try:
        handle = ctypes.CDLL(os.path.abspath(path))
    except OSError as exc:
        raise MXNetError(f"load: cannot load {path!r}: {exc}") from None
    check = getattr(handle, "symjit_aot_check", None)   # libraries from `symjit compile`: CPU features
    if check is not None:
        check.restype = ctypes.c_char_p
        problem = check()
        if problem:
            raise MXNetError(f"load: {problem.decode(errors='replace')}")
    try:
        graphs_fn = handle.symjit_graphs
    except AttributeError:
        raise MXNetError(f"load: {path!r} is not a symjit AOT library (it has no symjit_graphs function)") from None
    descs = _runtime.describe_graphs(ctypes.cast(graphs_fn, ctypes.c_void_p).value)
    entries: dict[str, Entry] = {}
    for desc in descs:
        gname = desc["name"]
        if gname in entries:
            raise MXNetError(f"load: {path!r} defines graph {gname!r} twice")
        bound = []
        for i, (pname, shape, dtype) in enumerate(desc["params"]):
            if desc["param_data"] is not None:
                array = _embedded_param(desc["param_data"][i], shape, dtype, handle)
            else:
                if params is None or pname not in params:
                    raise MXNetError(f"load: graph {gname!r} needs parameter {pname!r}; pass it in params")
                array = np.ascontiguousarray(params[pname])
                if array.shape != shape or array.dtype != np.dtype(dtype):
                    raise MXNetError(f"load: graph {gname!r} parameter {pname!r}: expected shape {shape} and dtype "
                                     f"{dtype}, got {array.shape} and {array.dtype}")
            bound.append((pname, array))
        entries[gname] = make_entry(desc["entry"], desc["inputs"], desc["outputs"], bound, desc["workspace_size"],
                                    gname, owner=handle, last_error=desc["last_error"])
    return Library(path, handle, entries)


# ------------------------------------------------------------------------------------------
# Build features (MXNet's `mx.runtime.Features`): what this installation can do.
# ------------------------------------------------------------------------------------------

class Feature:
    """One capability of the installation: its `index` in `feature_list()`, `name` and whether it
    is `enabled`."""
    __slots__ = ("index", "name", "enabled")

    def __init__(self, name: str, enabled: bool, index: int = 0):
        self.index = index
        self.name = name
        self.enabled = bool(enabled)

    def __repr__(self) -> str:
        return f"{'✔' if self.enabled else '✖'} {self.name}"


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _importable(module: str) -> bool:
    import importlib.util
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def feature_list() -> list[Feature]:
    """The installation's features with MXNet's names. Native code is generated at run time for
    the host CPU, so the CPU_* entries report the instructions this CPU offers. CUDA (MXNet: GPU
    arrays and operators) is off: NDArrays live on the CPU; CUDA_AOT (symjit's own) says that
    `symjit compile --target cuda` can build libraries (nvcc found). INT64_TENSOR_SIZE: shapes
    and indices are 64-bit."""
    import shutil
    flags = _cpu_flags()
    nvcc = bool(os.environ.get("SYMJIT_NVCC") or shutil.which("nvcc")
                or (os.environ.get("CUDA_HOME") and os.path.exists(os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc"))))
    table = [
        ("CUDA", False), ("CUDA_AOT", nvcc), ("CUDNN", False), ("NCCL", False), ("CUDA_RTC", False), ("TENSORRT", False),
        ("CPU_SSE", "sse" in flags), ("CPU_SSE2", "sse2" in flags), ("CPU_SSE3", "pni" in flags),
        ("CPU_SSE4_1", "sse4_1" in flags), ("CPU_SSE4_2", "sse4_2" in flags), ("CPU_SSE4A", "sse4a" in flags),
        ("CPU_AVX", "avx" in flags), ("CPU_AVX2", "avx2" in flags), ("CPU_AVX512F", "avx512f" in flags),
        ("OPENMP", False), ("SSE", "sse" in flags), ("F16C", "f16c" in flags), ("JEMALLOC", False),
        ("BLAS_OPEN", True), ("BLAS_ATLAS", False), ("BLAS_MKL", False), ("BLAS_APPLE", False),
        ("LAPACK", True), ("MKLDNN", False), ("OPENCV", _importable("cv2")), ("CAFFE", False),
        ("PROFILER", True), ("DIST_KVSTORE", _importable("mpi4py")), ("CXX14", True),
        ("INT64_TENSOR_SIZE", True), ("SIGNAL_HANDLER", False), ("DEBUG", os.environ.get("SYMJIT_DEBUG") == "1"),
        ("TVM_OP", False), ("LLVM", True),
    ]
    return [Feature(name, enabled, i) for i, (name, enabled) in enumerate(table)]


class Features(dict):
    """The features by name (`Features().is_enabled('CUDA')`)."""

    def __init__(self):
        super().__init__((f.name, f) for f in feature_list())

    def __repr__(self) -> str:
        return str(list(self.values()))

    def is_enabled(self, feature_name: str) -> bool:
        """Whether `feature_name` is enabled; RuntimeError for an unknown name (as MXNet)."""
        name = feature_name.upper()
        if name not in self:
            raise RuntimeError(f"Feature '{feature_name}' is unknown, known features are: {list(self.keys())}")
        return self[name].enabled


__all__ += ["Feature", "Features", "feature_list"]
