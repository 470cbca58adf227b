"""symjit.test_utils against MXNet 1.9.1's documented test_utils semantics."""
import os

import numpy as np
import pytest

import symjit as mx
from symjit import test_utils as tu


def test_default_tolerances_per_dtype():
    r, a = tu.default_rtols(), tu.default_atols()
    assert (r[np.dtype(np.float16)], a[np.dtype(np.float16)]) == (1e-2, 1e-1)
    assert (r[np.dtype(np.float32)], a[np.dtype(np.float32)]) == (1e-4, 1e-3)
    assert (r[np.dtype(np.float64)], a[np.dtype(np.float64)]) == (1e-5, 1e-20)
    assert r[np.dtype(np.int32)] == 0 and a[np.dtype(np.int64)] == 0
    eps = tu.default_numeric_eps()
    assert eps[np.dtype(np.float32)] == 2.0 ** -9 and eps[np.dtype(np.float64)] == 2.0 ** -14


def test_get_tols_takes_the_looser_dtype():
    x32 = np.zeros(3, np.float32)
    x64 = np.zeros(3, np.float64)
    assert tu.get_tols(x32, x64, None, None) == (1e-4, 1e-3)
    assert tu.get_tols(x64, x64, None, None) == (1e-5, 1e-20)
    assert tu.get_tols(x64, 1.0, 0.5, None) == (0.5, 1e-20)     # python numbers count as float64
    assert tu.get_tols(x32, x32, {np.dtype(np.float32): 0.25}, None) == (0.25, 1e-3)


def test_assert_almost_equal_uses_float32_defaults():
    a = np.ones(4, np.float32)
    tu.assert_almost_equal(a, a + 5e-4)                   # within atol 1e-3 of float32
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(a.astype(np.float64), a.astype(np.float64) + 5e-4)   # float64: 1e-5/1e-20
    tu.assert_almost_equal(mx.nd.array(a), a + 5e-4)      # NDArrays compare by value


def test_assert_almost_equal_broadcasts_and_reports():
    tu.assert_almost_equal(np.ones((2, 3), np.float32), np.float32(1))
    with pytest.raises(AssertionError, match="Shape mismatch"):
        tu.assert_almost_equal(np.ones((2, 3)), np.ones(3), use_broadcast=False)
    with pytest.raises(AssertionError) as info:
        tu.assert_almost_equal(np.array([1., 2., 3., 4.]), np.array([1., 2., 3.5, 4.]), names=("got", "want"))
    text = str(info.value)
    assert "exceeds tolerance rtol=1.000000e-05, atol=1.000000e-20" in text
    assert "(mismatch 25.000000%)" in text
    assert "Location of maximum error: (2,), got=3.00000000, want=3.50000000" in text


def test_almost_equal_nan_handling():
    a = np.array([1.0, np.nan])
    assert not tu.almost_equal(a, a)
    assert tu.almost_equal(a, a, equal_nan=True)
    assert tu.almost_equal_ignore_nan(a, np.array([1.0, 5.0]))


def test_same_and_assert_exception():
    assert tu.same(mx.nd.array([1, 2]), np.array([1, 2], np.float32))
    assert not tu.same(np.array([1, 2]), np.array([1, 3]))
    tu.assert_exception(lambda: 1 / 0, ZeroDivisionError)
    with pytest.raises(AssertionError):
        tu.assert_exception(lambda: None, ValueError)


def test_same_array_detects_shared_memory():
    x = mx.nd.zeros((3,))
    assert tu.same_array(x, x)
    assert not tu.same_array(x, x.copy())


def test_random_shapes_and_arrays():
    np.random.seed(0)
    for _ in range(20):
        s2, s3, sn = tu.rand_shape_2d(4, 5), tu.rand_shape_3d(), tu.rand_shape_nd(4, dim=3)
        assert 1 <= s2[0] <= 4 and 1 <= s2[1] <= 5 and len(s3) == 3 and all(1 <= d <= 3 for d in sn)
    assert 0 in {d for _ in range(50) for d in tu.rand_shape_nd(3, dim=1, allow_zero_size=True)}
    one = tu.random_arrays((2, 3))
    assert one.shape == (2, 3) and one.dtype == np.float32
    a, b = tu.random_arrays((2,), ())
    assert a.shape == (2,) and b.shape == ()
    assert sorted(tu.random_sample(list(range(10)), 10)) == list(range(10))
    assert len(tu.random_sample([1, 2, 3], 2)) == 2


@pytest.mark.parametrize("stype", ["default", "csr", "row_sparse"])
def test_rand_ndarray_storage_types(stype):
    arr = tu.rand_ndarray((6, 4), stype, density=0.5, dtype="float64")
    assert arr.stype == stype and arr.shape == (6, 4) and np.dtype(arr.dtype) == np.float64
    if stype != "default":
        full = tu.rand_ndarray((6, 4), stype, density=1.0)
        assert np.count_nonzero(full.asnumpy()) == 24
        empty = tu.rand_ndarray((6, 4), stype, density=0.0)
        assert np.count_nonzero(empty.asnumpy()) == 0


def test_rand_sparse_ndarray_parts():
    arr, (data, indices) = tu.rand_sparse_ndarray((5, 2), "row_sparse", rsp_indices=[1, 3], data_init=2.0)
    dense = np.zeros((5, 2), np.float32)
    dense[[1, 3]] = 2.0
    assert np.array_equal(arr.asnumpy(), dense) and list(indices) == [1, 3]
    csr, (indptr, cols, values) = tu.rand_sparse_ndarray((3, 4), "csr", density=0.5)
    rebuilt = np.zeros((3, 4), np.float32)
    for r in range(3):
        rebuilt[r, cols[indptr[r]:indptr[r + 1]]] = values[indptr[r]:indptr[r + 1]]
    assert np.array_equal(rebuilt, csr.asnumpy())
    with pytest.raises(mx.MXNetError):
        tu.rand_ndarray((3, 4), "coo")


def test_np_reduce_matches_numpy():
    x = np.arange(24.0).reshape(2, 3, 4)
    assert np.array_equal(tu.np_reduce(x, (0, 2), True, np.sum), x.sum(axis=(0, 2), keepdims=True))
    assert np.array_equal(tu.np_reduce(x, 1, False, np.max), x.max(axis=1))
    assert np.array_equal(tu.np_reduce(x, None, False, np.sum), np.array(x.sum()))


def test_environment_sets_and_restores():
    os.environ.pop("SYMJIT_TEST_ENV_A", None)
    os.environ["SYMJIT_TEST_ENV_B"] = "keep"
    with tu.environment({"SYMJIT_TEST_ENV_A": "1", "SYMJIT_TEST_ENV_B": None}):
        assert os.environ["SYMJIT_TEST_ENV_A"] == "1" and "SYMJIT_TEST_ENV_B" not in os.environ
    assert "SYMJIT_TEST_ENV_A" not in os.environ and os.environ["SYMJIT_TEST_ENV_B"] == "keep"
    with pytest.raises(RuntimeError):
        with tu.environment("SYMJIT_TEST_ENV_A", "2"):
            assert os.environ["SYMJIT_TEST_ENV_A"] == "2"
            raise RuntimeError("body failed")
    assert "SYMJIT_TEST_ENV_A" not in os.environ

    @tu.environment("SYMJIT_TEST_ENV_A", "3")
    def read():
        return os.environ.get("SYMJIT_TEST_ENV_A")
    assert read() == "3" and "SYMJIT_TEST_ENV_A" not in os.environ
    del os.environ["SYMJIT_TEST_ENV_B"]


def test_discard_stderr_silences_fd2(capfd):
    with tu.discard_stderr():
        os.write(2, b"hidden\n")
    os.write(2, b"shown\n")
    assert capfd.readouterr().err == "shown\n"


def test_default_context_follows_set_default_context():
    assert tu.default_context() == mx.cpu()
    try:
        tu.set_default_context(mx.cpu(1))
        assert tu.default_context() == mx.cpu(1)
    finally:
        tu.set_default_context(mx.cpu(0))


def test_star_import_exports_mxnet_names():
    namespace = {}
    exec("from symjit.test_utils import *", namespace)
    for name in ("assert_almost_equal", "check_numeric_gradient", "environment", "np", "mx", "sys",
                 "default_rtols", "rand_ndarray", "DummyIter", "compare_optimizer", "npt"):
        assert name in namespace
    assert "check_op_gradient" not in namespace     # symjit's own helper stays out of MXNet's names


def test_simple_forward_and_symbolic_checks():
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    out = x * y + x
    a = np.random.uniform(-1, 1, (3, 4)).astype(np.float32)
    b = np.random.uniform(-1, 1, (3, 4)).astype(np.float32)
    assert np.allclose(tu.simple_forward(out, x=a, y=b), a * b + a)
    tu.check_symbolic_forward(out, {"x": a, "y": b}, [a * b + a])
    tu.check_symbolic_forward(out, [a, b], {out.list_outputs()[0]: a * b + a})
    g = np.ones((3, 4), np.float32)
    tu.check_symbolic_backward(out, [a, b], [g], [b + 1, a])
    tu.check_symbolic_backward(out, [a, b], [g], {"x": b + 1}, grad_req={"x": "add", "y": "null"})
    with pytest.raises(AssertionError):
        tu.check_symbolic_backward(out, [a, b], [g], [b, a])
    with pytest.raises(ValueError, match="do not match"):
        tu.check_symbolic_forward(out, {"x": a}, [a])


def test_check_numeric_gradient_accepts_right_and_rejects_wrong_gradients():
    x = mx.sym.Variable("x")
    a = np.random.uniform(0.5, 1.5, (2, 3))
    tu.check_numeric_gradient(mx.sym.square(x), [a], rtol=1e-2, atol=1e-3, dtype=np.float64)
    tu.check_numeric_gradient(mx.sym.tanh(x), {"x": a}, numeric_eps=1e-3, rtol=1e-2, atol=1e-3)
    # BlockGrad's backward is zero while its forward is the identity: the check must notice
    with pytest.raises(AssertionError):
        tu.check_numeric_gradient(mx.sym.BlockGrad(x) * 2, [a], rtol=1e-2, atol=1e-3)


def test_numeric_grad_both_forms():
    x = np.array([1.0, 2.0])
    g = tu.numeric_grad(lambda: float(np.sum(x ** 3)), x)
    assert np.allclose(g, 3 * x ** 2, rtol=1e-6)
    v = mx.sym.Variable("v")
    exe = (v * v).bind(mx.cpu(), args={"v": mx.nd.array(x)})
    grads = tu.numeric_grad(exe, {"v": x.copy()}, eps=1e-3, dtype=np.float64)
    assert np.allclose(grads["v"], 2 * x, rtol=1e-3)


def test_check_consistency_compares_dtypes():
    x = mx.sym.Variable("x")
    sym = mx.sym.exp(x) * 2
    ctx_list = [{"ctx": mx.cpu(0), "x": (3, 4), "type_dict": {"x": np.float64}},
                {"ctx": mx.cpu(0), "x": (3, 4), "type_dict": {"x": np.float32}},
                {"ctx": mx.cpu(0), "x": (3, 4), "type_dict": {"x": np.float16}}]
    gt = tu.check_consistency(sym, ctx_list)
    assert set(gt) >= {sym.list_outputs()[0], "x"}


def test_check_speed_returns_seconds_per_iteration():
    x = mx.sym.Variable("x")
    t = tu.check_speed(mx.sym.relu(x), N=2, x=(4, 4))
    assert 0 < t < 10
    with pytest.raises(ValueError):
        tu.check_speed(mx.sym.relu(x), N=1, typ="backward", x=(4, 4))


def test_generator_statistics_accept_and_reject():
    pytest.importorskip("scipy")
    from scipy.stats import norm
    np.random.seed(1)
    buckets, probs = tu.gen_buckets_probs_with_ppf(lambda p: norm.ppf(p), 5)
    assert probs == [0.2] * 5 and buckets[0][0] == -np.inf and buckets[-1][1] == np.inf
    tu.verify_generator(lambda n: np.random.normal(size=n), buckets, probs, nsamples=20000, nrepeat=3)
    with pytest.raises(AssertionError, match="Generator test fails"):
        tu.verify_generator(lambda n: np.random.normal(0.5, size=n), buckets, probs, nsamples=20000, nrepeat=3)
    p, obs, _ = tu.chi_square_check(lambda n: np.random.randint(0, 3, size=n), [0, 1, 2], [1 / 3] * 3, nsamples=3000)
    assert obs.sum() == 3000 and 0 <= p <= 1
    assert tu.mean_check(lambda n: np.random.normal(2.0, 1.0, size=n), 2.0, 1.0, nsamples=20000)
    assert not tu.mean_check(lambda n: np.random.normal(2.5, 1.0, size=n), 2.0, 1.0, nsamples=20000)
    assert tu.var_check(lambda n: np.random.normal(0, 2.0, size=n), 2.0, nsamples=20000)


def test_get_mnist_reads_local_files_and_fails_clearly(tmp_path):
    import gzip
    import struct
    images = np.arange(2 * 28 * 28, dtype=np.uint8).reshape(2, 28, 28)
    labels = np.array([3, 7], np.uint8)
    for stem in ("train", "t10k"):
        with gzip.open(tmp_path / f"{stem}-images-idx3-ubyte.gz", "wb") as f:
            f.write(struct.pack(">IIII", 0x803, 2, 28, 28) + images.tobytes())
        with open(tmp_path / f"{stem}-labels-idx1-ubyte", "wb") as f:
            f.write(struct.pack(">II", 0x801, 2) + labels.tobytes())
    mnist = tu.get_mnist(str(tmp_path))
    assert mnist["train_data"].shape == (2, 1, 28, 28) and mnist["train_data"].dtype == np.float32
    assert np.allclose(mnist["test_data"][1, 0], images[1] / 255.0)
    assert list(mnist["train_label"]) == [3.0, 7.0]
    with pytest.raises(mx.MXNetError, match="could not be fetched"):
        tu.download("http://127.0.0.1:9/absent.bin", dirname=str(tmp_path / "none"), retries=1)


def test_compare_optimizer_detects_differences():
    tu.compare_optimizer(mx.optimizer.SGD(learning_rate=0.1), mx.optimizer.SGD(learning_rate=0.1), (3, 4), np.float32)
    with pytest.raises(AssertionError):
        tu.compare_optimizer(mx.optimizer.SGD(learning_rate=0.1), mx.optimizer.SGD(learning_rate=0.2), (3, 4),
                             np.float32)


def test_almost_equal_compares_large_arrays_in_chunks_with_the_same_answer():
    """Arrays above one chunk are compared chunk by chunk (bounded temporaries); a single
    violating element anywhere, NaN handling and the tolerances give np.allclose's answer."""
    from symjit.test_utils import _allclose_in_chunks
    a = np.linspace(0, 1, 10_000, dtype=np.float32).reshape(100, 100)
    b = a.copy()
    assert _allclose_in_chunks(a, b, 1e-5, 1e-6, False, chunk=333)
    b[99, 99] += 1e-3
    assert not _allclose_in_chunks(a, b, 1e-5, 1e-6, False, chunk=333)
    assert _allclose_in_chunks(a, b, 1e-2, 1e-2, False, chunk=333)
    a[0, 0] = b[0, 0] = np.nan
    assert not _allclose_in_chunks(a, b, 1e-2, 1e-2, False, chunk=333)
    assert _allclose_in_chunks(a, b, 1e-2, 1e-2, True, chunk=333)
