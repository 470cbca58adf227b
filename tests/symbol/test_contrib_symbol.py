"""Tests for `mx.sym.contrib`, `mx.sym.image` naming and `mx.sym.random` (symjit/symbol/
contrib.py, image.py, random.py) and the `_while_loop` op (symjit/ops/contrib.py).

The symbolic while_loop is checked against the same loop run in plain Python, through
eval, simple_bind, JSON round trips, captured outer symbols and free variables of the body."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.ops.registry import ComputeContext, get_op
from symjit.symbol.naming import NameManager
from symjit.test_utils import check_op_gradient

nd = mx.nd


@pytest.fixture(autouse=True)
def fresh_names():
    with NameManager():
        yield


def fib_loop(i, s, max_iterations):
    """The loop of the spec (E54/E98) in plain Python: rows of i + s while i <= 7."""
    rows = []
    while len(rows) < max_iterations and i <= 7:
        rows.append(i + s)
        i, s = i + 1, s + i
    return rows + [0] * (max_iterations - len(rows)), i, s


def spec_loop(max_iterations=10):
    cond = lambda i, s: i <= 7  # noqa: E731
    func = lambda i, s: ([i + s], [i + 1, s + i])  # noqa: E731
    return mx.sym.contrib.while_loop(cond, func, (mx.sym.var("i"), mx.sym.var("s")),
                                     max_iterations=max_iterations)


# --------------------------------------------------------------------------------------
# while_loop
# --------------------------------------------------------------------------------------

def test_while_loop_is_one_node_named_like_mxnet():
    outputs, states = spec_loop()
    assert repr(outputs) == "[<Symbol _while_loop0>]"
    assert repr(states) == "[<Symbol _while_loop0>, <Symbol _while_loop0>]"
    g = mx.sym.Group(outputs + states)
    assert g.list_arguments() == ["i", "s"]
    assert g.list_outputs() == [f"_while_loop0_output{k}" for k in range(3)]
    assert json.loads(g.tojson())["nodes"][-1]["op"] == "_while_loop"


@pytest.mark.parametrize("start, max_iterations", [((0, 1), 10), ((3, 2), 10), ((0, 1), 4), ((9, 1), 3)])
def test_while_loop_eval_matches_python(start, max_iterations):
    outputs, states = spec_loop(max_iterations)
    g = mx.sym.Group(outputs + states)
    out, i, s = g.eval(i=nd.array([start[0]], dtype="int64"), s=nd.array([start[1]], dtype="int64"))
    rows, fi, fs = fib_loop(*start, max_iterations)
    assert out.shape == (max_iterations, 1) and out.dtype == np.int64
    assert out.asnumpy()[:, 0].tolist() == rows
    assert (i.asnumpy().tolist(), s.asnumpy().tolist()) == ([fi], [fs])


def test_while_loop_same_as_ndarray_version():
    cond = lambda x, acc: x.sum() < 20  # noqa: E731
    func = lambda x, acc: ([x * 2, acc], [x * 2, acc + x])  # noqa: E731
    start = np.array([1.0, 0.5], np.float32)
    sym_out, sym_st = mx.sym.contrib.while_loop(cond, func, [mx.sym.var("x"), mx.sym.var("acc")], max_iterations=6)
    got = mx.sym.Group(sym_out + sym_st).eval(x=nd.array(start), acc=nd.zeros((2,)))
    nd_out, nd_st = nd.contrib.while_loop(cond, func, [nd.array(start), nd.zeros((2,))], max_iterations=6)
    for a, b in zip(got, nd_out + nd_st):
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=1e-6)


def test_while_loop_infer_shape_and_type():
    outputs, states = spec_loop(10)
    g = mx.sym.Group(outputs + states)
    assert g.infer_shape(i=(1,), s=(1,))[1] == [(10, 1), (1,), (1,)]
    assert g.infer_type(i="int64", s="int64")[1] == [np.int64] * 3


def test_while_loop_captures_outer_symbols_and_free_variables():
    x = mx.sym.var("x")
    scale = x * 2  # computed outside the loop, used inside

    def func(h):
        nxt = mx.sym.broadcast_add(mx.sym.FullyConnected(h, num_hidden=2, name="fc"), scale)
        return [nxt], [nxt]
    outputs, states = mx.sym.contrib.while_loop(lambda h: h.sum() < 50, func, [mx.sym.var("h")], max_iterations=5)
    g = mx.sym.Group(outputs + states)
    assert sorted(g.list_arguments()) == ["fc_bias", "fc_weight", "h", "x"]
    w = np.array([[0.5, 1.0], [1.0, 0.0]], np.float32)
    b = np.array([0.1, -0.2], np.float32)
    h0, xv = np.array([[1.0, 2.0]], np.float32), np.array([0.25], np.float32)
    feeds = dict(h=nd.array(h0), x=nd.array(xv), fc_weight=nd.array(w), fc_bias=nd.array(b))
    out, final = g.eval(**feeds)
    rows, h = [], h0
    while len(rows) < 5 and h.sum() < 50:
        h = h @ w.T + b + 2 * xv
        rows.append(h)
    expect = np.concatenate([np.stack(rows), np.zeros((5 - len(rows), 1, 2), np.float32)])
    np.testing.assert_allclose(out.asnumpy(), expect, rtol=1e-5)
    np.testing.assert_allclose(final.asnumpy(), h, rtol=1e-5)


def test_while_loop_json_round_trip_and_unused_loop_variable():
    # the body ignores `k` (its new value does not depend on it); it is still a loop variable
    outputs, states = mx.sym.contrib.while_loop(lambda v, k: v < 5, lambda v, k: ([v], [v + 1, v * 10]),
                                                [mx.sym.var("v"), mx.sym.var("k")], max_iterations=6)
    g = mx.sym.Group(outputs + states)
    back = mx.sym.load_json(g.tojson())
    feeds = dict(v=nd.array([2.0]), k=nd.array([-1.0]))
    for a, b in zip(g.eval(**feeds), back.eval(**feeds)):
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
    out, v, k = back.eval(**feeds)
    assert out.asnumpy()[:, 0].tolist() == [2, 3, 4, 0, 0, 0] and v.asnumpy()[0] == 5 and k.asnumpy()[0] == 40
    # zero iterations: padding only, the unused variable keeps its initial value
    out, v, k = back.eval(v=nd.array([7.0]), k=nd.array([-1.0]))
    assert out.asnumpy().tolist() == [[0.0]] * 6 and k.asnumpy()[0] == -1


def test_while_loop_errors():
    with pytest.raises(ValueError, match="max_iterations"):
        mx.sym.contrib.while_loop(lambda x: x < 1, lambda x: ([x], [x]), [mx.sym.var("x")])
    with pytest.raises(ValueError, match="consistent"):
        mx.sym.contrib.while_loop(lambda x: x < 1, lambda x: ([x], [x, x]), [mx.sym.var("x")], max_iterations=2)
    with pytest.raises(ValueError, match="single"):
        mx.sym.contrib.while_loop(lambda x: [x, x], lambda x: ([x], [x]), [mx.sym.var("x")], max_iterations=2)
    outputs, states = mx.sym.contrib.while_loop(lambda x: x < 3, lambda x: ([x], [x + 1]), [mx.sym.var("x")],
                                                max_iterations=2)
    g = mx.sym.Group(outputs + states)
    with pytest.raises(MXNetError, match="_while_loop.*one element"):   # raised where the output is read
        g.eval(x=nd.array([1.0, 2.0]))[0].asnumpy()


def test_while_loop_op_validates_attributes():
    outputs, _ = spec_loop(3)
    node = outputs[0]._outputs[0][0]
    attrs = dict(node.parsed)
    attrs["func_input_locs"] = (0, 5)
    op = get_op("_while_loop")
    with pytest.raises(MXNetError, match="_while_loop.*func_input_locs"):
        op.compute(attrs, [np.zeros(1), np.zeros(1)], ComputeContext())
    with pytest.raises(MXNetError, match="_while_loop.*Subgraph|_while_loop.*subgraph"):
        op.parse({**node.attrs, "cond": "not json"})


def test_cond_and_foreach_ops_validate_attributes():
    x = mx.sym.var("x")
    c = mx.sym.contrib.cond(x.sum() > 0, lambda: x, lambda: x * 2)
    name, attrs = node_attrs(c)
    with pytest.raises(MXNetError, match="_cond.*then_input_locs"):
        get_op(name).compute({**attrs, "then_input_locs": (7,)}, [np.ones(1), np.ones(2)], ComputeContext())
    outs, _ = mx.sym.contrib.foreach(lambda e, s: (e * 2, []), x, [])
    name, attrs = node_attrs(outs)
    with pytest.raises(MXNetError, match="_foreach.*remain_locs"):
        get_op(name).compute({**attrs, "in_data_locs": (1,)}, [np.ones((2, 1))], ComputeContext())
    with pytest.raises(MXNetError, match="_foreach.*no rows"):
        get_op(name).compute(attrs, [np.ones((0, 1))], ComputeContext())


# --------------------------------------------------------------------------------------
# rand_zipfian, contrib ops
# --------------------------------------------------------------------------------------

def test_sym_rand_zipfian():
    t = mx.sym.var("t")
    samples, exp_true, exp_sample = mx.sym.contrib.rand_zipfian(t, 5, 6)
    (et,) = exp_true.eval(t=nd.array([3]))
    assert et.dtype == np.float64
    np.testing.assert_allclose(et.asnumpy(), [5 * math.log(5 / 4) / math.log(7)], rtol=1e-12)
    s, c = mx.sym.Group([samples, exp_sample]).eval(t=nd.array([3]))
    assert s.dtype == np.int64 and np.all((s.asnumpy() >= 0) & (s.asnumpy() < 6))
    expect = [5 * math.log((k + 2) / (k + 1)) / math.log(7) for k in s.asnumpy()]
    np.testing.assert_allclose(c.asnumpy(), expect, rtol=1e-12)


def test_contrib_ops_are_named_by_function():
    a, i, b = mx.sym.var("a"), mx.sym.var("i"), mx.sym.var("b")
    s = mx.sym.contrib.index_copy(a, i, b)
    assert s.name == "index_copy0"
    (out,) = s.eval(a=nd.zeros((3, 2)), i=nd.array([2]), b=nd.ones((1, 2)))
    assert out.asnumpy().tolist() == [[0, 0], [0, 0], [1, 1]]
    assert "while_loop" in dir(mx.sym.contrib) and "index_copy" in dir(mx.sym.contrib)
    with pytest.raises(AttributeError):
        mx.sym.contrib.no_such_op


def test_eval_ignores_names_the_symbol_does_not_read():
    x = mx.sym.var("x")
    (out,) = (x * 2).eval(x=nd.array([1.0]), unrelated=nd.array([5.0]))
    assert out.asnumpy().tolist() == [2.0]


# --------------------------------------------------------------------------------------
# mx.sym.random
# --------------------------------------------------------------------------------------

def test_sym_random_names_and_dispatch():
    s = mx.sym.random.generalized_negative_binomial(10, 0.1)
    assert repr(s) == "<Symbol _random_generalized_negative_binomial0>"
    p = mx.sym.random.uniform(mx.sym.var("lo"), mx.sym.var("hi"), shape=(2,))
    assert p.name == "_sample_uniform0" and p.list_arguments() == ["lo", "hi"]
    assert mx.sym.random.shuffle(mx.sym.var("d")).name == "_shuffle0"
    assert mx.sym.random.exponential(scale=4, shape=(3,)).list_attr()["lam"] == "0.25"
    assert mx.sym.random.randn(2, 3).list_attr()["shape"] == "(2, 3)"
    m = mx.sym.random.multinomial(mx.sym.var("prob"))
    assert len(m.list_outputs()) == 2  # MXNet's symbolic default get_prob=True
    with pytest.raises(MXNetError, match="same type"):
        mx.sym.random.normal(mx.sym.var("m"), 1.0)
    with pytest.raises(MXNetError, match="Symbol or numbers"):
        mx.sym.random.normal("m", 1.0)
    with pytest.raises(MXNetError, match="randint"):
        mx.sym.random.randint(mx.sym.var("a"), mx.sym.var("b"))


def test_sym_shuffle_permutes_rows_at_every_run():
    data = nd.array(np.arange(40).reshape(20, 2))
    y = mx.sym.random.shuffle(mx.sym.var("x"))
    runs = [y.eval(x=data)[0].asnumpy() for _ in range(3)]
    for r in runs:
        assert sorted(map(tuple, r.tolist())) == sorted(map(tuple, data.asnumpy().tolist()))
    assert any(not np.array_equal(runs[0], r) for r in runs[1:])


def test_sym_random_values_respect_bounds():
    s = mx.sym.random.uniform(-2, 3, shape=(1000,))
    (v,) = s.eval()
    assert v.shape == (1000,) and v.asnumpy().min() >= -2 and v.asnumpy().max() < 3
    (g,) = mx.sym.random.generalized_negative_binomial(10, 0.1, shape=(500,)).eval()
    assert np.all(g.asnumpy() >= 0) and np.all(g.asnumpy() == np.round(g.asnumpy()))



# --------------------------------------------------------------------------------------
# cond, foreach
# --------------------------------------------------------------------------------------

def test_sym_cond_picks_the_branch_at_run_time():
    x, y = mx.sym.var("x"), mx.sym.var("y")
    out = mx.sym.contrib.cond(x.sum() > 1, lambda: x * 2, lambda: y - 1)
    assert repr(out) == "<Symbol _cond0>" and out.list_arguments() == ["x", "y"]
    xv, yv = np.array([1.0, 2.0], np.float32), np.array([5.0, 6.0], np.float32)
    assert out.eval(x=nd.array(xv), y=nd.array(yv))[0].asnumpy().tolist() == (xv * 2).tolist()
    assert out.eval(x=nd.array(xv / 4), y=nd.array(yv))[0].asnumpy().tolist() == (yv - 1).tolist()
    back = mx.sym.load_json(out.tojson())
    assert back.eval(x=nd.array(xv / 4), y=nd.array(yv))[0].asnumpy().tolist() == (yv - 1).tolist()
    assert out.infer_shape(x=(2,), y=(2,))[1] == [(2,)]


def test_sym_cond_errors():
    x = mx.sym.var("x")
    with pytest.raises(ValueError, match="differs"):
        mx.sym.contrib.cond(x > 0, lambda: [x, x], lambda: x)
    bad = mx.sym.contrib.cond(x.sum() > 0, lambda: x, lambda: mx.sym.concat(x, x, dim=0))
    with pytest.raises(MXNetError, match="_cond"):
        bad.infer_shape(x=(2,))
    with pytest.raises(MXNetError, match="_cond.*one element"):
        mx.sym.contrib.cond(x > 0, lambda: x, lambda: x).eval(x=nd.array([1.0, 2.0]))[0].asnumpy()


def test_sym_foreach_matches_python_scan():
    d, s0, w = mx.sym.var("d"), mx.sym.var("s0"), mx.sym.var("w")
    outs, states = mx.sym.contrib.foreach(lambda e, s: ([e * w + s[0]], [s[0] + e]), d, [s0])
    g = mx.sym.Group(outs + states)
    assert repr(outs) == "[<Symbol _foreach0>]" and sorted(g.list_arguments()) == ["d", "s0", "w"]
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    wv, sv = np.array([0.5, -1.0, 2.0], np.float32), np.ones(3, np.float32)
    out, final = g.eval(d=nd.array(data), s0=nd.array(sv), w=nd.array(wv))
    rows, s = [], sv
    for e in data:
        rows.append(e * wv + s)
        s = s + e
    np.testing.assert_allclose(out.asnumpy(), np.stack(rows), rtol=1e-6)
    np.testing.assert_allclose(final.asnumpy(), s, rtol=1e-6)
    assert g.infer_shape(d=(4, 3), s0=(3,), w=(3,))[1] == [(4, 3), (3,)]
    back = mx.sym.load_json(g.tojson())
    np.testing.assert_allclose(back.eval(d=nd.array(data), s0=nd.array(sv), w=nd.array(wv))[0].asnumpy(),
                               out.asnumpy())


def test_sym_foreach_errors():
    d = mx.sym.var("d")
    with pytest.raises(ValueError, match="format"):
        mx.sym.contrib.foreach(lambda e, s: (e, [e, e]), d, [mx.sym.var("s")])
    outs, _ = mx.sym.contrib.foreach(lambda e, s: (e, []), [d, mx.sym.var("d2")], [])
    with pytest.raises(MXNetError, match="_foreach.*first dimension"):
        mx.sym.Group(outs).eval(d=nd.zeros((3, 1)), d2=nd.zeros((2, 1)))


def test_loop_variable_also_captured_keeps_its_initial_value():
    """A symbol used both as a loop variable and captured by the body: the captured use reads
    the value from before the loop (two inputs of the node), as in MXNet."""
    x = mx.sym.var("x")
    outputs, states = mx.sym.contrib.while_loop(lambda v: v < 10, lambda v: ([v], [v + x]), [x],
                                                max_iterations=10)
    out, final = mx.sym.Group(outputs + states).eval(x=nd.array([3.0]))
    assert final.asnumpy().tolist() == [12.0]
    assert out.asnumpy()[:4, 0].tolist() == [3.0, 6.0, 9.0, 0.0]


# --------------------------------------------------------------------------------------
# gradients of the control-flow ops (finite differences through check_op_gradient)
# --------------------------------------------------------------------------------------

def node_attrs(sym) -> tuple[str, dict]:
    node = sym._outputs[0][0]
    return node.op.name, dict(node.parsed)


def node_inputs(sym, feeds: dict) -> list:
    """The values feeding the head node of `sym` (inputs computed outside are evaluated)."""
    from symjit.symbol.symbol import Symbol
    node = sym._outputs[0][0]
    nd_feeds = {k: nd.array(v, dtype="float64") for k, v in feeds.items()}
    return [Symbol([e]).eval(**nd_feeds)[0].asnumpy() for e in node.inputs]


def test_while_loop_gradient_matches_finite_differences():
    x, w = mx.sym.var("x"), mx.sym.var("w")
    outputs, states = mx.sym.contrib.while_loop(
        lambda v, acc: v.sum() < 10, lambda v, acc: ([v * w, mx.sym.sin(acc)], [v * 2, acc + v * w]),
        [x, mx.sym.var("acc")], max_iterations=6)
    name, attrs = node_attrs(outputs[0])
    feeds = {"x": np.array([1.0, 0.5]), "acc": np.array([0.2, -0.1]), "w": np.array([0.3, 2.0])}
    check_op_gradient(name, node_inputs(outputs[0], feeds), attrs)


def test_while_loop_gradient_through_executor():
    x, w = mx.sym.var("x"), mx.sym.var("w")
    outputs, states = mx.sym.contrib.while_loop(lambda v: v.sum() < 10, lambda v: ([v * w], [v * 2]), [x],
                                                max_iterations=5)
    loss = mx.sym.sum(outputs[0]) + mx.sym.sum(states[0])
    exe = loss.simple_bind(mx.cpu(), x=(2,), w=(2,))
    exe.arg_dict["x"][:] = nd.array([1.0, 0.5])
    exe.arg_dict["w"][:] = nd.array([0.3, 2.0])
    exe.forward(is_train=True)
    exe.backward()
    # iterations v = x, 2x, 4x (sum 1.5, 3, 6 < 10), final 8x: loss = 7 x.w + 8 sum(x)
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), 7 * np.array([0.3, 2.0]) + 8, rtol=1e-6)
    np.testing.assert_allclose(exe.grad_dict["w"].asnumpy(), 7 * np.array([1.0, 0.5]), rtol=1e-6)


def test_cond_gradient_follows_the_taken_branch():
    x, y = mx.sym.var("x"), mx.sym.var("y")
    out = mx.sym.contrib.cond(x.sum() > 1, lambda: [x * y, mx.sym.exp(x)], lambda: [y * y, x + y])
    name, attrs = node_attrs(out[0])
    for xv in (np.array([1.0, 0.7]), np.array([0.2, 0.1])):
        inputs = node_inputs(out[0], {"x": xv, "y": np.array([0.5, -1.5])})
        assert len(inputs) == 3  # the predicate, y and x
        check_op_gradient(name, inputs, attrs)


def test_foreach_gradient_matches_finite_differences():
    d, s0, w = mx.sym.var("d"), mx.sym.var("s0"), mx.sym.var("w")
    outs, states = mx.sym.contrib.foreach(lambda e, s: ([mx.sym.tanh(e * w + s[0])], [s[0] * 0.5 + e]), d, [s0])
    name, attrs = node_attrs(outs[0])
    rng = np.random.default_rng(1)
    feeds = {"d": rng.uniform(-1, 1, (4, 3)), "s0": rng.uniform(-1, 1, (3,)), "w": rng.uniform(-1, 1, (3,))}
    check_op_gradient(name, node_inputs(outs[0], feeds), attrs)
