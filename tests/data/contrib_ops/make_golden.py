"""Writes golden.npz: outputs and input gradients of MXNet 1.9.1's contrib vision operators.

Run with Apache MXNet 1.9.1 (`pip install mxnet==1.9.1 "numpy<1.24"`, Python 3.11), not with
symjit: `python make_golden.py`. Each case stores its inputs (`<case>:in<k>`), the op name and
attributes (`<case>:op`, `<case>:attrs` as JSON), the head gradient (`<case>:head`), the
outputs (`<case>:out<k>`) and the input gradients (`<case>:grad<k>`, where MXNet has them).
"""
import json

import mxnet as mx
import numpy as np

rng = np.random.RandomState(7)
cases = {}


def add(name, op, inputs, attrs, grad=True, visible=1, is_train=True):
    arrs = [mx.nd.array(x, dtype=x.dtype) for x in inputs]
    for a in arrs:
        a.attach_grad()
    fn = getattr(mx.nd.contrib, op)
    with mx.autograd.record(train_mode=is_train):
        outs = fn(*arrs, **attrs)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    head = rng.uniform(-1, 1, outs[0].shape).astype(inputs[0].dtype)
    if grad:
        outs[0].backward(mx.nd.array(head, dtype=head.dtype))
    rec = {f"{name}:op": np.array(op), f"{name}:attrs": np.array(json.dumps(attrs)),
           f"{name}:head": head}
    for k, x in enumerate(inputs):
        rec[f"{name}:in{k}"] = x
        if grad:
            rec[f"{name}:grad{k}"] = arrs[k].grad.asnumpy()
    for k, o in enumerate(outs[:visible]):
        rec[f"{name}:out{k}"] = o.asnumpy()
    cases.update(rec)


f32 = np.float32
x = rng.uniform(size=(2, 2, 7, 5)).astype(f32)
add("adaptive_3x4", "AdaptiveAvgPooling2D", [x], {"output_size": (3, 4)})
add("adaptive_default", "AdaptiveAvgPooling2D", [x], {})
add("adaptive_8", "AdaptiveAvgPooling2D", [x], {"output_size": 8})

x = rng.uniform(size=(1, 2, 5, 4)).astype(f32)
add("resize_size", "BilinearResize2D", [x], {"height": 7, "width": 3})
add("resize_size_unaligned", "BilinearResize2D", [x], {"height": 9, "width": 6, "align_corners": False})
add("resize_scale", "BilinearResize2D", [x], {"scale_height": 1.5, "scale_width": 0.7})
add("resize_odd_scale", "BilinearResize2D", [x], {"scale_height": 2.0, "scale_width": 0.5, "mode": "odd_scale"})
add("resize_to_odd_up", "BilinearResize2D", [x], {"mode": "to_odd_up"})
add("resize_to_even_down", "BilinearResize2D", [x], {"mode": "to_even_down"})
like = rng.uniform(size=(1, 2, 3, 6)).astype(f32)
add("resize_like", "BilinearResize2D", [x, like], {"mode": "like", "align_corners": False})

data = rng.uniform(-1, 1, size=(2, 12, 9, 10)).astype(f32)
rois = np.array([[0, 1.2, 0.7, 13.1, 11.3], [1, 4.5, 2.0, 9.3, 17.9], [1, -3, -2, 30, 25],
                 [0, 6.0, 6.0, 6.5, 6.2]], dtype=f32)
add("roialign", "ROIAlign", [data, rois], {"pooled_size": (2, 3), "spatial_scale": 0.5})
add("roialign_ratio2", "ROIAlign", [data, rois], {"pooled_size": (3, 2), "spatial_scale": 0.5,
                                                  "sample_ratio": 2})
add("roialign_aligned", "ROIAlign", [data, rois[:3]], {"pooled_size": (2, 2), "spatial_scale": 0.5,
                                                       "aligned": True})
add("roialign_ps", "ROIAlign", [data, rois], {"pooled_size": (2, 3), "spatial_scale": 0.5,
                                              "position_sensitive": True})

rrois = np.array([[0, 8.0, 9.0, 10.0, 6.0, 30.0], [1, 5.0, 4.0, 12.0, 3.0, 120.0],
                  [1, 10.0, 8.0, 1.0, 1.0, -45.0]], dtype=f32)
add("rroialign", "RROIAlign", [data, rrois], {"pooled_size": (2, 3), "spatial_scale": 0.8}, grad=False)
add("rroialign_ratio2", "RROIAlign", [data, rrois], {"pooled_size": (3, 3), "spatial_scale": 0.8,
                                                     "sampling_ratio": 2}, grad=False)

psdata = rng.uniform(size=(2, 18, 6, 7)).astype(f32)
psrois = np.array([[0, 10, 22, 61, 73], [1, 20, 15, 94, 80], [1, 0, 0, 3, 3]], dtype=f32)
add("psroipool", "PSROIPooling", [psdata, psrois], {"spatial_scale": 0.0625, "output_dim": 2, "pooled_size": 3})
add("psroipool_group", "PSROIPooling", [psdata[:, :8], psrois], {"spatial_scale": 0.125, "output_dim": 2,
                                                                  "pooled_size": 3, "group_size": 2})

d = rng.uniform(size=(2, 4, 5, 6)).astype(f32)
off = (rng.uniform(size=(2, 2 * 2 * 9, 5, 6)) * 2.4 - 1.2).astype(f32)
w = rng.normal(size=(6, 2, 3, 3)).astype(f32)
b = rng.normal(size=(6,)).astype(f32)
add("deform", "DeformableConvolution", [d, off, w, b],
    {"kernel": (3, 3), "pad": (1, 1), "num_filter": 6, "num_group": 2, "num_deformable_group": 2})
off2 = (rng.uniform(size=(2, 18, 2, 4)) * 3 - 1.5).astype(f32)
add("deform_strided", "DeformableConvolution", [d, off2, w[:4].repeat(2, axis=1)],
    {"kernel": (3, 3), "stride": (2, 1), "dilate": (2, 1), "pad": (1, 0), "num_filter": 4,
     "no_bias": True})

A, H, W = 6, 5, 6
cls = rng.uniform(size=(1, 2 * A, H, W)).astype(f32)
bbox = (rng.uniform(-0.3, 0.3, size=(1, 4 * A, H, W))).astype(f32)
info = np.array([[70, 90, 0.8]], dtype=f32)
pattrs = {"feature_stride": 16, "scales": (2.0, 4.0, 8.0), "ratios": (0.5, 2.0), "rpn_pre_nms_top_n": 60,
          "rpn_post_nms_top_n": 20, "threshold": 0.6, "rpn_min_size": 10, "output_score": True}
add("proposal", "Proposal", [cls, bbox, info], pattrs, grad=False, visible=2)
add("proposal_iou", "Proposal", [cls, bbox * 10, info], dict(pattrs, iou_loss=True), grad=False, visible=2)
cls2 = rng.uniform(size=(2, 2 * A, H, W)).astype(f32)
bbox2 = (rng.uniform(-0.3, 0.3, size=(2, 4 * A, H, W))).astype(f32)
info2 = np.array([[70, 90, 0.8], [80, 60, 1.2]], dtype=f32)
add("multiproposal", "MultiProposal", [cls2, bbox2, info2], pattrs, grad=False, visible=2)

x = rng.uniform(size=(4, 3, 2, 5)).astype(f32)
g = rng.uniform(0.5, 1.5, size=(3,)).astype(f32)
bb = rng.uniform(size=(3,)).astype(f32)
mm = np.zeros(3, f32)
mv = np.ones(3, f32)
add("syncbn", "SyncBatchNorm", [x, g, bb, mm, mv], {"key": "golden", "fix_gamma": False,
                                                    "output_mean_var": True, "eps": 1e-4}, visible=3)

np.savez_compressed("golden.npz", **cases)
print(len(cases), "arrays")
