"""MLP inference at batch 64: 784 -> Dense 512 relu -> Dense 512 relu -> Dense 10.

Runs the network through symjit.gluon (HybridSequential, hybridized: one compiled native call,
the dense layers' relu fused as GEMM epilogues) and compares, in the same run, with ONNX Runtime
(the same weights as an ONNX graph of Gemm + Relu, built with the `onnx` package; same intra-op
threads; its weights are initializers, which it may pre-pack, while symjit's are parameters
read on every call, as in a Gluon net) and numpy (x @ W.T + b, numpy's bundled OpenBLAS with 1
thread and with its default threads), and times the `tiny` network (16 -> relu -> 16 at batch
1) through Executor.forward. Prints medians, ratios, GFLOP/s and the fraction of this machine's
FP32 peak. Runtimes whose worker threads spin after a call (ONNX Runtime, OpenBLAS) are timed in
blocks, not interleaved (model_bench_util.blocked).

    python benchmarks/bench_mlp64.py [--repeats R] [--threads N]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from model_bench_util import LAST_CPU, blocked, numpy_blas_threads, peak_gflops, race

import symjit as mx
from symjit import runtime


def gluon_mlp(batch: int):
    from symjit.gluon import nn
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Dense(512, activation="relu"), nn.Dense(512, activation="relu"), nn.Dense(10))
    net.initialize(mx.init.Xavier())
    net.hybridize()
    x = mx.nd.array(np.random.default_rng(0).standard_normal((batch, 784)).astype(np.float32))
    net(x).wait_to_read()
    params = [p.data().asnumpy() for p in net.collect_params().values()]
    return (lambda: net(x).wait_to_read()), x.asnumpy(), params, net


def ort_mlp(params, batch: int, threads: int):
    """ONNX Runtime session of the same MLP (Gemm transB=1 + Relu), or None without onnx/onnxruntime."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    nodes, inits, x = [], [], "x"
    for i in range(0, len(params), 2):
        w, b = params[i], params[i + 1]
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [f"g{i}"], transB=1))
        x = f"g{i}"
        if i + 2 < len(params):
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"]))
            x = f"r{i}"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 784])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [batch, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def tiny_executor():
    x = mx.sym.var("data")
    y = mx.sym.FullyConnected(mx.sym.relu(mx.sym.FullyConnected(x, num_hidden=16, name="fc1")), num_hidden=16,
                              name="fc2")
    rng = np.random.default_rng(0)
    args = {"data": mx.nd.array(rng.standard_normal((1, 16))),
            "fc1_weight": mx.nd.array(rng.standard_normal((16, 16))), "fc1_bias": mx.nd.zeros((16,)),
            "fc2_weight": mx.nd.array(rng.standard_normal((16, 16))), "fc2_bias": mx.nd.zeros((16,))}
    ex = y.bind(mx.cpu(), args)
    ex.forward(is_train=False)
    return ex


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=60)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    if a.threads:
        runtime.set_num_threads(a.threads)
    threads = runtime.num_threads()
    run_symjit, x, params, net = gluon_mlp(64)
    w1, b1, w2, b2, w3, b3 = params

    def numpy_mlp():
        h = np.maximum(x @ w1.T + b1, 0)
        h = np.maximum(h @ w2.T + b2, 0)
        return h @ w3.T + b3

    got = net(mx.nd.array(x)).asnumpy()
    err = np.abs(got - numpy_mlp()).max() / np.abs(numpy_mlp()).max()
    # numpy's BLAS threads keep spinning after a call and would slow whatever runs next, so
    # numpy with its default threads runs last, on its own; ONNX Runtime's pool spins too, so
    # it and symjit run in blocks
    numpy_blas_threads(1)
    sess = ort_mlp(params, 64, threads)
    cands = {"symjit": run_symjit}
    if sess is not None:
        xin = np.ascontiguousarray(x, dtype=np.float32)
        cands["onnxruntime"] = lambda: sess.run(None, {"x": xin})
        err_ort = np.abs(cands["onnxruntime"]()[0] - got).max() / np.abs(got).max()
    res = blocked(cands, a.repeats, rounds=3)
    cpu = dict(LAST_CPU)
    res.update(race({"numpy (1 BLAS thread)": numpy_mlp}, a.repeats))
    cpu.update(LAST_CPU)
    numpy_blas_threads(threads)
    res["numpy (default threads)"] = race({"n": numpy_mlp}, a.repeats)["n"]
    cpu["numpy (default threads)"] = LAST_CPU["n"]
    flops = 2.0 * 64 * (784 * 512 + 512 * 512 + 512 * 10)
    peak, how = peak_gflops(threads)
    print(f"mlp64 (784-512-512-10, batch 64), threads={threads}, max rel. diff vs numpy {err:.1e}"
          + (f", vs onnxruntime {err_ort:.1e}" if sess is not None else " (onnxruntime not installed)"))
    print(f"peak FP32: {peak:.0f} GFLOP/s ({how})")
    for k, t in res.items():
        gf = flops / t / 1e9
        print(f"  {k:24s} {t * 1e3:8.3f} ms wall {cpu[k] * 1e3:8.3f} ms cpu  {gf:6.1f} GFLOP/s  "
              f"{gf / peak * 100:5.1f}% of peak  symjit/this = {res['symjit'] / t:5.2f} (wall), "
              f"{cpu['symjit'] / cpu[k]:5.2f} (cpu)")
    ex = tiny_executor()
    n = 20000
    samples = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            ex.forward(is_train=False)
        samples.append((time.perf_counter() - t) / n)
    print(f"tiny (16 -> relu -> 16, batch 1) through Executor.forward: {np.median(samples) * 1e6:.2f} us per call")


if __name__ == "__main__":
    main()
