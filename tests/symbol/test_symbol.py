"""Symbol API: composition, naming, attributes, introspection, inference, eval."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError


@pytest.fixture(autouse=True)
def fresh_names():
    """Each test starts with fresh automatic-name counters (as a fresh MXNet process)."""
    with mx.name.NameManager():
        yield


def test_auto_names_follow_mxnet():
    x, y = mx.sym.Variable("x"), mx.sym.Variable("y")
    z = x + y
    assert repr(z) == "<Symbol _plus0>"
    assert repr(x + y) == "<Symbol _plus1>"
    assert (z / 100).name == "_divscalar0"
    assert (1 - x).name == "_rminusscalar0"
    assert (x ** 2).name == "_powerscalar0"
    assert (-x).name == "_mulscalar0"
    assert mx.sym.FullyConnected(x, num_hidden=3).name == "fullyconnected0"
    assert mx.sym.sum_axis(x, axis=1).name == "sum_axis0"


def test_name_manager_scopes_and_prefix():
    x = mx.sym.var("x")
    with mx.name.NameManager():
        assert mx.sym.relu(x).name == "relu0"
    with mx.name.Prefix("net_"):
        assert mx.sym.relu(x).name == "net_relu0"
        assert mx.sym.relu(x, name="r").name == "net_r"
    assert mx.sym.relu(x).name == "relu0"


def test_auto_created_variables_named_like_mxnet():
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data=data, num_hidden=10, name="fc1")
    assert fc.list_arguments() == ["data", "fc1_weight", "fc1_bias"]
    nb = mx.sym.FullyConnected(data, num_hidden=10, no_bias=True, name="fc2")
    assert nb.list_arguments() == ["data", "fc2_weight"]
    bn = mx.sym.BatchNorm(fc, name="bn0")
    assert bn.list_arguments() == ["data", "fc1_weight", "fc1_bias", "bn0_gamma", "bn0_beta"]
    assert bn.list_auxiliary_states() == ["bn0_moving_mean", "bn0_moving_var"]
    assert bn.list_inputs() == ["data", "fc1_weight", "fc1_bias", "bn0_gamma", "bn0_beta",
                                "bn0_moving_mean", "bn0_moving_var"]
    out = mx.sym.SoftmaxOutput(bn, name="softmax")
    assert out.list_arguments()[-1] == "softmax_label"
    assert out.list_outputs() == ["softmax_output"]
    # MXNet copies the op's attributes onto the variables it creates
    assert fc.get_internals()["fc1_weight"].list_attr() == {"num_hidden": "10"}


def test_explicit_inputs_by_keyword_and_position():
    w = mx.sym.var("w")
    fc = mx.sym.FullyConnected(mx.sym.var("d"), weight=w, num_hidden=4, no_bias=True, name="f")
    assert fc.list_arguments() == ["d", "w"]
    with pytest.raises(MXNetError, match="num_hiden"):
        mx.sym.FullyConnected(mx.sym.var("d"), num_hiden=4)
    with pytest.raises(MXNetError, match="FullyConnected"):
        mx.sym.FullyConnected(mx.sym.var("d"), num_hidden="abc")
    with pytest.raises(MXNetError, match="unexpected input"):
        mx.sym.relu(mx.sym.var("a"), foo=mx.sym.var("b"))


def test_multi_output_indexing_group_and_internals():
    x = mx.sym.var("x")
    parts = mx.sym.split(x, num_outputs=3, axis=1, name="sp")
    assert parts.list_outputs() == ["sp_output0", "sp_output1", "sp_output2"]
    assert len(parts) == 3
    assert parts.name is None
    assert repr(parts[1]) == "<Symbol sp>"
    assert parts["sp_output2"].list_outputs() == ["sp_output2"]
    assert [s.list_outputs()[0] for s in parts] == parts.list_outputs()
    with pytest.raises(IndexError):
        parts[3]
    g = mx.sym.Group([parts[0], x])
    assert g.list_outputs() == ["sp_output0", "x"]
    assert repr(g) == "<Symbol group [sp, x]>"
    y = mx.sym.relu(parts[2], name="r")
    internals = y.get_internals()
    assert internals.list_outputs() == ["x", "sp_output0", "sp_output1", "sp_output2", "r_output"]
    assert y.get_children().list_outputs() == ["sp_output2"]
    assert x.get_children() is None
    bn = mx.sym.BatchNorm(x, name="bn")
    assert bn.get_internals().list_outputs()[-3:] == ["bn_output", "bn_mean", "bn_var"]


def test_variable_attributes_and_attr_scope():
    v = mx.sym.Variable("w", shape=(2, 3), lr_mult=2.0, wd_mult=0.5, dtype="float16", init="zeros",
                        __extra__="e")
    assert v.list_attr() == {"__shape__": "(2, 3)", "__lr_mult__": "2.0", "__wd_mult__": "0.5",
                             "__dtype__": "2", "__init__": "zeros", "__extra__": "e"}
    assert v.attr("lr_mult") == "2.0"
    assert v.attr("__shape__") == "(2, 3)"
    assert v.attr("missing") is None
    with pytest.raises(ValueError):
        mx.sym.Variable("bad", foo="1")
    with mx.AttrScope(ctx_group="dev1", __mood__="calm"):
        a = mx.sym.Variable("a")
        b = mx.sym.relu(a, name="r")
        with mx.AttrScope(__mood__="happy"):
            c = mx.sym.Variable("c", attr={"__x__": "1"})
    assert a.list_attr() == {"__ctx_group__": "dev1", "__mood__": "calm"}
    assert a.attr("ctx_group") == "dev1"
    # an op keeps a hidden key under both spellings (MXNet's list_attr shows both)
    assert b.list_attr() == {"ctx_group": "dev1", "__ctx_group__": "dev1", "__mood__": "calm"}
    assert c.list_attr() == {"__ctx_group__": "dev1", "__mood__": "happy", "__x__": "1"}
    assert mx.sym.Variable("d").list_attr() == {}
    fc = mx.sym.FullyConnected(a, num_hidden=3, name="fc")
    d = fc.attr_dict()
    assert d["fc"] == {"num_hidden": "3"} and d["a"]["__ctx_group__"] == "dev1"
    fc._set_attr(lr_mult="3")
    assert fc.list_attr()["__lr_mult__"] == "3"
    with pytest.raises(ValueError):
        mx.AttrScope(x=1)


def test_arithmetic_matches_numpy():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    av = np.array([[1.5, -2.0, 3.0]], dtype=np.float32)
    bv = np.array([[2.0, 4.0, -1.0]], dtype=np.float32)
    cases = [
        (a + b, av + bv), (a - b, av - bv), (a * b, av * bv), (a / b, av / bv),
        (a + 1, av + 1), (2 - a, 2 - av), (a * 3, av * 3), (1 / b, 1 / bv), (b ** 2, bv ** 2),
        (2 ** a, 2 ** av), (-a, -av), (a % 2, np.mod(av, 2)), (abs(b), np.abs(bv)),
        (a > b, (av > bv).astype(np.float32)), (a <= 1.5, (av <= 1.5).astype(np.float32)),
        (a == b, (av == bv).astype(np.float32)),
        (mx.sym.maximum(a, 0), np.maximum(av, 0)), (mx.sym.minimum(b, a), np.minimum(av, bv)),
        (mx.sym.power(a, b), np.power(av, bv)),
    ]
    for sym, want in cases:
        args = {k: mx.nd.array(v) for k, v in (("a", av), ("b", bv)) if k in sym.list_arguments()}
        got = sym.eval(**args)
        assert isinstance(got, list) and len(got) == 1
        np.testing.assert_allclose(got[0].asnumpy(), want, rtol=1e-6, err_msg=repr(sym))
    assert mx.sym.power(2, 10) == 1024
    assert mx.sym.maximum(3, 7) == 7
    with pytest.raises(TypeError):
        a + "x"


def test_compose_call_and_deepcopy():
    x = mx.sym.var("x")
    net = mx.sym.relu(mx.sym.var("data"), name="r")
    composed = net(data=x * 2)
    assert composed.list_arguments() == ["x"]
    assert net.list_arguments() == ["data"]  # the original is untouched
    np.testing.assert_allclose(composed.eval(x=mx.nd.array([-1.0, 2.0]))[0].asnumpy(), [0.0, 4.0])
    pos = net(x)
    assert pos.list_arguments() == ["x"]
    dup = copy.deepcopy(net)
    dup._set_attr(__tag__="t")
    assert net.attr("__tag__") is None and dup.attr("__tag__") == "t"
    with pytest.raises(TypeError):
        net(data=3)


def test_infer_shape_and_type():
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=10, name="fc")
    net = mx.sym.relu(fc)
    arg, out, aux = net.infer_shape(data=(4, 7))
    assert arg == [(4, 7), (10, 7), (10,)] and out == [(4, 10)] and aux == []
    assert net.infer_shape(fc_bias=(10,)) == (None, None, None)
    arg, out, aux = net.infer_shape_partial(fc_bias=(10,))
    # MXNet's FullyConnected deduces nothing (not even the weight's rows) before data's rank
    assert arg == [(), (), (10,)] and out == [()]
    arg, out, aux = net.infer_shape((2, 3))
    assert out == [(2, 10)]
    ta, to, tx = net.infer_type(data="float64")
    assert ta == [np.float64] * 3 and to == [np.float64]
    assert net.infer_type() == (None, None, None)
    v = mx.sym.var("v", shape=(3, 4), dtype="float16")
    assert mx.sym.relu(v).infer_shape()[1] == [(3, 4)]
    assert mx.sym.relu(v).infer_type()[1] == [np.float16]
    with pytest.raises(MXNetError, match="not an input"):
        net.infer_shape(nope=(1,))


def test_infer_shape_error_names_node_op_and_shapes():
    a, b = mx.sym.var("a"), mx.sym.var("b")
    s = mx.sym.elemwise_add(a, b, name="adder")
    with pytest.raises(MXNetError) as e:
        s.infer_shape(a=(2, 3), b=(3, 2))
    msg = str(e.value)
    assert "adder" in msg and "elemwise_add" in msg and "(2, 3)" in msg and "(3, 2)" in msg


def test_astype_fluent_and_reshape():
    x = mx.sym.var("x")
    y = x.astype("int32")
    out = y.eval(x=mx.nd.array([1.7, -2.2]))[0]
    assert out.dtype == np.int32 and out.asnumpy().tolist() == [1, -2]
    s = x.sum(axis=1)
    np.testing.assert_allclose(s.eval(x=mx.nd.array([[1, 2], [3, 4]]))[0].asnumpy(), [3, 7])
    r = x.reshape((2, -1))
    assert r.infer_shape(x=(4,))[1] == [(2, 2)]
    with pytest.raises(AttributeError):
        x.no_such_method


def test_e45_graph_builds():
    user, item, score = mx.symbol.Variable("user"), mx.symbol.Variable("item"), mx.symbol.Variable("score")
    user = mx.symbol.Embedding(data=user, input_dim=100, output_dim=64)
    item = mx.symbol.Embedding(data=item, input_dim=50, output_dim=64)
    net = user * item
    net = mx.symbol.sum_axis(data=net, axis=1)
    net = mx.symbol.Flatten(data=net)
    net = mx.symbol.LinearRegressionOutput(data=net, label=score)
    assert net.list_arguments() == ["user", "embedding0_weight", "item", "embedding1_weight", "score"]
    assert net.list_outputs() == ["linearregressionoutput0_output"]
    with open("/work/shared/models/matfact-symbol.json") as f:
        assert net.tojson() == f.read()  # the visualization example, as MXNet saved it
    arg, out, _ = net.infer_shape(user=(8,), item=(8,), score=(8, 1))
    assert out == [(8, 1)] and arg[1] == (100, 64)


def test_eval_errors_and_bool():
    x = mx.sym.var("x")
    with pytest.raises(MXNetError, match="missing"):
        (x + mx.sym.var("y")).eval(x=mx.nd.ones((2,)))
    with pytest.raises(mx.base.NotImplementedForSymbol):   # an MXNetError, as in MXNet
        bool(x)


def test_autograd_get_symbol():
    x = mx.nd.array([1.0, 2.0])
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.relu(x * 2) + x
    s = mx.autograd.get_symbol(y)
    assert s.list_arguments() == ["var0"]
    assert [n["name"] for n in json.loads(s.tojson())["nodes"]] == ["var0", "node_0", "node_1", "node_2"]
    np.testing.assert_allclose(s.eval(var0=mx.nd.array([-1.0, 3.0]))[0].asnumpy(), [-1.0, 9.0])
    c = mx.nd.array([10.0, 20.0])
    with mx.autograd.record():
        z = x * c
    s = mx.autograd.get_symbol(z)
    assert s.list_arguments() == ["var0", "null1"]
    np.testing.assert_allclose(s.eval(var0=mx.nd.array([1.0, 2.0]), null1=c)[0].asnumpy(), [10.0, 40.0])
    with pytest.raises(MXNetError):
        mx.autograd.get_symbol(mx.nd.ones((1,)))


def test_every_registered_op_composes_as_mx_sym_opname():
    from symjit.ops import get_op, list_ops
    from symjit.ops.attrs import REQUIRED
    composed = 0
    for name in list_ops():
        fn = getattr(mx.sym, name, None)
        assert callable(fn), f"mx.sym.{name} is missing"
        op = get_op(name)
        if any(p.default is REQUIRED for k, p in op.params.items() if k != "num_args"):
            continue
        if "num_args" in op.params:
            s = fn(mx.sym.var("a"), mx.sym.var("b"), name="n")
            assert s.list_arguments()[:2] == ["a", "b"]
        else:
            s = fn(name="n")
            # every input left out becomes an automatically named variable
            names = op.input_names(op.parse({}))
            assert s.list_inputs() == [f"n_{i}" for i in names], name
        assert s.list_outputs()[0].startswith("n_")
        composed += 1
    assert composed > 100


def test_sub_namespaces_dispatch_like_mxnet():
    s = mx.sym.random.uniform(low=0, high=1, shape=(2, 3))
    assert s.get_internals().list_outputs() == ["_random_uniform0_output"]
    t = mx.sym.random.normal(mx.sym.var("mu"), mx.sym.var("sigma"), shape=(2,))
    assert t.list_arguments() == ["mu", "sigma"]
    assert json_op(t) == "_sample_normal"
    assert mx.attribute.AttrScope is mx.AttrScope
    with pytest.raises(AttributeError):
        mx.sym.linalg.no_such_thing


def json_op(sym):
    import json
    return json.loads(sym.tojson())["nodes"][-1]["op"]


def test_attribute_values_are_sent_as_mxnet_strings():
    x = mx.sym.var("x")
    s = mx.sym.Convolution(x, kernel=(3, 3), num_filter=8, no_bias=True, name="c")
    assert s.list_attr() == {"kernel": "(3, 3)", "num_filter": "8", "no_bias": "True"}
    c = mx.sym.Cast(x, dtype=np.float16, name="k")
    assert c.list_attr() == {"dtype": "float16"}
    v = mx.sym.var("v", shape=[2, 3])
    assert mx.sym.relu(v).infer_shape()[1] == [(2, 3)]


def test_pickle_round_trips_through_json():
    import pickle
    s = mx.sym.FullyConnected(mx.sym.var("x", shape=(2, 3)), num_hidden=4, name="fc")
    back = pickle.loads(pickle.dumps(s))
    assert back.tojson() == s.tojson() and back.infer_shape()[1] == [(2, 4)]
