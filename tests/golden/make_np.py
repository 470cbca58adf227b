"""Golden data for mx.np, made with MXNet 1.9.1 (run with the reference venv only:
`/work/mxref/bin/python tests/golden/make_np.py`). Writes tests/golden/data/np_*.

- np_names.json: the public names of mx.np, mx.np.linalg, mx.np.random.
- np_dtypes.json: result dtypes of binary ops over dtype pairs, of scalar ops, unary ops,
  reductions and creation functions.
- np_cases.json + np_cases.npz: expressions (evaluated with `np` = mx.np and inputs x, y, i, b, m,
  s) and MXNet's results; the "grads" expressions f whose gradient of sum(f(x)) MXNet computed.
- np_symbols.json: graphs built with mx.sym.np, as MXNet's JSON, with their outputs in np_cases.npz.
All in `npx.set_np()` mode."""
import json
import os
import sys

sys.modules["onnx"] = None      # the reference venv's onnx does not import with its numpy
import mxnet as mx               # noqa: E402
import numpy as onp              # noqa: E402

mx.npx.set_np()
np = mx.np
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

DTYPES = ["bool", "uint8", "int8", "int32", "int64", "float16", "float32", "float64"]
BINARY = ["add", "subtract", "multiply", "true_divide", "mod", "power", "maximum", "equal", "less"]
UNARY = ["exp", "sqrt", "sin", "abs", "negative", "log", "square", "floor", "sign", "tanh", "logical_not",
         "isnan"]


def inputs() -> dict:
    r = onp.random.RandomState(0)
    return {
        "x": r.rand(3, 4).astype(onp.float32) + 0.1,
        "y": r.rand(4).astype(onp.float32) + 0.1,
        "i": r.randint(0, 10, (3, 4)).astype(onp.int32),
        "b": r.rand(3, 4) > 0.5,
        "m": (r.rand(3, 3) + 3 * onp.eye(3)).astype(onp.float32),
        "s": onp.array(2.5, onp.float32),
    }


CASES = [
    "x + y", "x - 1", "2 / x", "x ** 2", "y ** x", "x % 0.3", "-x", "i + x", "i * 2", "i / 3", "i // 3",
    "x > 0.5", "x == x", "np.sum(x)", "np.sum(x, axis=0)", "np.sum(i)", "np.sum(b)", "np.mean(i)",
    "x.mean(axis=1, keepdims=True)",
    "np.max(x, axis=1)", "np.min(i)", "np.prod(x, axis=0)", "np.std(x)", "np.var(x, axis=0, ddof=1)",
    "np.argmax(x, axis=1)", "np.argmin(x)", "np.cumsum(x, axis=1)", "np.cumsum(i)", "np.all(b)", "np.any(b, axis=0)",
    "x[1]", "x[1, 2]", "x[:, 1:3]", "x[::-1]", "x[x > 0.5]", "x[[0, 2]]", "x[[0, 2], [1, 3]]", "x[None, 1]",
    "x[..., 0]", "x[1:, np.array([0, 3], dtype='int32')]", "s * x", "s + 1", "np.exp(s)",
    "x.reshape(2, 6)", "x.reshape(-1)", "x.T", "np.transpose(x)", "np.swapaxes(x, 0, 1)", "np.expand_dims(x, 1)",
    "np.squeeze(x[None])", "np.concatenate([x, x], axis=1)", "np.stack([x, x])", "np.vstack([x, x])",
    "np.hstack([x, x])", "np.dstack([x, x])", "np.column_stack([y, y])", "np.split(x, 2, axis=1)[1]",
    "np.array_split(x, 3, axis=1)[0]", "np.flip(x, 0)", "np.fliplr(x)", "np.roll(x, 1)", "np.rot90(x)",
    "np.tile(y, 2)", "np.repeat(x, 2, axis=0)", "np.broadcast_to(y, (2, 4))", "np.ravel(x)", "np.atleast_2d(y)",
    "np.atleast_3d(x)", "np.moveaxis(x[None], 0, 2)", "np.where(b, x, 0.)", "np.clip(x, 0.3, 0.7)",
    "np.diag(m)", "np.diagflat(y)", "np.diagonal(m)", "np.trace(m)", "np.tril(m)", "np.triu(m, 1)",
    "np.dot(x, y)", "np.dot(x, x.T)", "np.matmul(x, x.T)", "np.tensordot(x, x, ([1], [1]))", "np.inner(y, y)",
    "np.outer(y, y)", "np.vdot(y, y)", "np.einsum('ij,j->i', x, y)", "np.kron(m, m[:2, :2])",
    "np.pad(x, ((1, 1), (2, 0)))", "np.take(x, np.array([0, 2], dtype='int64'), axis=1)",
    "np.linalg.norm(x)", "np.linalg.norm(x, axis=1)", "np.linalg.norm(y, 1)", "np.linalg.inv(m)",
    "np.linalg.det(m)", "np.linalg.slogdet(m)[1]", "np.linalg.solve(m, m[0])", "np.linalg.eigvalsh(m + m.T)",
    "np.linalg.cholesky(np.dot(m, m.T))", "np.linalg.pinv(x)", "np.linalg.svd(x.T @ x)[1]",
    "np.linalg.tensorinv(m, 1)", "np.sort(x, axis=1)", "np.argsort(y)", "np.unique(i)",
    "np.unique(i, return_counts=True)[1]", "np.percentile(x, 25)", "np.quantile(x, 0.5, axis=0)",
    "np.average(x, axis=1, weights=y[:4])", "np.bincount(i.reshape(-1))", "np.diff(x, axis=1)",
    "np.ediff1d(y)", "np.polyval(y, x)", "np.delete(x, 1, axis=1)", "np.insert(y, 1, 5.)", "np.resize(y, (3, 3))",
    "np.arange(5)", "np.arange(2, 7, 2)", "np.linspace(0, 1, 5)", "np.logspace(0, 2, 3)", "np.eye(3, k=1)",
    "np.identity(2)", "np.zeros_like(i)", "np.ones_like(x)", "np.full_like(x, 7)", "np.full((2,), 3)",
    "np.tri(3)" if hasattr(np, "tri") else "np.eye(2)", "np.indices((2, 3))", "np.meshgrid(y, y)[0]",
    "np.isnan(x)", "np.isinf(x / 0)", "np.isfinite(x)", "np.nan_to_num(x / 0)", "np.around(x, 1)",
    "np.maximum(x, 0.5)", "np.minimum(x, y)", "np.hypot(x, y)", "np.arctan2(x, y)", "np.copysign(x, -1.)",
    "np.logical_and(b, b)", "np.hanning(4)", "np.hamming(4)", "np.blackman(4)", "np.array([1, 2])",
    "np.array([[True, False]])", "np.array(3)", "np.interp(x, y, y)", "np.cov(x)", "np.nanmax(x)",
    "np.searchsorted(y, 0.5)", "np.nonzero(b)[1]", "np.absolute(-i)", "np.cbrt(x)", "np.log1p(x)",
    "np.reciprocal(x)", "np.trunc(x * 3)", "np.ceil(x * 3)", "np.fix(-x * 3)", "np.rint(x * 3)",
    "np.round(x, 2)", "x.astype('int32')", "np.sum(x, dtype='float64')", "np.mean(i, dtype='float64')",
    "np.arange(0, 1, 0.3)", "np.linspace(0, 1, 5, endpoint=False)", "np.eye(2, 3)", "np.cumsum(b)",
    "np.argmax(i, axis=0)", "np.clip(i, 2, 5)", "np.where(b, i, 0)", "np.abs(i)", "np.sign(-x)",
    "np.power(i, 2)", "i ** 2.5", "2 ** i", "i % 3", "np.maximum(i, 3)", "x[None, :, None]", "x[:, ::2]",
    "x[-1, -2]", "np.stack([i, i], axis=1)", "np.split(x, [1, 3], axis=1)[2]", "np.std(i)", "np.var(i, axis=0)",
    "np.max(b)", "np.prod(i, axis=1)", "np.exp(i)", "np.sqrt(b)", "np.negative(i)", "np.floor(i / 4)",
    "np.true_divide(i, 4)", "np.concatenate([i, i])", "np.unique(x.reshape(-1)[:5] * 0 + 1)",
    "np.linalg.norm(i.astype('float32'), ord=1, axis=0)", "np.linalg.norm(m, 'fro')", "np.linalg.norm(m, 'nuc')",
    "np.linalg.norm(m, np.inf)", "np.linalg.norm(y, np.inf)", "np.linalg.norm(y, -np.inf)", "np.linalg.norm(m, 2)",
    "np.abs(np.linalg.svd(x)[0])", "np.linalg.eigh(m + m.T)[0]", "np.diff(i, n=2)", "np.ravel(i)", "np.flipud(i)",
    "np.tile(i, (2, 1))", "np.rot90(i, 2)", "np.roll(i, -1, axis=0)", "np.trace(i)", "np.dot(i, i.T)",
    "np.matmul(i, i.T)", "np.outer(i[0], i[1])", "np.kron(i[0], i[1])" if hasattr(np, "kron") else "np.copy(i)",
    "np.full((2, 2), 7, dtype='int32')", "np.ones((2,), dtype='bool')", "np.zeros((2,), dtype='int64')",
    "np.array([[1, 2], [3, 4]], dtype='uint8') + np.array([1, 1], dtype='uint8')", "np.empty_like(i).shape and i",
    "np.atleast_1d(s)", "np.expand_dims(s, 0)", "s.reshape(1, 1)", "np.broadcast_arrays(y, x)[0]",
]

GRADS = [
    "x * x", "np.exp(x)", "np.log(x)", "np.sqrt(x)", "np.tanh(x)", "np.sin(x) * np.cos(x)", "x / y", "y ** x",
    "np.sum(x, axis=0)", "np.mean(x)", "np.max(x, axis=1)", "np.prod(x, axis=1)", "np.std(x, axis=0)",
    "np.var(x)", "x[x > 0.5]", "x[[0, 2], 1:3]", "x.T @ x", "np.dot(x, y)", "np.matmul(x, x.T)",
    "np.concatenate([x, 2 * x], axis=1)", "np.stack([x, x * x])", "np.where(x > 0.5, x, x * x)",
    "np.clip(x, 0.3, 0.7)", "np.linalg.norm(x)", "np.linalg.norm(x, axis=1)", "np.cumsum(x, axis=1)",
    "np.tril(x)", "np.flip(x, 1)", "np.roll(x, 2)", "np.tile(x, 2)", "np.repeat(x, 2, axis=1)",
    "np.broadcast_to(y, (3, 4)) * x", "np.einsum('ij,ij->i', x, x)", "np.tensordot(x, x, ([0], [0]))",
    "np.pad(x, 1)", "np.split(x, 2, axis=1)[0] * 3", "np.abs(x - 0.5)", "np.maximum(x, 0.5)",
    "np.average(x, axis=0)", "np.diag(x @ x.T)", "np.trace(x @ x.T)", "np.square(x).sum(axis=1, keepdims=True)",
]


#: graphs built with mx.sym.np (S) from variables x (3x4) and y (3x4): their MXNet JSON and outputs
SYMBOLS = [
    "S.sum(S.exp(x) * 2 + x, axis=1)", "1 - x / 3", "S.concatenate([x, y], axis=0)", "S.stack([x, y])",
    "x.reshape((4, 3))", "S.transpose(x)", "S.mean(x, axis=0)", "S.max(x)", "S.matmul(x, y.T)",
    "S.where(x > 0.5, x, y)", "S.dot(x, y.T)", "S.tensordot(x, y, ([1], [1]))", "S.linalg.norm(x)",
    "S.linalg.norm(x, axis=1)", "x ** 2", "2 ** x", "S.sqrt(x)", "S.squeeze(S.sum(x, axis=0, keepdims=True))",
    "S.flip(x, 1)", "S.argmax(x, axis=1)", "S.cumsum(x, axis=0)", "S.var(x)", "S.std(x, axis=1)",
    "S.prod(x, axis=0)", "S.broadcast_to(S.sum(x, axis=0, keepdims=True), (3, 4))", "S.einsum('ij,kj->ik', x, y)",
    "S.swapaxes(x, 0, 1)", "S.diag(S.dot(x, y.T))", "S.tril(S.dot(x, y.T))", "S.pad(x, ((1, 1), (0, 0)))",
    "S.repeat(x, 2, axis=0)", "S.roll(x, 1, axis=1)", "S.moveaxis(x, 0, 1)", "S.vstack([x, y])",
    "S.hstack([x, y])", "S.copy(x)", "S.around(x, 1)", "S.trace(S.dot(x, y.T))", "S.average(x, axis=0)",
    "S.diff(x, axis=1)", "S.zeros_like(x)", "S.ones_like(x)", "S.full_like(x, 3.0)", "S.abs(x - 0.5)",
    "S.floor(x * 4)", "S.log1p(x)", "S.arctan2(x, y)", "S.hypot(x, y)", "S.copysign(x, -1.0)",
    "S.true_divide(x, y)", "S.mod(x, 0.3)", "S.less(x, y)", "S.logical_not(x > 0.5)", "S.sum(x)",
    "S.atleast_2d(S.sum(x))", "S.linalg.inv(S.dot(x, y.T) + S.eye(3))", "S.linalg.det(S.dot(x, y.T))",
    "S.sort(x, axis=1)", "S.argsort(x, axis=0)", "S.insert(x, 1, 5.0, axis=1)", "S.delete(x, 1, axis=0)",
    "S.nan_to_num(x / (x - x))", "S.reciprocal(x)", "S.power(x, y)", "S.subtract(3, x)", "S.amax(x, axis=0)",
    "S.split(x, 2, axis=1)[1]", "S.hsplit(x, 2)[0]", "S.tile(x, (2, 1))", "S.expand_dims(x, 0)",
    "S.clip(x, 0.2, 0.8)", "S.maximum(x, y)", "x[1:3]", "S.column_stack([x, y])", "S.dstack([x, y])",
    "S.ediff1d(x)", "S.polyval(S.sum(x, axis=0), y)", "S.arange(5)", "S.linspace(0, 1, 5)",
    "S.eye(3, k=1)", "S.identity(3)", "S.indices((2, 3))", "S.hanning(4)",
]


def _symbols(raw) -> tuple:
    """(kept expressions, their JSON, their outputs) for SYMBOLS that MXNet runs."""
    S = mx.sym.np
    x = mx.sym.var("x").as_np_ndarray()
    y = mx.sym.var("y").as_np_ndarray()
    args = {"x": np.array(raw["x"]), "y": np.array(raw["x"][::-1] + 0.25)}
    kept, jsons, outs = [], [], {}
    for expr in SYMBOLS:
        try:
            sym = eval(expr, {"S": S, "x": x, "y": y})   # noqa: S307 - our own expression list
            if isinstance(sym, (list, tuple)):
                sym = sym[0]
            needed = {k: v for k, v in args.items() if k in sym.list_arguments()}
            out = sym.bind(mx.cpu(), needed).forward()[0].asnumpy()
        except Exception as e:       # noqa: BLE001 - MXNet cannot run it: not golden
            print(f"skip symbol {expr!r}: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
            continue
        outs[f"sym_{len(kept)}"] = out
        kept.append(expr)
        jsons.append(sym.tojson())
    outs["sym_input_y"] = args["y"].asnumpy()
    return kept, jsons, outs


def _dtype_tables() -> dict:
    arrays = {d: np.array(onp.ones(2, dtype=d)) for d in DTYPES}
    table = {}
    for op in BINARY:
        for a in DTYPES:
            for b in DTYPES:
                try:
                    table[f"{op}|{a}|{b}"] = str(getattr(np, op)(arrays[a], arrays[b]).dtype)
                except Exception:       # noqa: BLE001 - MXNet refuses the pair
                    table[f"{op}|{a}|{b}"] = "error"
    for a in DTYPES:
        for name, fn in [("add1", lambda v: v + 1), ("add1.5", lambda v: v + 1.5), ("div2", lambda v: v / 2),
                         ("mul_true", lambda v: v * True), ("rsub1", lambda v: 1 - v), ("gt1", lambda v: v > 1)]:
            try:
                table[f"scalar_{name}|{a}"] = str(fn(arrays[a]).dtype)
            except Exception:           # noqa: BLE001
                table[f"scalar_{name}|{a}"] = "error"
        for op in UNARY:
            try:
                table[f"unary_{op}|{a}"] = str(getattr(np, op)(arrays[a]).dtype)
            except Exception:           # noqa: BLE001
                table[f"unary_{op}|{a}"] = "error"
        for red in ["sum", "mean", "prod", "max", "argmax", "std", "var", "cumsum"]:
            try:
                table[f"reduce_{red}|{a}"] = str(getattr(np, red)(arrays[a]).dtype)
            except Exception:           # noqa: BLE001
                table[f"reduce_{red}|{a}"] = "error"
    return table


def _as_numpy(v):
    if isinstance(v, (list, tuple)):
        v = v[0]
    return v.asnumpy() if hasattr(v, "asnumpy") else onp.asarray(v)


def main():
    os.makedirs(OUT, exist_ok=True)
    names = {"np": [n for n in dir(mx.np) if not n.startswith("_")],
             "linalg": [n for n in dir(mx.np.linalg) if not n.startswith("_")],
             "random": [n for n in dir(mx.np.random) if not n.startswith("_")]}
    with open(os.path.join(OUT, "np_names.json"), "w") as f:
        json.dump(names, f, indent=0)

    raw = inputs()
    env = {"np": np, **{k: np.array(v, dtype=v.dtype) for k, v in raw.items()}}
    arrays = {f"input_{k}": v for k, v in raw.items()}
    ok_cases = []
    for k, expr in enumerate(CASES):
        try:
            out = _as_numpy(eval(expr, env))   # noqa: S307 - our own expression list
        except Exception as e:                 # noqa: BLE001 - MXNet cannot run it: not golden
            print(f"skip case {expr!r}: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
            continue
        arrays[f"case_{len(ok_cases)}"] = out
        ok_cases.append(expr)
    ok_grads = []
    for expr in GRADS:
        x = env["x"].copy()
        x.attach_grad()
        genv = dict(env, x=x)
        try:
            with mx.autograd.record():
                out = eval(expr, genv)          # noqa: S307
            out.backward()
            g = x.grad.asnumpy()
        except Exception as e:                 # noqa: BLE001
            print(f"skip grad {expr!r}: {type(e).__name__}: {str(e).splitlines()[0][:80]}")
            continue
        arrays[f"grad_{len(ok_grads)}"] = g
        ok_grads.append(expr)
    sym_exprs, sym_jsons, sym_outs = _symbols(raw)
    arrays.update(sym_outs)
    onp.savez_compressed(os.path.join(OUT, "np_cases.npz"), **arrays)
    with open(os.path.join(OUT, "np_symbols.json"), "w") as f:
        json.dump({"exprs": sym_exprs, "json": sym_jsons}, f)
    with open(os.path.join(OUT, "np_cases.json"), "w") as f:
        json.dump({"cases": ok_cases, "grads": ok_grads}, f, indent=0)
    # last: MXNet's refusals of dtype pairs leave its engine in a state where later ops fail
    with open(os.path.join(OUT, "np_dtypes.json"), "w") as f:
        json.dump(_dtype_tables(), f, indent=0, sort_keys=True)
    print(f"{len(ok_cases)} cases, {len(ok_grads)} gradients, {len(sym_exprs)} symbols")


if __name__ == "__main__":
    main()
