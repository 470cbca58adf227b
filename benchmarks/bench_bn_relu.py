"""BatchNorm + relu fusion in training graphs (passes/norm_relu.py): the joint training graph of
x -> BatchNorm -> relu -> 2x2 max pooling (forward and backward: BatchNorm, relu, pooling, their
gradients, the moving-average update) compiled with the pass and without it (`bn_relu`
disabled), run alternately in one process; prints each variant's best CPU time per call and
the paired ratio fused / unfused per shape.

    python benchmarks/bench_bn_relu.py [--threads 1] [--rounds 15] [--shapes 64,32,32,32 64,64,16,16]

Findings (2026-12, the 2-core AMD Zen 5 development machine shared with other work, load
average ~6, 1 thread): the CIFAR-size CNN's two stages, (64, 32, 32, 32) 7.43 against 9.15 ms
(0.81) and (64, 64, 16, 16) 2.66 against 2.96 ms (0.90); a second run (load 4.9) 6.76 against
10.01 (0.675) and 2.12 against 2.52 (0.84): one pass over the activation fewer
each way (relu applied in BatchNorm's stores, relu's gradient mask in its backward's loads).
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from symjit import runtime
from symjit.codegen.llvm.executable import compile_planned
from symjit.ir import GraphBuilder, TensorType
from symjit.passes.manager import compile_graph
from symjit.passes.training_graph import build_training_graph


def bn_relu_pool_training_graph(shape: tuple):
    """The joint training graph (gradients of data, gamma, beta) of BatchNorm -> relu -> pooling."""
    b = GraphBuilder(name="bench_bn_relu")
    c = shape[1]
    x = b.add_input("x", TensorType(shape, "float32"))
    vecs = [b.add_input(n, TensorType((c,), "float32"), aux=n.startswith("moving"))
            for n in ("gamma", "beta", "moving_mean", "moving_var")]
    y = b.add_node("BatchNorm", [x, *vecs], {"fix_gamma": False, "eps": 1e-5})[0]
    r = b.add_node("relu", [y])[0]
    out = b.add_node("Pooling", [r], {"kernel": (2, 2), "stride": (2, 2), "pool_type": "max"})[0]
    g, _ = build_training_graph(b.build([out]), wrt=["x", "gamma", "beta"])
    return g


def measure(shape: tuple, rounds: int) -> dict:
    g = bn_relu_pool_training_graph(shape)
    rng = np.random.default_rng(0)
    feeds = {v.name: (np.abs(rng.standard_normal(v.type.shape)) + 0.5 if v.name == "moving_var"
                      else rng.standard_normal(v.type.shape)).astype("float32") for v in g.inputs}
    variants = {}
    for label, disabled in (("fused", set()), ("unfused", {"bn_relu"})):
        opt, _ = compile_graph(g, "training", disabled=disabled)
        cg = compile_planned(opt, f"{g.name}_{label}", True)
        variants[label] = (cg, [np.ascontiguousarray(feeds[v.name]) for v in opt.inputs])
    best = {k: float("inf") for k in variants}
    for r in range(rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for k in order:
            cg, arrays = variants[k]
            t = time.process_time()
            for _ in range(5):
                cg.run(arrays, is_train=True)
            best[k] = min(best[k], (time.process_time() - t) / 5)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--shapes", nargs="+", default=["64,32,32,32", "64,64,16,16"])
    args = ap.parse_args()
    runtime.set_num_threads(args.threads)
    print(f"threads {args.threads}, load average {os.getloadavg()[0]:.2f}; best CPU ms per call")
    for s in args.shapes:
        shape = tuple(int(d) for d in s.split(","))
        best = measure(shape, args.rounds)
        print(f"  {shape}: fused {best['fused'] * 1e3:.2f}  unfused {best['unfused'] * 1e3:.2f}  "
              f"fused/unfused {best['fused'] / best['unfused']:.3f}")


if __name__ == "__main__":
    main()
