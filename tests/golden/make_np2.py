"""Golden data for the mx.sym.np functions that build several operators or take attributes that
depend on the call (splits, tensor products, insert/delete, statistics, windows, linalg, random),
made with MXNet 1.9.1 (run with the reference venv only: `/work/mxref/bin/python
tests/golden/make_np2.py`). Writes tests/golden/data/np2_cases.json + np2_cases.npz:

- each case: an expression over `np` and the inputs named in `inputs`; MXNet's operator names in
  the JSON that mx.sym.np writes for it (inputs as np symbols), and the results of the same
  expression with mx.np on arrays (a list of outputs), in npz keys `<k>_<j>`.
- random cases (mx.sym.np.random and mx.sym.npx.random, `npx` in the expressions): operator
  names, output shapes and dtypes; for npx.random also MXNet's JSON, to load and run."""
import json
import os
import sys

sys.modules["onnx"] = None      # the reference venv's onnx does not import with its numpy
import mxnet as mx               # noqa: E402
import numpy as onp              # noqa: E402

mx.npx.set_np()
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

r = onp.random.RandomState(1)
INPUTS = {
    "x": r.rand(3, 4).astype(onp.float32) + 0.1,
    "y": r.rand(4).astype(onp.float32) + 0.1,
    "z": r.rand(2, 2, 4).astype(onp.float32),
    "m": (r.rand(3, 3) + 3 * onp.eye(3)).astype(onp.float32),
    "i": r.randint(0, 6, (7,)).astype(onp.int64),
    "w": r.rand(7).astype(onp.float32),
    "k": onp.array([0, 2], onp.int64),
    "e": onp.array([0.0, 0.3, 0.6, 1.0], onp.float32),
    "f": onp.array([1, 5, 11], onp.int64),
}
CASES = [
    "np.append(x, x, axis=0)", "np.append(x, y)", "np.array_split(x, 2, axis=1)", "np.array_split(x, [1, 3], axis=1)",
    "np.atleast_1d(x)", "np.atleast_2d(y, x)", "np.atleast_3d(x)", "np.average(x, axis=0)",
    "np.average(x, axis=1, weights=y)", "np.average(x)", "np.bincount(i, minlength=8)", "np.bincount(i, weights=w)",
    "np.blackman(5)", "np.hamming(6)", "np.hanning(7)", "np.delete(x, k, axis=1)", "np.delete(x, slice(0, 2), axis=1)",
    "np.diag_indices_from(m)", "np.diff(x, n=2, axis=1)", "np.diff(y)", "np.dsplit(z, 2)", "np.ediff1d(x)",
    "np.ediff1d(y, to_end=y, to_begin=3)", "np.histogram(y, bins=e)", "np.histogram(x, bins=4, range=(0, 1))",
    "np.hsplit(x, 2)", "np.hsplit(x, [1, 2])", "np.indices((2, 3))", "np.inner(x, y)", "np.inner(x, x)",
    "np.insert(y, 1, 5.0)", "np.insert(y, slice(0, 2), 5.0)", "np.insert(y, k, 7.0)", "np.insert(y, 2, y[:1])",
    "np.insert(x, k, 7.0, axis=1)", "np.invert(i)", "np.logspace(0, 2, 5)", "np.logspace(1, 2, 4, base=2.0, endpoint=False)",
    "np.outer(y, x)", "np.percentile(x, 50, axis=0)", "np.percentile(x, 25, interpolation='lower')",
    "np.polyval(y, x)", "np.quantile(x, 0.3, axis=1)", "np.resize(x, (2, 3))", "np.resize(y, (3, 3))",
    "np.tensordot(x, x, 2)", "np.tensordot(x, y, 1)", "np.tensordot(z, x, ([2], [1]))", "np.unique(i)",
    "np.unique(i, return_index=True, return_inverse=True, return_counts=True)", "np.unravel_index(f, (3, 4))",
    "np.vdot(x, x)", "np.vsplit(x, 3)", "np.linalg.norm(x)", "np.linalg.norm(x, axis=1)", "np.linalg.norm(y, 1)",
    "np.linalg.norm(x, 'fro', axis=(0, 1))", "np.linalg.inv(m)", "np.linalg.det(m)", "np.linalg.slogdet(m)",
    "np.linalg.solve(m, x)", "np.linalg.cholesky(m)", "np.linalg.eigvalsh(m + m.T)", "np.linalg.pinv(x)",
    "np.linalg.svd(x)[1]", "np.linalg.tensorinv(m, 1)",
]
RANDOM = [
    "np.random.normal(0, 1, size=(2, 3))", "np.random.uniform(x, 2.0, size=(5, 3, 4))", "np.random.normal(x, y)",
    "np.random.gamma(2.0, 1.0, size=(4,))", "np.random.exponential(x)", "np.random.randint(0, 5, size=(3,))",
    "npx.random.normal_n(x, y, batch_shape=(2,))", "npx.random.uniform_n(0, 1, batch_shape=(2, 3))",
    "npx.random.uniform_n(y, 2.0, batch_shape=5)", "npx.random.bernoulli(prob=w)",
    "npx.random.bernoulli(logit=0.3, size=(2,))", "npx.random.bernoulli(prob=0.3)",
]


#: npx calls on legacy NDArrays (`legacy` names one): MXNet refuses them; recorded are the
#: exception's type and first words
LEGACY = [
    "npx.relu(legacy)", "npx.sigmoid(legacy)", "npx.softmax(legacy)", "npx.log_softmax(legacy)",
    "npx.activation(legacy, act_type='relu')", "npx.fully_connected(legacy, legacy, num_hidden=3, no_bias=True)",
    "npx.reshape(legacy, (-1,))", "npx.one_hot(legacy, 3)", "npx.pick(legacy, x)", "npx.topk(legacy)",
    "npx.batch_dot(legacy, legacy)", "npx.gather_nd(legacy, x)", "npx.nonzero(legacy)", "npx.erf(legacy)",
    "npx.gamma(legacy)", "npx.sequence_mask(legacy)", "npx.shape_array(legacy)", "npx.dropout(legacy)",
    "npx.layer_norm(legacy, y, y)", "npx.arange_like(legacy)", "npx.cast(legacy, 'float16')",
    "npx.constraint_check(legacy > 0)", "npx.image.to_tensor(legacy)", "npx.random.normal_n(legacy, 1.0)",
    "npx.random.uniform_n(legacy)", "npx.random.bernoulli(prob=legacy)", "npx.random.bernoulli(logit=legacy)",
]


def legacy_error(expr: str) -> dict:
    env = {"npx": mx.npx, "x": mx.np.array(INPUTS["x"]), "y": mx.np.array(INPUTS["y"]),
           "legacy": mx.nd.array(INPUTS["z"])}
    try:
        eval(expr, env)
    except Exception as err:  # noqa: BLE001 - the error is the golden value
        return {"expr": expr, "type": type(err).__name__, "message": str(err).split("\n")[0][:60]}
    return {"expr": expr, "type": None, "message": ""}


def names_in(expr: str) -> list:
    return [n for n in INPUTS if any(tok == n for tok in _tokens(expr))]


def _tokens(expr: str) -> list:
    return "".join(c if c.isalnum() or c == "_" else " " for c in expr).split()


def symbol_json(expr: str) -> str:
    env = {"np": mx.sym.np, "npx": mx.sym.npx}
    env.update({n: mx.sym.var(n).as_np_ndarray() for n in names_in(expr)})
    out = eval(expr, env)
    if isinstance(out, (list, tuple)):
        out = mx.sym.Group(list(out))
    return out.tojson()


def op_names(expr: str) -> list:
    return [n["op"] for n in json.loads(symbol_json(expr))["nodes"] if n["op"] != "null"]


def eager(expr: str) -> list:
    env = {"np": mx.np, "npx": mx.npx}
    env.update({n: mx.np.array(INPUTS[n], dtype=INPUTS[n].dtype) for n in names_in(expr)})
    out = eval(expr, env)
    return [o.asnumpy() for o in (out if isinstance(out, (list, tuple)) else [out])]


def main() -> None:
    arrays = {f"input_{n}": v for n, v in INPUTS.items()}
    meta = {"cases": [], "random": [], "legacy": [legacy_error(e) for e in LEGACY]}
    for k, expr in enumerate(CASES):
        try:
            ops = op_names(expr)
        except Exception as err:  # MXNet's sym.np refuses some forms its np accepts
            ops = None
            print("sym refused:", expr, type(err).__name__)
        try:
            outs = eager(expr)
        except Exception as err:  # noqa: BLE001 - recorded and left out
            print("np refused:", expr, type(err).__name__, str(err)[:80])
            continue
        for j, o in enumerate(outs):
            arrays[f"{k}_{j}"] = o
        meta["cases"].append({"key": k, "expr": expr, "inputs": names_in(expr), "ops": ops, "n_out": len(outs)})
    for expr in RANDOM:
        outs = eager(expr)
        meta["random"].append({"expr": expr, "inputs": names_in(expr), "ops": op_names(expr),
                               "shape": list(outs[0].shape), "dtype": str(outs[0].dtype),
                               "json": symbol_json(expr) if expr.startswith("npx.") else None})
    onp.savez_compressed(os.path.join(OUT, "np2_cases.npz"), **arrays)
    with open(os.path.join(OUT, "np2_cases.json"), "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()
