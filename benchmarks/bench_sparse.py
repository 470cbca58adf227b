"""Benchmark of sparse products: csr . dense at 1% density through `mx.nd.sparse.dot` (the C
kernel of runtime/nn/sparse.c behind the sparse operator) against scipy.sparse's product and
against the dense `mx.nd.dot` of the same matrices, all in this process.

Default: a 4096 x 4096 float32 CSR matrix (1% of its entries stored) times a 4096 x 64 dense
matrix; also csr.T . dense (row_sparse result, the gradient of the dense operand), dense . csr,
and a recorded csr . dense with its backward to the dense operand (dense: the same with a dense lhs).
Prints median times and the ratios (> 1: the sparse operator is faster).

    python benchmarks/bench_sparse.py [--n N] [--k K] [--density D] [--repeat R]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import symjit as mx  # noqa: E402
from common import median_time  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=64)
    ap.add_argument("--density", type=float, default=0.01)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    import scipy.sparse as sps

    nd = mx.nd
    n, k = args.n, args.k
    a_sp = sps.random(n, n, density=args.density, format="csr", dtype=np.float32, random_state=0)
    a_sp.sort_indices()
    rng = np.random.default_rng(0)
    b = rng.standard_normal((n, k)).astype(np.float32)
    d = rng.standard_normal((k, n)).astype(np.float32)
    csr = nd.sparse.csr_matrix(a_sp)
    a_dense, b_nd, d_nd = nd.array(a_sp.toarray()), nd.array(b), nd.array(d)

    got = nd.sparse.dot(csr, b_nd).asnumpy()
    err = float(np.abs(got - a_sp @ b).max())
    print(f"csr {n}x{n} at density {args.density:g} ({a_sp.nnz} stored), dense {n}x{k}; "
          f"max |symjit - scipy| = {err:.2e}")
    cases = [
        ("csr . dense", lambda: nd.sparse.dot(csr, b_nd), lambda: a_sp @ b, lambda: nd.dot(a_dense, b_nd)),
        ("csr.T . dense (row_sparse)", lambda: nd.sparse.dot(csr, b_nd, transpose_a=True),
         lambda: a_sp.T @ b, lambda: nd.dot(a_dense, b_nd, transpose_a=True)),
        ("dense . csr (csr)", lambda: nd.sparse.dot(d_nd, csr), lambda: (a_sp.T @ d.T).T,
         lambda: nd.dot(d_nd, a_dense)),
    ]
    head = nd.array(rng.standard_normal((n, k)).astype(np.float32))

    def train_step(lhs):
        w = nd.array(b)
        w.attach_grad()

        def run():
            with mx.autograd.record():
                y = nd.dot(lhs, w)
            y.backward(head)
        return run

    head_np = head.asnumpy()
    cases.append(("fwd + bwd (grad of dense)", train_step(csr), lambda: (a_sp @ b, a_sp.T @ head_np),
                  train_step(a_dense)))
    print(f"{'product':28s} {'symjit sparse':>14s} {'scipy':>10s} {'dense nd.dot':>13s} "
          f"{'scipy/sparse':>13s} {'dense/sparse':>13s}")
    for name, ours, scipy_fn, dense_fn in cases:
        t_ours = median_time(ours, args.repeat, warmup=1)
        t_scipy = median_time(scipy_fn, args.repeat, warmup=1)
        t_dense = median_time(dense_fn, args.repeat, warmup=1)
        print(f"{name:28s} {t_ours * 1e3:11.3f} ms {t_scipy * 1e3:7.3f} ms {t_dense * 1e3:10.3f} ms "
              f"{t_scipy / t_ours:12.2f}x {t_dense / t_ours:12.2f}x")


if __name__ == "__main__":
    main()
