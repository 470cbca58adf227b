"""Shape-generic elementwise nests against shape-specialised ones: run time per call and LLVM
compile time, paired in one process.

For per-channel scale-shift-relu (the BatchNorm+relu kernel of CNNs) and a residual add+relu
with a per-channel bias, over output shapes (N, C, plane) with planes from 8 to 12544
elements, both kernels are compiled from the same spec (the specialised one by raising
`elementwise.GENERIC_MIN_ROW`) and called on the same buffers over the whole range on one
thread, alternating in blocks; each figure is the median over blocks of the per-call time,
the ratio generic/specialised the median of paired block ratios. The compile columns: CPU
time of LLVM for a module of K shapes of one pattern (K specialised nests against one generic
nest + K callers).

With `--models DIR ...`: every model of those directories (bench_zoo.py's discovery) is
compiled twice in this process: with what saves code generation time (the shape-generic
kernels: elementwise nests and row copies; segments compiled unoptimized,
graph.SEGMENTS_UNOPTIMIZED) and without (`elementwise.GENERIC_MIN_ROW` raised, segments
optimized), and both run on the same input in alternating blocks (model_bench_util.blocked):
run time per call, the paired ratio generic/specialised, CPU per call, the LLVM CPU time of
each module and the largest difference between the two outputs.

    python benchmarks/bench_ew_generic.py [--repeats 15] [--modules 20]
    python benchmarks/bench_ew_generic.py --models DIR ... [--only NAME ...] [--batch 1 8] [--threads 1]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from symjit.codegen.llvm import ElementwiseSpec, compile_ir, compile_to_object, elementwise
from symjit.codegen.llvm.elementwise import ModuleBuilder, emit_elementwise
from symjit.codegen.llvm.jit import ElementwiseKernel
from symjit.ops import scalar as S

A, B, C = S.Input(0), S.Input(1), S.Input(2)
PATTERNS = {
    "scale_shift_relu": ((S.maximum(A * B + C, 0.0),), lambda shape: [shape, (1, shape[1], 1), (1, shape[1], 1)]),
    "add_bias_relu": ((S.maximum(A + B + C, 0.0),), lambda shape: [shape, shape, (1, shape[1], 1)]),
}
SHAPES = [(1, 64, 3136), (1, 128, 784), (8, 256, 196), (8, 512, 49), (8, 1024, 16), (8, 256, 8), (1, 32, 12544)]


def spec_of(pattern: str, shape) -> ElementwiseSpec:
    exprs, ins = PATTERNS[pattern]
    in_shapes = ins(shape)
    return ElementwiseSpec(exprs, ("float32",) * len(in_shapes), tuple(in_shapes), "float32", ("float32",), shape)


def build(specs, generic: bool, tag: str):
    saved = elementwise.GENERIC_MIN_ROW
    elementwise.GENERIC_MIN_ROW = saved if generic else 1 << 60
    try:
        mb = ModuleBuilder()
        names = [emit_elementwise(mb, s, f"sj_bench_{tag}_{i}") for i, s in enumerate(specs)]
        return mb.render(), names
    finally:
        elementwise.GENERIC_MIN_ROW = saved


def per_call(kernel, args, n, calls: int) -> float:
    t = time.perf_counter()
    for _ in range(calls):
        kernel.call_range(0, n, args)
    return (time.perf_counter() - t) / calls


def compile_model(d: Path, name: str, batch: int, generic: bool):
    """(compiled model, input) of a model directory's NAME, with or without generic kernels."""
    import symjit as mx
    from bench_zoo import _batch_input
    x = _batch_input(np.load(d / f"{name}-input.npy"), batch)
    from symjit.codegen.llvm import graph
    saved = elementwise.GENERIC_MIN_ROW, graph.SEGMENTS_UNOPTIMIZED
    elementwise.GENERIC_MIN_ROW = saved[0] if generic else 1 << 60
    graph.SEGMENTS_UNOPTIMIZED = generic
    try:
        model = mx.compile(mx.sym.load(str(d / f"{name}-symbol.json")), {"data": x.shape},
                           params=mx.nd.load(str(d / f"{name}-0000.params")))
    finally:
        elementwise.GENERIC_MIN_ROW, graph.SEGMENTS_UNOPTIMIZED = saved
    return model, x


def llvm_cpu(model) -> float:
    """CPU seconds LLVM takes for the model's module (best of two)."""
    best = float("inf")
    for _ in range(2):
        t = time.process_time()
        compile_to_object(model.compiled.module.ir)
        best = min(best, time.process_time() - t)
    return best


def bench_models(a) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_zoo import _models
    from model_bench_util import LAST_CPU, LAST_PAIRED, blocked
    from symjit import runtime
    runtime.set_num_threads(a.threads)
    print(f"threads {a.threads}; {'model':16s} batch  specialised ms  generic ms  gen/spec (paired)  cpu gen/spec"
          "  max |diff|  LLVM ms spec -> gen")
    ratios = []
    for d in a.models:
        for name in _models(d):
            if a.only and name not in a.only:
                continue
            for batch in a.batch:
                spec_model, x = compile_model(d, name, batch, False)
                gen_model, _ = compile_model(d, name, batch, True)
                diff = float(np.max(np.abs(gen_model(data=x)[0] - spec_model(data=x)[0])))
                t = blocked({"specialised": lambda: spec_model(data=x), "generic": lambda: gen_model(data=x)},
                            a.repeats, rounds=4)
                ratio = 1.0 / LAST_PAIRED["generic"]
                ratios.append(ratio)
                print(f"  {name:16s} {batch:5d}  {t['specialised'] * 1e3:14.2f}  {t['generic'] * 1e3:10.2f}  "
                      f"{ratio:17.3f}  {LAST_CPU['generic'] / LAST_CPU['specialised']:12.3f}  {diff:10.3g}  "
                      f"{llvm_cpu(spec_model) * 1e3:7.0f} -> {llvm_cpu(gen_model) * 1e3:.0f}")
    print(f"geomean generic/specialised: {float(np.exp(np.mean(np.log(ratios)))):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--modules", type=int, default=20, help="shapes per module in the compile columns")
    ap.add_argument("--models", type=Path, nargs="+", default=None)
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    if a.models:
        bench_models(a)
        return
    rng = np.random.default_rng(0)
    print(f"{'pattern':18s} {'shape':16s} {'specialised us':>15s} {'generic us':>11s} {'gen/spec':>9s}")
    ratios = []
    for pattern in PATTERNS:
        for shape in SHAPES:
            spec = spec_of(pattern, shape)
            arrays = [rng.standard_normal(s).astype(np.float32) for s in spec.in_shapes]
            out = np.empty(shape, np.float32)
            kernels, codes = {}, []
            for generic in (False, True):
                text, names = build([spec], generic, f"{pattern}_{generic}")
                code = compile_ir(text, names)
                codes.append(code)
                kernels[generic] = ElementwiseKernel(code.addresses[names[0]], spec.in_dtypes, spec.in_shapes,
                                                     spec.out_dtypes, spec.out_shape, name=names[0])
            n = out.size
            calls = max(3, int(2e6 // n))
            times = {False: [], True: []}
            pair = []
            for r in range(a.repeats):
                order = (False, True) if r % 2 == 0 else (True, False)
                got = {}
                for g in order:
                    args = kernels[g].pack_args(arrays, [out])
                    got[g] = per_call(kernels[g], args, n, calls)
                    times[g].append(got[g])
                pair.append(got[True] / got[False])
            ratio = float(np.median(pair))
            ratios.append(ratio)
            print(f"{pattern:18s} {str(shape):16s} {np.median(times[False]) * 1e6:15.2f} "
                  f"{np.median(times[True]) * 1e6:11.2f} {ratio:9.3f}")
    print(f"geomean generic/specialised run time: {float(np.exp(np.mean(np.log(ratios)))):.3f}")
    specs = [spec_of("scale_shift_relu", (1, 16 * (i + 1), 3136 // (1 + i % 4))) for i in range(a.modules)]
    for generic in (False, True):
        text, _ = build(specs, generic, f"compile_{generic}")
        best = float("inf")
        for _ in range(2):
            t = time.process_time()
            compile_to_object(text)
            best = min(best, time.process_time() - t)
        print(f"LLVM CPU for {a.modules} shapes, {'generic' if generic else 'specialised'}: {best * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
