"""Every shared MXNet-exported model: symjit `compile`, `hybridize()` and ONNX Runtime, one run.

For each model in the models directories (every NAME-symbol.json with NAME-0000.params and
NAME-input.npy; `--models DIR [DIR ...]`, default $SYMJIT_SHARED_DIR/models or
<repo>/../shared/models; benchmarks/export_zoo.py writes more model-zoo architectures, with
their ONNX files, from MXNet 1.9.1)
and each batch size (1 and 8; with a NAME.onnx, only the batch sizes its input allows), on the
same input and weights, in one process with the same thread count:
  * compile    `symjit.compile(sym, shapes, params)` (parameters bound as constants)
  * hybridize  `gluon.SymbolBlock.imports(...)`, `hybridize()`, `net(x)`: the path users take
               (inference binds the parameters as constants: packed, BatchNorm folded)
  * hyb-inputs the same with `hybridize(bind_params=False)`: parameters stay graph inputs (what
               hybridize did before binding)
  * onnxruntime  an InferenceSession on NAME.onnx (skipped when the model has no .onnx or
               onnxruntime is not installed: `pip install onnxruntime`, not a symjit dependency)
Steady-state times are medians over alternating blocks of calls (model_bench_util.blocked: each
block after a pause, the order reversed every round); ratios are the median of the rounds'
paired ratios (both blocks of a round see the same machine load); where the model directory has
NAME-output.npy (MXNet's own output), each batch that fits in NAME-input.npy is checked against its
rows too. First-call times: from
nothing to the first output (symjit: compile or import + hybridize + first call, with the
in-process object cache emptied, so each reads the on-disk cache like a new process; ONNX
Runtime: session creation + first run). That in-process figure reads symjit's on-disk cache
(a warm model cache); `--fresh-first-call` measures instead in new processes with an EMPTY
model cache (benchmarks/bench_first_call.py: the acceptance's first call) and reports the cache
hit of a second new process too. A geometric mean of each ratio closes the table.

    python benchmarks/bench_zoo.py [--models DIR ...] [--batch 1 8] [--threads 2] [--repeats 30] [--only NAME ...]
        [--fresh-first-call]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np


def _default_models() -> Path:
    root = os.environ.get("SYMJIT_SHARED_DIR")
    if root:
        return Path(root) / "models"
    return Path(__file__).resolve().parents[1].parent / "shared" / "models"


def _models(directory: Path) -> list[str]:
    names = []
    for sym in sorted(directory.glob("*-symbol.json")):
        name = sym.name[:-len("-symbol.json")]
        if (directory / f"{name}-0000.params").exists() and (directory / f"{name}-input.npy").exists():
            names.append(name)
    return names


def _batch_input(x: np.ndarray, batch: int) -> np.ndarray:
    reps = -(-batch // x.shape[0])
    return np.ascontiguousarray(np.concatenate([x] * reps, axis=0)[:batch])


def _ort_batches(session, batches) -> list[int]:
    dim = session.get_inputs()[0].shape[0]
    return [b for b in batches if not isinstance(dim, int) or dim == b]


def _empty_object_cache() -> None:
    from symjit.codegen.llvm import executable
    executable._MEMORY.clear()


def _first_compile(mx, d: Path, name: str, x: np.ndarray):
    t = time.perf_counter()
    model = mx.compile(mx.sym.load(str(d / f"{name}-symbol.json")), shapes={"data": x.shape},
                       params=mx.nd.load(str(d / f"{name}-0000.params")))
    y = model(data=x)[0]
    return model, y, time.perf_counter() - t


def _first_hybridize(mx, d: Path, name: str, x: np.ndarray, bind: bool):
    t = time.perf_counter()
    net = mx.gluon.SymbolBlock.imports(str(d / f"{name}-symbol.json"), ["data"], str(d / f"{name}-0000.params"))
    net.hybridize(bind_params=bind)
    xn = mx.nd.array(x)
    y = net(xn).asnumpy()
    return net, xn, y, time.perf_counter() - t


def _ort_first(onnx_path: Path, threads: int, x: np.ndarray):
    from model_bench_util import ort_session
    t = time.perf_counter()
    sess = ort_session(onnx_path, threads)
    if sess is None:
        return None, None, 0.0
    iname = sess.get_inputs()[0].name
    y = sess.run(None, {iname: x})[0]
    return sess, y, time.perf_counter() - t


def bench_model(mx, d: Path, name: str, batch: int, threads: int, repeats: int,
                fresh_first_call: bool = False) -> dict | None:
    from model_bench_util import LAST_CPU, blocked, ort_session, paired_ratio
    x = _batch_input(np.load(d / f"{name}-input.npy"), batch)
    onnx_path = d / f"{name}.onnx"
    if onnx_path.exists():
        probe = ort_session(onnx_path, threads)
        if probe is not None and batch not in _ort_batches(probe, [batch]):
            print(f"{name} batch {batch}: skipped (the ONNX model's batch dimension is fixed)")
            return None
    first = {}
    _empty_object_cache()
    net, xn, y_h, first["hybridize"] = _first_hybridize(mx, d, name, x, True)
    _empty_object_cache()
    model, y_c, first["compile"] = _first_compile(mx, d, name, x)
    _empty_object_cache()
    net_u, xu, y_u, first["hyb-inputs"] = _first_hybridize(mx, d, name, x, False)
    cands = {"compile": lambda: model(data=x), "hybridize": lambda: net(xn), "hyb-inputs": lambda: net_u(xu)}
    sess, y_o, t_o = _ort_first(onnx_path, threads, x) if onnx_path.exists() else (None, None, 0.0)
    if sess is not None:
        first["onnxruntime"] = t_o
        iname = sess.get_inputs()[0].name
        cands["onnxruntime"] = lambda: sess.run(None, {iname: x})
    scale = float(np.abs(y_c).max()) or 1.0
    diffs = {"hybridize": np.abs(y_h - y_c).max() / scale, "hyb-inputs": np.abs(y_u - y_c).max() / scale}
    if y_o is not None:
        diffs["onnxruntime"] = np.abs(y_o - y_c).max() / scale
    reference = d / f"{name}-output.npy"
    n_ref = np.load(d / f"{name}-input.npy", mmap_mode="r").shape[0]
    if reference.exists() and batch <= n_ref:     # MXNet's output rows for this input's first rows
        y_mx = np.load(reference)[:batch]
        diffs["MXNet 1.9.1's output"] = np.abs(y_mx - y_c).max() / (float(np.abs(y_mx).max()) or 1.0)
    res = blocked(cands, repeats, rounds=max(2, repeats // 5))
    cpu = dict(LAST_CPU)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"== {name} batch {batch} (threads {threads}, load average {load:.1f}); max |x - compile| / max|compile|: "
          + ", ".join(f"{k} {v:.1e}" for k, v in diffs.items()))
    print(f"  hybridize bound copies: {net.bound_bytes() / 2**20:.1f} MiB (limit {net.bound_bytes_limit() / 2**20:.0f} MiB)")
    for k, t in res.items():
        print(f"  {k:12s} {t * 1e3:9.2f} ms wall  {cpu[k] * 1e3:9.2f} ms cpu   first call {first[k] * 1e3:8.0f} ms")
    ratios = {"hybridize/compile": paired_ratio("hybridize", "compile"),
              "hyb-inputs/compile": paired_ratio("hyb-inputs", "compile"),
              "hybridize/hyb-inputs": paired_ratio("hybridize", "hyb-inputs")}
    if sess is not None:
        for k in ("compile", "hybridize", "hyb-inputs"):
            ratios[f"{k}/onnxruntime"] = paired_ratio(k, "onnxruntime")
        for k in ("compile", "hybridize"):
            ratios[f"first {k}/onnxruntime"] = first[k] / first["onnxruntime"]
    if fresh_first_call:
        from bench_first_call import fresh_first_calls
        fresh = fresh_first_calls(d, name, batch, threads)
        print("  first call in a new process, empty model cache: "
              + ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in fresh.items()))
        if "onnxruntime" in fresh:
            for k in ("compile", "hybridize"):
                ratios[f"fresh first {k}/onnxruntime"] = fresh[k] / fresh["onnxruntime"]
    print("  paired ratios: " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))
    return ratios


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=Path, nargs="+", default=None,
                    help="directories of NAME-symbol.json / NAME-0000.params (export_zoo.py writes more)")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--only", nargs="+", default=None, help="model names to run (default: all)")
    ap.add_argument("--fresh-first-call", action="store_true",
                    help="also measure first calls in new processes with an empty model cache")
    a = ap.parse_args(argv)
    dirs = a.models or [_default_models()]
    missing = [d for d in dirs if not d.is_dir()]
    if missing:
        print(f"no models directory {missing[0]} (give --models DIR or set SYMJIT_SHARED_DIR)")
        return 1
    os.environ.setdefault("SYMJIT_NUM_THREADS", str(a.threads))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import symjit as mx
    from symjit import runtime
    runtime.set_num_threads(a.threads)
    try:
        import onnxruntime
        print(f"onnxruntime {onnxruntime.__version__}")
    except ImportError:
        print("onnxruntime not installed (pip install onnxruntime): symjit only")
    models = [(d, n) for d in dirs for n in _models(d) if a.only is None or n in a.only]
    print(f"models: {[n for _, n in models]} in {[str(d) for d in dirs]}; batch {a.batch}; {os.cpu_count()} CPUs; "
          f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    if models:   # the process's one-time costs (imports, runtime start) out of the first-call times
        d, n = models[0]
        _first_hybridize(mx, d, n, _batch_input(np.load(d / f"{n}-input.npy"), 1), True)
    table: dict = {}
    for d, name in models:
        for b in a.batch:
            r = bench_model(mx, d, name, b, a.threads, a.repeats, a.fresh_first_call)
            for k, v in (r or {}).items():
                table.setdefault(k, []).append((f"{name}/{b}", v))
    print("== geometric means over model/batch pairs (worst in brackets)")
    for k, rows in table.items():
        vals = np.array([v for _, v in rows])
        worst = max(rows, key=lambda kv: kv[1])
        print(f"  {k:28s} {float(np.exp(np.log(vals).mean())):6.2f}  over {len(rows):2d}  "
              f"[{worst[1]:.2f} {worst[0]}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
