"""Compile time and code memory of hybridized blocks fed new input shapes.

  * relu chains: a HybridSequential of N `Activation('relu')` compiled for a second input
    shape (each relu reads its input several times, so fused expressions share subtrees;
    the compile time must grow linearly, not exponentially). Target: 40 relus < 1 s.
  * code lifetime: a Dense-relu-Dense block run at 200 input shapes, then dropped: live JIT
    engines while alive (at most `CachedOp.max_signatures` plus the fast-path plans) and
    after the drop (target: 0), and resident memory growth of a second, disk-cached round
    (target: near 0; a fresh LLVM compile leaks ~60 KB inside llvmlite's pass builder,
    which no load from the cache does).
Run: python benchmarks/bench_code_memory.py
"""
from __future__ import annotations

import gc
import os
import tempfile
import time


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def relu_chain(depth: int) -> float:
    import symjit as mx
    from symjit.gluon import nn
    net = nn.HybridSequential()
    for _ in range(depth):
        net.add(nn.Activation("relu"))
    net.initialize()
    net.hybridize()
    net(mx.nd.ones((2, 3))).asnumpy()
    t0 = time.perf_counter()
    net(mx.nd.ones((4, 5))).asnumpy()
    return time.perf_counter() - t0


def shapes_round(n: int) -> tuple[int, int]:
    """(live engines with the block alive, after dropping it)."""
    import symjit as mx
    from symjit.codegen.llvm.jit import live_engines
    from symjit.gluon import nn
    net = nn.HybridSequential(prefix="bench_")
    with net.name_scope():
        net.add(nn.Dense(16, activation="relu"), nn.Dense(4))
    net.initialize()
    net.hybridize()
    for rows in range(1, n + 1):
        net(mx.nd.ones((rows, 8))).asnumpy()
    gc.collect()
    alive = live_engines()
    del net
    gc.collect()
    return alive, live_engines()


def main() -> None:
    os.environ.setdefault("SYMJIT_CACHE_DIR", tempfile.mkdtemp(prefix="symjit-bench-"))
    print("== relu chain: compile time for a second input shape")
    for depth in (10, 14, 20, 40):
        t = relu_chain(depth)
        print(f"  {depth:3d} relus   {t * 1e3:8.1f} ms")
    print(f"  target: 40 relus < 1 s -> {'met' if t < 1.0 else 'MISSED'}")
    print("== Dense block at 200 input shapes")
    r0 = _rss()
    t0 = time.perf_counter()
    alive, dropped = shapes_round(200)
    print(f"  first round (LLVM)       {time.perf_counter() - t0:6.1f} s   engines alive {alive}, "
          f"after drop {dropped}, RSS +{(_rss() - r0) / 1e6:.1f} MB")
    r1 = _rss()
    t0 = time.perf_counter()
    alive, dropped = shapes_round(200)
    print(f"  second round (disk)      {time.perf_counter() - t0:6.1f} s   engines alive {alive}, "
          f"after drop {dropped}, RSS +{(_rss() - r1) / 1e6:.1f} MB")
    print(f"  target: 0 engines after drop -> {'met' if dropped == 0 else 'MISSED'}")


if __name__ == "__main__":
    main()
