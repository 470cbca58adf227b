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
