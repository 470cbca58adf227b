"""AOT libraries hold each weight once: weights the kernel library reads packed (convolution
panels, Winograd transforms) are packed again when the library is first used, from the
embedded source, instead of being embedded a second time (a library was twice its weights)."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import symjit as mx
from symjit import runtime
from symjit.codegen import aot

from shared_data import model_path

needs_cc = pytest.mark.skipif(shutil.which("cc") is None, reason="needs the system C compiler `cc`")

#: what a library holds besides its weights (generated code, runtime and kernel library): well
#: under this many bytes
CODE_BYTES = 2 << 20


@pytest.fixture
def jit_blas(monkeypatch):
    """The AOT library binds the BLAS the JIT uses, so that their outputs can be compared bit for
    bit: on a host without the AVX-512 tiles the portable path runs GEMMs through scipy's
    OpenBLAS in the JIT, while a library uses its built-in loops unless SYMJIT_BLAS names one
    (the two sum in different orders)."""
    from symjit.codegen.blas import openblas_library
    path = openblas_library()
    if not runtime.native_kernels_in_use() and path:
        monkeypatch.setenv("SYMJIT_BLAS", path)


def _two_convs():
    """64 -> 256 channels 3x3 at 14x14 (Winograd), max pool, 256 -> 256 3x3 at 7x7 (filter-vector
    panels): 2.9 MB of weights, 3.5 MB more once packed."""
    x = mx.sym.var("data")
    y = mx.sym.Convolution(x, kernel=(3, 3), pad=(1, 1), num_filter=256, name="c1")
    y = mx.sym.Activation(y, act_type="relu")
    y = mx.sym.Pooling(y, kernel=(2, 2), stride=(2, 2), pool_type="max")
    y = mx.sym.Convolution(y, kernel=(3, 3), pad=(1, 1), num_filter=256, name="c2")
    rng = np.random.default_rng(1)
    params = {"c1_weight": rng.standard_normal((256, 64, 3, 3)).astype(np.float32) * 0.05,
              "c1_bias": rng.standard_normal(256).astype(np.float32),
              "c2_weight": rng.standard_normal((256, 256, 3, 3)).astype(np.float32) * 0.05,
              "c2_bias": rng.standard_normal(256).astype(np.float32)}
    return y, params


@needs_cc
def test_packed_weights_are_not_embedded_twice(tmp_path, jit_blas):
    """The NCHW kernels' packings (the blocked layout, which packs in Python, is off)."""
    net, params = _two_convs()
    model = mx.compile(net, shapes={"data": (1, 64, 14, 14)}, params=params, disabled=("blocked_layout",))
    res = aot.build_library(model.compiled, str(tmp_path / "convs"), name="convs", bound=model._bound)
    manifest = json.loads(Path(res.manifest_path).read_text())
    weights = sum(v.nbytes for v in params.values())
    assert manifest["params"]["bytes"] == weights
    packed = manifest["params"]["packed_when_loaded"]
    if runtime.native_kernels_in_use():       # the AVX-512 kernels pack both convolutions' weights
        assert packed["count"] == 2 and packed["bytes"] > weights
    size = os.path.getsize(res.library)
    assert weights < size < weights + CODE_BYTES, (size, weights, packed)
    # the packing at load gives the compile-time result: outputs equal the JIT's
    x = np.random.default_rng(2).standard_normal((1, 64, 14, 14)).astype(np.float32)
    (got,) = runtime.load(res.library)["convs"](x)
    np.testing.assert_array_equal(got, model(data=x)[0])


@needs_cc
def test_weights_read_only_packed_are_not_embedded(tmp_path, jit_blas):
    """Constants the code never reads (weights it reads only in a packed copy, e.g. the
    blocked layout's panels, packed at compile time) are left out of the library."""
    net, params = _two_convs()
    model = mx.compile(net, shapes={"data": (1, 64, 14, 14)}, params=params)
    res = aot.build_library(model.compiled, str(tmp_path / "convs"), name="convs", bound=model._bound)
    manifest = json.loads(Path(res.manifest_path).read_text())["params"]
    weights = sum(v.nbytes for v in params.values())
    embedded = manifest["bytes"] + manifest["packed_when_loaded"]["bytes"]
    unread = manifest["unread"]
    if runtime.native_kernels_in_use():
        assert unread["count"] + manifest["packed_when_loaded"]["count"] >= 2
    # each weight once: what is embedded or packed at load is about the weights' size, not twice
    assert embedded < 1.5 * weights, manifest
    assert os.path.getsize(res.library) < 1.5 * weights + CODE_BYTES
    x = np.random.default_rng(2).standard_normal((1, 64, 14, 14)).astype(np.float32)
    (got,) = runtime.load(res.library)["convs"](x)
    np.testing.assert_array_equal(got, model(data=x)[0])


@needs_cc
@pytest.mark.slow
def test_resnet18_library_is_the_size_of_its_weights(tmp_path):
    from symjit.cli import main
    assert main(["compile", str(model_path("resnet18_v1-symbol.json")), str(model_path("resnet18_v1-0000.params")),
                 "-i", "data:1x3x224x224", "-q", "-o", str(tmp_path / "r18")]) == 0
    weights = os.path.getsize(model_path("resnet18_v1-0000.params"))     # 47 MB
    size = os.path.getsize(tmp_path / "r18.so")                        # was 100 MB
    assert size < weights + CODE_BYTES, (size, weights)
    x = np.load(model_path("resnet18_v1-input.npy"))
    ref = np.load(model_path("resnet18_v1-output.npy"))
    (got,) = runtime.load(str(tmp_path / "r18.so"))["r18"](x)
    assert np.abs(got - ref).max() <= 1e-4 * max(1.0, float(np.abs(ref).max()))
