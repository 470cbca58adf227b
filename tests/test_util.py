"""mxnet.util switches and mxnet.base helpers against MXNet 1.9.1's documented behaviour."""
import os

import pytest

import symjit as mx
from symjit import util
from symjit.base import NotImplementedForSymbol, _as_list, py_str


def test_np_shape_scope_and_decorator_restore_the_switch():
    assert not util.is_np_shape()
    with mx.np_shape():
        assert util.is_np_shape()
        with mx.np_shape(False):
            assert not util.is_np_shape()
        assert util.is_np_shape()
    assert not util.is_np_shape()
    assert util.set_np_shape(True) is False and util.set_np_shape(False) is True

    @util.use_np
    def inside():
        return util.is_np_shape(), util.is_np_array()
    assert inside() == (True, True) and not util.is_np_array()


def test_use_np_on_a_class_wraps_its_methods():
    @util.use_np_shape
    class Block:
        def __init__(self):
            self.at_init = util.is_np_shape()

        def forward(self):
            return util.is_np_shape()
    b = Block()
    assert b.at_init and b.forward() and not util.is_np_shape()


def test_set_np_refuses_array_without_shape():
    with pytest.raises(ValueError):
        util.set_np(shape=False, array=True)
    util.set_np()
    assert util.is_np_shape() and util.is_np_array()
    util.reset_np()
    assert not util.is_np_shape() and not util.is_np_array()


def test_setenv_getenv():
    util.setenv("SYMJIT_UTIL_TEST", "x")
    assert util.getenv("SYMJIT_UTIL_TEST") == "x" == os.environ["SYMJIT_UTIL_TEST"]
    util.setenv("SYMJIT_UTIL_TEST", None)
    assert util.getenv("SYMJIT_UTIL_TEST") is None


def test_base_helpers():
    assert py_str(b"caf\xc3\xa9") == "café" and py_str("x") == "x"
    assert _as_list(3) == [3] and _as_list((1, 2)) == (1, 2)
    err = NotImplementedForSymbol(len, "len", 1)
    assert isinstance(err, mx.MXNetError)
    assert str(err) == ("Function len (namely operator \"len\") with arguments (<class 'int'>) is not "
                        "implemented for Symbol and only available in NDArray.")


def test_version_is_the_mxnet_api_level():
    assert mx.__version__ == "1.9.1"
    assert mx.__symjit_version__ != mx.__version__


def test_runtime_features():
    feats = mx.runtime.Features()
    assert feats.is_enabled("INT64_TENSOR_SIZE") and not feats.is_enabled("MKLDNN")
    assert feats.is_enabled("cpu_sse2") == feats["CPU_SSE2"].enabled
    with pytest.raises(RuntimeError, match="unknown"):
        feats.is_enabled("NO_SUCH_FEATURE")
    assert {f.name for f in mx.runtime.feature_list()} == set(feats)


def test_numpy_subset():
    import symjit.numpy as mnp
    x = mnp.random.uniform(size=(4, 3))
    assert x.shape == (4, 3) and 0 <= x.asnumpy().min() and x.asnumpy().max() < 1
    assert mnp.concatenate([x, x], axis=1).shape == (4, 6)
    assert mnp.stack([x, x]).shape == (2, 4, 3)
    assert isinstance(x, mnp.ndarray) and isinstance(x, mx.nd.NDArray)


def test_np_shape_cannot_be_turned_off_under_the_array_switch():
    util.set_np()
    try:
        assert util.is_np_array() and util.is_np_shape()
        with pytest.raises(ValueError, match="reset_np"):
            util.set_np_shape(False)
        assert util.is_np_shape()
    finally:
        util.reset_np()
    assert not util.is_np_array() and not util.is_np_shape()


def test_feature_indices_follow_the_list():
    features = mx.runtime.feature_list()
    assert [f.index for f in features] == list(range(len(features)))
    expected = {"CUDA", "CUDNN", "NCCL", "CUDA_RTC", "TENSORRT", "CPU_SSE", "CPU_SSE2", "CPU_SSE3", "CPU_SSE4_1",
                "CPU_SSE4_2", "CPU_SSE4A", "CPU_AVX", "CPU_AVX2", "OPENMP", "SSE", "F16C", "JEMALLOC", "BLAS_OPEN",
                "BLAS_ATLAS", "BLAS_MKL", "BLAS_APPLE", "LAPACK", "MKLDNN", "OPENCV", "CAFFE", "PROFILER",
                "DIST_KVSTORE", "CXX14", "INT64_TENSOR_SIZE", "SIGNAL_HANDLER", "DEBUG", "TVM_OP"}
    assert expected <= {f.name for f in features}     # MXNet 1.9.1's names, all present
    assert repr(features[0]) in ("✔ CUDA", "✖ CUDA")


def test_gpu_memory_queries():
    n = util.get_gpu_count()
    assert n == mx.context.num_gpus()
    with pytest.raises(mx.base.MXNetError, match=f"no GPU {n}"):
        util.get_gpu_memory(n)
    with pytest.raises(mx.base.MXNetError, match="no GPU"):
        mx.context.gpu_memory_info(-1)
    for dev in range(n):
        free, total = mx.context.gpu_memory_info(dev)
        assert 0 < free <= total and util.get_gpu_memory(dev)[1] == total
