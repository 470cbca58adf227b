"""mx.operator: Python operators (CustomOp / CustomOpProp / register, NumpyOp) eagerly, in
Symbol executors, in hybridized Gluon blocks, under autograd and from several threads."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError


class _Scale(mx.operator.CustomOp):
    """y = factor * x**2 (plus an aux state counting forward calls)."""

    def __init__(self, factor):
        super().__init__()
        self.factor = factor

    def forward(self, is_train, req, in_data, out_data, aux):
        if aux:
            aux[0][:] = aux[0] + 1
        self.assign(out_data[0], req[0], self.factor * in_data[0] * in_data[0])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], 2 * self.factor * in_data[0] * out_grad[0])


@mx.operator.register("test_scale_sq")
class _ScaleProp(mx.operator.CustomOpProp):
    def __init__(self, factor="1", with_aux="0"):
        super().__init__(need_top_grad=True)
        self.factor = float(factor)
        self.with_aux = with_aux == "1"

    def list_arguments(self):
        return ["data"]

    def list_auxiliary_states(self):
        return ["count"] if self.with_aux else []

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], [in_shape[0]] if self.with_aux else []

    def create_operator(self, ctx, shapes, dtypes):
        return _Scale(self.factor)


def _x(shape=(3, 4), seed=0):
    return mx.nd.array(np.random.default_rng(seed).uniform(-1, 1, size=shape))


def test_imperative_forward_and_autograd():
    x = _x()
    x.attach_grad()
    with mx.autograd.record():
        y = mx.nd.Custom(x, op_type="test_scale_sq", factor=3)
    y.backward()
    np.testing.assert_allclose(y.asnumpy(), 3 * x.asnumpy() ** 2, rtol=1e-6)
    np.testing.assert_allclose(x.grad.asnumpy(), 6 * x.asnumpy(), rtol=1e-6)


def test_symbol_executor_gradient_and_aux():
    data = mx.sym.Variable("data")
    s = mx.sym.Custom(data, op_type="test_scale_sq", factor=2, with_aux=1, name="sq")
    assert s.list_arguments() == ["data"]
    assert s.list_auxiliary_states() == ["sq_count"]
    assert s.infer_shape(data=(3, 4))[1] == [(3, 4)]
    x = _x()
    grad = mx.nd.zeros((3, 4))
    count = mx.nd.zeros((3, 4))
    ex = s.bind(mx.cpu(), {"data": x}, args_grad={"data": grad}, aux_states=[count])
    ex.forward(is_train=True)
    ex.backward(mx.nd.ones((3, 4)))
    np.testing.assert_allclose(ex.outputs[0].asnumpy(), 2 * x.asnumpy() ** 2, rtol=1e-6)
    np.testing.assert_allclose(grad.asnumpy(), 4 * x.asnumpy(), rtol=1e-6)
    assert (count.asnumpy() == 1).all()          # the aux state written back


def test_hybridized_block_calls_back_into_python():
    class Net(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return F.Custom(F.tanh(x), op_type="test_scale_sq", factor=0.5) * 2 + 1

    net = Net()
    net.hybridize()
    x = _x()
    x.attach_grad()
    with mx.autograd.record():
        y = net(x)
    y.backward()
    t = np.tanh(x.asnumpy())
    np.testing.assert_allclose(y.asnumpy(), t ** 2 + 1, rtol=1e-5)
    np.testing.assert_allclose(x.grad.asnumpy(), 2 * t * (1 - t ** 2), rtol=1e-5)


def test_compiled_graph_from_threads():
    data = mx.sym.Variable("data")
    s = mx.sym.exp(mx.sym.Custom(data, op_type="test_scale_sq", factor=1.5))
    x = _x((8, 16))
    ex = s.bind(mx.cpu(), {"data": x})
    expected = np.exp(1.5 * x.asnumpy() ** 2)
    errors = []

    def run():
        try:
            for _ in range(20):
                out = s.eval(data=x)[0].asnumpy()
                np.testing.assert_allclose(out, expected, rtol=1e-5)
        except Exception as e:  # noqa: BLE001 - collected for the main thread
            errors.append(e)
    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    np.testing.assert_allclose(ex.forward()[0].asnumpy(), expected, rtol=1e-5)


def test_no_input_op_and_no_top_grad():
    class Ones(mx.operator.CustomOp):
        def __init__(self, n):
            super().__init__()
            self.n = n

        def forward(self, is_train, req, in_data, out_data, aux):
            self.assign(out_data[0], req[0], np.ones((self.n, 2), dtype=np.float32))

    @mx.operator.register("test_ones")
    class OnesProp(mx.operator.CustomOpProp):
        def __init__(self, n):
            super().__init__(need_top_grad=False)
            self.n = int(n)

        def list_arguments(self):
            return []

        def infer_shape(self, in_shape):
            return [], [(self.n, 2)], []

        def infer_type(self, in_type):
            return [], [np.float32], []

        def create_operator(self, ctx, shapes, dtypes):
            return Ones(self.n)

    out = mx.nd.Custom(n=5, op_type="test_ones")
    assert out.shape == (5, 2) and (out.asnumpy() == 1).all()
    assert "test_ones" in mx.operator.get_all_custom_operators()
    assert "Activation" in mx.operator.get_all_registered_operators()
    args = mx.operator.get_operator_arguments("Activation")
    assert args.names == ["data", "act_type"] and args.narg == 2
    assert args.types == ["NDArray-or-Symbol", "{'relu', 'sigmoid', 'softrelu', 'softsign', 'tanh'}, required"]


def test_errors_are_mxnet_errors():
    class Bad(mx.operator.CustomOp):
        def forward(self, is_train, req, in_data, out_data, aux):
            raise ValueError("boom")

    @mx.operator.register("test_bad")
    class BadProp(mx.operator.CustomOpProp):
        def create_operator(self, ctx, shapes, dtypes):
            return Bad()

    with pytest.raises(MXNetError, match=r"Custom\[test_bad\].*forward.*boom"):
        mx.nd.Custom(mx.nd.ones((2,)), op_type="test_bad")
    with pytest.raises(MXNetError, match="no custom operator registered"):
        mx.nd.Custom(mx.nd.ones((2,)), op_type="never_registered")
    with pytest.raises(MXNetError, match="CustomOpProp subclass"):
        mx.operator.register("test_not_a_prop")(object)


def test_numpy_op_legacy_interface():
    class Double(mx.operator.NumpyOp):
        def forward(self, in_data, out_data):
            out_data[0][:] = 2 * in_data[0]

        def backward(self, out_grad, in_data, out_data, in_grad):
            in_grad[0][:] = 2 * out_grad[0]

    x = mx.sym.Variable("X")
    s = Double().get_symbol(x, name="double")
    dx = mx.nd.zeros((4,))
    ex = s.bind(mx.cpu(), args=[mx.nd.ones((4,)) * 3], args_grad={"X": dx})
    ex.forward(is_train=True)
    ex.backward(mx.nd.ones((4,)))
    assert (ex.outputs[0].asnumpy() == 6).all() and (dx.asnumpy() == 2).all()
