"""Per-call overhead of calling a compiled graph from Python, and the thread pool's dispatch cost.

Compares, on tiny arrays (so the native work is negligible and the numbers are overhead):
  - symjit's native binding (`symjit.runtime.Entry`, vectorcall + numpy C API), allocating outputs
    and writing into `out=` arrays,
  - the same entry point called through ctypes (what a pure-Python binding would do),
  - a numpy ufunc call (`np.add`), the floor any Python-level array call pays.
Then the cost of one symjit_parallel_for dispatch over the pool versus running inline.
Ratios are against baselines measured in the same run. Usage: python benchmarks/bench_call_overhead.py
"""
from __future__ import annotations

import argparse
import ctypes
import time

import numpy as np

from symjit import _runtime, runtime


def per_call_us(fn, number: int, repeat: int = 5) -> float:
    """Best-of-`repeat` mean time of fn() in microseconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--number", type=int, default=100_000, help="calls per timing")
    args = parser.parse_args()
    number = args.number

    test = _runtime.test_symbols()
    n = 3
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, np.float32)
    nparam, aparam = np.array([n], np.int64), np.array([2.0], np.float32)
    entry = runtime.make_entry(test["entry_axpy"], [("x", (n,), "float32"), ("y", (n,), "float32")],
                               [("out", (n,), "float32"), ("align", (1,), "int64")],
                               params=[("n", nparam), ("a", aparam)], workspace_size=4 * n, name="axpy")
    outs = (np.empty(n, np.float32), np.empty(1, np.int64))

    # The ctypes path: same entry, pointer arrays built per call, outputs allocated with numpy.
    cfn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                           ctypes.c_void_p)(test["entry_axpy"])
    ptr3, ptr2 = ctypes.c_void_p * 2, ctypes.c_void_p * 2
    params_c = ptr2(nparam.ctypes.data, aparam.ctypes.data)
    workspace = np.empty(64, np.uint8)
    ws_addr = workspace.ctypes.data

    def ctypes_call():
        o0, o1 = np.empty(n, np.float32), np.empty(1, np.int64)
        rc = cfn(ptr3(x.ctypes.data, y.ctypes.data), ptr2(o0.ctypes.data, o1.ctypes.data), params_c, ws_addr)
        if rc:
            raise RuntimeError(rc)
        return o0, o1

    np.testing.assert_array_equal(entry(x, y)[0], ctypes_call()[0])
    add_out = np.empty(n, np.float32)
    rows = [
        ("symjit Entry (allocates outputs)", per_call_us(lambda: entry(x, y), number)),
        ("symjit Entry (out=)", per_call_us(lambda: entry(x, y, out=outs), number)),
        ("ctypes call of the same entry", per_call_us(ctypes_call, number // 4)),
        ("numpy ufunc np.add(x, y)", per_call_us(lambda: np.add(x, y), number)),
        ("numpy ufunc np.add(x, y, out=)", per_call_us(lambda: np.add(x, y, out=add_out), number)),
    ]
    base_ctypes, base_numpy = rows[2][1], rows[3][1]
    print(f"call overhead, {n}-element float32 arrays (2 inputs, 2 outputs, 2 params), best of 5:")
    print(f"{'path':38s} {'us/call':>9s} {'vs ctypes':>10s} {'vs np.add':>10s}")
    for name, us in rows:
        print(f"{name:38s} {us:9.3f} {us / base_ctypes:9.2f}x {us / base_numpy:9.2f}x")

    kernel, size = test["kernel_noop"], 1 << 20
    print(f"\nparallel_for dispatch of an empty kernel (n={size}, grain=1), incl. the Python-level call:")
    inline = None
    for threads in sorted({1, 2, runtime.num_threads()}):
        with runtime.threads(threads):
            us = per_call_us(lambda: _runtime.parallel_for(kernel, size, 1, ()),
                             number // 10)
        inline = us if inline is None else inline
        print(f"  threads={threads:<3d} {us:9.3f} us/call  ({us / inline:5.2f}x of inline)")

    big = 1 << 22
    nbig = np.array([big], np.int64)
    xb, yb = np.random.default_rng(0).standard_normal((2, big)).astype(np.float32)
    entry_big = runtime.make_entry(test["entry_axpy"], [("x", (big,), "float32"), ("y", (big,), "float32")],
                                   [("out", (big,), "float32"), ("align", (1,), "int64")],
                                   params=[("n", nbig), ("a", aparam)], workspace_size=4 * big, name="axpy_big")
    outs_big = (np.empty(big, np.float32), np.empty(1, np.int64))
    print(f"\nscaling of a memory-bound graph (axpy through the workspace, n={big}, out=):")
    single = None
    for threads in sorted({1, 2, runtime.num_threads()}):
        with runtime.threads(threads):
            us = per_call_us(lambda: entry_big(xb, yb, out=outs_big), 20, repeat=3)
        single = us if single is None else single
        print(f"  threads={threads:<3d} {us:9.1f} us/call  (speed-up {single / us:4.2f}x)")


if __name__ == "__main__":
    main()
