"""`np`: Gluon blocks in NumPy mode (`npx.set_np()`), hybridized, against the same blocks in
MXNet's legacy mode (hybridized) and against NumPy mode run eagerly, in one run.

Two networks, each with the same weights in both modes:
  * an MLP whose hidden layer mixes elementwise math, h = tanh(a) * 0.5 + exp(-a * a) -
    maximum(a, 0) / 3 with a = dense(x) (np ops: `_npi_tanh`, `_npi_exp`, `_npi_maximum_scalar`,
    ... ; legacy: `tanh`, `exp`, `_maximum_scalar`, ...), batch 256, 512 -> 1024 -> 10;
  * d2l's LeNet (sigmoid activations, average pooling), batch 64 on 1x28x28.
For each: inference forward, and a training step (forward + backward under autograd.record).
Ratios: np-hybridized time / legacy-hybridized time (1.0 = parity: the np ops compile and fuse
like the legacy ones) and eager-np time / np-hybridized time (what hybridizing buys).
Run: python benchmarks/bench_np.py
"""
from __future__ import annotations

import numpy as onp

import symjit as mx
from symjit import autograd, npx
from symjit.gluon import nn
from common import median_time, report


class MixMLP(nn.HybridBlock):
    """dense -> elementwise mix -> dense; `F` is the np or the legacy namespace."""

    def __init__(self):
        super().__init__()
        self.d1 = nn.Dense(1024)
        self.d2 = nn.Dense(10)

    def hybrid_forward(self, F, x):
        a = self.d1(x)
        if npx.is_np_array():
            h = F.np.tanh(a) * 0.5 + F.np.exp(-a * a) - F.np.maximum(a, 0) / 3
        else:
            h = F.tanh(a) * 0.5 + F.exp(-a * a) - F.maximum(a, 0) / 3
        return self.d2(h)


def lenet():
    net = nn.HybridSequential()
    net.add(nn.Conv2D(channels=6, kernel_size=5, padding=2, activation="sigmoid"),
            nn.AvgPool2D(pool_size=2, strides=2),
            nn.Conv2D(channels=16, kernel_size=5, activation="sigmoid"),
            nn.AvgPool2D(pool_size=2, strides=2),
            nn.Dense(120, activation="sigmoid"),
            nn.Dense(84, activation="sigmoid"),
            nn.Dense(10))
    return net


def build(make, x_np: onp.ndarray, np_mode: bool, hybrid: bool, weights: list | None):
    """(net, input array) in the chosen mode, with `weights` (numpy, in parameter order) loaded."""
    if np_mode:
        npx.set_np()
    else:
        npx.reset_np()
    net = make()
    net.initialize()
    x = mx.np.array(x_np) if np_mode else mx.nd.array(x_np)
    net(x)                          # materialise deferred shapes
    params = list(net.collect_params().values())
    if weights is not None:
        for p, w in zip(params, weights):
            p.set_data(mx.np.array(w) if np_mode else mx.nd.array(w))
    if hybrid:
        net.hybridize(static_alloc=True, static_shape=True)
    return net, x


def timings(make, x_np: onp.ndarray, rounds: int) -> dict:
    """Median seconds of inference and of a training step per configuration; checks that the
    np and legacy outputs agree."""
    npx.reset_np()
    ref_net, _ = build(make, x_np, False, False, None)
    weights = [p.data().asnumpy() for p in ref_net.collect_params().values()]
    out, outputs = {}, {}
    for label, np_mode, hybrid in (("legacy hybridized", False, True), ("np hybridized", True, True),
                                   ("np eager", True, False)):
        net, x = build(make, x_np, np_mode, hybrid, weights)

        def infer():
            return net(x).asnumpy()

        def train():
            with autograd.record():
                loss = (net(x) ** 2).sum()
            loss.backward()
            return loss.asnumpy()
        outputs[label] = infer()
        out[label] = (median_time(infer, repeat=rounds, warmup=2), median_time(train, repeat=rounds, warmup=2))
    npx.reset_np()
    err = max(float(onp.abs(outputs[k] - outputs["legacy hybridized"]).max()) for k in outputs)
    return {"times": out, "max_abs_diff": err}


def main() -> None:
    rng = onp.random.default_rng(0)
    cases = [("mlp 512-1024-10 (batch 256)", MixMLP, rng.standard_normal((256, 512)).astype(onp.float32), 20),
             ("lenet (batch 64)", lenet, rng.standard_normal((64, 1, 28, 28)).astype(onp.float32), 20)]
    for title, make, x, rounds in cases:
        r = timings(make, x, rounds)
        t = r["times"]
        for phase, k in (("inference", 0), ("training step", 1)):
            rows = [(label, t[label][k]) for label in t]
            report(f"{title}: {phase} (outputs agree to {r['max_abs_diff']:.1e})", rows, "legacy hybridized")
            print(f"  np hybridized / legacy hybridized = {t['np hybridized'][k] / t['legacy hybridized'][k]:.2f}x;"
                  f" np eager / np hybridized = {t['np eager'][k] / t['np hybridized'][k]:.2f}x")


if __name__ == "__main__":
    main()
