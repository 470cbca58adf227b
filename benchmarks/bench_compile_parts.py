"""Paired, in-process figures for the parts of the first call (compile pipeline), robust to a
loaded machine: every pair runs in ONE process on the same input, alternating, and each figure
is the MINIMUM process CPU time over the repeats (other load can only raise it).

Per model (`--models NAME ...`, found in `--dirs`; batch 1):
  * codegen  the model's LLVM module compiled to an object with symjit's code generator options
             (target.CODEGEN_OPTIONS: loop strength reduction off) and with LLVM's defaults,
             CPU each; whether the two objects compute bit-identical outputs; and their run
             time (median over alternating blocks of calls, `--threads` threads)
  * gc       the inference pass pipeline with the cyclic collector paused (as `PassManager.run`
             does) and on
  * --ref TREE: the same process also imports the other tree's `fold_constants`, `fusion` and
             NDArray file loader (`symjit/passes/fold_constants.py`, `fusion.py`,
             `symjit/ndarray/serialization.py`) and times them against this tree's on the same
             graph / file

    python benchmarks/bench_compile_parts.py [--models resnet18_v1 densenet121 ...] [--ref TREE]
        [--repeats 3] [--threads 1]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

import numpy as np


def min_cpu(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def _module_from(tree: str, dotted: str):
    """Module `dotted` (e.g. symjit.passes.fusion) of another tree, loaded as a sibling of this
    tree's package (its relative imports resolve to this tree's modules)."""
    path = Path(tree, *dotted.split(".")).with_suffix(".py")
    spec = importlib.util.spec_from_file_location(dotted + "_ref", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def codegen_pair(mx, module, cg, inputs, repeats: int) -> str:
    """Object with symjit's codegen options vs LLVM defaults: CPU, identity, run time."""
    from symjit.codegen.llvm import executable as E
    from symjit.codegen.llvm import jit
    from symjit.codegen.llvm import target as T
    ours = min_cpu(lambda: jit.compile_to_object(module.ir), repeats)
    saved = T.CODEGEN_OPTIONS
    T.CODEGEN_OPTIONS = ()
    try:
        default = min_cpu(lambda: jit.compile_to_object(module.ir), repeats)
        obj = jit.compile_to_object(module.ir)
    finally:
        T.CODEGEN_OPTIONS = saved
    # the defaults' object in an engine of its own (same symbols as the live one)
    code = jit.CompiledCode(obj, jit._Engine(obj), module.segment_names)
    other = E.CompiledGraph(cg.graph, module, code, cg.stats, "llvm-defaults")
    a, b = cg(inputs)[0], other(inputs)[0]
    same = a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))
    ratios = []
    for _ in range(7):
        ta = min_block(lambda: cg(inputs))
        tb = min_block(lambda: other(inputs))
        ratios.append(ta / tb)
    return (f"codegen cpu {ours * 1e3:7.1f} ms (LLVM defaults {default * 1e3:7.1f}, ratio {ours / default:4.2f}); "
            f"outputs {'bit-identical' if same else 'DIFFER'}; run time ours/defaults {np.median(ratios):4.2f}")


def min_block(fn, n: int = 5) -> float:
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


def main(argv=None) -> int:
    here = Path(__file__).resolve()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["resnet18_v1", "mobilenet1.0", "inceptionv3", "densenet121"])
    ap.add_argument("--dirs", nargs="+", default=[str(here.parents[2] / "shared" / "models"), "/tmp/hybinfer-zoo"])
    ap.add_argument("--ref", default=None)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    os.environ["SYMJIT_CACHE"] = "0"
    import symjit as mx
    from symjit import compiler, runtime
    from symjit.codegen.llvm.executable import compile_planned
    from symjit.codegen.llvm.graph import lower_graph
    from symjit.passes import fold_constants as fold_mod
    from symjit.passes import fusion as fusion_mod
    from symjit.passes.dce import eliminate_dead_code
    from symjit.passes.manager import PassManager
    from symjit.ndarray import serialization
    runtime.set_num_threads(a.threads)
    ref = {}
    if a.ref:
        ref = {k: _module_from(a.ref, f"symjit.{k}") for k in
               ("passes.fold_constants", "passes.fusion", "ndarray.serialization")}
    print(f"minimum CPU over {a.repeats} repeats, one process; load average "
          f"{' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    for name in a.models:
        d = next((x for x in a.dirs if Path(x, f"{name}-symbol.json").exists()), None)
        if d is None:
            print(f"{name}: not found in {a.dirs}")
            continue
        x = np.load(Path(d, f"{name}-input.npy"))
        params_file = str(Path(d, f"{name}-0000.params"))
        g, _ = compiler._to_graph(mx.sym.load(str(Path(d, f"{name}-symbol.json"))), {"data": x.shape}, None)
        consts = compiler._bound_constants(g, {}, mx.nd.load(params_file))
        target = compiler.llvm_target(None)
        pm = PassManager("inference", target=target)
        opt = pm.run(g, consts)
        cg = compile_planned(opt, name)
        module = lower_graph(opt, name)
        feed = [x if n == "data" else consts[n] for n, _, _ in cg.input_specs]
        print(f"== {name}")
        print("  " + codegen_pair(mx, module, cg, feed, a.repeats), flush=True)
        paused = min_cpu(lambda: pm.run(g, consts), a.repeats)
        on = min_cpu(lambda: pm._run(g, consts), a.repeats)
        print(f"  pass pipeline cpu: collector paused {paused * 1e3:7.1f} ms, on {on * 1e3:7.1f} ms, "
              f"ratio {paused / on:4.2f}", flush=True)
        if not ref:
            continue
        early = PassManager("inference", target=target, disabled={n for n, _ in pm.passes if n not in (
            "infer", "inference_rewrites", "simplify")})
        pre = early.run(g, consts)
        folded, _ = eliminate_dead_code(fold_mod.fold_constants(pre)[0])
        pairs = {
            "fold_constants": (lambda: fold_mod.fold_constants(pre), lambda: ref["passes.fold_constants"].fold_constants(pre)),
            "fusion": (lambda: fusion_mod.fuse(folded), lambda: ref["passes.fusion"].fuse(folded)),
            "nd.load": (lambda: serialization.load(params_file), lambda: ref["ndarray.serialization"].load(params_file)),
        }
        for what, (ours, theirs) in pairs.items():
            t_ours, t_ref = min_cpu(ours, a.repeats), min_cpu(theirs, a.repeats)
            print(f"  {what:15s} cpu this {t_ours * 1e3:7.1f} ms, ref {t_ref * 1e3:7.1f} ms, this/ref {t_ours / t_ref:4.2f}",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
