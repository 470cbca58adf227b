"""npx refuses legacy NDArrays as MXNet 1.9.1 does: its operator functions raise TypeError
naming the `_npx_*` operator, its samplers MXNetError (the array is read as a parameter);
expected errors recorded from MXNet by tests/golden/make_np2.py."""
import json
from pathlib import Path

import numpy as onp
import pytest

import symjit as mx

DATA = Path(__file__).resolve().parents[1] / "golden" / "data"
LEGACY = json.loads((DATA / "np2_cases.json").read_text())["legacy"]
ARRAYS = onp.load(DATA / "np2_cases.npz")


@pytest.mark.parametrize("case", LEGACY, ids=[c["expr"] for c in LEGACY])
def test_legacy_ndarray_is_refused_as_in_mxnet(case):
    env = {"npx": mx.npx, "x": mx.np.array(ARRAYS["input_x"]), "y": mx.np.array(ARRAYS["input_y"]),
           "legacy": mx.nd.array(ARRAYS["input_z"])}
    with pytest.raises(Exception) as info:
        eval(case["expr"], env)
    assert type(info.value).__name__ == case["type"]
    want = case["message"].removeprefix("MXNetError: ")
    assert str(info.value).startswith(want[:40]), (str(info.value)[:80], want)


def test_np_arrays_and_converted_legacy_arrays_are_accepted():
    legacy = mx.nd.array(ARRAYS["input_x"])
    out = mx.npx.relu(legacy.as_np_ndarray() - 0.5)
    onp.testing.assert_allclose(out.asnumpy(), onp.maximum(ARRAYS["input_x"] - 0.5, 0))
    assert isinstance(out, mx.np.ndarray)
