"""Software prefetching in the kernel library, measured on whole networks:

* weights (nnkernels.c mm_run, `panels_outer`): in the filter-vector convolutions each packed
  weight panel is streamed once per call, and at batch 1 the deep layers' weights (resnet18's
  512-channel 3x3, mobilenet's 1024-channel 1x1) come from memory on every call. Row tile i of
  a block (a panel's K block) prefetches the i-th part of the next block, so it streams in while
  the current one is computed from L1/L2: the next panel, or after a K block's last panel the
  next K block's first (`--what kblock` switches only that second case off).
* planes (nnkernels.c prefetch_plane_rows): the implicit-GEMM, Winograd and filter-vector
  convolutions copy a block of rows of every input channel into phase planes; each channel's
  rows are a short run of their own that the hardware prefetchers meet cold, so each copy
  prefetches the next channel's rows first.
* rows (nnkernels.c mm_run, A by rows): the GEMMs whose rows are weights read row by row (the
  Winograd layers' U, implicit-GEMM convolutions) start each row tile with R cold streams; the
  first tile of a row pass prefetches the next row tile's rows.
* depthwise (nnkernels.c dw3x3_rows_core): the 3x3 depthwise row kernel reads 10 (stride 1) or
  17 (stride 2) input rows column vector by column vector, more streams than the hardware
  prefetchers follow, and inside a network its input has left the caches; each group of output
  rows prefetches the rows the next group adds.
* dwout (the same kernel): and prefetches for writing the rows the next group stores: inside a
  network the arena's lines were last written in the previous call and have left the caches
  since (the weights stream through them), so every first store of a line waits for memory.
* gemmout, winoout (nnkernels.c mm_run `pfw`, wnat_output): the same for the GEMM tiles that
  store to the arena (implicit-GEMM and 1x1 convolutions: the tile two panels on) and for the
  Winograd output transform (the next 16 tiles).

Compiles the model once with in-graph profiling and alternates, in the same process, the
library's default (prefetch) with the override that disables the chosen prefetch
(symjit_nn_tune TUNE_PREFETCH with the value nnkernels.h names for it, lower_gemm.TUNE_PREFETCH_VALUES:
weights, dw_rows, kblock, planes, a_rows, and dw_out, gemm_out, wino_out, blocked_out for the
output rows); prints the
whole-call medians and every convolution whose in-graph time
differs by more than 5%.

    python benchmarks/bench_weight_prefetch.py [--model resnet18_v1 mobilenet1.0] [--threads 2] [--batch 1]
                                               [--what weights|depthwise|kblock|planes|rows|dwout|gemmout|winoout|blockedout]
"""
from __future__ import annotations

import argparse
import ctypes

from model_bench_util import describe, load_model_graph, profiled_rounds

#: the symjit_nn_tune value (runtime/nnkernels.h enum symjit_tune_prefetch) that disables each prefetch
NO_PREFETCH = {"weights": "weights", "depthwise": "dw_rows", "kblock": "kblock", "planes": "planes",
               "rows": "a_rows", "dwout": "dw_out", "gemmout": "gemm_out", "winoout": "wino_out",
               "blockedout": "blocked_out"}


def compare(name: str, threads: int, what: str = "weights", batch: int = 1, rounds: int = 8) -> None:
    from symjit import runtime
    from symjit.codegen.llvm import lower_gemm
    from symjit.codegen.llvm.executable import compile_planned
    runtime.set_num_threads(threads)
    tune = lower_gemm.kernel_library().symjit_nn_tune
    tune.restype = ctypes.c_int64
    tune.argtypes = [ctypes.c_int64, ctypes.c_int64]
    _, arrays, _, opt = load_model_graph(name, batch)
    calls = 10 if batch == 1 else 3
    cg = compile_planned(opt, "prefetch_ab", profile=True)
    nodes = {n.name: n for n in opt.nodes}
    prefetch_key = lower_gemm.TUNE_KEYS["prefetch"]
    off = lower_gemm.TUNE_PREFETCH_VALUES[NO_PREFETCH[what]]
    try:
        res = profiled_rounds({mode: (lambda mode=mode: tune(prefetch_key, mode), cg, arrays) for mode in (0, off)},
                              rounds, calls)
    finally:
        tune(prefetch_key, 0)
    a, b = res.median(0), res.median(off)
    print(f"{name} batch {batch}, threads {threads}, {what} prefetch: whole call {a * 1e3:.2f} ms with prefetch, {b * 1e3:.2f} ms "
          f"without (x{a / b:.3f}; paired per round x{res.paired(0, off):.3f})")
    for node in res.per[0]:
        n = nodes.get(node)
        with_pf, without = res.node(0, node), res.node(off, node)
        if n is not None and "Conv" in describe(n) and without > 5e-5 and abs(with_pf - without) > 0.05 * without:
            print(f"  {describe(n):42s} {with_pf * 1e3:7.3f} ms with, {without * 1e3:7.3f} ms without "
                  f"(x{with_pf / without:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", nargs="+", default=["resnet18_v1", "mobilenet1.0"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--what", choices=sorted(NO_PREFETCH), default="weights")
    args = ap.parse_args()
    for name in args.model:
        compare(name, args.threads, args.what, args.batch)


if __name__ == "__main__":
    main()
