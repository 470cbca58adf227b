"""Per layer kind, symjit against ONNX Runtime: where a model's time goes in each.

symjit: the compiled graph's own per-node profile (codegen/llvm/profile.py, via
model_bench_util.graph_profile), grouped by op and kernel / stride (convolutions, poolings) or op
name; ONNX Runtime: its profiler's node times (model_bench_util.ort_node_profile), grouped by op
type (and kernel / stride where the `onnx` package is importable to read the model's attributes).
Both at the same thread count; `--layers N` also lists each runtime's N slowest nodes. Node times
include each profiler's own cost (see ort_profiler_cost), so compare kinds, not sums, and run
on a quiet machine.

    python benchmarks/bench_layer_kinds.py --model inceptionv3 --models DIR [--batch 8] [--threads 2]
        [--calls 10] [--layers 0]
"""
from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

from model_bench_util import MODELS, describe, graph_profile, load_model_graph, ort_node_profile
from symjit import runtime


def symjit_kind(n) -> str:
    """'Convolution k(1, 7) s(1, 1)', 'Pool avg k(3, 3) s(1, 1)' or the op name of a graph node."""
    inner = n.attrs["inner"] if n.op.name == "_with_epilogue" else n.op.name
    attrs = n.attrs.get("inner_attrs", n.attrs.get("conv_attrs", n.attrs))
    if inner in ("Convolution", "_conv_blocked", "_conv_pool"):
        return f"{inner} k{tuple(attrs['kernel'])} s{tuple(attrs.get('stride') or (1, 1))}"
    if inner == "_pool_blocked":
        inner, attrs = "Pooling", n.attrs["pool_attrs"]
    if inner == "Pooling":
        return f"Pool {attrs['pool_type']} k{tuple(attrs['kernel'])} s{tuple(attrs.get('stride') or ())}"
    return inner


#: ONNX ops that ONNX Runtime folds or fuses into the convolution before them (its profiled node
#: then carries their name)
FUSED_INTO_CONV = ("BatchNormalization", "Relu", "Clip")


def onnx_kinds(path: Path) -> dict:
    """{ONNX node name: 'Conv k(1, 7) s(1, 1)'} for convolutions and poolings ({} without onnx)."""
    try:
        import onnx
    except ImportError:
        return {}
    kinds, by_output = {}, {}
    for nd in onnx.load(str(path)).graph.node:
        if nd.op_type in ("Conv", "AveragePool", "MaxPool"):
            a = {at.name: onnx.helper.get_attribute_value(at) for at in nd.attribute}
            kinds[nd.name] = f"{nd.op_type} k{tuple(a.get('kernel_shape', ()))} s{tuple(a.get('strides', ()))}"
            by_output[nd.output[0]] = kinds[nd.name]
        elif nd.op_type in FUSED_INTO_CONV and nd.input and nd.input[0] in by_output:
            kinds[nd.name] = by_output[nd.output[0]] = by_output[nd.input[0]]
    return kinds


def ort_kind(kinds: dict, op: str, name: str) -> str:
    """The kind of an ONNX Runtime profiled node: its own name's, or that of the node it was made
    from (its layout transformer appends '_nchwc'), else its op type."""
    return kinds.get(name, kinds.get(name.removesuffix("_nchwc"), op))


def print_grouped(title: str, rows) -> None:
    """rows: (kind, seconds); prints the sums per kind, largest first."""
    agg = defaultdict(lambda: [0.0, 0])
    for kind, t in rows:
        agg[kind][0] += t
        agg[kind][1] += 1
    print(f"{title}: sum {sum(t for _, t in rows) * 1e3:.2f} ms")
    for kind, (t, c) in sorted(agg.items(), key=lambda kv: -kv[1][0]):
        print(f"  {t * 1e3:9.3f} ms {c:4d}  {kind}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="inceptionv3")
    ap.add_argument("--models", type=Path, default=MODELS)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--layers", type=int, default=0, help="also list each runtime's N slowest nodes")
    args = ap.parse_args()
    runtime.set_num_threads(args.threads)
    _, arrays, x, opt = load_model_graph(args.model, args.batch, models=args.models)
    prof = graph_profile(opt, arrays, calls=args.calls)
    nodes = {n.name: n for n in opt.nodes}
    print_grouped(f"symjit {args.model} batch {args.batch}, {args.threads} thread(s), in graph",
                  [(symjit_kind(nodes[k]) if k in nodes else k, t) for k, t in prof.items()])
    for k, t in sorted(prof.items(), key=lambda kv: -kv[1])[:args.layers]:
        print(f"    {t * 1e3:8.3f}  {describe(nodes[k]) if k in nodes else k}")
    onnx_path = args.models / f"{args.model}.onnx"
    rows = ort_node_profile(onnx_path, args.threads, x, calls=args.calls)
    if not rows:
        print("onnxruntime not installed: pip install onnxruntime")
        return
    kinds = onnx_kinds(onnx_path)
    print_grouped("onnxruntime", [(ort_kind(kinds, op, name), t) for op, name, t in rows])
    for op, name, t in sorted(rows, key=lambda r: -r[2])[:args.layers]:
        print(f"    {t * 1e3:8.3f}  {ort_kind(kinds, op, name)}  {name}")


if __name__ == "__main__":
    main()
