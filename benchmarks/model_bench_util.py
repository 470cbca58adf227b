"""Shared pieces of the model benchmarks: timing, peak FLOP/s of this machine, baselines.

Timings are medians of round-robin repeats (candidates alternate, so machine load affects all
alike); every ratio printed is measured in the same run, and `blocked` also gives the median of
its rounds' paired ratios (LAST_PAIRED), steadier on a machine whose speed drifts.
"""
from __future__ import annotations

import ctypes
import functools
import glob
import os
import time
from dataclasses import dataclass
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


#: seconds to wait before each block of `blocked`: worker threads that spin after a call
#: (ONNX Runtime's intra-op pool, OpenBLAS, symjit's pool) go idle instead of taking a core
#: from the next candidate's first calls
SETTLE_S = 0.2


#: per candidate of the last `blocked`: the median over its rounds of (the first candidate's
#: block median / this candidate's block median in the same round). Both blocks of a round run
#: within a second, so a machine that changes speed between rounds moves both: on a noisy
#: machine this ratio varies less from run to run than the ratio of the overall medians.
LAST_PAIRED: dict = {}

#: per candidate of the last `blocked`: its block medians, one per round (for paired ratios
#: between any two candidates: `paired_ratio`)
LAST_BLOCKS: dict = {}


def paired_ratio(a: str, b: str) -> float:
    """The median over the rounds of the last `blocked` of (a's block median / b's)."""
    return float(np.median(np.array(LAST_BLOCKS[a]) / np.array(LAST_BLOCKS[b])))


def blocked(cands: dict, repeats: int, rounds: int = 2) -> dict:
    """Like `race`, but each candidate runs `repeats` times in a row (after a warm-up), in
    `rounds` blocks, each block after a pause of SETTLE_S: a runtime whose worker threads keep
    spinning after a call (ONNX Runtime's intra-op pool, OpenBLAS) then slows neither itself
    nor the next candidate. The candidates' order alternates from round to round (forward,
    then backward), so neither always runs first after the pause. Medians over all blocks; CPU
    seconds in LAST_CPU; per-round (paired) ratios to the first candidate in LAST_PAIRED."""
    wall = {k: [] for k in cands}
    cpu = {k: [] for k in cands}
    block = {k: [] for k in cands}
    per = max(1, repeats // rounds)
    names = list(cands)
    for r in range(rounds):
        for k in (names if r % 2 == 0 else names[::-1]):
            fn = cands[k]
            time.sleep(SETTLE_S)
            fn()
            fn()
            times = []
            for _ in range(per):
                c = time.process_time()
                t = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t)
                cpu[k].append(time.process_time() - c)
            wall[k].extend(times)
            block[k].append(float(np.median(times)))
    LAST_CPU.clear()
    LAST_CPU.update({k: float(np.median(v)) for k, v in cpu.items()})
    LAST_BLOCKS.clear()
    LAST_BLOCKS.update(block)
    first = np.array(block[names[0]])
    LAST_PAIRED.clear()
    LAST_PAIRED.update({k: float(np.median(first / np.array(v))) for k, v in block.items()})
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


def vector_lanes() -> int:
    """float32 lanes of the host's widest FMA vectors: 16 with AVX-512F, 8 with AVX2/FMA, else 4."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                return 16 if "avx512f" in flags else (8 if "fma" in flags else 4)
    except OSError:
        pass
    return 4


_FMA_PROBE = """
declare <{w} x float> @llvm.fma.v{w}f32(<{w} x float>, <{w} x float>, <{w} x float>)
define float @fma_probe(i64 %n) {{
entry:
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i2, %loop]
{phis}
{body}
  %i2 = add i64 %i, 1
  %c = icmp ult i64 %i2, %n
  br i1 %c, label %loop, label %exit
exit:
{sum}
  %r = extractelement <{w} x float> %s{last}, i64 0
  ret float %r
}}
"""


@functools.lru_cache(maxsize=None)
def measured_fma_gflops() -> float:
    """Single-core FP32 FMA throughput measured on this machine (GFLOP/s): a JIT-compiled loop of
    12 independent vector FMA chains at the host's widest width (`vector_lanes`), best of 5 runs
    of ~50 ms. This is the real peak of one core at its current clock (turbo included; it also
    reveals CPUs that split 512-bit operations into two 256-bit halves)."""
    import ctypes as ct

    from symjit.codegen.llvm import jit
    w, acc = vector_lanes(), 12
    one = ", ".join(["float 1.0"] * w)
    near1 = ", ".join(["float 0x3FEFFFFFE0000000"] * w)     # 1 - 2**-24: no folding to an add
    tiny = ", ".join(["float 0x3E10000000000000"] * w)
    phis = "\n".join(f"  %a{k} = phi <{w} x float> [<{one}>, %entry], [%b{k}, %loop]" for k in range(acc))
    body = "\n".join(f"  %b{k} = call <{w} x float> @llvm.fma.v{w}f32(<{w} x float> %a{k}, "
                     f"<{w} x float> <{near1}>, <{w} x float> <{tiny}>)" for k in range(acc))
    sums = [f"  %s0 = fadd <{w} x float> %b0, %b1"]
    sums += [f"  %s{k - 1} = fadd <{w} x float> %s{k - 2}, %b{k}" for k in range(2, acc)]
    ir = _FMA_PROBE.format(w=w, phis=phis, body=body, sum="\n".join(sums), last=acc - 2)
    code = jit.compile_ir(ir, ["fma_probe"])
    fn = ct.CFUNCTYPE(ct.c_float, ct.c_int64)(code.addresses["fma_probe"])
    n = 1 << 16
    fn(n)
    while True:      # about 50 ms per run
        t = time.perf_counter()
        fn(n)
        dt = time.perf_counter() - t
        if dt > 0.05:
            break
        n = int(n * max(2.0, 0.06 / max(dt, 1e-6)))
    best = min(_timed(fn, n) for _ in range(5))
    return n * acc * w * 2 / best / 1e9


def _timed(fn, n) -> float:
    t = time.perf_counter()
    fn(n)
    return time.perf_counter() - t


def peak_gflops(threads: int) -> tuple[float, str]:
    """FP32 peak of `threads` cores: the measured single-core FMA throughput
    (`measured_fma_gflops`) times the thread count; the description also gives the clock this
    implies for 2 FMA pipes of `vector_lanes()` lanes (what x86 cores since Haswell have)."""
    one = measured_fma_gflops()
    lanes = vector_lanes()
    ghz = one / (2 * lanes * 2)
    return threads * one, (f"{threads} cores x {one:.0f} GFLOP/s measured (= 2 FMA x {lanes} lanes x 2 flop "
                           f"x {ghz:.2f} GHz; nominal clock {cpu_clock_ghz():.2f} GHz)")


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


def ort_session(onnx_path: Path, threads: int, profile_prefix: str | None = None):
    """An ONNX Runtime CPU session with `threads` intra-op threads (with its profiler on, writing
    under `profile_prefix`, when given), or None if unavailable."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    if profile_prefix is not None:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    return ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])


def load_model_graph(name: str, batch: int, disabled=(), models: Path = MODELS, pipeline="inference"):
    """(compiled symjit graph callable, input array, optimized graph) for a model of the
    directory `models` (default the shared models); `disabled`: pass names the inference
    pipeline (or the given `pipeline`, a list of (name, pass)) skips."""
    import symjit as mx
    from symjit.codegen.llvm.executable import compile_planned
    from symjit.codegen.llvm.target import compile_target
    from symjit.passes.infer import infer_types
    from symjit.passes.manager import compile_graph
    from symjit.symbol.lower import lower
    sym = mx.sym.load(str(models / f"{name}-symbol.json"))
    params = mx.nd.load(str(models / f"{name}-0000.params"))
    x = np.load(models / f"{name}-input.npy")
    x = np.ascontiguousarray(np.repeat(x[:1], batch, axis=0))
    g, _ = lower(sym)
    g, _ = infer_types(g, shapes={"data": x.shape})
    consts = {k.split(":", 1)[1]: v.asnumpy() for k, v in params.items()}
    opt, _ = compile_graph(g, pipeline, constants=consts, disabled=set(disabled),
                           target=compile_target("native"))
    cg = compile_planned(opt, name)
    feeds = {"data": x, **consts}
    arrays = [np.ascontiguousarray(feeds[v.name]) for v in opt.inputs]
    return cg, arrays, x, opt


def conv_output_shape(n) -> tuple:
    """The convolution's output shape of a Convolution-like node (for `_conv_pool`, the shape
    before the pooling)."""
    if n.op.name == "_conv_blocked":
        from symjit.ops.blocked import nchw_shape
        return nchw_shape(n.op.name, n.outputs[0].type.shape)
    if n.op.name != "_conv_pool":
        return tuple(n.outputs[0].type.shape)
    from symjit.ops.registry import get_op
    _, (y,) = get_op("Convolution").infer_shape(n.attrs["conv_attrs"], [tuple(v.type.shape) for v in n.inputs])
    return tuple(y)


def node_flops(n) -> float:
    """Multiply-add FLOPs (2 per MAC) of one Convolution / FullyConnected node (0 otherwise;
    `_conv_pool` and `_conv_blocked` nodes count their convolution's)."""
    name = n.attrs["inner"] if n.op.name == "_with_epilogue" else n.op.name
    if name in ("Convolution", "_conv_pool", "_conv_blocked"):
        w = n.inputs[1].type.shape
        return 2.0 * np.prod(conv_output_shape(n), dtype=np.float64) * np.prod(w[1:], dtype=np.float64)
    if name == "FullyConnected":
        w = n.inputs[1].type.shape
        return 2.0 * np.prod(n.inputs[0].type.shape, dtype=np.float64) / w[1] * w[0] * w[1]
    return 0.0


def conv_flops(opt) -> float:
    """Multiply-add FLOPs (2 per MAC) of the convolutions and dense layers of a graph."""
    return float(sum(node_flops(n) for n in opt.nodes))


def describe(n) -> str:
    """'Convolution 64x56x56 -> 64 k3 s1 g1 (+epi)' style summary of a node."""
    inner = n.attrs["inner"] if n.op.name == "_with_epilogue" else n.op.name
    attrs = n.attrs.get("inner_attrs", n.attrs.get("conv_attrs", n.attrs))
    xs = tuple(n.inputs[0].type.shape) if n.inputs else ()
    if inner == "_conv_blocked" and n.attrs.get("data_blocked", True):
        from symjit.ops.blocked import nchw_shape
        xs = nchw_shape(inner, xs)
    if inner in ("Convolution", "_conv_pool", "_conv_blocked"):
        k = attrs["kernel"]
        pool = (f" + max pool k{n.attrs['pool_attrs']['kernel'][0]}" if inner == "_conv_pool"
                else " NCHW16c" if inner == "_conv_blocked" else "")
        return (f"Conv {xs[0]}x{xs[1]}x{xs[2]}x{xs[3]} -> {conv_output_shape(n)[1]} k{k[0]} "
                f"s{attrs['stride'][0] if attrs['stride'] else 1} g{attrs['num_group']}{pool}")
    if inner == "Pooling":
        return f"Pool {attrs['pool_type']} {xs} k{attrs['kernel']} s{attrs['stride']}"
    if inner == "FullyConnected":
        return f"FC {xs} -> {attrs['num_hidden']}"
    return f"{inner} {xs}"


def single_node_graphs(opt):
    """(node, compiled one-node graph, its input arrays) for every non-constant node of an
    optimized graph: the node's constant inputs stay `_const` nodes (so lowerings that use
    compile-time weights see them), the others are random inputs of the same shape."""
    from symjit.codegen.llvm.executable import compile_planned
    from symjit.ir import GraphBuilder, TensorType
    from symjit.passes.infer import infer_types
    from symjit.passes.memory_plan import plan_memory
    rng = np.random.default_rng(0)
    producer = {n.outputs[0]: n for n in opt.nodes if n.op.name == "_const"}
    for n in opt.nodes:
        if n.op.name == "_const":
            continue
        b = GraphBuilder(name="layer")
        ins = []
        for k, v in enumerate(n.inputs):
            c = producer.get(v)
            if c is not None:
                ins.append(b.add_node("_const", [], {"value": c.attrs["value"]}, already_parsed=True)[0])
            else:
                ins.append(b.add_input(f"i{k}", TensorType(tuple(v.type.shape), v.type.dtype)))
        outs = b.add_node(n.op, ins, n.attrs)[:len(n.outputs)]
        g, _ = infer_types(b.build(outs))
        g, _ = plan_memory(g)
        cg = compile_planned(g, "layer")
        arrays = [rng.standard_normal(v.type.shape).astype(v.type.dtype) for v in g.inputs]
        yield n, cg, arrays


def layer_profile(opt, rounds: int = 8, per_round: int = 3):
    """Every node of an optimized graph compiled alone (same attributes, shapes and constant
    weights; random data), timed at the current thread count: [(wall s, cpu s, flops,
    description)] in graph order. Wall: the fastest call over `rounds` passes through all the
    layers (`per_round` calls each), so every layer is sampled across the whole run and the
    minimum is what it costs undisturbed on a shared machine; cpu: the median process CPU time
    (with several threads Linux may not yet have accounted the workers' share of a short call)."""
    layers = [(n, (lambda cg=cg, arrays=arrays: cg(arrays))) for n, cg, arrays in single_node_graphs(opt)]
    best = [float("inf")] * len(layers)
    cpus = [[] for _ in layers]
    for fn in (f for _, f in layers):
        fn()
    for _ in range(rounds):
        for i, (n, fn) in enumerate(layers):
            for _ in range(per_round):
                c = time.process_time()
                t = time.perf_counter()
                fn()
                best[i] = min(best[i], time.perf_counter() - t)
                cpus[i].append(time.process_time() - c)
    return [(best[i], float(np.median(cpus[i])), node_flops(n), describe(n), n.name)
            for i, (n, _) in enumerate(layers)]


@dataclass
class ProfiledRounds:
    """Per-call seconds of several variants measured in alternating rounds (`profiled_rounds`):
    `whole[label]` one figure per round, `per[label][node]` the in-graph profile per round."""
    whole: dict
    per: dict

    def median(self, label) -> float:
        return float(np.median(self.whole[label]))

    def paired(self, a, b) -> float:
        """Median over the rounds of a's time / b's time in the same round."""
        return float(np.median(np.array(self.whole[a]) / np.array(self.whole[b])))

    def node(self, label, node) -> float:
        return float(np.median(self.per[label].get(node, [0.0])))


def profiled_rounds(variants: dict, rounds: int = 8, calls: int = 10) -> ProfiledRounds:
    """variants: label -> (prepare, compiled graph with profiling, its input arrays). Each round
    runs every variant in turn -- prepare() (e.g. set a tuning switch), one warm-up call, then
    `calls` timed calls -- in reversed order every other round, so that a machine that speeds up
    or slows down affects all of them and none always runs first."""
    labels = list(variants)
    whole = {k: [] for k in labels}
    per = {k: {} for k in labels}
    for r in range(rounds):
        for label in (labels if r % 2 == 0 else labels[::-1]):
            prepare, cg, arrays = variants[label]
            prepare()
            cg(arrays)
            cg.profile(reset=True)
            t = time.perf_counter()
            for _ in range(calls):
                cg(arrays)
            whole[label].append((time.perf_counter() - t) / calls)
            for p in cg.profile():
                per[label].setdefault(p.node, []).append(p.seconds / calls)
    return ProfiledRounds(whole, per)


def graph_profile(opt, arrays, calls: int = 30) -> dict:
    """{node name: seconds per call} of every native node measured inside the whole compiled
    graph (compiled again with profiling: codegen/llvm/profile.py), over `calls` calls."""
    from symjit.codegen.llvm.executable import compile_planned
    cg = compile_planned(opt, "profiled", profile=True)
    for _ in range(3):
        cg(arrays)
    cg.profile(reset=True)
    for _ in range(calls):
        cg(arrays)
    return {p.node: p.seconds / calls for p in cg.profile()}


#: ONNX Runtime node types that hold a model's convolutions and dense layers
ORT_DENSE_OPS = ("Conv", "FusedConv", "Gemm", "FusedGemm", "MatMul", "FusedMatMul")


def ort_node_profile(onnx_path: Path, threads: int, x: np.ndarray, calls: int = 30) -> list:
    """[(op type, node name, median seconds per call)] of ONNX Runtime's nodes in execution
    order, from its own profiler (same session options as `ort_session`), or [] without it."""
    import json
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        sess = ort_session(onnx_path, threads, os.path.join(tmp, "ort"))
        if sess is None:
            return []
        feed = {sess.get_inputs()[0].name: x}
        for _ in range(calls + 3):
            sess.run(None, feed)
        with open(sess.end_profiling()) as f:
            events = json.load(f)
    order, times = [], {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            key = (e["args"].get("op_name", "?"), e["name"][:-len("_kernel_time")])
            if key not in times:
                order.append(key)
                times[key] = []
            times[key].append(e["dur"] * 1e-6)
    return [(op, name, float(np.median(times[(op, name)][3:] or times[(op, name)]))) for op, name in order]


def ort_profiler_cost(onnx_path: Path, threads: int, x: np.ndarray, repeats: int = 20) -> tuple[float, float]:
    """(median wall seconds per call of an ONNX Runtime session with its profiler on, the same
    with it off), timed in alternating blocks: its profiler's node times include what turning it
    on costs (measured: mobilenet1.0 2 threads 4.29 vs 3.75 ms, resnet18_v1 10.43 vs 10.08 ms;
    nothing at 1 thread), so they overstate each node by about that fraction."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        on = ort_session(onnx_path, threads, os.path.join(tmp, "ort"))
        off = ort_session(onnx_path, threads)
        feed = {on.get_inputs()[0].name: x}
        res = blocked({"on": lambda: on.run(None, feed), "off": lambda: off.run(None, feed)}, repeats,
                      rounds=max(2, repeats // 5))
        on.end_profiling()
    return res["on"], res["off"]


def print_profile(rows, peak: float, top: int = 0, in_graph: dict | None = None, ort_nodes=()) -> None:
    """The per-layer table (slowest first when `top`), with GFLOP/s and shares of the sum:
    each node compiled alone, and (when given) its time inside the whole graph and ONNX
    Runtime's time for the same layer (its convolution / dense nodes matched in order)."""
    total = sum(r[0] for r in rows)
    print(f"  per-layer profile (alone: each node compiled alone, fastest call; sum {total * 1e3:.2f} ms wall, "
          f"{sum(r[1] for r in rows) * 1e3:.2f} ms cpu):")
    ort_dense = [t for op, _, t in ort_nodes if op in ORT_DENSE_OPS]
    ours_dense = [r[4] for r in rows if r[2]]
    ort_of = dict(zip(ours_dense, ort_dense)) if len(ort_dense) == len(ours_dense) else {}
    if in_graph:
        print(f"  in graph: the same node timed inside the whole compiled graph (sum "
              f"{sum(in_graph.values()) * 1e3:.2f} ms)" + (f"; onnxruntime: its node for the layer, from its profiler "
                                                           f"(all its nodes: {sum(t for *_, t in ort_nodes) * 1e3:.2f} ms)"
                                                           if ort_of else ""))
    order = sorted(rows, reverse=True)[:top] if top else rows
    for wall, cpu, fl, what, name in order:
        gf = f"{fl / wall / 1e9:6.1f} GF/s {fl / wall / 1e9 / peak * 100:4.0f}%" if fl else " " * 17
        extra = ""
        if in_graph:
            extra = f" in graph {in_graph.get(name, 0.0) * 1e3:7.3f}"
            if ort_of:
                extra += f" ort {ort_of[name] * 1e3:7.3f}" if name in ort_of else " " * 12
        print(f"    {wall * 1e3:7.3f} ms {cpu * 1e3:7.3f} cpu {gf} {wall / total * 100:5.1f}%{extra}  {what}")


def compare_with_ort(name: str, batch: int, threads: int, repeats: int, profile: bool,
                     models: Path = MODELS) -> None:
    """symjit's compiled model vs ONNX Runtime (same threads) on a model of the directory `models`
    (default the shared models); prints the table."""
    from symjit import runtime
    runtime.set_num_threads(threads)
    cg, arrays, x, opt = load_model_graph(name, batch, models=models)
    assert cg.native, "every node should lower natively"
    cands = {"symjit": lambda: cg(arrays)}
    sess = ort_session(models / f"{name}.onnx", threads)
    if sess is not None:
        iname = sess.get_inputs()[0].name
        cands["onnxruntime"] = lambda: sess.run(None, {iname: x})
        diff = np.abs(cg(arrays)[0] - cands["onnxruntime"]()[0]).max()
    res = blocked(cands, repeats, rounds=max(2, repeats // 5))   # blocks of 5 calls: both runtimes see the same machine
    cpu, paired = dict(LAST_CPU), dict(LAST_PAIRED)
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
              f"{cpu['symjit'] / cpu['onnxruntime']:.2f} (cpu time), "
              f"{paired['onnxruntime']:.2f} (wall, median of the rounds' ratios)")
    else:
        print("  (onnxruntime not installed: pip install onnxruntime)")
    if profile:
        ort_nodes = ort_node_profile(models / f"{name}.onnx", threads, x) if sess is not None else []
        if sess is not None:
            on, off = ort_profiler_cost(models / f"{name}.onnx", threads, x)
            print(f"  onnxruntime with its profiler on: {on * 1e3:.2f} ms per call, off: {off * 1e3:.2f} ms "
                  f"(its node times below include the difference, {(on / off - 1) * 100:+.0f}%)")
        print_profile(layer_profile(opt), peak, top=0 if profile == "all" else 15,
                      in_graph=graph_profile(opt, arrays), ort_nodes=ort_nodes)
