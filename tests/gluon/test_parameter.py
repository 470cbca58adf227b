"""gluon.Parameter, Constant and ParameterDict: initialization, contexts, deferred shapes,
gradients, errors and (de)serialization, against MXNet 1.x semantics."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import symjit as mx
from symjit import autograd, gluon, nd
from symjit.base import MXNetError
from symjit.gluon.parameter import DeferredInitializationError


def test_default_initializer_is_uniform_007_and_grad_is_zero():
    p = gluon.Parameter("weight", shape=(50, 40))
    p.initialize(ctx=mx.cpu(0))
    w = p.data().asnumpy()
    assert w.shape == (50, 40) and w.dtype == np.float32
    assert np.abs(w).max() <= 0.07 and np.abs(w).max() > 0.05  # drawn from U(-0.07, 0.07)
    assert abs(w.mean()) < 0.01
    g = p.grad()
    assert g.shape == (50, 40) and not g.asnumpy().any()
    assert p.list_ctx() == [mx.cpu(0)]


def test_repr_and_var_attributes():
    p = gluon.Parameter("dense0_weight", shape=(10, 0), dtype="float32", allow_deferred_init=True)
    assert repr(p) == "Parameter dense0_weight (shape=(10, 0), dtype=float32)"
    v = p.var()
    assert v.name == "dense0_weight"
    assert v.list_attr() == {"__shape__": "(10, 0)", "__dtype__": "0", "__lr_mult__": "1.0",
                             "__wd_mult__": "1.0", "__storage_type__": "0"}
    assert p.var() is v  # created once
    b = gluon.Parameter("b", shape=(3,), init="zeros")
    assert b.var().list_attr()["__init__"] == "zeros"


def test_replicated_on_several_contexts_with_identical_values():
    p = gluon.Parameter("w", shape=(3, 4))
    p.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    a, b = p.data(mx.cpu(0)), p.data(mx.cpu(1))
    assert a.context == mx.cpu(0) and b.context == mx.cpu(1)
    np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    assert len(p.list_data()) == 2 and len(p.list_grad()) == 2
    assert p.list_ctx() == [mx.cpu(0), mx.cpu(1)]
    p.set_data(nd.ones((3, 4)))
    for arr in p.list_data():
        np.testing.assert_array_equal(arr.asnumpy(), np.ones((3, 4)))


def test_not_initialized_on_context_error_text():
    p = gluon.Parameter("weight", shape=(2, 2))
    p.initialize(ctx=mx.cpu(0))
    with pytest.warns(UserWarning, match="already initialized"):
        p.initialize(ctx=[mx.gpu(0), mx.gpu(1)])
    with pytest.raises(RuntimeError) as e:
        p.data(mx.gpu(0))
    assert str(e.value) == ("Parameter 'weight' was not initialized on context gpu(0). "
                            "It was only initialized on [cpu(0)].")
    assert isinstance(e.value, MXNetError)


def test_uninitialized_and_null_grad_errors():
    p = gluon.Parameter("w", shape=(2,))
    with pytest.raises(MXNetError, match="has not been initialized"):
        p.data()
    q = gluon.Parameter("q", shape=(2,), grad_req="null")
    q.initialize()
    with pytest.raises(MXNetError, match="because grad_req='null'"):
        q.grad()
    with pytest.raises(ValueError, match="invalid shape"):
        gluon.Parameter("z", shape=(2, 0)).initialize()
    with pytest.raises(AssertionError, match="grad_req must be one of"):
        gluon.Parameter("z", grad_req="sometimes")


def test_deferred_initialization_resolves_once_shape_is_known():
    p = gluon.Parameter("w", shape=(4, 0), allow_deferred_init=True, init=mx.init.One())
    p.initialize(ctx=mx.cpu(0))
    with pytest.raises(DeferredInitializationError, match="initialization was deferred"):
        p.data()
    assert p.list_ctx() == [mx.cpu(0)]
    p.shape = (4, 3)
    p._finish_deferred_init()
    np.testing.assert_array_equal(p.data().asnumpy(), np.ones((4, 3)))
    with pytest.raises(AssertionError, match="incompatible"):
        p.shape = (5, 3)


def test_init_precedence():
    """Parameter.initialize(init=X) uses X; through ParameterDict.initialize (X given as the
    default) a Parameter's own init wins, as in MXNet."""
    p = gluon.Parameter("b", shape=(3,), init="ones")
    p.initialize(init=mx.init.Zero())
    np.testing.assert_array_equal(p.data().asnumpy(), np.zeros(3))
    pd = gluon.ParameterDict("n_")
    pd.get("b", shape=(3,), init="ones")
    pd.initialize(mx.init.Zero())
    np.testing.assert_array_equal(pd["n_b"].data().asnumpy(), np.ones(3))
    q = gluon.Parameter("c", shape=(3,))
    q.initialize(init=mx.init.Constant(2.5))
    np.testing.assert_array_equal(q.data().asnumpy(), np.full(3, 2.5))


def test_force_reinit_redraws():
    p = gluon.Parameter("w", shape=(20,))
    p.initialize()
    first = p.data().asnumpy()
    p.initialize(force_reinit=True)
    assert not np.array_equal(first, p.data().asnumpy())


def test_gradient_flows_to_parameter_and_zero_grad():
    p = gluon.Parameter("w", shape=(3,), grad_req="add")
    p.initialize(init=mx.init.One())
    for _ in range(2):
        with autograd.record():
            y = (p.data() * nd.array([1, 2, 3])).sum()
        y.backward()
    np.testing.assert_allclose(p.grad().asnumpy(), [2, 4, 6])
    p.zero_grad()
    assert not p.grad().asnumpy().any()


def test_grad_req_null_detaches_and_back():
    p = gluon.Parameter("w", shape=(2,))
    p.initialize()
    p.grad_req = "null"
    assert p._grad is None
    with pytest.raises(MXNetError):
        p.grad()
    p.grad_req = "write"
    assert p.grad().shape == (2,)
    nodiff = gluon.Parameter("n", shape=(2,), differentiable=False)
    assert nodiff.grad_req == "null"


def test_reset_ctx_and_cast():
    p = gluon.Parameter("w", shape=(2, 2))
    p.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    before = p.data(mx.cpu(0)).asnumpy()
    p.reset_ctx(mx.cpu(2))
    assert p.list_ctx() == [mx.cpu(2)]
    np.testing.assert_array_equal(p.data().asnumpy(), before)
    p.cast("float64")
    assert p.data().dtype == np.float64 and p.grad().dtype == np.float64
    np.testing.assert_allclose(p.data().asnumpy(), before)


def test_constant():
    c = gluon.Constant("const", [[1, 2], [3, 4]])
    assert c.grad_req == "null"
    with pytest.warns(UserWarning):
        c.grad_req = "write"
    assert c.grad_req == "null"
    c.initialize()
    np.testing.assert_array_equal(c.data().asnumpy(), [[1, 2], [3, 4]])
    assert repr(c).startswith("Constant const (shape=(2, 2)")


def test_parameter_dict_get_shares_and_checks():
    pd = gluon.ParameterDict("net_")
    w = pd.get("weight", shape=(3, 0))
    assert w.name == "net_weight"
    assert pd.get("weight", shape=(3, 5)) is w and w.shape == (3, 5)  # 0 dims merge
    with pytest.raises(AssertionError, match="desired attribute does not match"):
        pd.get("weight", shape=(4, 5))
    shared = gluon.ParameterDict("net_", shared=pd)
    assert shared.get("weight") is w
    assert list(shared.keys()) == ["net_weight"]


def test_parameter_dict_repr_and_select():
    pd = gluon.ParameterDict("model_")
    pd.get("dense_weight", shape=(2, 3))
    pd.get("dense_bias", shape=(2,))
    assert repr(pd) == ("model_ (\n  Parameter model_dense_weight (shape=(2, 3), dtype=<class 'numpy.float32'>)\n"
                        "  Parameter model_dense_bias (shape=(2,), dtype=<class 'numpy.float32'>)\n)")
    assert list(pd._select(".*bias")) == ["model_dense_bias"]


def test_parameter_dict_save_load_roundtrip(tmp_path):
    pd = gluon.ParameterDict("net_")
    pd.get("weight", shape=(3, 2))
    pd.get("bias", shape=(3,), init="ones")
    pd.initialize()
    fname = str(tmp_path / "p.params")
    pd.save(fname, strip_prefix="net_")
    assert sorted(nd.load(fname)) == ["bias", "weight"]
    other = gluon.ParameterDict("net_")
    other.get("weight", shape=(3, 0), allow_deferred_init=True)
    other.get("bias", shape=(3,))
    other.load(fname, restore_prefix="net_")
    for k in ("net_weight", "net_bias"):
        np.testing.assert_array_equal(other[k].data().asnumpy(), pd[k].data().asnumpy())
    assert other["net_weight"].shape == (3, 2)
    missing = gluon.ParameterDict("net_")
    missing.get("gamma", shape=(3,))
    with pytest.raises(AssertionError, match="'gamma' is missing"):
        missing.load(fname, restore_prefix="net_")
    with pytest.raises(AssertionError, match="is not present in ParameterDict"):
        missing.load(fname, restore_prefix="net_", allow_missing=True)
    with pytest.raises(ValueError, match="does not start with"):
        pd.save(fname, strip_prefix="other_")


def test_assigning_dtype_casts_the_value_and_gradient():
    p = gluon.Parameter("w", shape=(2, 3))
    p.initialize(init=mx.init.Constant(1.5))
    p.dtype = "float16"
    assert p.data().dtype == np.float16 and p.grad().dtype == np.float16
    np.testing.assert_array_equal(p.data().asnumpy(), np.full((2, 3), 1.5))


def test_load_with_cast_dtype_keeps_current_or_takes_saved_dtype(tmp_path):
    saved = gluon.ParameterDict("")
    saved.get("w", shape=(2, 2), dtype="float32", init="ones")
    saved.initialize()
    fname = str(tmp_path / "w.params")
    saved.save(fname)
    pd = gluon.ParameterDict("")
    pd.get("w", shape=(2, 2), dtype="float64")
    with pytest.raises(AssertionError, match="dtype incompatible"):
        pd.load(fname)
    pd.load(fname, cast_dtype=True, dtype_source="current")
    assert pd["w"].data().dtype == np.float64
    # loading again into the initialized parameter with the saved dtype recasts it
    pd.load(fname, cast_dtype=True, dtype_source="saved")
    assert pd["w"].dtype == np.float32 and pd["w"].data().dtype == np.float32
    np.testing.assert_array_equal(pd["w"].data().asnumpy(), np.ones((2, 2)))


def test_parameter_dict_bulk_operations():
    pd = gluon.ParameterDict("m_")
    pd.get("a", shape=(2,))
    pd.get("b", shape=(2,))
    pd.initialize(ctx=mx.cpu(0))
    pd.setattr("grad_req", "add")
    assert all(p.grad_req == "add" for p in pd.values())
    pd.setattr("lr_mult", 0.5)
    assert all(p.lr_mult == 0.5 for p in pd.values())
    for p in pd.values():
        p.grad()._data[...] = 1
    pd.zero_grad()
    assert all(not p.grad().asnumpy().any() for p in pd.values())
    pd.reset_ctx(mx.cpu(1))
    assert pd.list_ctx() == [mx.cpu(1)]
    with pytest.raises(AssertionError, match="different Parameters with the same name"):
        pd.update({"m_a": gluon.Parameter("m_a")})


def test_initialize_warns_once_per_parameter_without_force():
    pd = gluon.ParameterDict("x_")
    pd.get("w", shape=(2,))
    pd.initialize()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        pd.initialize()
    assert any("already initialized" in str(x.message) for x in w)


def _saved_dense(tmp_path):
    net = gluon.nn.Dense(3, in_units=4, prefix="dense0_")
    net.initialize()
    path = str(tmp_path / "dense.params")
    net.collect_params().save(path)
    return path, {k: v.data().asnumpy() for k, v in net.collect_params().items()}


def test_loading_a_file_gives_each_parameter_its_own_writable_array(tmp_path):
    path, saved = _saved_dense(tmp_path)
    nets = []
    for _ in range(2):
        net = gluon.nn.Dense(3, in_units=4, prefix="dense0_")
        net.collect_params().load(path, mx.cpu())
        nets.append(net)
    a, b = (n.collect_params()["dense0_weight"] for n in nets)
    np.testing.assert_array_equal(a.data().asnumpy(), saved["dense0_weight"])
    assert a.data()._data.flags.owndata and a.data()._data.flags.writeable
    assert not np.shares_memory(a.data()._data, b.data()._data)
    a.set_data(mx.nd.zeros((3, 4)))
    np.testing.assert_array_equal(b.data().asnumpy(), saved["dense0_weight"])
    assert a.grad().shape == (3, 4) and not a.grad().asnumpy().any()


def test_loading_a_file_on_two_contexts_gives_separate_copies(tmp_path):
    path, saved = _saved_dense(tmp_path)
    net = gluon.nn.Dense(3, in_units=4, prefix="dense0_")
    net.collect_params().load(path, [mx.cpu(0), mx.cpu(1)])
    w0, w1 = net.collect_params()["dense0_weight"].list_data()
    assert not np.shares_memory(w0._data, w1._data)
    np.testing.assert_array_equal(w1.asnumpy(), saved["dense0_weight"])


def test_load_dict_copies_the_callers_arrays():
    net = gluon.nn.Dense(3, in_units=4, prefix="dense0_")
    given = {"dense0_weight": mx.nd.ones((3, 4)), "dense0_bias": mx.nd.zeros((3,))}
    net.collect_params().load_dict(given, mx.cpu())
    w = net.collect_params()["dense0_weight"].data()
    assert not np.shares_memory(w._data, given["dense0_weight"]._data)
    given["dense0_weight"][:] = 5
    np.testing.assert_array_equal(w.asnumpy(), np.ones((3, 4), np.float32))
