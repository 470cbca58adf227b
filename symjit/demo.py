"""The main demo: `python -m symjit.demo`. Self-contained, no downloads.

Builds a small computation with the MXNet 1.x API, differentiates it with autograd,
and checks the results against numpy. It grows as the compiler lands.
"""
from __future__ import annotations

import time

import numpy as np

import symjit as mx
from symjit import autograd, nd


def main() -> None:
    print(f"symjit {mx.__version__}")
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((4, 2 ** 16)).astype(np.float32)
    a = nd.array(a_np)
    a.attach_grad()
    with autograd.record():
        y = nd.relu(a * 2.0 + 1.0) * nd.sigmoid(a) - nd.tanh(a)
    y.backward()
    ref = np.maximum(a_np * 2 + 1, 0) * (1 / (1 + np.exp(-a_np))) - np.tanh(a_np)
    print("eager forward   max |symjit - numpy| =", float(np.abs(y.asnumpy() - ref).max()))
    s = 1 / (1 + np.exp(-a_np))
    dref = (2 * (a_np * 2 + 1 > 0)) * s + np.maximum(a_np * 2 + 1, 0) * s * (1 - s) - (1 - np.tanh(a_np) ** 2)
    print("autograd        max |dy/da - analytic| =", float(np.abs(a.grad.asnumpy() - dref).max()))
    t0 = time.perf_counter()
    for _ in range(10):
        nd.relu(a * 2.0 + 1.0) * nd.sigmoid(a) - nd.tanh(a)
    print(f"eager time      {(time.perf_counter() - t0) / 10 * 1e3:.2f} ms per call")


if __name__ == "__main__":
    main()
