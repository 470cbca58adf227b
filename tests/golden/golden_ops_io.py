"""Golden operator cases: one case is one call `nd.<fn>(*inputs, **attrs)` made with MXNet 1.9.1,
stored with its inputs (dense values and storage types), attributes, outputs (dense values,
storage types, and the stored row indices of row_sparse outputs) and, where recorded, the
gradients of chosen inputs for a given head gradient.

This module imports only numpy and json: the generators (`make_*.py`, run with the MXNet 1.9.1
reference environment) write cases with it and the tests (run with symjit) read them.

File layout (an `.npz`): for case NAME the keys `NAME.meta` (a JSON string), `NAME.in<i>`,
`NAME.out<j>`, `NAME.outidx<j>` (row_sparse outputs), `NAME.head<j>`, `NAME.grad<i>`.
"""
from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

DATA_DIR = Path(__file__).resolve().parent / "data"


@dataclass
class Case:
    """One recorded call. `mode` says how the call is made: "call" (fn(*inputs, **attrs)),
    "update" (fn(*inputs, out=inputs[0], **attrs); `outputs` are then the inputs listed in
    `mutated`, after the call), or a name the tests dispatch on (e.g. "row_sparse_pull").
    `grad_of` lists the inputs whose gradients were recorded, `grad_stypes` their storage.
    `error`: the reference's error message when it refuses the call (no outputs then)."""
    name: str
    fn: str
    inputs: list
    in_stypes: list
    attrs: dict = field(default_factory=dict)
    outputs: list = field(default_factory=list)
    out_stypes: list = field(default_factory=list)
    out_indices: dict = field(default_factory=dict)
    heads: list = field(default_factory=list)
    grad_of: list = field(default_factory=list)
    grads: list = field(default_factory=list)
    grad_stypes: list = field(default_factory=list)
    mode: str = "call"
    mutated: list = field(default_factory=list)
    rtol: float = 1e-5
    atol: float = 1e-6
    error: str = ""


_META = ("fn", "in_stypes", "attrs", "out_stypes", "grad_of", "grad_stypes", "mode", "mutated", "rtol", "atol", "error")


def save_cases(path: Path, cases: list) -> None:
    """Write `cases` (unique names) into one compressed `.npz`."""
    arrays = {}
    for c in cases:
        if f"{c.name}.meta" in arrays:
            raise ValueError(f"duplicate case name {c.name}")
        meta = {k: getattr(c, k) for k in _META}
        meta.update(n_in=len(c.inputs), n_out=len(c.outputs), n_head=len(c.heads))
        arrays[f"{c.name}.meta"] = np.array(json.dumps(meta))
        for i, x in enumerate(c.inputs):
            arrays[f"{c.name}.in{i}"] = np.asarray(x)
        for j, y in enumerate(c.outputs):
            arrays[f"{c.name}.out{j}"] = np.asarray(y)
        for j, idx in c.out_indices.items():
            arrays[f"{c.name}.outidx{j}"] = np.asarray(idx)
        for j, h in enumerate(c.heads):
            arrays[f"{c.name}.head{j}"] = np.asarray(h)
        for i, g in zip(c.grad_of, c.grads):
            arrays[f"{c.name}.grad{i}"] = np.asarray(g)
    np.savez_compressed(path, **arrays)


def load_cases(path: Path) -> list:
    """The cases stored by `save_cases`, in name order."""
    with np.load(path, allow_pickle=False) as z:
        files = {k: z[k] for k in z.files}
    cases = []
    for key in sorted(k for k in files if k.endswith(".meta")):
        name = key[:-len(".meta")]
        meta = json.loads(str(files[key]))
        n_in, n_out, n_head = meta.pop("n_in"), meta.pop("n_out"), meta.pop("n_head")
        cases.append(Case(
            name=name, inputs=[files[f"{name}.in{i}"] for i in range(n_in)],
            outputs=[files[f"{name}.out{j}"] for j in range(n_out)],
            out_indices={j: files[f"{name}.outidx{j}"] for j in range(n_out) if f"{name}.outidx{j}" in files},
            heads=[files[f"{name}.head{j}"] for j in range(n_head)],
            grads=[files[f"{name}.grad{i}"] for i in meta["grad_of"]], **meta))
    return cases


# ------------------------------------------------------------------------------------------
# Making the call: shared by the generators (mx = mxnet) and the tests (mx = symjit), so both
# run a case the same way
# ------------------------------------------------------------------------------------------

def resolve(mx, path: str):
    """`mx.nd.<path>` (a dotted path such as "sparse.dot" or "contrib.box_nms")."""
    obj = mx.nd
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def make_array(mx, values: np.ndarray, stype: str):
    """An NDArray holding `values` (their dtype) in storage `stype`."""
    a = mx.nd.array(values, dtype=values.dtype)
    return a if stype == "default" else a.tostype(stype)


def _as_list(out) -> list:
    return list(out) if isinstance(out, (list, tuple)) else [out]


def run_case(mx, case: Case) -> tuple:
    """(outputs, gradients) of `case` run with `mx`: NDArrays, gradients in `case.grad_of` order."""
    arrays = [make_array(mx, x, s) for x, s in zip(case.inputs, case.in_stypes)]
    attrs = dict(case.attrs)
    train = attrs.pop("__train__", False)
    if case.mode == "row_sparse_pull":
        kv = mx.kv.create("local")
        kv.init("w", arrays[0])
        out = mx.nd.sparse.zeros("row_sparse", arrays[0].shape, dtype=arrays[0].dtype)
        kv.row_sparse_pull("w", out=out, row_ids=arrays[1])
        return [out], []
    fn = resolve(mx, case.fn)
    if case.mode == "update":
        fn(*arrays, out=arrays[0], **attrs)
        return [arrays[i] for i in case.mutated], []
    if not case.grad_of:
        with mx.autograd.train_mode() if train else mx.autograd.predict_mode():
            return _as_list(fn(*arrays, **attrs)), []
    for i, stype in zip(case.grad_of, case.grad_stypes):
        arrays[i].attach_grad(stype=stype)
    with mx.autograd.record(train_mode=train):
        outs = _as_list(fn(*arrays, **attrs))
    heads = [mx.nd.array(h, dtype=h.dtype) for h in case.heads]
    mx.autograd.backward(outs[:len(heads)], head_grads=heads)
    return outs, [arrays[i].grad for i in case.grad_of]


def describe(array) -> tuple:
    """(dense values, storage type, stored row indices or None) of an NDArray."""
    stype = array.stype
    indices = array.indices.asnumpy() if stype == "row_sparse" else None
    return array.asnumpy(), stype, indices


def record(mx, case: Case, n_heads: int = 1) -> Case:
    """`case` with its outputs and gradients filled in by running it with `mx` (the reference),
    or with `error` set when the reference refuses it. Head gradients, when gradients are wanted
    and none are given, are standard normal values (seeded by the case name) for the first
    `n_heads` outputs."""
    try:
        return _record(mx, case, n_heads)
    except mx.base.MXNetError as e:
        case.outputs, case.out_indices, case.grads, case.heads, case.grad_of = [], {}, [], [], []
        lines = [ln for ln in str(e).splitlines() if "Error" in ln or "failed" in ln] or str(e).splitlines()
        case.error = lines[-1].strip()[:300]
        return case


def _record(mx, case: Case, n_heads: int) -> Case:
    if case.grad_of and not case.heads:
        plain = Case(**{**case.__dict__, "grad_of": [], "grad_stypes": []})
        outs, _ = run_case(mx, plain)
        rng = np.random.default_rng(zlib.crc32(case.name.encode()))
        case.heads = [rng.standard_normal(o.shape).astype(o.dtype) for o in outs[:n_heads]]
    if case.grad_of and not case.grad_stypes:
        case.grad_stypes = ["default"] * len(case.grad_of)
    outs, grads = run_case(mx, case)
    case.outputs, case.out_stypes, case.out_indices = [], [], {}
    for j, y in enumerate(outs):
        values, stype, indices = describe(y)
        case.outputs.append(values)
        case.out_stypes.append(stype)
        if indices is not None:
            case.out_indices[j] = indices
    case.grads = [describe(g)[0] for g in grads]
    case.grad_stypes = [g.stype for g in grads]
    return case


def check_case(case: Case) -> None:
    """Run `case` with symjit and assert it agrees with the recorded reference: the same error
    class when the reference refused the call; otherwise, per output, the storage type, the
    stored rows (row_sparse) and the values within the case's tolerances; per recorded
    gradient, its values and storage type."""
    import symjit as mx
    if case.error:
        try:
            run_case(mx, case)
        except mx.base.MXNetError:
            return
        raise AssertionError(f"{case.name}: MXNet refuses this call ({case.error}), symjit accepts it")
    outs, grads = run_case(mx, case)
    assert len(outs) == len(case.outputs), f"{case.name}: {len(outs)} outputs, MXNet {len(case.outputs)}"
    for j, (y, want) in enumerate(zip(outs, case.outputs)):
        values, stype, indices = describe(y)
        assert stype == case.out_stypes[j], f"{case.name}: output {j} is {stype}, MXNet {case.out_stypes[j]}"
        if j in case.out_indices:
            np.testing.assert_array_equal(indices, case.out_indices[j],
                                          err_msg=f"{case.name}: stored rows of output {j}")
        assert values.dtype == want.dtype, f"{case.name}: output {j} dtype {values.dtype}, MXNet {want.dtype}"
        np.testing.assert_allclose(values, want, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name}: output {j}")
    for i, g, want, stype in zip(case.grad_of, grads, case.grads, case.grad_stypes):
        values, got_stype, _ = describe(g)
        assert got_stype == stype, f"{case.name}: gradient of input {i} is {got_stype}, MXNet {stype}"
        np.testing.assert_allclose(values, want, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name}: gradient of input {i}")
