"""Shared pieces of the model benchmarks: timing, peak FLOP/s of this machine, baselines.

Timings are medians of round-robin repeats (candidates alternate, so machine load affects all
alike); every ratio printed is measured in the same run.
"""
from __future__ import annotations

import ctypes
import glob
import os
import time
from pathlib import Path

import numpy as np

MODELS = Path(__file__).resolve().parents[2] / "shared" / "models"


#: process CPU seconds of the last `race` per candidate (all threads of the process; with one
#: thread this is the work done, independent of how long other processes kept the core)
LAST_CPU: dict = {}


def race(cands: dict, repeats: int, warmup: int = 2) -> dict:
    """Median wall seconds per candidate (callables), timed round robin; the median process CPU
    seconds go to LAST_CPU."""
    for fn in cands.values():
        for _ in range(warmup):
            fn()
    times = {k: [] for k in cands}
    cpu = {k: [] for k in cands}
    for _ in range(repeats):
        for k, fn in cands.items():
            c = time.process_time()
            t = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t)
            cpu[k].append(time.process_time() - c)
    LAST_CPU.clear()
    LAST_CPU.update({k: float(np.median(v)) for k, v in cpu.items()})
    return {k: float(np.median(v)) for k, v in times.items()}


def blocked(cands: dict, repeats: int, rounds: int = 2) -> dict:
    """Like `race`, but each candidate runs `repeats` times in a row (after a warm-up), in
    `rounds` alternating blocks: a runtime whose worker threads keep spinning after a call
    (ONNX Runtime's intra-op pool, OpenBLAS) then slows only itself, not the next candidate.
    Medians over all blocks; CPU seconds in LAST_CPU."""
    wall = {k: [] for k in cands}
    cpu = {k: [] for k in cands}
    per = max(1, repeats // rounds)
    for _ in range(rounds):
        for k, fn in cands.items():
            fn()
            fn()
            for _ in range(per):
                c = time.process_time()
                t = time.perf_counter()
                fn()
                wall[k].append(time.perf_counter() - t)
                cpu[k].append(time.process_time() - c)
    LAST_CPU.clear()
    LAST_CPU.update({k: float(np.median(v)) for k, v in cpu.items()})
    return {k: float(np.median(v)) for k, v in wall.items()}


def cpu_clock_ghz() -> float:
    """Nominal clock from /proc/cpuinfo ('cpu MHz'), or bogomips / 2."""
    mhz = []
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("cpu MHz"):
                mhz.append(float(line.split(":")[1]))
            elif line.startswith("bogomips") and not mhz:
                mhz.append(float(line.split(":")[1]) / 2)
    except OSError:
        pass
    return (max(mhz) / 1000.0) if mhz else 0.0


def peak_gflops(threads: int) -> tuple[float, str]:
    """FP32 peak: 2 FMA pipes x 8 lanes (256-bit; Zen 3/4 run AVX-512 as 2x256) x 2 flops x clock."""
    ghz = cpu_clock_ghz()
    return threads * 2 * 8 * 2 * ghz, f"{threads} cores x 2 FMA x 8 lanes x 2 flop x {ghz:.2f} GHz"


def numpy_blas_threads(n: int) -> bool:
    """Set the thread count of numpy's bundled OpenBLAS (True if it could be set)."""
    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "*openblas*"))
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
            for sym in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads"):
                fn = getattr(lib, sym, None)
                if fn is not None:
                    fn(ctypes.c_int(n))
                    return True
        except OSError:
            continue
    return False


def ort_session(onnx_path: Path, threads: int):
    """An ONNX Runtime CPU session with `threads` intra-op threads, or None if unavailable."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])


def load_model_graph(name: str, batch: int):
    """(compiled symjit graph callable, input array, optimized graph) for a shared model."""
    import symjit as mx
    from symjit.codegen.llvm.executable import compile_planned
    from symjit.passes.infer import infer_types
    from symjit.passes.manager import compile_graph
    from symjit.symbol.lower import lower
    sym = mx.sym.load(str(MODELS / f"{name}-symbol.json"))
    params = mx.nd.load(str(MODELS / f"{name}-0000.params"))
    x = np.load(MODELS / f"{name}-input.npy")
    x = np.ascontiguousarray(np.repeat(x[:1], batch, axis=0))
    g, _ = lower(sym)
    g, _ = infer_types(g, shapes={"data": x.shape})
    consts = {k.split(":", 1)[1]: v.asnumpy() for k, v in params.items()}
    opt, _ = compile_graph(g, "inference", constants=consts)
    cg = compile_planned(opt, name)
    feeds = {"data": x, **consts}
    arrays = [np.ascontiguousarray(feeds[v.name]) for v in opt.inputs]
    return cg, arrays, x, opt


def conv_flops(opt) -> float:
    """Multiply-add FLOPs (2 per MAC) of the convolutions and dense layers of a graph."""
    total = 0.0
    for n in opt.nodes:
        name = n.attrs["inner"] if n.op.name == "_with_epilogue" else n.op.name
        if name == "Convolution":
            w = n.inputs[1].type.shape
            y = (n.outputs[0].type.shape)
            total += 2.0 * np.prod(y, dtype=np.float64) * np.prod(w[1:], dtype=np.float64)
        elif name == "FullyConnected":
            w = n.inputs[1].type.shape
            total += 2.0 * n.inputs[0].type.shape[0] * w[0] * w[1]
    return total


def layer_profile(opt, repeats: int = 5, top: int = 12) -> list[tuple[float, str]]:
    """Median process CPU time of every node of an optimized graph compiled alone (same
    attributes and shapes, random inputs): (seconds, description), slowest first. With one
    thread this is each layer's work, whatever else runs on the machine."""
    from symjit.codegen.llvm.executable import compile_planned
    from symjit.ir import GraphBuilder, TensorType
    from symjit.passes.infer import infer_types
    from symjit.passes.memory_plan import plan_memory
    rng = np.random.default_rng(0)
    rows = []
    for n in opt.nodes:
        if n.op.name == "_const":
            continue
        b = GraphBuilder(name="layer")
        ins = [b.add_input(f"i{k}", TensorType(tuple(v.type.shape), v.type.dtype)) for k, v in enumerate(n.inputs)]
        outs = b.add_node(n.op, ins, n.attrs)[:len(n.outputs)]
        g, _ = infer_types(b.build(outs))
        g, _ = plan_memory(g)
        cg = compile_planned(g, "layer")
        arrays = [rng.standard_normal(v.type.shape).astype(v.type.dtype) for v in g.inputs]
        race({"x": lambda: cg(arrays)}, repeats, warmup=1)
        t = LAST_CPU["x"]
        inner = n.attrs["inner"] if n.op.name == "_with_epilogue" else n.op.name
        attrs = n.attrs.get("inner_attrs", n.attrs)
        geo = {k: attrs[k] for k in ("kernel", "stride", "num_group", "pool_type") if k in attrs}
        shapes = " x ".join(str(tuple(v.type.shape)) for v in n.inputs[:2])
        rows.append((t, f"{inner:16s} {shapes} {geo}"))
    rows.sort(reverse=True)
    return rows[:top], sum(r[0] for r in rows)


def compare_with_ort(name: str, batch: int, threads: int, repeats: int, profile: bool) -> None:
    """symjit's compiled model vs ONNX Runtime (same threads) on a shared model; prints the table."""
    from symjit import runtime
    runtime.set_num_threads(threads)
    cg, arrays, x, opt = load_model_graph(name, batch)
    assert cg.native, "every node should lower natively"
    cands = {"symjit": lambda: cg(arrays)}
    sess = ort_session(MODELS / f"{name}.onnx", threads)
    if sess is not None:
        iname = sess.get_inputs()[0].name
        cands["onnxruntime"] = lambda: sess.run(None, {iname: x})
        diff = np.abs(cg(arrays)[0] - cands["onnxruntime"]()[0]).max()
    res = blocked(cands, repeats)
    cpu = dict(LAST_CPU)
    flops = conv_flops(opt)
    peak, how = peak_gflops(threads)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{name} batch {batch}, threads {threads}, {flops / 1e9:.2f} GFLOP per call, load average {load:.1f}")
    print(f"peak FP32: {peak:.0f} GFLOP/s ({how})")
    if sess is not None:
        print(f"max |symjit - onnxruntime| = {diff:.2e}")
    for k, t in res.items():
        gf = flops / t / 1e9
        print(f"  {k:12s} {t * 1e3:9.2f} ms wall  {cpu[k] * 1e3:9.2f} ms cpu  {gf:6.1f} GFLOP/s  "
              f"{gf / peak * 100:5.1f}% of peak")
    if sess is not None:
        print(f"  ratio symjit / onnxruntime = {res['symjit'] / res['onnxruntime']:.2f} (wall), "
              f"{cpu['symjit'] / cpu['onnxruntime']:.2f} (cpu time)")
    else:
        print("  (onnxruntime not installed: pip install onnxruntime)")
    if profile:
        rows, total = layer_profile(opt)
        print(f"  per-layer CPU-time profile (each node compiled alone; sum {total * 1e3:.1f} ms):")
        for t, what in rows:
            print(f"    {t * 1e3:8.3f} ms  {what}")
