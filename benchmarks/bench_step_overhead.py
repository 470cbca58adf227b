"""Per-step Python overhead of the ordinary Gluon training loop, phase by phase, before/after.

The loop of bench_train.py (hybridized network under `autograd.record()`, eager
SoftmaxCrossEntropyLoss, `loss.backward()`, `Trainer.step` with SGD momentum, then
`loss.mean().asscalar()`) on an MLP narrow enough (default 32-16-16-10, batch 64) that its
native work is a few microseconds: what is measured is the frontend's own cost per step --
dispatch, autograd tape, eager loss ops, Trainer and optimizer -- which any Gluon loop pays on
top of its kernels. `--width 512 --inputs 784` gives bench_train.py's MLP instead; `--depth 80 --width 8` a network of
162 parameters (per-parameter costs: Trainer, optimizer, autograd).

Each tree (this one, and `--ref TREE` for a before/after pair) runs in its own subprocess, one
thread, pinned to one CPU, in alternating rounds (order reversed every round); a round times
`--steps` steps per phase with process CPU time (not wall: the development machine is shared)
and keeps the best of `--windows` windows. Printed: per phase the median over rounds for each
tree and the median of the rounds' paired ratios (this tree / ref), with the load average.

Findings (2026-12, the 2-core development machine under a load average of 7.7-8.8 from other
work; `--ref` the tree before the changes named): the default network, 6 rounds of 300 steps:
step 703 -> 519 us CPU (paired 0.750): eager loss 0.667, Trainer 0.659, backward 0.806,
`mean().asscalar()` 0.770, forward 0.925 -- the fused loss's flat gather and one-hot write, the
optimizer's reused native call plans and lighter per-parameter loop, memoized eager elementwise
expressions, reductions through the ufuncs. `--depth 80 --width 8` (162 parameters), 4 rounds
of 100 steps: Trainer 1451 -> 994 us (0.690), loss 0.808, step 3622 -> 3170 us (0.880; the
forward and backward there are mostly the 80 layers' native work, unchanged).

    python benchmarks/bench_step_overhead.py [--ref OLD_TREE] [--rounds 5] [--steps 300]
                                             [--windows 5] [--width 16] [--inputs 32] [--depth 2]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

PHASES = ("forward", "loss", "backward", "trainer", "asscalar", "step")

CHILD = r"""
import json, os, sys, time
import numpy as np
import symjit as mx
from symjit import autograd, gluon
from symjit.gluon import nn
width, inputs, steps, windows, depth = (int(a) for a in sys.argv[1:6])
mx.runtime.set_num_threads(1)
rng = np.random.RandomState(0)
x = rng.rand(64, inputs).astype(np.float32)
y = rng.randint(0, 10, 64).astype(np.float32)
net = nn.HybridSequential()
for _ in range(depth):
    net.add(nn.Dense(width, activation="relu"))
net.add(nn.Dense(10))
net.initialize(mx.init.Xavier())
net.hybridize()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.9})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
data, label = mx.nd.array(x), mx.nd.array(y)
clock = time.process_time

def step(acc):
    t0 = clock()
    with autograd.record():
        out = net(data)
        t1 = clock()
        loss = loss_fn(out, label)
    t2 = clock()
    loss.backward()
    t3 = clock()
    trainer.step(64)
    t4 = clock()
    loss.mean().asscalar()
    t5 = clock()
    for i, d in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t5 - t0)):
        acc[i] += d

for _ in range(30):
    step([0.0] * 6)
best = None
for _ in range(windows):
    acc = [0.0] * 6
    for _ in range(steps):
        step(acc)
    best = acc if best is None else [min(a, b) for a, b in zip(best, acc)]
print(json.dumps(mx.__file__))
print(json.dumps([v / steps * 1e6 for v in best]))
"""


def _run(tree: str, args) -> list[float]:
    env = dict(os.environ, PYTHONPATH=tree)
    cmd = ["taskset", "-c", str(args.cpu), sys.executable, "-c", CHILD,
           str(args.width), str(args.inputs), str(args.steps), str(args.windows), str(args.depth)]
    # cwd: not a source tree (`python -c` puts the working directory first on sys.path)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, timeout=900, cwd="/")
    lines = out.stdout.strip().splitlines()
    loaded = json.loads(lines[-2])
    if not loaded.startswith(tree):
        raise RuntimeError(f"{tree}: the subprocess imported symjit from {loaded}")
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", help="another built symjit source tree (before/after pair)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--windows", type=int, default=5)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--inputs", type=int, default=32)
    ap.add_argument("--depth", type=int, default=2, help="hidden Dense layers (2 parameters each)")
    ap.add_argument("--cpu", type=int, default=0, help="CPU the subprocesses are pinned to")
    args = ap.parse_args()
    trees = {"symjit": str(Path(__file__).resolve().parent.parent)}
    if args.ref:
        trees["ref"] = str(Path(args.ref).resolve())
    results: dict = {name: [] for name in trees}
    load_before = os.getloadavg()[0]
    for r in range(args.rounds):
        order = list(trees) if r % 2 == 0 else list(reversed(trees))
        for name in order:
            results[name].append(_run(trees[name], args))
    load_after = os.getloadavg()[0]
    layers = f"{args.inputs}-{args.width}x{args.depth}-10"
    print(f"Gluon step overhead, MLP {layers} batch 64, 1 thread, "
          f"CPU us/step, best of {args.windows} windows of {args.steps} steps, median of {args.rounds} "
          f"rounds (load average before {load_before:.2f}, after {load_after:.2f})")
    header = f"  {'phase':10s}" + "".join(f"{n:>12s}" for n in trees)
    print(header + ("   symjit/ref (paired)" if args.ref else ""))
    for i, phase in enumerate(PHASES):
        row = f"  {phase:10s}" + "".join(f"{statistics.median(v[i] for v in results[n]):12.1f}" for n in trees)
        if args.ref:
            ratios = [a[i] / b[i] for a, b in zip(results["symjit"], results["ref"]) if b[i] > 0]
            row += f"   {statistics.median(ratios):.3f}" if ratios else "   -"
        print(row)


if __name__ == "__main__":
    main()
