"""Compile time of the `ew` graph (relu(a*b + c) * sigmoid(a) - tanh(c), 4*2**20 float32):
cold (empty disk cache) and warm (a second process finding the object in the disk cache).
Each measurement runs in a fresh process and times bind + the first forward (pass pipeline,
lowering, LLVM or cache load, entry creation). Target: warm-cache compile <= 0.1 s.
Run: python benchmarks/bench_compile.py

`--models NAME ...` (with `--dirs DIR ...`, `--ref TREE`, `--repeats N`, `--batch B`): the compile
time of whole models instead, `symjit.compile` with every cache off (no disk cache, the
in-memory object cache emptied), repeated N times in one process per tree after a warm-up
compile; per stage (passes, lowering, LLVM, total; weight packing overlaps LLVM) the MINIMUM over the
repeats of process CPU and wall time, which other load on the machine can only raise. Trees
alternate process by process; `--ref` prints this tree's / the other tree's minima.
"""
from __future__ import annotations

import json
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
    out = subprocess.run([sys.executable, "-P", "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    t, where, llvm_s, t_import = out.stdout.split()
    return float(t), where, float(llvm_s), float(t_import)


MODEL_CHILD = r"""
import json, sys, time
import numpy as np
import symjit as mx
from symjit import compiler
from symjit.codegen.llvm import executable
d, name, batch, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
x = np.load(f"{d}/{name}-input.npy")
x = np.ascontiguousarray(np.concatenate([x] * -(-batch // x.shape[0]))[:batch])
sym, params = mx.sym.load(f"{d}/{name}-symbol.json"), mx.nd.load(f"{d}/{name}-0000.params")
best = {}
for r in range(repeats + 1):
    executable._MEMORY.clear()
    t = {"start": (time.perf_counter(), time.process_time())}
    m = mx.compile(sym, shapes={"data": x.shape}, params=params)
    t["total"] = (time.perf_counter(), time.process_time())
    m(data=x)
    st = m.compiled.stats
    if r == 0:
        continue   # warm-up: imports and one-time set-up
    wall = t["total"][0] - t["start"][0]
    cpu = t["total"][1] - t["start"][1]
    passes = sum(p.seconds for p in m.manager.records)
    for k, v in {"total wall": wall, "total cpu": cpu, "passes wall": passes, "lower wall": st.lower_s,
                 "llvm wall": st.llvm_s + st.load_s}.items():
        best[k] = min(best.get(k, v), v)
print(json.dumps(best))
"""


def model_times(tree: str, d: str, name: str, batch: int, repeats: int) -> dict:
    env = dict(os.environ, PYTHONPATH=tree, SYMJIT_CACHE="0")
    out = subprocess.run([sys.executable, "-c", MODEL_CHILD, d, name, str(batch), str(repeats)], env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main_models(a) -> None:
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"this": here} | ({"ref": a.ref} if a.ref else {})
    print(f"compile time per model, minimum of {a.repeats} in-process repeats (caches off), batch {a.batch}; "
          f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    for name in a.models:
        d = next((x for x in a.dirs if os.path.exists(os.path.join(x, f"{name}-symbol.json"))), None)
        if d is None:
            print(f"{name}: not found in {a.dirs}")
            continue
        res = {k: model_times(t, d, name, a.batch, a.repeats) for k, t in trees.items()}
        for stage in res["this"]:
            line = f"  {name:16s} {stage:15s} " + "  ".join(f"{k} {v[stage] * 1e3:8.1f} ms" for k, v in res.items())
            if "ref" in res:
                line += f"   this/ref {res['this'][stage] / res['ref'][stage]:5.2f}"
            print(line, flush=True)


def main() -> None:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=None)
    ap.add_argument("--dirs", nargs="+", default=[os.path.join(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))), "shared", "models"), "/tmp/hybinfer-zoo"])
    ap.add_argument("--ref", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=1)
    a = ap.parse_args()
    if a.models:
        main_models(a)
        return
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
