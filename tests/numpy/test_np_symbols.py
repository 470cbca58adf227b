"""Graphs that MXNet 1.9.1 built with mx.sym.np, loaded from MXNet's JSON (its _np/_npi operator
names and attribute spellings) and run by symjit's executor, against MXNet's outputs."""
import json
from pathlib import Path

import numpy as onp
import pytest

import symjit as mx
from symjit import util

DATA = Path(__file__).resolve().parents[1] / "golden" / "data"
SYMBOLS = json.loads((DATA / "np_symbols.json").read_text())
ARRAYS = onp.load(DATA / "np_cases.npz")


#: MXNet 1.9.1's own wrong results: its symbolic _npi_delete with an int index gives an empty
#: array (the imperative np.delete is right); symjit gives numpy's result
MXNET_WRONG = {"S.delete(x, 1, axis=0)": lambda v: onp.delete(v["x"], 1, axis=0)}


@pytest.fixture
def np_shape_semantics():
    previous = util.set_np_shape(True)
    try:
        yield
    finally:
        util.set_np_shape(previous)


@pytest.mark.parametrize("k", range(len(SYMBOLS["exprs"])), ids=SYMBOLS["exprs"])
def test_mxnet_np_graph_runs_as_in_mxnet(k, np_shape_semantics):
    sym = mx.sym.load_json(SYMBOLS["json"][k])
    values = {"x": ARRAYS["input_x"], "y": ARRAYS["sym_input_y"]}
    args = {name: mx.nd.array(values[name], dtype=values[name].dtype) for name in sym.list_arguments()}
    out = sym.bind(mx.cpu(), args).forward()[0].asnumpy()
    want = ARRAYS[f"sym_{k}"]
    if SYMBOLS["exprs"][k] in MXNET_WRONG:
        assert want.size == 0
        want = MXNET_WRONG[SYMBOLS["exprs"][k]](values)
    assert out.shape == want.shape, SYMBOLS["exprs"][k]
    assert out.dtype == want.dtype, (SYMBOLS["exprs"][k], out.dtype, want.dtype)
    onp.testing.assert_allclose(out, want, rtol=2e-5, atol=1e-5, err_msg=SYMBOLS["exprs"][k])
