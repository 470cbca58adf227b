"""Executor: bind/simple_bind, forward/backward, grad_req, aux updates, params, reshape, backend."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.executor import InterpreterBackend, LLVMBackend, select_backend


@pytest.fixture(autouse=True)
def fresh_names():
    with mx.name.NameManager():
        yield


def net():
    data = mx.sym.var("data")
    fc = mx.sym.FullyConnected(data, num_hidden=3, name="fc")
    scale = mx.sym.var("scale")
    return mx.sym.broadcast_mul(mx.sym.tanh(fc), scale) + fc


def fill(exe, seed=0):
    rng = np.random.default_rng(seed)
    for a in exe.arg_arrays:
        a[:] = rng.uniform(-1, 1, a.shape)


def test_simple_bind_allocates_by_inferred_shapes():
    exe = net().simple_bind(mx.cpu(), data=(4, 5), scale=(1, 3))
    assert list(exe.arg_dict) == ["data", "fc_weight", "fc_bias", "scale"]
    assert [a.shape for a in exe.arg_arrays] == [(4, 5), (3, 5), (3,), (1, 3)]
    assert all(a.dtype == np.float32 for a in exe.arg_arrays)
    assert set(exe.grad_dict) == {"data", "fc_weight", "fc_bias", "scale"}
    assert list(exe.output_dict) == ["_plus0_output"]
    assert exe.outputs[0].shape == (4, 3)
    exe16 = net().simple_bind(mx.cpu(), type_dict={"data": "float64"}, data=(4, 5), scale=(1, 3))
    assert all(a.dtype == np.float64 for a in exe16.arg_arrays)
    with pytest.raises(MXNetError, match="cannot infer"):
        net().simple_bind(mx.cpu(), data=(4, 5))
    with pytest.raises(MXNetError, match="not an input"):
        net().simple_bind(mx.cpu(), data=(4, 5), scale=(1, 3), bogus=(1,))
    # keyword arguments that are not shapes (MXNet's force_rebind=...) are ignored
    flagged = net().simple_bind(mx.cpu(), data=(4, 5), scale=(1, 3), force_rebind=True)
    assert [a.shape for a in flagged.arg_arrays] == [a.shape for a in exe.arg_arrays]


def test_forward_matches_numpy_and_arrays_are_bound_by_reference():
    exe = net().simple_bind(mx.cpu(), grad_req="null", data=(4, 5), scale=(1, 3))
    fill(exe)
    d = exe.arg_dict
    out = exe.forward()
    assert out is exe.outputs
    fc = d["data"].asnumpy() @ d["fc_weight"].asnumpy().T + d["fc_bias"].asnumpy()
    want = np.tanh(fc) * d["scale"].asnumpy() + fc
    np.testing.assert_allclose(out[0].asnumpy(), want, rtol=1e-5, atol=1e-6)
    first = exe.outputs[0]
    d["data"][:] = 0
    exe.forward(data=mx.nd.ones((4, 5)))
    assert exe.outputs[0] is first  # outputs are updated in place, as MXNet's
    np.testing.assert_array_equal(d["data"].asnumpy(), np.ones((4, 5)))
    with pytest.raises(MXNetError, match="reshape"):
        exe.forward(data=mx.nd.ones((2, 5)))
    with pytest.raises(MXNetError, match="unknown argument"):
        exe.forward(nope=mx.nd.ones((1,)))


def numeric_grads(sym, values, heads, eps=1e-3):
    """Central differences of sum(out * head) in float64 via Symbol.eval."""
    def loss():
        outs = sym.eval(**{k: mx.nd.array(v, dtype="float64") for k, v in values.items()})
        return sum(float(np.sum(o.asnumpy() * h)) for o, h in zip(outs, heads))
    grads = {}
    for k, v in values.items():
        g = np.zeros_like(v)
        for i in np.ndindex(v.shape):
            old = v[i]
            v[i] = old + eps
            fp = loss()
            v[i] = old - eps
            fm = loss()
            v[i] = old
            g[i] = (fp - fm) / (2 * eps)
        grads[k] = g
    return grads


def test_backward_matches_finite_differences_with_broadcast_and_multi_output():
    x = mx.sym.var("x")
    parts = mx.sym.split(x, num_outputs=2, axis=1, name="sp")
    y = mx.sym.broadcast_add(parts[0] * parts[1], mx.sym.var("b"))
    s = mx.sym.sum(mx.sym.sigmoid(y), axis=0)
    sym = mx.sym.Group([s, y, parts[1]])
    rng = np.random.default_rng(3)
    values = {"x": rng.uniform(-1, 1, (3, 4)), "b": rng.uniform(-1, 1, (1, 2))}
    exe = sym.simple_bind(mx.cpu(), type_dict={"x": "float64", "b": "float64"}, x=(3, 4), b=(1, 2))
    for k, v in values.items():
        exe.arg_dict[k][:] = v
    exe.forward(is_train=True)
    heads = [rng.uniform(-1, 1, o.shape) for o in exe.outputs]
    exe.backward([mx.nd.array(h, dtype="float64") for h in heads])
    want = numeric_grads(sym, values, heads)
    for k in values:
        np.testing.assert_allclose(exe.grad_dict[k].asnumpy(), want[k], rtol=1e-5, atol=1e-7)


def test_grad_req_add_accumulates_and_null_skips():
    sym = mx.sym.sum(mx.sym.var("a") * mx.sym.var("b"))
    a = mx.nd.array([1.0, 2.0, 3.0])
    b = mx.nd.array([4.0, 5.0, 6.0])
    ga, gb = mx.nd.ones((3,)), mx.nd.full((3,), 7.0)
    exe = sym.bind(mx.cpu(), {"a": a, "b": b}, args_grad={"a": ga, "b": gb}, grad_req={"a": "add", "b": "null"})
    assert exe.grad_dict == {"a": ga, "b": gb}   # MXNet lists given arrays, null req included
    exe.forward(is_train=True)
    exe.backward()
    exe.backward()
    np.testing.assert_allclose(ga.asnumpy(), 1 + 2 * b.asnumpy())
    np.testing.assert_allclose(gb.asnumpy(), 7.0)
    exe2 = sym.bind(mx.cpu(), [a, b], args_grad=[mx.nd.zeros((3,)), mx.nd.zeros((3,))], grad_req="write")
    exe2.forward(is_train=True)
    exe2.backward(mx.nd.array([2.0]))
    exe2.backward(mx.nd.array([2.0]))  # write overwrites
    np.testing.assert_allclose(exe2.grad_dict["b"].asnumpy(), 2 * a.asnumpy())


def test_bind_errors():
    sym = mx.sym.var("a") + mx.sym.var("b")
    with pytest.raises(MXNetError, match="missing"):
        sym.bind(mx.cpu(), {"a": mx.nd.ones((2,))})
    with pytest.raises(MXNetError, match="expected 2"):
        sym.bind(mx.cpu(), [mx.nd.ones((2,))])
    # names that are not arguments are ignored, as MXNet does
    extra = sym.bind(mx.cpu(), {"a": mx.nd.ones((2,)), "b": mx.nd.ones((2,)), "c": None},
                     args_grad={"a": mx.nd.zeros((2,)), "c": None}, grad_req={"a": "write", "c": "add"})
    assert extra.arg_dict.keys() == {"a", "b"} and extra._grad_reqs == ["write", "null"]
    with pytest.raises(MXNetError, match="grad_req"):
        sym.bind(mx.cpu(), [mx.nd.ones((2,))] * 2, grad_req="maybe")
    with pytest.raises(MXNetError, match="elemwise_add"):
        sym.bind(mx.cpu(), [mx.nd.ones((2,)), mx.nd.ones((3,))])
    bn = mx.sym.BatchNorm(mx.sym.var("d"))
    with pytest.raises(MXNetError, match="aux"):
        bn.bind(mx.cpu(), {"d": mx.nd.ones((2, 3)), "batchnorm0_gamma": mx.nd.ones((3,)),
                           "batchnorm0_beta": mx.nd.ones((3,))})
    # a backward that reads a computed forward value (exp's output) needs a forward first
    exe = mx.sym.exp(sym).bind(mx.cpu(), [mx.nd.ones((2,))] * 2, args_grad=[mx.nd.ones((2,))] * 2)
    with pytest.raises(MXNetError, match="forward"):
        exe.backward()


def test_backward_without_forward_reads_the_bound_inputs():
    """As MXNet: a backward needing only bound inputs (and the head gradient) runs without a
    forward; it reads the arguments as they are when backward is called."""
    x = mx.sym.var("x")
    exe = (x * mx.sym.var("w")).bind(mx.cpu(), {"x": mx.nd.array([1.0, 2.0]), "w": mx.nd.array([3.0, 4.0])},
                                     args_grad={"x": mx.nd.zeros((2,)), "w": mx.nd.zeros((2,))})
    exe.arg_dict["w"][:] = np.array([5.0, 7.0])
    exe.backward(mx.nd.array([1.0, 10.0]))
    np.testing.assert_allclose(exe.grad_dict["x"].asnumpy(), [5.0, 70.0])
    np.testing.assert_allclose(exe.grad_dict["w"].asnumpy(), [1.0, 20.0])


def test_batchnorm_updates_moving_statistics_in_training_only():
    bn = mx.sym.BatchNorm(mx.sym.var("d"), momentum=0.9, fix_gamma=False, name="bn")
    exe = bn.simple_bind(mx.cpu(), d=(16, 2))
    x = np.random.default_rng(0).normal(3.0, 2.0, (16, 2)).astype(np.float32)
    exe.arg_dict["d"][:] = x
    exe.arg_dict["bn_gamma"][:] = 1
    exe.aux_dict["bn_moving_var"][:] = 1
    exe.forward(is_train=False)
    np.testing.assert_array_equal(exe.aux_dict["bn_moving_mean"].asnumpy(), [0, 0])
    np.testing.assert_allclose(exe.outputs[0].asnumpy(), x / np.sqrt(1 + 1e-3), rtol=1e-5)
    exe.forward(is_train=True)
    np.testing.assert_allclose(exe.aux_dict["bn_moving_mean"].asnumpy(), 0.1 * x.mean(0), rtol=1e-5)
    np.testing.assert_allclose(exe.aux_dict["bn_moving_var"].asnumpy(), 0.9 + 0.1 * x.var(0), rtol=1e-4)
    np.testing.assert_allclose(exe.outputs[0].asnumpy().mean(0), [0, 0], atol=1e-5)
    exe.backward(mx.nd.ones((16, 2)))
    np.testing.assert_allclose(exe.grad_dict["bn_beta"].asnumpy(), [16, 16], rtol=1e-6)


def test_copy_params_from_and_reshape():
    sym = net()
    exe = sym.simple_bind(mx.cpu(), data=(4, 5), scale=(1, 3))
    w = mx.nd.array(np.arange(15).reshape(3, 5))
    exe.copy_params_from({"fc_weight": w, "extra": mx.nd.ones((1,))}, allow_extra_params=True)
    np.testing.assert_array_equal(exe.arg_dict["fc_weight"].asnumpy(), w.asnumpy())
    with pytest.raises(MXNetError, match="extra"):
        exe.copy_params_from({"extra": mx.nd.ones((1,))})
    with pytest.raises(MXNetError, match="shape"):
        exe.copy_params_from({"fc_weight": mx.nd.ones((2, 2))})
    small = exe.reshape(data=(2, 5))
    assert small.arg_dict["data"].shape == (2, 5)
    assert small.arg_dict["fc_weight"] is exe.arg_dict["fc_weight"]  # parameters are shared
    assert small.outputs[0].shape == (2, 3)
    small.forward(data=mx.nd.ones((2, 5)))
    with pytest.raises(MXNetError, match="allow_up_sizing"):
        exe.reshape(data=(8, 5))
    big = exe.reshape(allow_up_sizing=True, data=(8, 5))
    assert big.forward()[0].shape == (8, 3)
    with pytest.raises(MXNetError, match="partial_shaping"):
        exe.reshape(allow_up_sizing=True, data=(4, 6))


def test_dropout_is_identity_in_inference():
    sym = mx.sym.Dropout(mx.sym.var("x"), p=0.5)
    exe = sym.simple_bind(mx.cpu(), grad_req="null", x=(100,))
    exe.arg_dict["x"][:] = 1
    np.testing.assert_array_equal(exe.forward()[0].asnumpy(), np.ones(100))
    out = exe.forward(is_train=True)[0].asnumpy()
    assert set(np.unique(out)) <= {0.0, 2.0} and 0 < out.sum() < 200


def test_backend_selection(monkeypatch):
    monkeypatch.setenv("SYMJIT_BACKEND", "interp")
    assert isinstance(select_backend(), InterpreterBackend)
    monkeypatch.setenv("SYMJIT_BACKEND", "warp-drive")
    with pytest.raises(MXNetError, match="SYMJIT_BACKEND"):
        select_backend()
    monkeypatch.delenv("SYMJIT_BACKEND")
    assert isinstance(select_backend(), LLVMBackend)  # native by default (tests/test_native.py)


def test_debug_str_shows_forward_and_backward():
    exe = net().simple_bind(mx.cpu(), data=(4, 5), scale=(1, 3))
    text = exe.debug_str()
    assert "FullyConnected(%data, %fc_weight, %fc_bias)" in text and "_backward" in text


def random_symbol(seed: int):
    """A random Symbol over registered ops: unary, scalar, same-shape and broadcast binary,
    reductions, FullyConnected, split (multi-output) and reuse of earlier values (fan-out)."""
    rng = np.random.default_rng(seed)
    shapes = {"x0": (2, 4), "x1": (2, 4)}
    pool = [(mx.sym.var("x0"), (2, 4)), (mx.sym.var("x1"), (2, 4))]

    def pick(shape):
        cands = [s for s, sh in pool if sh == shape]
        return cands[rng.integers(len(cands))]

    for i in range(int(rng.integers(3, 8))):
        x = pick((2, 4))
        kind = rng.integers(6)
        if kind == 0:
            y = getattr(mx.sym, str(rng.choice(["tanh", "sigmoid", "sin", "square"])))(x)
        elif kind == 1:
            y = x * float(rng.uniform(-2, 2)) + float(rng.uniform(-1, 1))
        elif kind == 2:
            y = x * pick((2, 4)) - pick((2, 4))
        elif kind == 3:
            name = f"b{i}"
            shapes[name] = (1, 4) if rng.random() < 0.5 else (2, 1)
            y = mx.sym.broadcast_mul(x, mx.sym.var(name))
        elif kind == 4:
            y = mx.sym.FullyConnected(x, num_hidden=4, name=f"fc{i}")
        else:
            a, b = mx.sym.split(x, num_outputs=2, axis=1)
            y = mx.sym.concat(b, a * b, dim=1)
            pool.append((mx.sym.sum(a, axis=1, keepdims=True), (2, 1)))
        pool.append((y, (2, 4)))
    outs = [pool[-1][0]] + ([pool[2][0]] if len(pool) > 3 else [])
    sym = mx.sym.Group(outs)
    return sym, {k: v for k, v in shapes.items() if k in sym.list_arguments()}


@pytest.mark.parametrize("seed", range(8))
def test_executor_backward_matches_finite_differences_on_random_symbols(seed):
    sym, shapes = random_symbol(seed)
    types = {k: "float64" for k in sym.list_arguments()}
    exe = sym.simple_bind(mx.cpu(), type_dict=types, **shapes)
    rng = np.random.default_rng(100 + seed)
    values = {k: rng.uniform(-1, 1, a.shape) for k, a in exe.arg_dict.items()}
    for k, v in values.items():
        exe.arg_dict[k][:] = v
    exe.forward(is_train=True)
    heads = [rng.uniform(-1, 1, o.shape) for o in exe.outputs]
    exe.backward([mx.nd.array(h, dtype="float64") for h in heads])
    want = numeric_grads(sym, values, heads, eps=1e-5)
    for k in values:
        np.testing.assert_allclose(exe.grad_dict[k].asnumpy(), want[k], rtol=1e-5, atol=1e-7, err_msg=k)


def test_batchnorm_training_gradient_matches_finite_differences():
    x = mx.sym.var("x")
    sym = mx.sym.BatchNorm(mx.sym.FullyConnected(x, num_hidden=3, name="fc"), fix_gamma=False, name="bn")
    exe = sym.simple_bind(mx.cpu(), type_dict={"x": "float64"}, x=(5, 4))
    rng = np.random.default_rng(7)
    for a in exe.arg_arrays:
        a[:] = rng.uniform(-1, 1, a.shape)
    exe.aux_dict["bn_moving_var"][:] = 1
    head = rng.uniform(-1, 1, (5, 3))
    exe.forward(is_train=True)
    exe.backward(mx.nd.array(head, dtype="float64"))

    def loss():
        return float(np.sum(exe.forward(is_train=True)[0].asnumpy() * head))
    eps = 1e-6
    for name in ["x", "fc_weight", "bn_gamma", "bn_beta"]:
        arr = exe.arg_dict[name]
        base = arr.asnumpy()
        num = np.zeros_like(base)
        for i in np.ndindex(base.shape):
            pert = base.copy()
            pert[i] += eps
            arr[:] = pert
            fp = loss()
            pert[i] -= 2 * eps
            arr[:] = pert
            fm = loss()
            num[i] = (fp - fm) / (2 * eps)
        arr[:] = base
        np.testing.assert_allclose(exe.grad_dict[name].asnumpy(), num, rtol=1e-4, atol=1e-6, err_msg=name)


def test_reshape_shares_memory_like_mxnet():
    y = mx.sym.FullyConnected(mx.sym.Variable("x"), num_hidden=4)
    exe = y.simple_bind(mx.cpu(), x=(5, 4), grad_req="null")
    exe.arg_arrays[0][:] = 1
    exe.arg_arrays[1][:] = 1
    exe.arg_arrays[2][:] = 0
    small = exe.reshape(x=(3, 4))
    small.forward()
    assert np.all(small.outputs[0].asnumpy() == 4)
    assert np.all(exe.outputs[0].asnumpy()[:3] == 4)          # the smaller output is a view
    big = exe.reshape(allow_up_sizing=True, x=(6, 4))
    big.arg_arrays[0][:] = 0
    assert np.all(exe.arg_arrays[0].asnumpy() == 1)           # a larger input is new memory
    assert big.arg_arrays[1] is exe.arg_arrays[1]              # unchanged shapes are shared


def test_debug_str_reports_the_memory_kept_for_backward():
    data = mx.sym.Variable("data")
    y = data
    for _ in range(3):
        y = y * y
    one = 10 * 3 * 64 * 64 * 4   # bytes of one float32 value of this shape
    train = y.simple_bind(mx.cpu(), data=(10, 3, 64, 64))
    infer = y.simple_bind(mx.cpu(), data=(10, 3, 64, 64), grad_req="null")
    blocked = mx.sym.stop_gradient(y).simple_bind(mx.cpu(), data=(10, 3, 64, 64))
    # the output, plus the two computed intermediates each multiplication's gradient reads
    assert train.allocated_bytes() == 3 * one
    assert infer.allocated_bytes() == blocked.allocated_bytes() == one
    assert f"Total {3 * one >> 20} MB allocated" in train.debug_str()


def test_bound_array_dtype_wins_over_the_variable_dtype_attribute():
    """As MXNet: `Variable(dtype=...)` only fills a dtype nothing else gives; arrays bound with
    another dtype decide the graph's dtypes."""
    x, y = mx.sym.var("x", dtype="float64"), mx.sym.var("y", dtype="float64")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((3, 2), np.float32)
    exe = mx.sym.dot(x, y).bind(mx.cpu(), {"x": mx.nd.array(a), "y": mx.nd.array(b)})
    out = exe.forward()[0]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.asnumpy(), a @ b)


def test_transposed_creation_shapes_are_inferred_backward_at_bind():
    ones = mx.sym.ones(shape=(2, -1)) + mx.sym.transpose(mx.sym.ones(shape=(3, -1)))
    out = ones.bind(mx.cpu(), args={}).forward()[0]
    np.testing.assert_array_equal(out.asnumpy(), np.full((2, 3), 2.0, np.float32))


@pytest.mark.parametrize("shape", [(), (0, 4), (3, 0, 2)])
def test_zero_size_and_scalar_values_run_under_np_shape(shape):
    """NumPy shape semantics: 0-d inputs and 0 dims are real, executors run them (forward and
    backward) with the shapes the ops compute; outside them the same bind is refused."""
    data = mx.sym.var("data")
    sym = mx.sym.contrib.index_array(data)
    x = np.ones(shape, np.float32)
    expected = np.zeros((0,), np.int64) if shape == () else np.stack(np.indices(shape), axis=-1)
    with mx.np_shape():
        exe = sym.bind(mx.cpu(), {"data": mx.nd.array(x)}, args_grad={"data": mx.nd.array(x)})
        out = exe.forward(is_train=True)[0]
        assert out.shape == expected.shape
        np.testing.assert_array_equal(out.asnumpy(), expected)
        exe.backward(mx.nd.array(np.ones(expected.shape)))
        np.testing.assert_array_equal(exe.grad_dict["data"].asnumpy(), np.zeros(shape))
    if shape:
        with pytest.raises(MXNetError, match="cannot infer"):
            sym.bind(mx.cpu(), {"data": mx.nd.array(x)})


def _sum_axis0():
    return mx.sym.sum(mx.sym.var("a"), axis=0)


def test_small_executor_interprets_its_first_calls_then_runs_native(monkeypatch):
    """SYMJIT_JIT_AFTER=n: a small graph runs its first n calls on the reference interpreter,
    then native code; the results are the same in both tiers, gradients included."""
    from symjit.executor import TieredFunction
    monkeypatch.setenv("SYMJIT_JIT_AFTER", "2")
    x = np.random.default_rng(3).normal(size=(4, 5)).astype(np.float32)
    exe = _sum_axis0().bind(mx.cpu(), {"a": mx.nd.array(x)}, args_grad={"a": mx.nd.zeros((4, 5))})
    assert isinstance(exe._forward_fn, TieredFunction)
    states = []
    for _ in range(3):
        states.append(exe._forward_fn.interpreting)
        out = exe.forward(is_train=True)[0].asnumpy()
        np.testing.assert_allclose(out, x.sum(axis=0), rtol=1e-5, atol=1e-6)
        exe.backward(mx.nd.array(np.arange(5, dtype=np.float32)))
        np.testing.assert_allclose(exe.grad_dict["a"].asnumpy(), np.tile(np.arange(5.0), (4, 1)))
    assert states == [True, True, False]
    assert not exe._forward_fn.interpreting and not exe._backward_fn.interpreting


def test_jit_after_zero_large_and_random_graphs_compile_at_once(monkeypatch):
    from symjit.executor import SMALL_GRAPH_ELEMENTS, TieredFunction
    monkeypatch.setenv("SYMJIT_JIT_AFTER", "0")
    assert not isinstance(_sum_axis0().simple_bind(mx.cpu(), a=(2, 3))._forward_fn, TieredFunction)
    monkeypatch.setenv("SYMJIT_JIT_AFTER", "1")
    big = _sum_axis0().simple_bind(mx.cpu(), a=(2, SMALL_GRAPH_ELEMENTS))
    assert not isinstance(big._forward_fn, TieredFunction)
    noisy = mx.sym.Dropout(mx.sym.var("a"), p=0.5).simple_bind(mx.cpu(), a=(2, 3))
    assert not isinstance(noisy._forward_fn, TieredFunction)
    monkeypatch.setenv("SYMJIT_JIT_AFTER", "soon")
    with pytest.raises(MXNetError, match="SYMJIT_JIT_AFTER"):
        _sum_axis0().simple_bind(mx.cpu(), a=(2, 3))


def test_simple_bind_reads_only_tuple_keywords_as_shapes():
    """MXNet's simple_bind takes shapes from tuple-valued keywords and ignores the rest (an op
    attribute passed along by a caller: `axis=0`, `mode='clip'`)."""
    sym = mx.sym.take(mx.sym.var("a"), mx.sym.var("indices"), axis=0, mode="clip")
    exe = sym.simple_bind(mx.cpu(), a=(5, 2), indices=(3,), axis=0, mode="clip")
    assert exe.arg_dict["a"].shape == (5, 2) and exe.outputs[0].shape == (3, 2)
    with pytest.raises(MXNetError, match="not an input"):
        sym.simple_bind(mx.cpu(), a=(5, 2), indices=(3,), b=(2,))


@pytest.mark.parametrize("jit_after", ["0", "1"])
def test_op_error_surfaces_when_the_output_is_read(monkeypatch, jit_after):
    """As MXNet's asynchronous engine: a forward whose op fails returns, reading an output
    raises the op's error, and the next forward runs normally."""
    monkeypatch.setenv("SYMJIT_JIT_AFTER", jit_after)
    exe = mx.sym.take(mx.sym.var("a"), mx.sym.var("i"), mode="raise").simple_bind(mx.cpu(), a=(3, 2), i=(2,))
    exe.arg_dict["a"][:] = np.arange(6, dtype=np.float32).reshape(3, 2)
    exe.arg_dict["i"][:] = np.array([0, 5], np.float32)
    out = exe.forward(is_train=True)
    for read in (lambda o: o.asnumpy(), lambda o: o.wait_to_read(), np.asarray):
        with pytest.raises(MXNetError, match="out of bounds"):
            read(out[0])
    with pytest.raises(MXNetError, match="out of bounds"):   # its backward reads the same indices
        exe.backward(mx.nd.ones((2, 2)))
    exe.arg_dict["i"][:] = np.array([2, 0], np.float32)
    np.testing.assert_array_equal(exe.forward()[0].asnumpy(), [[4, 5], [0, 1]])


def test_executors_share_compiled_programs_and_keep_their_own_arrays():
    """Binding one symbol twice with the same shapes reuses the compiled program; 'write' and
    'add' share it and still differ in what backward does to the gradient arrays."""
    from symjit.executor_cache import clear_bound_programs
    clear_bound_programs()
    x, w = mx.sym.var("x"), mx.sym.var("w")
    sym = mx.sym.FullyConnected(x, w, num_hidden=3, no_bias=True)
    rng = np.random.default_rng(0)
    xv, wv = rng.normal(size=(2, 4)), rng.normal(size=(3, 4))

    def bind(req):
        args = {"x": mx.nd.array(xv), "w": mx.nd.array(wv)}
        grads = {"x": mx.nd.ones((2, 4)), "w": mx.nd.ones((3, 4))}
        return sym.bind(mx.cpu(), args, args_grad=grads, grad_req={"x": "null", "w": req})

    write, add = bind("write"), bind("add")
    assert write._graph is add._graph and write._backward_fn is add._backward_fn
    head = mx.nd.array(rng.normal(size=(2, 3)))
    for exe in (write, add):
        exe.forward(is_train=True)
        exe.backward(head)
    dw = head.asnumpy().T @ xv
    np.testing.assert_allclose(write.grad_dict["w"].asnumpy(), dw, rtol=1e-5)
    np.testing.assert_allclose(add.grad_dict["w"].asnumpy(), 1 + dw, rtol=1e-5)
    np.testing.assert_array_equal(add.grad_dict["x"].asnumpy(), 1)   # 'null': never written
    other = sym.bind(mx.cpu(), {"x": mx.nd.ones((5, 4)), "w": mx.nd.array(wv)})
    assert other._graph is not write._graph and other.forward()[0].shape == (5, 3)
    # the same structure under other automatic operator names shares too; other variables do not
    renamed = mx.sym.FullyConnected(mx.sym.var("x"), mx.sym.var("w"), num_hidden=3, no_bias=True)
    assert renamed.name != sym.name
    same = renamed.bind(mx.cpu(), {"x": mx.nd.array(xv), "w": mx.nd.array(wv)},
                        args_grad={"x": mx.nd.zeros((2, 4)), "w": mx.nd.zeros((3, 4))},
                        grad_req={"x": "null", "w": "write"})
    assert same._graph is write._graph and list(same.output_dict) == renamed.list_outputs()
    relabeled = mx.sym.FullyConnected(mx.sym.var("x"), mx.sym.var("v"), num_hidden=3, no_bias=True)
    assert relabeled.bind(mx.cpu(), {"x": mx.nd.array(xv), "v": mx.nd.array(wv)})._graph is not other._graph
