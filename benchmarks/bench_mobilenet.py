"""mobilenet1.0 inference (224x224, batch 1) compiled by symjit vs ONNX Runtime.

The model and its parameters come from /work/shared/models (exported by MXNet); ONNX Runtime
runs the same model's .onnx with the same number of intra-op threads. Prints medians over
alternating blocks of 5 calls (each block after a pause, so neither runtime's spinning worker
threads slow the other; model_bench_util.blocked), GFLOP/s, the fraction of the measured FP32
peak, the ratio (of the medians, and the median of the rounds' paired ratios), and with
--profile the slowest layers (each compiled alone, constant weights kept constant;
`--profile all`: every layer in graph order).

    python benchmarks/bench_mobilenet.py [--batch 1] [--threads N] [--repeats R] [--profile [all]]
        [--model NAME --models DIR]   (another model, e.g. of export_zoo.py's directory)
"""
from __future__ import annotations

import argparse

from pathlib import Path

from model_bench_util import MODELS, compare_with_ort


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[1])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--profile", nargs="?", const="top", choices=("top", "all"),
                    help="per-layer profile: the 15 slowest layers (default) or all, in graph order")
    ap.add_argument("--model", default="mobilenet1.0")
    ap.add_argument("--models", type=Path, default=MODELS, help="directory of NAME-symbol.json, NAME.onnx, ...")
    a = ap.parse_args()
    for b in a.batch:
        compare_with_ort(a.model, b, a.threads, a.repeats, a.profile, models=a.models)


if __name__ == "__main__":
    main()
