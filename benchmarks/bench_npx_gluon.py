"""NumPy mode (`npx.set_np()`) against legacy mode for the same hybridized Gluon network, in
the same run: inference call time (an MLP on a small batch, where per-call overhead shows) and
one training step of LeNet (forward, SoftmaxCrossEntropyLoss, backward, sgd).

    python benchmarks/bench_npx_gluon.py [--calls 3000] [--steps 30]

Prints the best-of-3 time per call / step of each mode and the ratio np / legacy (1.0 = no
cost for the NumPy interface). The two modes alternate, so machine load affects both alike.
Never gates CI.
"""
from __future__ import annotations

import argparse
import time

import symjit as mx
from symjit import autograd, gluon, np, npx
from symjit.gluon import nn


def _mlp():
    net = nn.HybridSequential()
    net.add(nn.Dense(64, activation="relu"), nn.Dense(10))
    return net


def _lenet():
    net = nn.HybridSequential()
    net.add(nn.Conv2D(6, 5, padding=2, activation="sigmoid"), nn.AvgPool2D(2, 2),
            nn.Conv2D(16, 5, activation="sigmoid"), nn.AvgPool2D(2, 2),
            nn.Dense(120, activation="sigmoid"), nn.Dense(84, activation="sigmoid"), nn.Dense(10))
    return net


def _in_mode(np_mode: bool, fn):
    if np_mode:
        npx.set_np()
    try:
        return fn(np.array if np_mode else mx.nd.array)
    finally:
        npx.reset_np()


def inference(calls: int):
    def run(make):
        net = _mlp()
        net.initialize()
        net.hybridize()
        x = make(mx.nd.ones((8, 32)).asnumpy())
        for _ in range(50):
            net(x)
        t = time.perf_counter()
        for _ in range(calls):
            net(x)
        return (time.perf_counter() - t) / calls
    return run


def training(steps: int):
    def run(make):
        net = _lenet()
        net.initialize(mx.init.Xavier())
        net.hybridize()
        loss = gluon.loss.SoftmaxCrossEntropyLoss()
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        x = make(mx.nd.random.uniform(shape=(64, 1, 28, 28)).asnumpy())
        y = make(mx.nd.array([i % 10 for i in range(64)]).asnumpy())

        def step():
            with autograd.record():
                l = loss(net(x), y)
            l.backward()
            trainer.step(64)
        for _ in range(3):
            step()
        t = time.perf_counter()
        for _ in range(steps):
            step()
        mx.nd.waitall()
        return (time.perf_counter() - t) / steps
    return run


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--steps", type=int, default=30)
    args = p.parse_args()
    for what, bench, unit, scale in (("MLP inference call", inference(args.calls), "us", 1e6),
                                     ("LeNet training step (batch 64)", training(args.steps), "ms", 1e3)):
        best = {False: float("inf"), True: float("inf")}
        for _ in range(3):
            for mode in (False, True):
                best[mode] = min(best[mode], _in_mode(mode, bench))
        print(f"{what}: legacy {best[False] * scale:.1f} {unit}, np {best[True] * scale:.1f} {unit}, "
              f"np/legacy {best[True] / best[False]:.2f}")


if __name__ == "__main__":
    main()
