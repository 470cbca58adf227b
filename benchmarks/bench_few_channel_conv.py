"""Few-input-channel convolutions (1-3 channels: a network's stem, alone or fused with max
pooling) of a model: the kernel library's default against each of its tuning overrides
`--against` (symjit_nn_tune "conv" values), paired in one process. `weight_rows`: the implicit
GEMM tiles read the weights by rows rather than by columns (implicit_weights_by_columns,
MM_TILE_KLOOP's constant offsets); `pool_rows_tmp`: a fused 2x2 stride-2 max pooling through
the general rows pass rather than conv_pool_rows_2w.

Every such node of the model's optimized graph is compiled alone (model_bench_util.single_node_graphs)
and called in alternating rounds under each setting; printed: the CPU time per call of this
thread (time.thread_time, minimum over rounds) for each, and the median of the per-round
ratios default / override.

    python benchmarks/bench_few_channel_conv.py [--model lenet] [--models DIR] [--batch 1 8] [--threads 1]
        [--against weight_rows pool_rows_tmp]
"""
from __future__ import annotations

import argparse
import ctypes
import statistics
import time
from pathlib import Path

from model_bench_util import MODELS, load_model_graph, single_node_graphs


def _tune_conv(value: int) -> None:
    from symjit.codegen.llvm.lower_gemm import TUNE_KEYS, kernel_library
    fn = kernel_library().symjit_nn_tune
    fn.argtypes = [ctypes.c_int64, ctypes.c_int64]
    fn.restype = ctypes.c_int64
    fn(TUNE_KEYS["conv"], value)


def _per_call(cg, arrays, calls: int) -> float:
    start = time.thread_time()
    for _ in range(calls):
        cg(arrays)
    return (time.thread_time() - start) / calls


def compare(model: str, models: Path, batch: int, rounds: int, calls: int, against: list) -> None:
    from symjit.codegen.llvm.lower_gemm import TUNE_CONV_VALUES
    settings = {"default": 0, **{name: TUNE_CONV_VALUES[name] for name in against}}
    _, _, _, opt = load_model_graph(model, batch, models=models)
    for n, cg, arrays in single_node_graphs(opt):
        if n.op.name not in ("Convolution", "_conv_pool") or n.inputs[0].type.shape[1] > 3:
            continue
        times = {label: [] for label in settings}
        try:
            for _ in range(rounds):
                for label, value in settings.items():
                    _tune_conv(value)
                    cg(arrays)
                    times[label].append(_per_call(cg, arrays, calls))
        finally:
            _tune_conv(0)
        line = f"{model} batch {batch} {n.op.name} {tuple(n.inputs[0].type.shape)}: " \
               f"default {min(times['default']) * 1e6:8.1f} us"
        for name in against:
            ratio = statistics.median(a / b for a, b in zip(times["default"], times[name]))
            line += f"; {name} {min(times[name]) * 1e6:8.1f} us, paired default/{name} {ratio:.3f}"
        print(line)


def main() -> None:
    from symjit import runtime
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", nargs="+", default=["lenet", "resnet18_v1"])
    ap.add_argument("--models", type=Path, default=MODELS)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--against", nargs="+", default=["weight_rows", "pool_rows_tmp"])
    args = ap.parse_args()
    runtime.set_num_threads(args.threads)
    for model in args.model:
        for batch in args.batch:
            calls = args.calls if batch == 1 or model == "lenet" else max(2, args.calls // 8)
            compare(model, args.models, batch, args.rounds, calls, args.against)


if __name__ == "__main__":
    main()
