"""DataParallelExecutorGroup: batch slicing over contexts and array sharing between groups."""
import numpy as np
import pytest

import symjit as mx
from symjit.io import DataBatch
from symjit.module.executor_group import DataParallelExecutorGroup, split_batch
from symjit.test_utils import same_array


def _mlp(hidden):
    data = mx.sym.Variable("data")
    fc = mx.sym.FullyConnected(data, num_hidden=hidden, name="fc")
    return mx.sym.SoftmaxOutput(fc, name="softmax")


def test_split_batch_follows_workload():
    assert split_batch(10, [1, 1]) == [slice(0, 5), slice(5, 10)]
    assert split_batch(9, [2, 1]) == [slice(0, 6), slice(6, 9)]
    with pytest.raises(mx.MXNetError):
        split_batch(1, [1, 1])


def test_group_slices_batch_and_matches_one_executor():
    sym = _mlp(3)
    contexts = [mx.cpu(0), mx.cpu(1)]
    group = DataParallelExecutorGroup(sym, contexts, [1, 1], [("data", (6, 4))], [("softmax_label", (6,))],
                                      ["fc_weight", "fc_bias"], for_training=True, inputs_need_grad=False)
    assert [e.arg_dict["data"].shape for e in group.execs] == [(3, 4), (3, 4)]
    assert group.grad_req == {"data": "null", "fc_weight": "write", "fc_bias": "write", "softmax_label": "null"}
    w = np.random.uniform(-1, 1, (3, 4)).astype(np.float32)
    b = np.zeros(3, np.float32)
    group.set_params({"fc_weight": mx.nd.array(w), "fc_bias": mx.nd.array(b)}, {})
    x = np.random.uniform(-1, 1, (6, 4)).astype(np.float32)
    y = np.array([0, 1, 2, 0, 1, 2], np.float32)
    group.forward(DataBatch([mx.nd.array(x)], [mx.nd.array(y)]), is_train=True)
    out = group.get_outputs()[0].asnumpy()
    logits = x @ w.T
    expect = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    assert np.allclose(out, expect, atol=1e-5)
    assert [o.shape for o in group.get_outputs(merge_multi_context=False)[0]] == [(3, 3), (3, 3)]
    group.backward()
    grad = sum(e.grad_dict["fc_weight"].asnumpy() for e in group.execs)
    onehot = np.eye(3)[y.astype(int)]
    assert np.allclose(grad, (expect - onehot).T @ x, atol=1e-4)


def test_shared_group_shares_parameters_and_inputs():
    contexts = [mx.cpu(0), mx.cpu(1)]
    g1 = DataParallelExecutorGroup(_mlp(3), contexts, [1, 1], [("data", (4, 5))], [("softmax_label", (4,))],
                                   ["fc_weight", "fc_bias"], for_training=True, inputs_need_grad=False)
    g2 = DataParallelExecutorGroup(_mlp(3), contexts, [1, 1], [("data", (2, 5))], [("softmax_label", (2,))],
                                   ["fc_weight", "fc_bias"], for_training=True, inputs_need_grad=False,
                                   shared_group=g1)
    for e1, e2 in zip(g1.execs, g2.execs):
        assert same_array(e1.arg_dict["fc_weight"], e2.arg_dict["fc_weight"])
        assert same_array(e1.grad_dict["fc_weight"], e2.grad_dict["fc_weight"])
    assert g2.shared_data_arrays is g1.shared_data_arrays
    assert sorted(g1.shared_data_arrays[0]) == ["data", "softmax_label"]
    # the smaller input is a view of the larger one's memory
    assert same_array(g1.shared_data_arrays[0]["data"], g1.execs[0].arg_dict["data"])
    g2.execs[0].arg_dict["data"][:] = 7
    assert np.all(g1.execs[0].arg_dict["data"].asnumpy().reshape(-1)[:5] == 7)


def _two_group_sym():
    """c = 2 a + b with a (and 2 a) in ctx group 'dev1', b in 'dev2'."""
    with mx.AttrScope(ctx_group="dev1"):
        a = mx.sym.Variable("a") * 2
    with mx.AttrScope(ctx_group="dev2"):
        return a + mx.sym.Variable("b")


def test_per_context_group2ctx_forms():
    from symjit.module.executor_group import per_context_group2ctx
    c = [mx.cpu(i) for i in range(6)]
    assert per_context_group2ctx(None, 2) == [None, None]
    assert per_context_group2ctx({"g": c[2]}, 2) == [{"g": c[2]}, {"g": c[2]}]
    assert per_context_group2ctx({"g": [c[3]]}, 2) == [{"g": c[3]}, {"g": c[3]}]
    assert per_context_group2ctx({"g": [c[3], c[4]], "h": c[5]}, 2) == [{"g": c[3], "h": c[5]},
                                                                       {"g": c[4], "h": c[5]}]
    assert per_context_group2ctx([{"g": c[1]}, {"g": c[2]}], 2) == [{"g": c[1]}, {"g": c[2]}]
    with pytest.raises(mx.MXNetError, match="expected 1 or 2"):
        per_context_group2ctx({"g": [c[1], c[2], c[3]]}, 2)
    with pytest.raises(mx.MXNetError, match="2 contexts"):
        per_context_group2ctx([{"g": c[1]}], 2)


def test_module_places_grouped_inputs_and_gradients_on_their_contexts():
    shape = (2, 5)
    a, b = np.arange(10.0).reshape(shape), np.ones(shape)
    mod = mx.mod.Module(_two_group_sym(), data_names=["a", "b"], label_names=None, context=[mx.cpu(0)],
                        group2ctxs={"dev1": mx.cpu(1), "dev2": mx.cpu(2)})
    mod.bind(data_shapes=[("a", shape), ("b", shape)], inputs_need_grad=True)
    mod.init_params()
    mod.forward(DataBatch(data=[mx.nd.array(a), mx.nd.array(b)]), is_train=True)
    np.testing.assert_array_equal(mod.get_outputs()[0].asnumpy(), 2 * a + b)
    og = np.full(shape, 3.0)
    mod.backward([mx.nd.array(og)])
    ga, gb = mod.get_input_grads()
    assert (ga.context, gb.context) == (mx.cpu(1), mx.cpu(2))
    np.testing.assert_array_equal(ga.asnumpy(), 2 * og)
    np.testing.assert_array_equal(gb.asnumpy(), og)


def test_simple_bind_places_grouped_arguments():
    ex = _two_group_sym().simple_bind(mx.cpu(0), a=(3,), b=(3,), group2ctx={"dev1": mx.cpu(4)})
    assert ex.arg_dict["a"].context == ex.grad_dict["a"].context == mx.cpu(4)
    assert ex.arg_dict["b"].context == mx.cpu(0)          # group 'dev2' not mapped: the default
    out = ex.forward(a=mx.nd.array([1.0, 2.0, 3.0]), b=mx.nd.ones((3,)))[0]
    np.testing.assert_array_equal(out.asnumpy(), [3.0, 5.0, 7.0])


def _sparse_regression(m):
    x = mx.sym.var("data", stype="csr")
    v = mx.sym.var("v", shape=(m, 1), stype="row_sparse", init=mx.init.Uniform(0.5))
    return mx.sym.LinearRegressionOutput(mx.sym.dot(x, v), mx.sym.var("label"), name="out")


def test_arrays_take_their_variables_storage_types():
    """As MXNet's storage inference: arguments in their variable's stype, the gradient of a
    row_sparse weight row_sparse, everything else dense; Module's parameters keep the stype."""
    n, m = 4, 6
    sym = _sparse_regression(m)
    mod = mx.mod.Module(sym, data_names=["data"], label_names=["label"])
    mod.bind(data_shapes=[("data", (n, m))], label_shapes=[("label", (n, 1))])
    mod.init_params()
    ex = mod._exec_group.execs[0]
    assert (ex.arg_dict["data"].stype, ex.arg_dict["v"].stype, ex.arg_dict["label"].stype) == \
        ("csr", "row_sparse", "default")
    assert ex.grad_dict["v"].stype == "row_sparse"
    v = mod._arg_params["v"]
    assert v.stype == "row_sparse" and np.abs(v.asnumpy()).sum() > 0
    dense_x = np.zeros((n, m), np.float32)
    dense_x[[0, 2, 3], [1, 4, 1]] = [1.0, 2.0, -1.0]
    y = np.ones((n, 1), np.float32)
    mod.forward(DataBatch([mx.nd.array(dense_x).tostype("csr")], [mx.nd.array(y)]), is_train=True)
    pred = dense_x @ v.asnumpy()
    np.testing.assert_allclose(mod.get_outputs()[0].asnumpy(), pred, rtol=1e-6)
    mod.backward()
    np.testing.assert_allclose(ex.grad_dict["v"].asnumpy(), dense_x.T @ (pred - y), rtol=1e-5, atol=1e-7)


def test_simple_bind_storage_types_and_stype_dict():
    ex = _sparse_regression(3).simple_bind(mx.cpu(), data=(2, 3), label=(2, 1), stype_dict={"label": "csr"})
    assert [ex.arg_dict[k].stype for k in ("data", "v", "label")] == ["csr", "row_sparse", "csr"]
    with pytest.raises(mx.MXNetError, match="unknown storage type 'dense'"):
        _sparse_regression(3).simple_bind(mx.cpu(), data=(2, 3), label=(2, 1), stype_dict={"v": "dense"})
