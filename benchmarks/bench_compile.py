"""Compile time of the `ew` graph (relu(a*b + c) * sigmoid(a) - tanh(c), 4*2**20 float32):
cold (empty disk cache) and warm (a second process finding the object in the disk cache).
Each measurement runs in a fresh process and times bind + the first forward (pass pipeline,
lowering, LLVM or cache load, entry creation). Target: warm-cache compile <= 0.1 s.
Run: python benchmarks/bench_compile.py
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

CHILD = r"""
import time
t_import = time.perf_counter()
import numpy as np, symjit as mx
import symjit.codegen.llvm.backend, symjit.runtime  # one-time imports, reported separately
t_import = time.perf_counter() - t_import
N = 4 * 2 ** 20
a, b, c = (mx.sym.Variable(n) for n in "abc")
ew = mx.sym.relu(a * b + c) * mx.sym.sigmoid(a) - mx.sym.tanh(c)
args = {n: mx.nd.zeros((N,)) for n in "abc"}
t0 = time.perf_counter()
exe = ew.bind(mx.cpu(), args, grad_req="null")
exe.forward()
t1 = time.perf_counter()
cg = list(exe._forward_fn.variants.values())[0][0]
print(f"{t1 - t0:.4f} {cg.stats.cache} {cg.stats.llvm_s:.4f} {t_import:.4f}")
"""


def run_child(cache_dir: str) -> tuple[float, str, float, float]:
    env = dict(os.environ, SYMJIT_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    t, where, llvm_s, t_import = out.stdout.split()
    return float(t), where, float(llvm_s), float(t_import)


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        cold = run_child(d)
        warm = [run_child(d) for _ in range(3)]
    warm_t = sorted(w[0] for w in warm)[1]
    print("== compile time of the ew graph (bind + first forward, fresh process)")
    print(f"  cold (empty cache)    {cold[0] * 1e3:8.1f} ms   (LLVM {cold[2] * 1e3:.1f} ms, cache: {cold[1]})")
    print(f"  warm (disk cache)     {warm_t * 1e3:8.1f} ms   (cache: {warm[0][1]})   x{warm_t / cold[0]:.3f} of cold")
    print(f"  (process start-up: importing symjit and llvmlite took {cold[3] * 1e3:.0f} ms, not counted)")
    print(f"  target: warm <= 100 ms -> {'met' if warm_t <= 0.1 else 'MISSED'}")


if __name__ == "__main__":
    main()
