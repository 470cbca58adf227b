"""Helpers for the lowering tests: one-node (or small) graphs compiled through the whole
pipeline (`passes.manager.compile_graph` + `executable.compile_planned`) and compared with
the interpreter (`symjit.ir.run`)."""
from __future__ import annotations

import numpy as np

from symjit.codegen.llvm.executable import compile_planned
from symjit.ir import GraphBuilder, TensorType, run
from symjit.passes.manager import compile_graph


def one_node_graph(op: str, inputs: list, attrs: dict | None = None, n_outputs: int | None = None,
                   aux: tuple = ()):
    """A graph applying `op` to inputs [(name, shape, dtype)], returning its visible outputs
    (or the first `n_outputs` outputs)."""
    b = GraphBuilder(name=f"t_{op}")
    vals = [b.add_input(n, TensorType(tuple(s), d), aux=n in aux) for n, s, d in inputs]
    outs = b.add_node(op, vals, attrs or {})
    if n_outputs is not None:
        outs = outs[:n_outputs]
    else:
        nv = b_visible(op, attrs or {})
        outs = outs[:nv] if nv else outs
    return b.build(outs)


def b_visible(op: str, attrs: dict) -> int | None:
    from symjit.ops.registry import get_op
    o = get_op(op)
    try:
        parsed = o.parse(attrs)
        return o.num_visible_outputs(parsed)
    except Exception:  # noqa: BLE001
        return None


def compile_and_run(g, feeds: dict, is_train: bool = False, pipeline: str | None = None):
    """(compiled outputs, interpreter outputs, CompiledGraph, compiled state updates, interpreter aux updates)."""
    opt, _ = compile_graph(g, pipeline or ("training" if is_train else "inference"))
    cg = compile_planned(opt, g.name, is_train)
    arrays = [np.ascontiguousarray(feeds[v.name]) for v in opt.inputs]
    outs, updates = cg.run(arrays, is_train=is_train)
    ref = run(g, feeds, is_train=is_train)
    return outs, ref.outputs, cg, updates, ref.aux_updates


def assert_close(got, want, rtol=1e-5, atol=1e-6):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def over_task_splits(call) -> list:
    """call()'s result with the library's calls cut into one block (min_task 1e12) and into one
    block per thread (min_task 1, two threads): what a kernel whose sums do not depend on the
    blocks gives bit for bit the same."""
    from symjit import runtime
    from symjit.codegen.llvm.lower_gemm import kernel_tune
    old_threads = runtime.set_num_threads(2)
    outs = []
    try:
        for min_task in (10**12, 1):
            kernel_tune("min_task", min_task)
            outs.append(np.array(call()))
    finally:
        kernel_tune("min_task", 0)
        runtime.set_num_threads(old_threads)
    return outs


def under_tune(key: str, value: int, call) -> np.ndarray:
    """call()'s result with the kernel library's override `key` set to `value` (lower_gemm
    TUNE_KEYS / TUNE_CONV_VALUES: the alternative path a test compares with), restored after."""
    from symjit.codegen.llvm.lower_gemm import kernel_tune
    kernel_tune(key, value)
    try:
        return np.array(call())
    finally:
        kernel_tune(key, 0)


def host_has_avx512() -> bool:
    """Whether this CPU runs the kernel library's AVX-512 paths (symjit_nn_native_available);
    the portable kernels (GCC vectors, AVX2 in their x86-64-v3 clones) run where it does not."""
    import ctypes
    from symjit.codegen.llvm.lower_gemm import kernel_library
    fn = kernel_library().symjit_nn_native_available
    fn.restype = ctypes.c_int64
    return bool(fn())
