"""Convolution layer kinds against ONNX Runtime: chains of identical convolution + relu layers,
the same random weights in both, each chain compiled by `symjit.compile` and run by ONNX Runtime
in one process, in alternating blocks (model_bench_util.blocked: medians, paired ratios).

A chain of `--layers` equal layers (default 4) keeps each layer's input and weights where a
network would have them (the previous layer's output, weights streamed per call) and makes the
layout conversions at its ends a small share; the kinds cover the shapes of the zoo's networks:
pointwise 1x1 (MobileNet, DenseNet), 3x3 on small and large planes (ResNet, Inception, DenseNet),
1x7 / 7x1 (Inception's 17x17 stage), batch 1 and 8. Prints per chain both runtimes' medians,
GFLOP/s and the paired ratio symjit / ONNX Runtime, and the largest relative difference of the
outputs. The ONNX models are built with the `onnx` package (e.g. in a virtual environment
that has it and onnxruntime: `PYTHONPATH=. /path/to/venv/bin/python benchmarks/...`); without
it, or without onnxruntime, only symjit's times are printed.

    python benchmarks/bench_conv_chains.py [--threads 2] [--repeats 30] [--layers 4] [--only pw512_14_b8 ...]

Findings (2026-12-07, a 2-vCPU Xeon VM (family 6 model 207), ONNX Runtime 1.32, 2 threads,
two runs): symjit / ONNX Runtime 1.04-1.16 on the pointwise chains at 7x7-14x14 (0.98-1.01 at
56x56), 1.26 on 3x3 at 448 channels on 8x8, 0.77-0.89 on 3x3 at 56x56-14x14 (Winograd),
0.71-0.83 on 3x3 batch 8, 0.76-1.02 on 1x7 and 1.14-1.27 on 7x1 at 17x17. One thread: the
pointwise chains 0.98-1.03, 3x3 at 448 channels 1.14, 7x1 1.22.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

#: name: (batch, channels, filters, height, width, kernel, stride, pad)
CHAINS = {
    "pw512_14_b8": (8, 512, 512, 14, 14, (1, 1), 1, (0, 0)),
    "pw1024_7_b8": (8, 1024, 1024, 7, 7, (1, 1), 1, (0, 0)),
    "pw128_56_b8": (8, 128, 128, 56, 56, (1, 1), 1, (0, 0)),
    "pw512_14_b1": (1, 512, 512, 14, 14, (1, 1), 1, (0, 0)),
    "c3_448_8_b1": (1, 448, 448, 8, 8, (3, 3), 1, (1, 1)),
    "c3_256_14_b1": (1, 256, 256, 14, 14, (3, 3), 1, (1, 1)),
    "c3_64_56_b1": (1, 64, 64, 56, 56, (3, 3), 1, (1, 1)),
    "c3_128_28_b8": (8, 128, 128, 28, 28, (3, 3), 1, (1, 1)),
    "c1x7_192_17_b1": (1, 192, 192, 17, 17, (1, 7), 1, (0, 3)),
    "c7x1_192_17_b1": (1, 192, 192, 17, 17, (7, 1), 1, (3, 0)),
}


def chain_weights(spec, layers: int) -> dict:
    """He-scaled random weights and small biases of a chain, reproducible per chain."""
    n, c, f, h, w, k, s, p = spec
    rng = np.random.default_rng(c * 1000 + f + k[0] * 10 + k[1])
    ws, ch = {}, c
    for i in range(layers):
        ws[f"w{i}"] = (rng.standard_normal((f, ch) + k) * np.sqrt(2.0 / (ch * k[0] * k[1]))).astype(np.float32)
        ws[f"b{i}"] = (rng.standard_normal(f) * 0.1).astype(np.float32)
        ch = f
    return ws


def out_planes(spec, layers: int) -> list[tuple[int, int]]:
    """Each layer's output plane (height, width)."""
    n, c, f, h, w, k, s, p = spec
    planes = []
    for _ in range(layers):
        h, w = (h + 2 * p[0] - k[0]) // s + 1, (w + 2 * p[1] - k[1]) // s + 1
        planes.append((h, w))
    return planes


def chain_flops(spec, layers: int) -> float:
    n, c, f, h, w, k, s, p = spec
    return sum(2.0 * n * oh * ow * f * (c if i == 0 else f) * k[0] * k[1]
               for i, (oh, ow) in enumerate(out_planes(spec, layers)))


def symjit_chain(spec, ws: dict, layers: int):
    import symjit as mx
    n, c, f, h, w, k, s, p = spec
    y = mx.sym.var("x")
    for i in range(layers):
        y = mx.sym.relu(mx.sym.Convolution(y, mx.sym.var(f"w{i}"), mx.sym.var(f"b{i}"), kernel=k, stride=(s, s),
                                           pad=p, num_filter=f))
    return mx.compile(y, shapes={"x": (n, c, h, w)}, params={key: mx.nd.array(v) for key, v in ws.items()})


def onnx_chain(spec, ws: dict, layers: int, path: str) -> bool:
    """Write the chain as an ONNX model (opset 13); False without the `onnx` package."""
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return False
    n, c, f, h, w, k, s, p = spec
    nodes, inits, cur = [], [], "x"
    for i in range(layers):
        inits += [numpy_helper.from_array(ws[f"w{i}"], f"w{i}"), numpy_helper.from_array(ws[f"b{i}"], f"b{i}")]
        nodes += [helper.make_node("Conv", [cur, f"w{i}", f"b{i}"], [f"c{i}"], kernel_shape=list(k), strides=[s, s],
                                   pads=[p[0], p[1], p[0], p[1]]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        cur = f"r{i}"
    oh, ow = out_planes(spec, layers)[-1]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, w])],
                              [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [n, f, oh, ow])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--only", nargs="+", choices=sorted(CHAINS))
    args = ap.parse_args()
    from model_bench_util import blocked, paired_ratio, ort_session
    from symjit import runtime
    runtime.set_num_threads(args.threads)
    print(f"chains of {args.layers} convolution + relu layers, {args.threads} thread(s); ms median, GFLOP/s, "
          "paired symjit / ONNX Runtime")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.only or CHAINS:
            spec = CHAINS[name]
            ws = chain_weights(spec, args.layers)
            model = symjit_chain(spec, ws, args.layers)
            x = np.random.default_rng(1).standard_normal(spec[:2] + spec[3:5]).astype(np.float32)
            cands = {"symjit": lambda: model(x=x)}
            path = os.path.join(tmp, f"{name}.onnx")
            sess = ort_session(path, args.threads) if onnx_chain(spec, ws, args.layers, path) else None
            diff = ""
            if sess is not None:
                cands["onnxruntime"] = lambda: sess.run(None, {"x": x})
                ys, yo = np.asarray(model(x=x)[0]), sess.run(None, {"x": x})[0]
                diff = f"  max diff {np.abs(ys - yo).max() / np.abs(yo).max():.1e}"
            med = blocked(cands, args.repeats, rounds=max(2, args.repeats // 5))
            flops = chain_flops(spec, args.layers)
            line = f"  {name:16s} symjit {med['symjit'] * 1e3:8.3f} ms ({flops / med['symjit'] / 1e9:4.0f} GF/s)"
            if sess is not None:
                line += (f"  onnxruntime {med['onnxruntime'] * 1e3:8.3f} ms ({flops / med['onnxruntime'] / 1e9:4.0f} GF/s)"
                         f"  symjit/onnxruntime {paired_ratio('symjit', 'onnxruntime'):.2f}{diff}")
            print(line, flush=True)


if __name__ == "__main__":
    main()
