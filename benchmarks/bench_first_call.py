"""First call in a fresh process: symjit `compile` and `SymbolBlock.imports + hybridize + net(x)`
against ONNX Runtime's session creation + first run, for every model of the model directories.

Each measurement runs in a NEW process (the honest first call: no in-process object, plan or
kernel cache survives). Importing the library is not counted for any runtime (onnxruntime, and
symjit with its public packages gluon, symbol and ndarray, are imported, and the LLVM target
initialized, before the clock starts; modules symjit loads on its first compile are counted);
the clock covers everything from the model files on disk to the first output array:
  * compile    `mx.compile(mx.sym.load(json), shapes, params=mx.nd.load(params))` + first call
  * hybridize  `SymbolBlock.imports(json, ["data"], params)`, `hybridize()`, `net(x).asnumpy()`
  * ort        `InferenceSession(model.onnx)` + first `run`
symjit's model cache (the on-disk object cache, SYMJIT_CACHE_DIR) is EMPTY for the "cold"
columns (a fresh temporary directory per measurement: nothing of this model compiled before;
the runtime's kernel library is the built extension, warm) and holds this model's objects
for the "hit" columns (a second fresh process after the cold one, same directory).
Rounds alternate the runtimes' order; each figure is the median over rounds, the ratio the
median of the rounds' paired ratios. `--ref TREE` also runs another built symjit tree (a
before/after pair in the same run). Per-stage CPU/wall breakdowns: `--profile` prints cProfile's
top functions of one cold symjit compile.

    python benchmarks/bench_first_call.py [--models DIR ...] [--only NAME ...] [--batch 1 8]
        [--rounds 3] [--threads 2] [--ref TREE] [--modes compile hybridize]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_zoo import _models  # noqa: E402 - the same model discovery as bench_zoo.py

CHILD = r"""
import json, os, sys, time
mode, d, name, batch, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
import numpy as np
x = np.load(os.path.join(d, name + "-input.npy"))
reps = -(-batch // x.shape[0])
x = np.ascontiguousarray(np.concatenate([x] * reps, axis=0)[:batch])
prefix = os.path.join(d, name)
if mode == "ort":
    import onnxruntime as ort
    so = ort.SessionOptions(); so.intra_op_num_threads = threads; so.inter_op_num_threads = 1
    c0, t0 = time.process_time(), time.perf_counter()
    sess = ort.InferenceSession(prefix + ".onnx", so, providers=["CPUExecutionProvider"])
    y = sess.run(None, {sess.get_inputs()[0].name: x})[0]
else:
    import symjit as mx
    from symjit import runtime
    import symjit.codegen.llvm.backend, symjit.codegen.llvm.target, symjit.gluon, symjit.symbol, symjit.ndarray
    runtime.set_num_threads(threads)
    symjit.codegen.llvm.target.ensure_initialized()
    prof = os.environ.get("FIRST_CALL_PROFILE")
    if prof:
        import cProfile; pr = cProfile.Profile(); pr.enable()
    c0, t0 = time.process_time(), time.perf_counter()
    if mode == "compile":
        model = mx.compile(mx.sym.load(prefix + "-symbol.json"), shapes={"data": x.shape},
                           params=mx.nd.load(prefix + "-0000.params"))
        y = model(data=x)[0]
    else:
        net = mx.gluon.SymbolBlock.imports(prefix + "-symbol.json", ["data"], prefix + "-0000.params")
        net.hybridize()
        y = net(mx.nd.array(x)).asnumpy()
    if prof:
        pr.disable(); pr.dump_stats(prof)
t = time.perf_counter() - t0
c = time.process_time() - c0
print(json.dumps({"wall": t, "cpu": c, "sum": float(np.abs(y).sum())}))
"""


#: bytecode of the children (as an installed package has it), outside the source tree
PYCACHE = os.path.join(tempfile.gettempdir(), "symjit-bench-first-call-pycache")


def compile_bytecode(tree: str) -> None:
    """Byte-compile a tree's package into PYCACHE (as installing it does), so that no measured
    child pays for compiling the modules it imports first."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=PYCACHE)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(tree, "symjit")], env=env,
                   capture_output=True, check=False)


def run_child(tree: str, mode: str, d: Path, name: str, batch: int, threads: int, cache: str,
              profile: str | None = None) -> dict:
    env = dict(os.environ, SYMJIT_CACHE_DIR=cache, PYTHONPATH=tree, SYMJIT_NUM_THREADS=str(threads),
               OMP_NUM_THREADS=str(threads), PYTHONPYCACHEPREFIX=PYCACHE)
    env.pop("PYTHONDONTWRITEBYTECODE", None)   # an installed package has its bytecode compiled
    if profile:
        env["FIRST_CALL_PROFILE"] = profile
    # run in the tree: `python -c` puts the working directory first on sys.path, ahead of
    # PYTHONPATH, so started from another tree the child would import that tree's package
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(Path(d).resolve()), name, str(batch), str(threads)],
                         env=env, capture_output=True, text=True, cwd=tree)
    if out.returncode != 0:
        raise RuntimeError(f"{mode} {name}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def fresh_first_calls(d: Path, name: str, batch: int, threads: int, tree: str | None = None) -> dict:
    """One fresh-process first call each, in seconds: {"compile", "hybridize"} with an empty
    model cache, {"compile hit", "hybridize hit"} from the cache they filled, and
    {"onnxruntime"} when the model has an ONNX file (what bench_zoo.py --fresh-first-call reports)."""
    tree = tree or str(Path(__file__).resolve().parents[1])
    compile_bytecode(tree)
    out = {}
    for mode in ("compile", "hybridize"):
        cold, hit = _cold_and_hit(tree, mode, d, name, batch, threads)
        out[mode], out[f"{mode} hit"] = cold["wall"], hit["wall"]
    if (d / f"{name}.onnx").exists():
        out["onnxruntime"] = run_child(tree, "ort", d, name, batch, threads, "/nonexistent")["wall"]
    return out


def _cold_and_hit(tree, mode, d, name, batch, threads) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory() as cache:
        os.chmod(cache, 0o700)
        cold = run_child(tree, mode, d, name, batch, threads, cache)
        hit = run_child(tree, mode, d, name, batch, threads, cache)
    return cold, hit


def main(argv=None) -> int:
    here = Path(__file__).resolve()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", type=Path, nargs="+",
                    default=[here.parents[2] / "shared" / "models", Path("/tmp/hybinfer-zoo")])
    ap.add_argument("--only", nargs="+", default=None)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ref", default=None, help="another built symjit tree, measured in the same rounds")
    ap.add_argument("--modes", nargs="+", default=["compile", "hybridize"])
    ap.add_argument("--profile", action="store_true", help="cProfile one cold compile per model")
    a = ap.parse_args(argv)
    trees = {"new": str(here.parents[1])}
    if a.ref:
        trees["ref"] = a.ref
    for tree in trees.values():
        compile_bytecode(tree)
    models = [(d, n) for d in a.models if d.is_dir() for n in _models(d) if a.only is None or n in a.only]
    print(f"models: {[n for _, n in models]}; batch {a.batch}; threads {a.threads}; rounds {a.rounds}; "
          f"load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    geo: dict = {}
    for d, name in models:
        has_onnx = (d / f"{name}.onnx").exists()
        for b in a.batch:
            rows: dict = {}
            for r in range(a.rounds):
                order = [(t, m) for t in trees for m in a.modes] + ([("ort", "ort")] if has_onnx else [])
                if r % 2:
                    order.reverse()
                for tree_key, mode in order:
                    if mode == "ort":
                        res = run_child(trees["new"], "ort", d, name, b, a.threads, "/nonexistent")
                        rows.setdefault("ort", []).append(res)
                        continue
                    cold, hit = _cold_and_hit(trees[tree_key], mode, d, name, b, a.threads)
                    rows.setdefault(f"{tree_key} {mode} cold", []).append(cold)
                    rows.setdefault(f"{tree_key} {mode} hit", []).append(hit)
            load = os.getloadavg()[0]
            print(f"== {name} batch {b} (load {load:.1f})")
            for k, v in rows.items():
                w = np.median([x["wall"] for x in v])
                c = np.median([x["cpu"] for x in v])
                line = f"  {k:24s} wall {w * 1e3:8.1f} ms  cpu {c * 1e3:8.1f} ms"
                if "ort" in rows and k != "ort" and k.endswith("cold"):
                    ratio = float(np.median([x["wall"] / o["wall"] for x, o in zip(v, rows["ort"])]))
                    cpu_ratio = float(np.median([x["cpu"] / o["cpu"] for x, o in zip(v, rows["ort"])]))
                    line += f"   / ort {ratio:5.2f} (cpu {cpu_ratio:4.2f})"
                    geo.setdefault(k, []).append(ratio)
                    geo.setdefault(f"{k} (cpu)", []).append(cpu_ratio)
                if k.startswith("ref") is False and "ref" in trees and k.startswith("new"):
                    rk = "ref" + k[3:]
                    if rk in rows:
                        ratio = float(np.median([x["wall"] / y["wall"] for x, y in zip(v, rows[rk])]))
                        cpu_ratio = float(np.median([x["cpu"] / y["cpu"] for x, y in zip(v, rows[rk])]))
                        line += f"   new/ref {ratio:5.2f} (cpu {cpu_ratio:4.2f})"
                        geo.setdefault(f"new/ref {k[4:]}", []).append(ratio)
                        geo.setdefault(f"new/ref cpu {k[4:]}", []).append(cpu_ratio)
                print(line, flush=True)
            if a.profile:
                with tempfile.TemporaryDirectory() as cache:
                    os.chmod(cache, 0o700)
                    prof = os.path.join(cache, "prof.out")
                    run_child(trees["new"], "compile", d, name, b, a.threads, cache, profile=prof)
                    import pstats
                    pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
    print("== geometric means over model/batch pairs")
    for k, v in geo.items():
        print(f"  {k:32s} {float(np.exp(np.mean(np.log(v)))):6.2f}  over {len(v)}  (worst {max(v):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
