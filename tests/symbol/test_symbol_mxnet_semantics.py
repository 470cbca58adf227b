"""Symbol behaviours MXNet 1.9.1 documents and its own unit tests rely on: attributes, partial
shape inference (legacy and numpy shape semantics), JSON flags, structure helpers."""
import json
import warnings

import numpy as np
import pytest

import symjit as mx
from symjit import sym


def test_hidden_keys_on_ops_are_kept_under_both_spellings():
    data = sym.Variable("data", attr={"mood": "angry"})
    op = sym.Convolution(data=data, name="conv", kernel=(1, 1), num_filter=1,
                         attr={"__mood__": "so so", "wd_mult": "x"}, lr_mult=1)
    attrs = op.list_attr()
    assert attrs["wd_mult"] == attrs["__wd_mult__"] == "x"
    assert attrs["lr_mult"] == attrs["__lr_mult__"] == "1"
    assert op.attr_dict()["conv_weight"]["__mood__"] == "so so"
    with pytest.raises(mx.MXNetError, match="unknown attribute 'foo'"):
        sym.Convolution(data=data, kernel=(1, 1), num_filter=1, foo=1)


def test_prelu_gamma_starts_at_a_quarter():
    net = sym.LeakyReLU(data=sym.Variable("data"), act_type="prelu", name="act")
    mod = mx.mod.Module(net, label_names=None)
    mod.bind(data_shapes=[("data", (4, 4))])
    mod.init_params()
    assert list(mod.get_params()[0]) == ["act_gamma"]
    assert (mod.get_params()[0]["act_gamma"].asnumpy() == 0.25).all()


def test_inference_with_repeated_variable_names():
    net = sym.FullyConnected(sym.Variable("data"), name="fc", num_hidden=8)
    net = sym.FullyConnected(net, name="fc", num_hidden=2)
    args, outs, _ = net.infer_shape(data=(5, 3))
    assert net.list_arguments() == ["data", "fc_weight", "fc_bias", "fc_weight", "fc_bias"]
    assert args == [(5, 3), (8, 3), (8,), (2, 8), (2,)] and outs == [(5, 2)]
    with pytest.raises(mx.MXNetError, match="two different variables"):
        net.simple_bind(mx.cpu(), data=(5, 3))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        pytest.importorskip("graphviz")
        mx.viz.plot_network(net, shape={"data": (5, 3)})
    assert any("multiple variables with the same name" in str(x.message) for x in w)


def test_given_shape_replaces_the_declared_one():
    a = sym.Variable("a", shape=(2, 3))
    c = sym.elemwise_add(a, sym.Variable("b"))
    assert c.infer_shape()[0] == [(2, 3), (2, 3)]
    assert c.infer_shape(a=(5, 6)) == ([(5, 6), (5, 6)], [(5, 6)], [])


def test_partial_inference_legacy_and_numpy_spelling():
    x = sym.sin(sym.var("data"))
    assert x.infer_shape_partial() == ([()], [()], [])
    with mx.np_shape():
        assert x.infer_shape_partial() == ([None], [None], [])
        _, out, _ = sym.dot(sym.var("x"), sym.var("y")).infer_shape_partial(x=(-1, 3, 4), y=(4, 5))
        assert out == [(-1, 3, 5)]
    _, out, _ = sym.dot(sym.var("x"), sym.var("y")).infer_shape_partial(x=(0, 3, 4), y=(4, 5))
    assert out == [(0, 3, 5)]
    # batch_dot and where wait for the shapes that decide them
    _, out, _ = sym.batch_dot(sym.var("x"), sym.var("y")).infer_shape_partial(x=(0, 3, 4), y=(0, 0, 5))
    assert out == [()]
    _, out, _ = sym.where(sym.var("c"), sym.var("x"), sym.var("y")).infer_shape_partial(
        c=(0, 2), x=(0, 2), y=(0, 2))
    assert out == [()]


def test_fully_connected_needs_data_rank_before_deducing_its_weight():
    out = sym.Activation(sym.elemwise_add(sym.FullyConnected(sym.var("data"), name="x2h", num_hidden=4),
                                          sym.FullyConnected(sym.var("prev"), name="h2h", num_hidden=4)),
                         act_type="relu")
    args = dict(zip(out.list_arguments(), out.infer_shape_partial(data=(10, 6))[0]))
    assert args["x2h_weight"] == (4, 6) and args["h2h_weight"] == ()


@pytest.mark.parametrize("build, expect", [
    # FullyConnected: the batch comes back from the output
    (lambda: sym.FullyConnected(sym.Variable("a", shape=(0, 10)), num_hidden=21)
     + sym.Variable("c", shape=(5, 0)), {"a": (5, 10), "c": (5, 21)}),
    # Convolution: batch and (stride 1) spatial sizes from the output
    (lambda: sym.Convolution(sym.Variable("a", shape=(0, 10, 0, 0)), num_filter=21, kernel=(3, 3),
                             pad=(1, 1)) + sym.Variable("c", shape=(5, 21, 32, 32)), {"a": (5, 10, 32, 32)}),
    # SliceChannel with squeeze_axis
    (lambda: sym.SliceChannel(sym.Variable("a", shape=(0, 10)), num_outputs=10, axis=1,
                              squeeze_axis=True)[1] + sym.Variable("c", shape=(5,)), {"a": (5, 10)}),
    # Concat: the other dims of every input, and the concat size of the only unknown one
    (lambda: sym.Variable("d", shape=(2, 0)) + sym.Concat(sym.Variable("a", shape=(0, 10)),
                                                          sym.Variable("b", shape=(0, 5)), num_args=2, dim=1),
     {"a": (2, 10), "b": (2, 5), "d": (2, 15)}),
])
def test_shapes_flow_back_from_outputs(build, expect):
    net = build()
    args = dict(zip(net.list_arguments(), net.infer_shape()[0]))
    for name, shape in expect.items():
        assert args[name] == shape


def test_identity_with_attr_like_rhs_ties_shapes():
    w = sym.Variable("weight")
    wt = sym._internal._identity_with_attr_like_rhs(
        sym.broadcast_add(w, sym.Variable("wshift", shape=(1,))), w)
    net = sym.FullyConnected(data=sym.Variable("data"), weight=wt, num_hidden=11, no_bias=True)
    args = dict(zip(net.list_arguments(), net.infer_shape(data=(7, 100))[0]))
    assert args["weight"] == (11, 100)
    x = np.random.rand(2, 3)
    out = mx.nd._internal._identity_with_attr_like_rhs(mx.nd.array(x), mx.nd.zeros((2, 3)))
    np.testing.assert_allclose(out.asnumpy(), x, rtol=1e-6)


def test_json_marks_numpy_shape_graphs():
    net = sym.FullyConnected(sym.var("data"), sym.var("weight", shape=(4, 0)), num_hidden=4)
    assert "is_np_shape" not in json.loads(net.tojson())["attrs"]
    with mx.np_shape():
        assert json.loads(net.tojson())["attrs"]["is_np_shape"] == ["int", 1]
    # a legacy graph's 0 dims stay unknown under numpy semantics too
    loaded = sym.load_json(net.tojson())
    with mx.np_shape():
        args, outs, _ = loaded.infer_shape(data=(3, 7))
    assert args[1] == (4, 7) and outs == [(3, 4)]


def test_structure_helpers():
    sliced = sym.SliceChannel(sym.Variable("data"), num_outputs=3, name="slice")
    assert sliced.get_children().list_outputs() == ["data"]
    rnn = sym.RNN(sym.Variable("data"), sym.Variable("p"), sym.Variable("h0"), sym.Variable("h1"),
                  state_size=4, num_layers=1, mode="lstm", state_outputs=True, name="rnn")
    atom = rnn._gen_atomic_symbol()
    assert atom.list_arguments() == ["rnn_data", "rnn_parameters", "rnn_state", "rnn_state_cell"]
    with pytest.raises(mx.base.NotImplementedForSymbol):
        bool(sym.Variable("x"))
    with mx.name.NameManager():   # a fluent method names its node like the function
        fluent = sym.Variable("d").split(axis=1, num_outputs=2)
    with mx.name.NameManager():
        plain = sym.split(sym.Variable("d"), axis=1, num_outputs=2)
    assert fluent.list_outputs() == plain.list_outputs() == ["split0_output0", "split0_output1"]
    assert sym.sparse.dot is not None and sym.sparse.dot(sym.var("a"), sym.var("b")).infer_shape(
        a=(2, 3), b=(3, 4))[1] == [(2, 4)]


def test_variable_shape_minus_one_is_an_unknown_dim():
    """A declared -1 dim (NumPy shape semantics' spelling) is unknown, reported back as -1
    there (and as 0 in legacy semantics)."""
    with mx.np_shape():
        v = sym.var("data", shape=(-1, 20))
        assert sym.slice(v, begin=(None, 3), end=(5, 10)).infer_shape_partial()[1][0] == (-1, 7)
        assert sym.slice_axis(sym.var("d", shape=(10, -1)), axis=0, begin=0, end=5).infer_shape_partial()[1][0] == (5, -1)
    assert sym.slice(sym.var("data", shape=(-1, 20)), begin=(None, 3), end=(None, 10)).infer_shape_partial()[1][0] == (0, 7)


def test_reshape_input_dim_inferred_from_a_downstream_shape():
    net = sym.elemwise_add(sym.var("data").reshape((0, -1)), sym.ones(shape=(2, 75)))
    arg, out, _ = net.infer_shape(data=(2, 3, 0, 5))
    assert arg[0] == (2, 3, 5, 5) and out[0] == (2, 75)
