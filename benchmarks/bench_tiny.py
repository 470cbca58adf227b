"""`tiny`: per-call latency of a compiled 2-layer graph (FullyConnected 16 -> relu ->
FullyConnected 16, batch 1) through Executor.forward with outputs ready, against the same
computation written directly in numpy, measured in the same run.
Target: at most 1.0x the numpy time (aim: under 5 microseconds).
Run: python benchmarks/bench_tiny.py
"""
from __future__ import annotations

import numpy as np

import symjit as mx
from common import median_time, report


def main() -> None:
    rng = np.random.default_rng(0)
    data = mx.sym.var("data")
    net = mx.sym.FullyConnected(data, num_hidden=16, name="fc1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=16, name="fc2")
    shapes = {"data": (1, 16), "fc1_weight": (16, 16), "fc1_bias": (16,), "fc2_weight": (16, 16),
              "fc2_bias": (16,)}
    arrays = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    exe = net.bind(mx.cpu(), {k: mx.nd.array(v) for k, v in arrays.items()}, grad_req="null")
    out = exe.forward()[0]
    x, w1, b1, w2, b2 = (arrays[k] for k in ("data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"))

    def numpy_tiny():
        return np.maximum(x @ w1.T + b1, 0) @ w2.T + b2

    err = np.abs(out.asnumpy() - numpy_tiny()).max()
    t_sym = median_time(lambda: exe.forward(), repeat=200, inner=100)
    t_np = median_time(numpy_tiny, repeat=200, inner=100)
    cg = list(exe._forward_fn.variants.values())[0][0] if hasattr(exe._forward_fn, "variants") else None
    native = getattr(cg, "native", False)
    print(f"max |symjit - numpy| = {err:.2e}; whole graph one native call: {native}")
    report("tiny: FC16 -> relu -> FC16, batch 1", [("numpy", t_np), ("symjit Executor.forward", t_sym)], "numpy")
    print(f"  target: <= 1.0x numpy -> {'met' if t_sym <= t_np else 'MISSED'}; "
          f"aim < 5 us -> {'met' if t_sym < 5e-6 else 'missed'}")


if __name__ == "__main__":
    main()
