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

    python benchmarks/bench_ew_generic.py [--repeats 15] [--modules 20]
"""
from __future__ import annotations

import argparse
import time

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--modules", type=int, default=20, help="shapes per module in the compile columns")
    a = ap.parse_args()
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
