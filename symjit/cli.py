"""The `symjit` command: compile | run | bench | inspect | viz (| launch).

    symjit compile MODEL-symbol.json [MODEL-0000.params] --input data:1x3x224x224[:float32] -o OUT
    symjit run OUT.so --input data=x.npy [--output y.npy]
    symjit bench MODEL-symbol.json [MODEL-0000.params] --input data:1x784 [--profile [N]] | symjit bench OUT.so
    symjit inspect MODEL-symbol.json [--input ...] [--json]
    symjit viz MODEL-symbol.json -o net.svg [--input ...] [--optimized] [--memory-plan plan.svg]

Conventions: `--help` on every command; exit status 0 on success, 1 on a failure the input
caused (missing or malformed files, wrong shapes, a graph that cannot be compiled AOT), 2 on a
usage error (argparse); errors are one line on stderr (`symjit <command>: error: ...`), never a
traceback (SYMJIT_DEBUG=1 adds it); `main` is the one place that turns exceptions into those
lines. Output destinations are checked before any slow step; all of a command's output files
are written to temporary names and renamed together at the end, so a failed command leaves
no partial file; their permissions follow the umask. `--json` prints machine-readable results
on stdout, with absolute paths.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

__all__ = ["main"]


class CliError(Exception):
    """A failure caused by the command's input: reported as one line, exit status 1."""


#: the largest input (bytes) an --input spec may declare; larger ones are refused before
#: anything is allocated for them
MAX_INPUT_BYTES = 1 << 36


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

def parse_input_spec(text: str) -> tuple[str, tuple[int, ...], str]:
    """'data:1x3x224x224[:float32]' -> ('data', (1, 3, 224, 224), 'float32')."""
    import numpy as np
    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0]:
        raise CliError(f"--input {text!r}: expected NAME:DIMS[:DTYPE], e.g. data:1x3x224x224:float32")
    try:
        shape = tuple(int(d) for d in parts[1].lower().split("x"))
    except ValueError:
        raise CliError(f"--input {text!r}: dimensions must be integers separated by 'x'") from None
    if not shape or any(d <= 0 for d in shape):
        raise CliError(f"--input {text!r}: dimensions must be positive")
    dtype = parts[2] if len(parts) == 3 else "float32"
    try:
        dtype = np.dtype(dtype).name
    except TypeError:
        raise CliError(f"--input {text!r}: unknown dtype {dtype!r}") from None
    nbytes = np.dtype(dtype).itemsize
    for d in shape:
        nbytes *= d
    if nbytes > MAX_INPUT_BYTES:
        raise CliError(f"--input {text!r}: {nbytes} bytes, more than the {MAX_INPUT_BYTES >> 30} GiB an input "
                       "may declare")
    return parts[0], shape, dtype


def _require_file(path: str, what: str) -> None:
    if not os.path.exists(path):
        raise CliError(f"{what} {path!r} does not exist")
    if not os.path.isfile(path):
        raise CliError(f"{what} {path!r} is not a file")


def load_model(symbol_path: str, params_path: str | None):
    """(Symbol, {name: numpy array}, graph hash) from MXNet's exported files."""
    import numpy as np
    from . import ndarray as nd
    from . import symbol as sym
    _require_file(symbol_path, "symbol file")
    text = Path(symbol_path).read_bytes()
    try:
        json.loads(text, strict=False)
    except (ValueError, UnicodeDecodeError) as e:
        raise CliError(f"{symbol_path}: not valid JSON ({e})") from None
    try:
        net = sym.load(symbol_path)
    except Exception as e:  # noqa: BLE001 - any malformed graph becomes one line
        raise CliError(f"{symbol_path}: not an MXNet symbol file: {e}") from None
    params: dict = {}
    if params_path is not None:
        _require_file(params_path, "params file")
        try:
            loaded = nd.load(params_path)
        except Exception as e:  # noqa: BLE001
            raise CliError(f"{params_path}: not an MXNet .params file: {e}") from None
        if not isinstance(loaded, dict):
            raise CliError(f"{params_path}: expected named parameters (arg:/aux: keys), got a list")
        for k, v in loaded.items():
            params[k.split(":", 1)[1] if k.startswith(("arg:", "aux:")) else k] = np.asarray(v.asnumpy())
    digest = hashlib.sha256(text)
    for k in sorted(params):
        digest.update(k.encode())
        digest.update(np.ascontiguousarray(params[k]).tobytes())
    return net, params, digest.hexdigest()


def _free_inputs(net, params: dict) -> list[str]:
    return [n for n in net.list_arguments() if n not in params]


#: operator input slots that hold learned parameters (their shapes follow from the data's)
PARAMETER_SLOTS = frozenset({"weight", "bias", "gamma", "beta", "moving_mean", "moving_var", "parameters"})


def _parameter_variables(net) -> set[str]:
    """Variables read only through parameter slots of their operators (weights, biases, ...)."""
    slots: dict = {}
    for node in net._nodes():
        if node.is_variable:
            continue
        for (src, _), slot in zip(node.inputs, node.input_names()):
            if src.is_variable:
                slots.setdefault(src.name, set()).add(slot)
    return {name for name, used in slots.items() if used <= PARAMETER_SLOTS}


def _shapes(net, params: dict, specs: list[str]) -> tuple[dict, dict]:
    """Shapes and dtypes of the model's free inputs from --input specs (all must be given)."""
    parsed = [parse_input_spec(s) for s in specs]
    shapes = {n: s for n, s, _ in parsed}
    dtypes = {n: d for n, _, d in parsed}
    free = _free_inputs(net, params)
    unknown = [n for n in shapes if n not in net.list_arguments() + net.list_auxiliary_states()]
    if unknown:
        raise CliError(f"--input names {unknown} are not inputs of the model; its free inputs are {free}")
    # inputs whose shapes follow from the given ones (e.g. weights from the data shape) need no spec
    try:
        arg_shapes, _, _ = net.infer_shape_partial(**shapes)
    except Exception:  # noqa: BLE001 - a conflict is reported by the compile step with its context
        arg_shapes = [None] * len(net.list_arguments())
    inferred = {n: s for n, s in zip(net.list_arguments(), arg_shapes) if s and all(s)}
    missing = [n for n in free if n not in shapes and n not in inferred]
    if missing:
        # name the data inputs; parameters are named only when the data does not determine them
        data = [n for n in missing if n not in _parameter_variables(net)] or missing
        raise CliError(f"missing --input for {data} (e.g. --input {data[0]}:1x3x224x224)")
    for k, v in params.items():
        if k in shapes:
            continue
        shapes[k] = tuple(v.shape)
        dtypes[k] = v.dtype.name
    return shapes, dtypes


@contextmanager
def progress(enabled: bool, label: str):
    """A spinner with elapsed time on stderr while a long step runs (on a terminal). The
    yielded `report(msg, notice=False)` names the current step; a `notice` (a step that is
    slow only the first time, such as building the kernel library) is also printed as a line
    when stderr is not a terminal, so logs show why a run took long."""
    state = {"msg": label}
    if not enabled or not sys.stderr.isatty():
        def report(msg, notice=False):
            state["msg"] = msg
            if enabled and notice:
                print(f"symjit: {msg}", file=sys.stderr, flush=True)
        yield report
        return
    stop = threading.Event()
    t0 = time.perf_counter()

    def spin():
        frames = "|/-\\"
        k = 0
        while not stop.wait(0.1):
            sys.stderr.write(f"\r{frames[k % 4]} {state['msg']} ({time.perf_counter() - t0:.1f} s)\033[K")
            sys.stderr.flush()
            k += 1
    th = threading.Thread(target=spin, daemon=True)
    th.start()
    try:
        yield lambda msg, notice=False: state.__setitem__("msg", msg)
    finally:
        stop.set()
        th.join()
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()


def write_outputs(files: dict) -> None:
    """Write all of a command's output files at once ({path: bytes or str}): temporary names,
    then one rename each at the end; nothing is left behind if any of them fails."""
    from .codegen.aot import write_files_atomically
    write_files_atomically(files)


def check_outputs(*paths: str | None, flag: str = "-o") -> None:
    """Fail now, naming the user's path, if an output could not be written later."""
    from .codegen.aot import check_output_dir
    for p in paths:
        if p:
            check_output_dir(p, flag)


def _emit(args, data: dict, text: str) -> None:
    print(json.dumps(data, indent=2) if getattr(args, "json", False) else text)


def _model_args(p: argparse.ArgumentParser, need_input: bool = True) -> None:
    p.add_argument("symbol", metavar="MODEL-symbol.json", help="the graph in MXNet's JSON format")
    p.add_argument("params", metavar="MODEL-0000.params", nargs="?", help="the weights (MXNet .params)")
    p.add_argument("--input", "-i", action="append", default=[], metavar="NAME:DIMS[:DTYPE]",
                   help="shape (and dtype, default float32) of a free input, e.g. data:1x3x224x224:float32"
                   + ("" if need_input else " (needed for shapes)"))


# --------------------------------------------------------------------------------------------
# commands
# --------------------------------------------------------------------------------------------

#: graph passes switched off at each --opt level (LLVM always optimizes at O3)
OPT_DISABLED = {0: ("fusion", "conv_pool", "inplace"), 1: ("fusion", "conv_pool"), 2: (), 3: ()}


def _compile_model(args, name: str, report, profile: bool = False):
    from . import compile as sj_compile
    net, params, digest = load_model(args.symbol, args.params)
    shapes, dtypes = _shapes(net, params, args.input)
    report("optimizing")
    # cache=False: an ahead-of-time build embeds the whole lowered module (a cached plan
    # carries only what running it in this process needs)
    model = sj_compile(net, shapes=shapes, params=params, dtypes=dtypes, name=name,
                       disabled=OPT_DISABLED[getattr(args, "opt", 3)], profile=profile,
                       target=getattr(args, "cpu", "native"), cache=False)
    return model, digest


def cmd_compile(args) -> int:
    """Compile a model ahead of time into OUT.so, OUT.h and OUT.json."""
    from .codegen import aot
    if args.target == "cuda" and args.cpu != "native":
        raise CliError("--cpu applies to --target llvm")
    if args.target == "cuda":
        return _compile_cuda(args)
    out = args.output
    for suffix in (".so", ".json", ".h"):
        if out.endswith(suffix):
            out = out[: -len(suffix)]
    name = args.name or Path(out).name
    check_outputs(args.output)
    t0 = time.perf_counter()
    with progress(not args.quiet, "loading") as report:
        model, digest = _compile_model(args, name, report)
        if not model.compiled.native:
            raise CliError("cannot compile ahead of time: no native lowering for op(s) "
                           + ", ".join(aot.non_native_ops(model.compiled)))
        result = aot.build_library(model.compiled, out, name=name, graph_hash=digest, bound=model._bound,
                                   progress=report)
    # the manifest file names its neighbours relative to itself; the printed result is absolute
    _emit(args, {**result.manifest, "library": result.library, "header": result.header,
                 "manifest": result.manifest_path},
          f"wrote {result.library}, {result.header}, {result.manifest_path} "
          f"in {time.perf_counter() - t0:.1f} s")
    return 0


def _compile_cuda(args) -> int:
    """--target cuda: the inference pipeline, then codegen/cuda: OUT.cu (the generated source),
    OUT.so (nvcc: sm_80/sm_90 machine code plus PTX, weights embedded), OUT.h and OUT.json.
    The library's `symjit_graphs` entry takes host pointers (so `symjit run OUT.so` works on a
    GPU machine); `symjit_cuda_run` in OUT.h takes device pointers."""
    from .codegen.cuda import TARGET
    from .codegen.cuda.aot import build_library, find_nvcc
    from .compiler import _to_graph
    from .passes.manager import PassManager
    out = args.output
    for suffix in (".so", ".json", ".h", ".cu"):
        if out.endswith(suffix):
            out = out[: -len(suffix)]
    name = args.name or Path(out).name
    check_outputs(args.output)
    find_nvcc()     # no CUDA compiler: fail before the slow steps, nothing written
    with progress(not args.quiet, "loading") as report:
        net, params, digest = load_model(args.symbol, args.params)
        shapes, dtypes = _shapes(net, params, args.input)
        report("optimizing")
        g, _ = _to_graph(net, shapes, dtypes)
        names = {v.name for v in g.inputs}
        bound = {k: v for k, v in params.items() if k in names}
        disabled = set(OPT_DISABLED[getattr(args, "opt", 3)])
        planned = PassManager("inference", disabled=disabled, target=TARGET).run(g, bound)
        result = build_library(planned, out, name=name, graph_hash=digest, bound=bound, progress=report)
    _emit(args, {**result.manifest, "library": result.library, "header": result.header, "source": result.source,
                 "manifest": result.manifest_path},
          f"wrote {result.library}, {result.header}, {result.source}, {result.manifest_path}")
    return 0


def _select_blas(choice: str | None) -> None:
    """--blas: `auto` (scipy's OpenBLAS), a path, or `none`; sets SYMJIT_BLAS, which an AOT
    library reads when it is loaded (so before runtime.load)."""
    if choice is None:
        return
    if choice == "none":
        os.environ.pop("SYMJIT_BLAS", None)
        return
    if choice == "auto":
        from .codegen.blas import openblas_library
        found = openblas_library()
        if found is None:
            raise CliError("--blas auto: no OpenBLAS found (scipy's scipy.libs); give --blas PATH")
        choice = found
    _require_file(choice, "BLAS library")
    os.environ["SYMJIT_BLAS"] = os.path.abspath(choice)


def _load_library(path: str, blas: str | None = None):
    from . import runtime
    _require_file(path, "library")
    _select_blas(blas)
    lib = runtime.load(path)
    if len(lib) != 1:
        raise CliError(f"{path}: expected one graph, found {len(lib)}")
    return lib, lib[next(iter(lib))]


def cmd_run(args) -> int:
    """Run an AOT library on .npy inputs."""
    import io
    import numpy as np
    check_outputs(*args.output)
    lib, entry = _load_library(args.library, args.blas)
    manifest_inputs = _library_inputs(entry)
    names = [n for n, _, _ in manifest_inputs]
    given, path_of = {}, {}
    for s in args.input:
        name, sep, path = s.partition("=")
        if not sep:
            if len(names) != 1:
                raise CliError(f"--input {s!r}: name the input (NAME=FILE.npy); inputs are {names}")
            name, path = names[0], s
        _require_file(path, "input")
        try:
            given[name] = np.load(path, allow_pickle=False)
        except Exception as e:  # noqa: BLE001
            raise CliError(f"{path}: not a .npy file: {e}") from None
        path_of[name] = path
    missing = [n for n in names if n not in given]
    extra = [n for n in given if n not in names]
    if missing or extra:
        raise CliError(f"inputs are {names}; missing {missing}, unexpected {extra}")
    arrays = []
    for n, shape, dtype in manifest_inputs:
        a = given[n]
        if a.shape != shape:
            raise CliError(f"input {n!r} has shape {a.shape}, the library expects {shape}")
        if a.dtype != dtype:   # never cast silently (as runtime/examples/run_model.c)
            raise CliError(f"input {n!r} ({path_of[n]}) has dtype {a.dtype}, the library expects {dtype}; "
                           f"convert it (e.g. x.astype('{dtype}'))")
        arrays.append(np.ascontiguousarray(a))
    if args.output and len(args.output) != len(entry.outputs):
        raise CliError(f"the graph has {len(entry.outputs)} outputs, got {len(args.output)} --output paths")
    outs = entry(*arrays)
    if args.output:
        files = {}
        for path, y in zip(args.output, outs):
            buf = io.BytesIO()
            np.save(buf, y)
            files[path] = buf.getvalue()
        write_outputs(files)
    summary = [{"shape": list(y.shape), "dtype": y.dtype.name, "min": float(y.min()) if y.size else None,
                "max": float(y.max()) if y.size else None} for y in outs]
    text = "\n".join(f"output {k}: shape {tuple(s['shape'])} {s['dtype']}, min {s['min']}, max {s['max']}"
                     for k, s in enumerate(summary))
    _emit(args, {"outputs": summary, "files": [os.path.abspath(p) for p in args.output]}, text)
    return 0


def _library_inputs(entry) -> list:
    """(name, shape, numpy dtype) of a loaded library graph's inputs."""
    import numpy as np
    return [(n, tuple(shape), np.dtype(d)) for n, shape, d in entry.inputs]


def _time_calls(fn, warmup: int, repeat: int, min_time: float) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    t_end = time.perf_counter() + min_time
    while len(times) < repeat or time.perf_counter() < t_end:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 100 * max(repeat, 1):
            break
    return times


def _stats(times: list[float], batch: int) -> dict:
    import numpy as np
    med = float(np.median(times))
    return {"median_ms": med * 1e3, "p10_ms": float(np.percentile(times, 10)) * 1e3,
            "p90_ms": float(np.percentile(times, 90)) * 1e3, "calls": len(times),
            "throughput_per_s": batch / med if med > 0 else None}


def cmd_bench(args) -> int:
    """Latency and throughput of an AOT library or a model (JIT, optionally the interpreter)."""
    import numpy as np
    rng = np.random.default_rng(0)
    results = {}
    if args.symbol.endswith(".so"):
        _, entry = _load_library(args.symbol, args.blas)
        specs = _library_inputs(entry)
        arrays = [rng.standard_normal(s).astype(d) if d.kind == "f" else np.zeros(s, d) for _, s, d in specs]
        batch = specs[0][1][0] if specs and specs[0][1] else 1
        results["aot"] = _stats(_time_calls(lambda: entry(*arrays), args.warmup, args.repeat, args.min_time), batch)
    else:
        with progress(not args.quiet, "compiling") as report:
            model, _ = _compile_model(args, "bench", report, profile=args.profile is not None)
        specs = [(n, s, d) for n, s, d in model.compiled.input_specs if n in model.input_names]
        arrays = {n: (rng.standard_normal(s).astype(d) if d.kind == "f" else np.zeros(s, d)) for n, s, d in specs}
        batch = specs[0][1][0] if specs and specs[0][1] else 1
        results["jit"] = _stats(_time_calls(lambda: model(**arrays), args.warmup, args.repeat, args.min_time), batch)
        if args.profile is not None:
            results["profile"] = _node_profile(model, lambda: model(**arrays), max(10, args.repeat))
        if args.compare:
            net, params, _ = load_model(args.symbol, args.params)
            interp = _interpreter(net, params, arrays)
            results["interpreter"] = _stats(_time_calls(interp, 1, max(3, args.repeat // 10), 0.0), batch)
    timings = {k: v for k, v in results.items() if k != "profile"}
    text = "\n".join(f"{k:12s} median {v['median_ms']:.3f} ms  p10 {v['p10_ms']:.3f}  p90 {v['p90_ms']:.3f}  "
                     f"{v['throughput_per_s']:.1f} samples/s  ({v['calls']} calls)" for k, v in timings.items())
    if "jit" in results and "interpreter" in results:
        text += f"\nJIT speed-up over the interpreter: x{results['interpreter']['median_ms'] / results['jit']['median_ms']:.2f}"
    if "profile" in results:
        text += "\n" + _profile_text(results["profile"], args.profile)
    _emit(args, results, text)
    return 0


def _node_profile(model, call, calls: int) -> list[dict]:
    """Each native node's mean time per call inside the compiled code, over `calls` calls
    (after the timed ones), slowest first: [{node, op, ms, share}]."""
    model.profile(reset=True)
    for _ in range(calls):
        call()
    nodes = model.profile()
    total = sum(n.seconds for n in nodes) or 1.0
    rows = [{"node": n.node, "op": n.op, "ms": n.mean_seconds * 1e3, "share": n.seconds / total} for n in nodes]
    return sorted(rows, key=lambda r: -r["ms"])


def _profile_text(rows: list[dict], top: int) -> str:
    shown = rows[:top] if top else rows
    lines = [f"per-node time inside the compiled graph (mean per call; {len(shown)} of {len(rows)} nodes, slowest first):"]
    lines += [f"  {r['ms']:9.3f} ms  {r['share'] * 100:5.1f}%  {r['node']} ({r['op']})" for r in shown]
    return "\n".join(lines)


def _interpreter(net, params: dict, arrays: dict):
    """A callable running the model on the numpy reference implementations (no codegen)."""
    from .compiler import _to_graph
    from .ir.interpreter import run
    feeds = {**params, **arrays}
    g, _ = _to_graph(net, {k: v.shape for k, v in feeds.items()}, {k: v.dtype.name for k, v in feeds.items()})
    feed = {v.name: feeds[v.name] for v in g.inputs}
    return lambda: run(g, feed)


def cmd_inspect(args) -> int:
    """The compiler's report: passes, fusion groups, memory plan (and the IR after each pass)."""
    from . import inspect as sj_inspect
    from .passes.manager import PIPELINES
    net, params, digest = load_model(args.symbol, args.params)
    shapes, dtypes = _shapes(net, params, args.input)
    dumps: dict = {}
    if args.dump_passes:
        rep, dumps = _inspect_with_dumps(net, shapes, params, dtypes)
    else:
        rep = sj_inspect(net, shapes=shapes, params=params, dtypes=dtypes)
    data = {"graph_hash": digest, "nodes_before": rep.nodes_before, "nodes_after": rep.nodes_after,
            "passes": [n for n, _ in PIPELINES["inference"]],
            "pass_report": rep.passes.splitlines(),
            "fusion_groups": [{"name": n, "op": op, "members": m} for n, op, m in rep.groups],
            "memory_plan": rep.memory, "unoptimized_bytes": rep.unoptimized_bytes,
            "params": _params_summary(params, args.list_params)}
    if dumps:
        data["ir_after_pass"] = dumps
    text = ("".join(f"# ---- IR after {k} ----\n{v}\n\n" for k, v in dumps.items()) + str(rep)
            + "\n\n" + _params_text(data["params"]))
    _emit(args, data, text)
    return 0


def _params_summary(params: dict, listed: bool) -> dict:
    """{count, bytes} of the params file's arrays, and with `listed` each one's name, shape,
    dtype and bytes (an inspect of a large model would otherwise list thousands of lines)."""
    out = {"count": len(params), "bytes": int(sum(v.nbytes for v in params.values()))}
    if listed:
        out["arrays"] = [{"name": k, "shape": list(v.shape), "dtype": v.dtype.name, "bytes": int(v.nbytes)}
                         for k, v in params.items()]
    return out


def _params_text(summary: dict) -> str:
    head = f"parameters: {summary['count']} arrays, {summary['bytes']} B"
    if "arrays" not in summary:
        return head + (" (--list-params lists them)" if summary["count"] else "")
    return "\n".join([head + ":"] + [f"  {a['name']}: {a['dtype']}{a['shape']} {a['bytes']} B"
                                    for a in summary["arrays"]])


def _inspect_with_dumps(net, shapes, params, dtypes):
    """symjit.inspect plus the IR text after every pass ({pass name: IR}); the pass manager's
    own dump printing is captured, so stdout carries only this command's output."""
    import contextlib
    import io
    from . import inspect as sj_inspect
    old = os.environ.get("SYMJIT_DUMP_PASSES")
    os.environ["SYMJIT_DUMP_PASSES"] = "all"
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            rep = sj_inspect(net, shapes=shapes, params=params, dtypes=dtypes)
    finally:
        if old is None:
            del os.environ["SYMJIT_DUMP_PASSES"]
        else:
            os.environ["SYMJIT_DUMP_PASSES"] = old
    dumps, current = {}, None
    for line in buf.getvalue().splitlines():
        if line.startswith("# ---- after ") and line.endswith(" ----"):
            current = line[len("# ---- after "):-len(" ----")]
            dumps[current] = []
        elif current is not None:
            dumps[current].append(line)
    return rep, {k: "\n".join(v) for k, v in dumps.items()}


def cmd_viz(args) -> int:
    """Draw the network (MXNet's plot_network; --optimized: after the passes) to SVG/PNG/PDF/DOT."""
    from . import visualization as viz
    net, params, _ = load_model(args.symbol, args.params)
    shapes = dtypes = None
    if args.input or args.optimized or args.memory_plan:
        shapes, dtypes = _shapes(net, params, args.input)
    if not args.output and not args.memory_plan:
        raise CliError("nothing to draw: give -o OUT.svg and/or --memory-plan PLAN.svg")
    files = {}
    if args.output:
        fmt = Path(args.output).suffix.lstrip(".").lower()
        if fmt not in ("svg", "png", "pdf", "dot", "gv"):
            raise CliError(f"-o {args.output}: unknown format {fmt!r} (use .svg, .png, .pdf or .dot)")
    if args.memory_plan:
        mfmt = Path(args.memory_plan).suffix.lstrip(".").lower()
        if mfmt not in ("svg", "png"):
            raise CliError(f"--memory-plan {args.memory_plan}: use .svg or .png")
    check_outputs(args.output)
    check_outputs(args.memory_plan, flag="--memory-plan")
    if args.output:
        # the weights' shapes go along, so that a wrong --input shape conflicts with them
        dot = viz.plot_network(net, title=Path(args.output).stem, save_format="svg" if fmt in ("dot", "gv") else fmt,
                               shape=shapes, hide_weights=not args.show_weights, optimized=args.optimized,
                               params=params)
        if fmt in ("dot", "gv"):
            files[args.output] = dot.source
        else:
            if shutil.which("dot") is None:
                raise CliError("rendering needs Graphviz's `dot` program (install graphviz), or write .dot")
            import graphviz
            try:
                files[args.output] = dot.pipe(format=fmt, quiet=True)
            except graphviz.ExecutableNotFound:
                raise CliError("rendering needs Graphviz's `dot` program (install graphviz)") from None
    if args.memory_plan:
        files[args.memory_plan] = viz.plot_memory_plan(net, shapes, params=params, dtype=dtypes, fmt=mfmt)
    write_outputs(files)      # both pictures or neither
    _emit(args, {"files": [os.path.abspath(p) for p in files]}, "wrote " + ", ".join(files))
    return 0


def cmd_launch(argv: list[str]) -> int:
    """Delegate `symjit launch ARGS` to symjit.launch (distributed jobs; its own --help)."""
    from . import launch
    return int(launch.main(list(argv)) or 0)


# --------------------------------------------------------------------------------------------
# parser
# --------------------------------------------------------------------------------------------

def _count(least: int):
    """argparse type: an integer >= `least`."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"expected an integer >= {least}, got {value}")
        return value
    parse.__name__ = f"integer >= {least}"
    return parse


def _seconds(text: str) -> float:
    """argparse type: a finite number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    from ._version import __version__
    from .codegen.llvm.target import NAMED_CPUS
    p = argparse.ArgumentParser(prog="symjit", description="symjit: compile, run and inspect MXNet models.")
    p.add_argument("--version", action="version", version=f"symjit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    c = sub.add_parser("compile", help="compile a model ahead of time into a shared library",
                       description="Compile an exported MXNet model into OUT.so (weights embedded), OUT.h "
                                   "and OUT.json. The library needs only the C runtime.")
    _model_args(c)
    c.add_argument("--target", choices=("llvm", "cuda"), default="llvm", help="code generator (default llvm)")
    c.add_argument("--cpu", choices=("native", *NAMED_CPUS), default="native",
                   help="llvm target: the CPU the library is built for, its generated code and kernel library "
                   "(default native: this machine's CPU)")
    c.add_argument("--opt", type=int, choices=range(4), default=3, metavar="{0..3}",
                   help="graph optimization level: 0 no fusion and no in-place reuse, 1 no fusion, 2-3 all passes; "
                   "machine code is always LLVM O3 (default 3)")
    c.add_argument("-o", "--output", required=True, metavar="OUT", help="output base name (OUT.so, OUT.h, OUT.json)")
    c.add_argument("--name", help="graph name inside the library (default: OUT's base name)")
    c.add_argument("--quiet", "-q", action="store_true", help="no progress display")
    c.add_argument("--json", action="store_true", help="print the manifest as JSON")
    c.set_defaults(func=cmd_compile)

    r = sub.add_parser("run", help="run an AOT library on .npy inputs",
                       description="Run a library built by `symjit compile` on inputs from .npy files.")
    r.add_argument("library", metavar="OUT.so")
    r.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE.npy")
    r.add_argument("--output", "-o", action="append", default=[], metavar="FILE.npy",
                   help="where to save output k (give once per output)")
    r.add_argument("--blas", metavar="auto|PATH|none", help="BLAS for an AOT library's dense/conv layers: auto (scipy's OpenBLAS), a path to a "
                   "library exporting sgemm_, or none (built-in kernels; the default unless SYMJIT_BLAS is set)")
    r.add_argument("--json", action="store_true", help="print a JSON summary")
    r.set_defaults(func=cmd_run)

    b = sub.add_parser("bench", help="latency/throughput of a model (JIT) or an AOT library",
                       description="Benchmark with warm-up; reports medians. MODEL-symbol.json (with --input) "
                                   "runs the JIT, OUT.so the AOT library; --compare adds the interpreter.")
    _model_args(b, need_input=False)
    b.add_argument("--warmup", type=_count(0), default=3, help="untimed calls first (>= 0, default 3)")
    b.add_argument("--repeat", type=_count(1), default=20, help="minimum number of timed calls (>= 1, default 20)")
    b.add_argument("--min-time", type=_seconds, default=0.5, help="minimum seconds of timed calls (default 0.5)")
    b.add_argument("--compare", action="store_true", help="also time the reference interpreter")
    b.add_argument("--profile", type=_count(0), nargs="?", const=15, metavar="N",
                   help="time each node inside the compiled graph and print the N slowest (default 15; 0: all)")
    b.add_argument("--blas", metavar="auto|PATH|none", help="BLAS for an AOT library's dense/conv layers: auto (scipy's OpenBLAS), a path to a "
                   "library exporting sgemm_, or none (built-in kernels; the default unless SYMJIT_BLAS is set)")
    b.add_argument("--quiet", "-q", action="store_true")
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_bench)

    i = sub.add_parser("inspect", help="passes, fusion groups and memory plan of a model",
                       description="Run the inference pass pipeline and report what it did.")
    _model_args(i)
    i.add_argument("--dump-passes", action="store_true", help="print the IR after every pass")
    i.add_argument("--list-params", action="store_true",
                   help="list each array of the params file (default: their count and total bytes)")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=cmd_inspect)

    v = sub.add_parser("viz", help="draw a model (MXNet style, or after the passes)",
                       description="Draw the network like mx.viz.plot_network; --optimized draws the graph after "
                                   "the passes with fusion groups as clusters; --memory-plan draws the arena.")
    _model_args(v, need_input=False)
    v.add_argument("-o", "--output", metavar="NET.svg", help="output picture (.svg, .png, .pdf or .dot)")
    v.add_argument("--optimized", action="store_true", help="draw the optimized graph (needs --input)")
    v.add_argument("--memory-plan", metavar="PLAN.svg", help="also draw the memory plan (.svg or .png)")
    v.add_argument("--show-weights", action="store_true", help="do not hide weight variables")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_viz)

    if (Path(__file__).parent / "launch.py").is_file():
        # listed for --help; main() hands `symjit launch ...` to symjit.launch before parsing
        sub.add_parser("launch", help="launch a distributed job on MPI (symjit.launch; see symjit launch --help)",
                       add_help=False)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `symjit` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["launch"] and (Path(__file__).parent / "launch.py").is_file():
        return cmd_launch(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:   # `symjit inspect ... | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        sys.stderr.write("symjit: interrupted\n")
        return 130
    except Exception as e:  # noqa: BLE001 - the one place where failures become one line
        if os.environ.get("SYMJIT_DEBUG", "") not in ("", "0"):
            import traceback
            traceback.print_exc()
        sys.stderr.write(f"symjit {args.command}: error: {error_line(e)}\n")
        return 1


def error_line(e: BaseException) -> str:
    """One line for the user: the message of a symjit or input error; for an operating-system
    error the path and the reason; other exceptions keep their class name (they are bugs)."""
    from .base import MXNetError
    if isinstance(e, OSError) and e.strerror:
        where = f"{e.filename}: " if e.filename is not None else ""
        msg = f"{where}{e.strerror}"
    elif isinstance(e, MemoryError):
        msg = "out of memory" + (f" ({e})" if str(e) else "") + "; try smaller --input shapes"
    elif isinstance(e, (CliError, MXNetError)):
        msg = str(e)
    else:
        msg = f"{type(e).__name__}: {e} (SYMJIT_DEBUG=1 shows the traceback)"
    return " ".join(msg.split())


if __name__ == "__main__":
    sys.exit(main())
