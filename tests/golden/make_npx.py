"""Writes data/npx_nn.npz and data/npx_ops.npz: inputs, arguments, outputs and input gradients of MXNet 1.9.1's
`mx.npx` operator functions (NumPy mode), the reference for tests/numpy_extension.

Also writes data/npx_names.json (the public names of mx.npx, mx.sym.npx and mx.sym.np), and
data/npx_model-symbol.json / npx_model-0000.params / npx_model_io.npz: a small hybridized
network using F.np / F.npx exported under npx.set_np(), with one input batch and MXNet's outputs
for it; data/npx_saved.params is a dict of np arrays (0-d and zero-size included) written by
npx.save.

Run with the MXNet 1.9.1 reference environment, never with symjit:
`/work/mxref/bin/python tests/golden/make_npx.py`. Each case `<c>` stores the function name
(`<c>:fn`), its keyword arguments as JSON (`<c>:kwargs`), its array inputs (`<c>:in<k>`, passed
positionally in order), the outputs (`<c>:out<k>`) and, when `<c>:head` is present, the
gradients of sum(out0 * head) with respect to the float inputs (`<c>:grad<k>`).
"""
import json
import os

import numpy as onp

import mxnet as mx
from mxnet import autograd, gluon, np, npx

npx.set_np()
rng = onp.random.RandomState(11)
cases = {}
f32 = onp.float32


def save(fname):
    """Write the cases collected so far to data/`fname` and start a new collection."""
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", fname)
    onp.savez_compressed(out, **cases)
    print(f"wrote {len({k.split(':')[0] for k in cases})} cases to {out} ({os.path.getsize(out)} bytes)")
    cases.clear()


def u(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(f32)


def add(name, fn, inputs, kwargs=None, grad=True, train=True, nodiff=()):
    kwargs = kwargs or {}
    arrs = [np.array(x, dtype=x.dtype) for x in inputs]
    diff = [grad and x.dtype.kind == "f" and k not in nodiff for k, x in enumerate(inputs)]
    for a, d in zip(arrs, diff):
        if d:
            a.attach_grad()
    func = getattr(npx, fn) if "." not in fn else getattr(getattr(npx, fn.split(".")[0]), fn.split(".")[1])
    with autograd.record(train_mode=train):
        outs = func(*arrs, **kwargs)
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    rec = {f"{name}:fn": onp.array(fn), f"{name}:kwargs": onp.array(json.dumps(kwargs))}
    if grad:
        head = rng.uniform(-1, 1, outs[0].shape).astype(outs[0].dtype)
        outs[0].backward(np.array(head, dtype=head.dtype))
        rec[f"{name}:head"] = head
    for k, x in enumerate(inputs):
        rec[f"{name}:in{k}"] = x
        if diff[k]:
            rec[f"{name}:grad{k}"] = arrs[k].grad.asnumpy()
    for k, o in enumerate(outs):
        rec[f"{name}:out{k}"] = o.asnumpy()
    cases.update(rec)


x4 = u(2, 3, 6, 5)
for act in ("relu", "sigmoid", "tanh", "softrelu", "softsign"):
    add(f"activation_{act}", "activation", [x4], {"act_type": act})
add("relu", "relu", [x4])
add("sigmoid", "sigmoid", [x4])
g, b, m, v = u(3, lo=0.5, hi=1.5), u(3), u(3), u(3, lo=0.5, hi=2.0)
add("batch_norm_train", "batch_norm", [x4, g, b, m, v], {"fix_gamma": False})
add("batch_norm_infer", "batch_norm", [x4, g, b, m, v], {"fix_gamma": False, "use_global_stats": True},
    train=False)
add("convolution", "convolution", [x4, u(4, 3, 3, 3), u(4)], {"kernel": (3, 3), "num_filter": 4, "pad": (1, 1)})
add("convolution_stride_nobias", "convolution", [x4, u(2, 3, 2, 2)],
    {"kernel": (2, 2), "num_filter": 2, "stride": (2, 2), "no_bias": True})
add("deconvolution", "deconvolution", [x4, u(3, 2, 3, 3), u(2)],
    {"kernel": (3, 3), "num_filter": 2, "stride": (2, 2), "no_bias": False})
add("fully_connected", "fully_connected", [x4, u(7, 90), u(7)], {"num_hidden": 7})
add("fully_connected_noflatten", "fully_connected", [x4, u(4, 5), u(4)], {"num_hidden": 4, "flatten": False})
add("pooling_max", "pooling", [x4], {"kernel": (2, 2), "stride": (2, 2), "pool_type": "max"})
add("pooling_avg_full", "pooling", [x4], {"kernel": (3, 3), "stride": (2, 2), "pool_type": "avg",
                                          "pooling_convention": "full"})
add("pooling_global", "pooling", [x4], {"kernel": (1, 1), "global_pool": True, "pool_type": "avg"})
add("dropout_infer", "dropout", [x4], {"p": 0.5}, train=False)
save("npx_nn.npz")
idx = onp.array([[0, 2, 4], [1, 1, 3]], dtype=f32)
add("embedding", "embedding", [idx, u(5, 4)], {"input_dim": 5, "output_dim": 4}, nodiff=(0,))
add("layer_norm", "layer_norm", [x4, u(5, lo=0.5, hi=1.5), u(5)], {"axis": -1, "eps": 1e-5})
x2 = u(4, 6)
for act, extra in (("leaky", {"slope": 0.1}), ("elu", {"slope": 0.3}), ("gelu", {}), ("selu", {})):
    add(f"leaky_relu_{act}", "leaky_relu", [x2], dict(extra, act_type=act))
add("leaky_relu_prelu", "leaky_relu", [x4, u(3, lo=0.1, hi=0.4)], {"act_type": "prelu"})
add("one_hot", "one_hot", [onp.array([0, 2, 1, 3], dtype="int32")], {"depth": 4}, grad=False)
add("one_hot_values", "one_hot", [onp.array([[1, 0], [2, 2]], dtype="int32")],
    {"depth": 3, "on_value": 5.0, "off_value": -1.0, "dtype": "float64"}, grad=False)
add("pick", "pick", [x2, onp.array([0, 5, 2, 3], dtype=f32)], {"axis": 1}, nodiff=(1,))
add("pick_keepdims", "pick", [x2, onp.array([1, 0, 3, 2, 0, 1], dtype=f32)], {"axis": 0, "keepdims": True}, nodiff=(1,))
add("softmax", "softmax", [x2], {})
add("softmax_axis0_temp", "softmax", [x2], {"axis": 0, "temperature": 2.0})
add("log_softmax", "log_softmax", [x2], {"axis": -1})
add("softmax_length", "softmax", [x2, onp.array([2, 6, 1, 4], dtype="int32")], {"use_length": True, "axis": -1})
add("topk_indices", "topk", [x2], {"k": 2}, grad=False)
add("topk_value", "topk", [x2], {"k": 3, "ret_typ": "value", "axis": 0})
add("topk_both", "topk", [x2], {"k": 2, "ret_typ": "both", "is_ascend": True}, grad=False)
seq = u(5, 3, 2)
add("sequence_mask", "sequence_mask", [seq, onp.array([2, 5, 1], dtype=f32)],
    {"use_sequence_length": True, "value": -1.0}, nodiff=(1,))
x5 = u(2, 3, 1, 4, 5)
for i, (shape, rev) in enumerate([((-2, -2, -3, -1), False), ((-5, -3, -4), False), ((-2, -6, 3, 1, -3, -1), False),
                                  ((-1, 5), False), ((-4, -5), True), ((2, -1, 5), True), ((-6, -1, 2, -4), False),
                                  ((120,), False)]):
    add(f"reshape_{i}", "reshape", [x5], {"newshape": shape, "reverse": rev})
add("reshape_like", "reshape_like", [u(2, 6), u(3, 4)])
add("batch_dot", "batch_dot", [u(2, 3, 4), u(2, 5, 4)], {"transpose_b": True})
add("batch_flatten", "batch_flatten", [x4])
add("gather_nd", "gather_nd", [u(3, 4, 2), onp.array([[0, 2, 1], [3, 0, 3]], dtype="int32")])
add("arange_like", "arange_like", [x2], {"start": 1.0, "step": 0.5}, grad=False)
add("arange_like_axis", "arange_like", [x2], {"axis": 1}, grad=False)
add("erf", "erf", [x2])
add("erfinv", "erfinv", [u(4, 6, lo=-0.9, hi=0.9)])
add("gamma", "gamma", [u(4, 6, lo=0.5, hi=3.0)])
add("gammaln", "gammaln", [u(4, 6, lo=0.5, hi=3.0)])
add("nonzero", "nonzero", [onp.array([[0, 1.5, 0], [2, 0, -1]], dtype=f32)], grad=False)
add("nonzero_3d", "nonzero", [(rng.uniform(size=(2, 3, 2)) > 0.5).astype("int32")], grad=False)
add("shape_array", "shape_array", [x4], grad=False)
add("slice", "slice", [x4], {"begin": (0, 1, None), "end": (2, 3, -1), "step": (1, 1, 2)})
add("smooth_l1", "smooth_l1", [x2 * 3], {"scalar": 1.5})
add("cast", "cast", [x2], {"dtype": "float64"})
add("cast_int", "cast", [x2 * 10], {"dtype": "int32"}, grad=False)
feat = u(1, 2, 8, 8)
rois = onp.array([[0, 0, 0, 4, 4], [0, 2, 1, 7, 6]], dtype=f32)
add("roi_pooling", "roi_pooling", [feat, rois], {"pooled_size": (2, 2), "spatial_scale": 1.0}, nodiff=(1,))
add("multibox_prior", "multibox_prior", [u(1, 3, 4, 4)], {"sizes": (0.5, 0.25), "ratios": (1, 2)}, grad=False)
anchors = onp.array([[[0.1, 0.1, 0.4, 0.4], [0.5, 0.5, 0.9, 0.9], [0.2, 0.6, 0.5, 0.95]]], dtype=f32)
cls_prob = onp.array([[[0.2, 0.1, 0.7], [0.5, 0.8, 0.1], [0.3, 0.1, 0.2]]], dtype=f32)
loc = u(1, 12, lo=-0.1, hi=0.1)
add("multibox_detection", "multibox_detection", [cls_prob, loc, anchors], {"nms_threshold": 0.5}, grad=False)
label = onp.array([[[0, 0.12, 0.1, 0.42, 0.38], [1, 0.55, 0.5, 0.88, 0.92]]], dtype=f32)
add("multibox_target", "multibox_target", [anchors, label, cls_prob], {}, grad=False)

# the GRU/LSTM kernel of npx.rnn: parameters packed as MXNet packs them
T, N, I, H = 3, 2, 4, 5
add("rnn_lstm", "rnn", [u(T, N, I), u(4 * H * (I + H + 2), lo=-0.3, hi=0.3), u(1, N, H), u(1, N, H)],
    {"state_size": H, "num_layers": 1, "mode": "lstm"})
add("rnn_gru", "rnn", [u(T, N, I), u(3 * H * (I + H + 2), lo=-0.3, hi=0.3), u(1, N, H)],
    {"state_size": H, "num_layers": 1, "mode": "gru"})

save("npx_ops.npz")


DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def public(module):
    return sorted(n for n in dir(module) if not n.startswith("_"))


with open(os.path.join(DATA, "npx_names.json"), "w") as f:
    json.dump({"npx": public(npx), "sym.npx": public(mx.sym.npx), "sym.np": public(mx.sym.np),
               "npx.random": public(npx.random)}, f, indent=0)


class Block(gluon.HybridBlock):
    """Conv, batch norm, relu, pooling, dense, and F.np / F.npx arithmetic in between."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.conv = gluon.nn.Conv2D(4, 3, padding=1)
            self.bn = gluon.nn.BatchNorm()
            self.pool = gluon.nn.MaxPool2D(2)
            self.dense = gluon.nn.Dense(5)

    def hybrid_forward(self, F, x):
        y = F.npx.relu(self.bn(self.conv(x)))
        y = self.pool(y) * 0.5 + 1
        y = F.np.tanh(self.dense(y))
        z = F.npx.reshape(y, (-2, -1)) - F.np.mean(y, axis=1, keepdims=True)
        return F.npx.softmax(z, axis=-1), F.np.sum(F.np.square(y), axis=0)


mx.random.seed(3)
net = Block(prefix="npxmodel_")
net.initialize(mx.init.Xavier())
net.hybridize()
xin = np.array(rng.uniform(-1, 1, size=(3, 2, 6, 6)).astype(f32))
net(xin)
for p in net.collect_params().values():   # non-trivial running statistics
    if p.name.endswith("running_var") or p.name.endswith("running_mean"):
        p.set_data(np.array(rng.uniform(0.5, 1.5, size=p.shape).astype(f32)))
outs = net(xin)
net.export(os.path.join(DATA, "npx_model"))
onp.savez_compressed(os.path.join(DATA, "npx_model_io.npz"), data=xin.asnumpy(),
                     out0=outs[0].asnumpy(), out1=outs[1].asnumpy())
npx.save(os.path.join(DATA, "npx_saved.params"),
         {"matrix": np.array(onp.arange(6, dtype=f32).reshape(2, 3)), "scalar": np.array(2.5),
          "empty": np.zeros((0, 3)), "ints": np.array(onp.array([1, -2, 3], dtype="int64"))})
print("wrote npx_names.json, npx_model-*, npx_model_io.npz, npx_saved.params")
