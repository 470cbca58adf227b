"""Golden values of MXNet 1.9.1's contrib operators (detection, ROI, resizing, attention,
quantization, signal and the small array ops of `mx.nd.contrib`).

Run with the MXNet 1.9.1 reference environment (never imported by the tests):

    /work/mxref/bin/python tests/golden/make_contrib.py

Writes tests/golden/data/contrib_<group>.npz (see golden_ops_io.py for the layout). Calls that
MXNet 1.9.1 refuses on CPU are reported and left out, except those recorded on purpose as
refusals (their names end in `_refused`). fft, ifft, count_sketch and
ModulatedDeformableConvolution run on GPUs only in MXNet 1.9.1: they have no golden values.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mxnet as mx  # noqa: E402
from golden_ops_io import DATA_DIR, Case, record, save_cases  # noqa: E402

RNG = np.random.default_rng(7)


def normal(*shape, scale=1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def uniform(lo, hi, *shape) -> np.ndarray:
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def boxes(n: int, size: float = 10.0, batch=None) -> np.ndarray:
    """Corner boxes (x1, y1, x2, y2) inside [0, size]^2 with positive widths and heights."""
    shape = (n,) if batch is None else (batch, n)
    xy = RNG.uniform(0, size * 0.6, shape + (2,))
    wh = RNG.uniform(size * 0.1, size * 0.4, shape + (2,))
    return np.concatenate([xy, xy + wh], axis=-1).astype(np.float32)


def case(name, fn, inputs, attrs=None, stypes=None, n_heads=1, **kw) -> Case | None:
    c = Case(name=name, fn=fn, inputs=list(inputs), in_stypes=stypes or ["default"] * len(inputs),
             attrs=attrs or {}, **kw)
    c = record(mx, c, n_heads=n_heads)
    if c.error and not name.endswith("_refused"):
        print(f"  left out {name}: {c.error}")
        return None
    return c


def detection_cases() -> list:
    b = boxes(8, batch=2)
    ids = RNG.integers(0, 3, (2, 8, 1)).astype(np.float32)
    ids[0, 2] = -1
    scores = uniform(0, 1, 2, 8, 1)
    nms_in = np.concatenate([ids, scores, b], axis=-1)
    tol = {"rtol": 1e-5, "atol": 1e-5}
    cs = [
        case("box_nms_default", "contrib.box_nms", [nms_in], {"overlap_thresh": 0.3, "id_index": 0,
                                                               "score_index": 1, "coord_start": 2}, **tol),
        case("box_nms_force_topk", "contrib.box_nms", [nms_in], {"overlap_thresh": 0.2, "id_index": 0,
                                                                  "score_index": 1, "coord_start": 2,
                                                                  "force_suppress": True, "topk": 5,
                                                                  "valid_thresh": 0.2}, **tol),
        case("box_nms_background_center", "contrib.box_nms", [nms_in], {"overlap_thresh": 0.4, "id_index": 0,
                                                                         "score_index": 1, "coord_start": 2,
                                                                         "background_id": 1, "in_format": "center",
                                                                         "out_format": "corner"}, **tol),
        case("box_nms_no_id", "contrib.box_nms", [nms_in[..., 1:]], {"overlap_thresh": 0.3, "score_index": 0,
                                                                      "coord_start": 1, "id_index": -1}, **tol),
        case("box_nms_grad", "contrib.box_nms", [nms_in], {"overlap_thresh": 0.3, "id_index": 0,
                                                            "score_index": 1, "coord_start": 2},
             grad_of=[0], **tol),
        case("box_iou_corner", "contrib.box_iou", [boxes(4), boxes(5)], {"format": "corner"}, **tol),
        case("box_iou_center", "contrib.box_iou", [boxes(3, batch=2), boxes(4)], {"format": "center"}, **tol),
    ]
    anchors = boxes(6, size=1.0)[None]
    refs = boxes(3, size=1.0)[None]
    samples = np.array([[1, -1, 1, 0, 1, -1]], np.float32)
    matches = np.array([[0, 1, 2, 0, 1, 2]], np.float32)
    means, stds = np.zeros(4, np.float32), np.array([0.1, 0.1, 0.2, 0.2], np.float32)
    cs += [
        case("box_encode", "contrib.box_encode", [samples, matches, anchors, refs, means, stds], **tol),
        case("box_decode_corner", "contrib.box_decode", [normal(2, 6, 4, scale=0.3), anchors],
             {"std0": 0.1, "std1": 0.1, "std2": 0.2, "std3": 0.2, "format": "corner"}, **tol),
        case("box_decode_center_clip", "contrib.box_decode", [normal(1, 6, 4), anchors],
             {"clip": 0.5, "format": "center"}, **tol),
        case("bipartite_matching", "contrib.bipartite_matching", [uniform(0, 1, 2, 5, 4)], {"threshold": 0.3}),
        case("bipartite_matching_ascend_topk", "contrib.bipartite_matching", [uniform(0, 1, 5, 4)],
             {"threshold": 0.6, "is_ascend": True, "topk": 3}),
    ]
    feat = normal(1, 2, 4, 5)
    cs += [
        case("multibox_prior", "contrib.MultiBoxPrior", [feat], {"sizes": (0.3, 0.6), "ratios": (1, 2, 0.5)}),
        case("multibox_prior_clip_steps", "contrib.MultiBoxPrior", [feat], {"sizes": (0.5,), "ratios": (1, 3),
                                                                            "clip": True, "steps": (0.3, 0.25),
                                                                            "offsets": (0.2, 0.4)}),
    ]
    anc = mx.nd.contrib.MultiBoxPrior(mx.nd.array(feat), sizes=(0.3, 0.6), ratios=(1, 2)).asnumpy()
    n_anchor = anc.shape[1]
    label = np.full((2, 3, 5), -1, np.float32)
    label[0, :2] = np.concatenate([[[0], [1]], boxes(2, size=1.0)], axis=1)
    label[1, :1] = np.concatenate([[[2]], boxes(1, size=1.0)], axis=1)
    cls_pred = normal(2, 4, n_anchor)
    cs += [
        case("multibox_target", "contrib.MultiBoxTarget", [anc, label, cls_pred],
             {"overlap_threshold": 0.3, "negative_mining_ratio": -1}, **tol),
        case("multibox_target_mining", "contrib.MultiBoxTarget", [anc, label, cls_pred],
             {"overlap_threshold": 0.4, "negative_mining_ratio": 2, "negative_mining_thresh": 0.3,
              "minimum_negative_samples": 1, "variances": (0.1, 0.1, 0.2, 0.2)}, **tol),
    ]
    probs = np.exp(cls_pred) / np.exp(cls_pred).sum(axis=1, keepdims=True)
    loc = normal(2, n_anchor * 4, scale=0.2)
    cs += [
        case("multibox_detection", "contrib.MultiBoxDetection", [probs, loc, anc],
             {"threshold": 0.1, "nms_threshold": 0.5}, **tol),
        case("multibox_detection_force_topk", "contrib.MultiBoxDetection", [probs, loc, anc],
             {"threshold": 0.2, "nms_threshold": 0.3, "force_suppress": True, "nms_topk": 10, "clip": False,
              "background_id": 0}, **tol),
    ]
    return cs


def roi_cases() -> list:
    data = normal(2, 8, 9, 10)
    rois = np.array([[0, 1.2, 0.5, 7.3, 6.1], [1, 0, 0, 9, 8], [1, 3.5, 2.5, 5.5, 7.5]], np.float32)
    rois2 = rois * np.array([1, 2, 2, 2, 2], np.float32)   # coordinates doubled, batch indices kept
    tol = {"rtol": 1e-4, "atol": 1e-5}
    cs = [
        case("roialign", "contrib.ROIAlign", [data, rois], {"pooled_size": (3, 3), "spatial_scale": 1.0,
                                                             "sample_ratio": 2}, grad_of=[0], **tol),
        case("roialign_scale_adaptive", "contrib.ROIAlign", [data, rois2],
             {"pooled_size": (2, 4), "spatial_scale": 0.5, "sample_ratio": -1}, grad_of=[0], **tol),
        case("roialign_aligned", "contrib.ROIAlign", [data, rois], {"pooled_size": (3, 2), "spatial_scale": 1.0,
                                                                     "sample_ratio": 2, "aligned": True},
             grad_of=[0], **tol),
        case("roialign_position_sensitive", "contrib.ROIAlign", [data, rois],
             {"pooled_size": (2, 2), "spatial_scale": 1.0, "sample_ratio": 2, "position_sensitive": True},
             grad_of=[0], **tol),
        case("psroipooling", "contrib.PSROIPooling", [normal(2, 2 * 9, 9, 10), rois],
             {"spatial_scale": 1.0, "output_dim": 2, "pooled_size": 3}, grad_of=[0], **tol),
        case("psroipooling_group", "contrib.PSROIPooling", [normal(2, 3 * 4, 9, 10), rois2],
             {"spatial_scale": 0.5, "output_dim": 3, "pooled_size": 2, "group_size": 2}, grad_of=[0], **tol),
    ]
    # Proposal: 3 anchors (scales (2,), ratios (0.5, 1, 2)) on a 4 x 5 feature map of stride 4
    cls_prob = uniform(0, 1, 1, 6, 4, 5)
    bbox = normal(1, 12, 4, 5, scale=0.1)
    im_info = np.array([[16, 20, 1.0]], np.float32)
    prop = {"scales": (2,), "ratios": (0.5, 1, 2), "feature_stride": 4, "rpn_pre_nms_top_n": 30,
            "rpn_post_nms_top_n": 8, "threshold": 0.6, "rpn_min_size": 2}
    cs += [
        case("proposal", "contrib.Proposal", [cls_prob, bbox, im_info], prop, **tol),
        case("proposal_scores", "contrib.Proposal", [cls_prob, bbox, im_info], dict(prop, output_score=True),
             **tol),
        case("multi_proposal", "contrib.MultiProposal",
             [uniform(0, 1, 2, 6, 4, 5), normal(2, 12, 4, 5, scale=0.1), np.array([[16, 20, 1], [12, 18, 1]],
                                                                                   np.float32)],
             dict(prop, output_score=True), **tol),
    ]
    x = normal(1, 2, 5, 6)
    offset = normal(1, 2 * 9, 5, 6, scale=0.7)
    w = normal(3, 2, 3, 3, scale=0.3)
    bias = normal(3)
    cs += [
        case("deformable_conv", "contrib.DeformableConvolution", [x, offset, w, bias],
             {"kernel": (3, 3), "num_filter": 3, "pad": (1, 1)}, grad_of=[0, 1, 2, 3], **tol),
        case("deformable_conv_stride_groups", "contrib.DeformableConvolution",
             [normal(1, 4, 6, 6), normal(1, 2 * 2 * 4, 3, 3, scale=0.5), normal(2, 2, 2, 2, scale=0.3)],
             {"kernel": (2, 2), "num_filter": 2, "stride": (2, 2), "num_group": 2, "num_deformable_group": 2,
              "no_bias": True}, grad_of=[0, 1, 2], **tol),
    ]
    return cs


def array_cases() -> list:
    img = normal(2, 3, 4, 5)
    tol = {"rtol": 1e-5, "atol": 1e-6}
    cs = [
        case("bilinear_size", "contrib.BilinearResize2D", [img], {"height": 7, "width": 3}, grad_of=[0], **tol),
        case("bilinear_size_not_aligned", "contrib.BilinearResize2D", [img], {"height": 6, "width": 8,
                                                                              "align_corners": False},
             grad_of=[0], **tol),
        case("bilinear_scale", "contrib.BilinearResize2D", [img], {"scale_height": 1.5, "scale_width": 0.6,
                                                                   "mode": "size"}, **tol),
        case("bilinear_odd_scale", "contrib.BilinearResize2D", [img], {"scale_height": 2.0, "scale_width": 2.0,
                                                                       "mode": "odd_scale"}, **tol),
        case("bilinear_to_even_down", "contrib.BilinearResize2D", [img], {"mode": "to_even_down"}, **tol),
        case("bilinear_to_even_up", "contrib.BilinearResize2D", [img], {"mode": "to_even_up"}, **tol),
        case("bilinear_to_odd_down", "contrib.BilinearResize2D", [img], {"mode": "to_odd_down"}, **tol),
        case("bilinear_to_odd_up", "contrib.BilinearResize2D", [img], {"mode": "to_odd_up"}, **tol),
        case("bilinear_like", "contrib.BilinearResize2D", [img, normal(1, 1, 6, 2)], {"mode": "like"}, **tol),
        case("adaptive_avg_pool", "contrib.AdaptiveAvgPooling2D", [normal(2, 3, 7, 9)], {"output_size": (3, 4)},
             grad_of=[0], **tol),
        case("adaptive_avg_pool_square", "contrib.AdaptiveAvgPooling2D", [normal(1, 2, 5, 5)], {"output_size": 2},
             grad_of=[0], **tol),
        case("boolean_mask", "contrib.boolean_mask", [normal(5, 3), np.array([1, 0, 1, 1, 0], np.float32)],
             grad_of=[0], **tol),
        case("boolean_mask_axis1_refused", "contrib.boolean_mask", [normal(3, 4), np.array([1, 0, 1, 1],
                                                                                            np.float32)],
             {"axis": 1}),
        case("index_array", "contrib.index_array", [normal(2, 3)]),
        case("index_array_axes", "contrib.index_array", [normal(2, 3, 4)], {"axes": (0, -1)}),
        case("index_copy", "contrib.index_copy", [normal(5, 3), np.array([3, 0], np.int64), normal(2, 3)],
             grad_of=[0, 2], **tol),
        case("arange_like", "contrib.arange_like", [normal(2, 3)], {"start": 1.5, "step": 0.5}),
        case("arange_like_axis_repeat", "contrib.arange_like", [normal(2, 6)], {"axis": 1, "repeat": 2,
                                                                                "start": -1}),
        case("div_sqrt_dim", "contrib.div_sqrt_dim", [normal(2, 3, 16)], grad_of=[0], **tol),
        case("round_ste", "contrib.round_ste", [np.array([-2.5, -1.5, -0.5, 0.4, 0.5, 1.5, 2.7, 0], np.float32)],
             grad_of=[0]),
        case("sign_ste", "contrib.sign_ste", [np.array([-2.5, -0.0, 0.0, 0.4, 3.0], np.float32)], grad_of=[0]),
        case("isfinite", "contrib.isfinite", [np.array([1, np.inf, -np.inf, np.nan, 0], np.float32)]),
        case("isinf", "contrib.isinf", [np.array([1, np.inf, -np.inf, np.nan, 0], np.float32)]),
        case("isnan", "contrib.isnan", [np.array([1, np.inf, -np.inf, np.nan, 0], np.float32)]),
    ]
    return cs


def attention_cases() -> list:
    seq, batch, heads, dim = 4, 2, 3, 5
    qkv = normal(seq, batch, heads * 3 * dim)
    att = normal(batch * heads, seq, seq)
    q = normal(seq, batch, heads * dim)
    kv = normal(6, batch, heads * 2 * dim)
    att_ed = normal(batch * heads, seq, 6)
    tol = {"rtol": 1e-4, "atol": 1e-5}
    return [
        case("selfatt_qk", "contrib.interleaved_matmul_selfatt_qk", [qkv], {"heads": heads}, grad_of=[0], **tol),
        case("selfatt_valatt", "contrib.interleaved_matmul_selfatt_valatt", [qkv, att], {"heads": heads},
             grad_of=[0, 1], **tol),
        case("encdec_qk", "contrib.interleaved_matmul_encdec_qk", [q, kv], {"heads": heads}, grad_of=[0, 1],
             **tol),
        case("encdec_valatt", "contrib.interleaved_matmul_encdec_valatt", [kv, att_ed], {"heads": heads},
             grad_of=[0, 1], **tol),
    ]


def norm_signal_cases() -> list:
    x = normal(4, 3, 2, 2)
    gamma, beta = normal(3), normal(3)
    mean, var = normal(3), np.abs(normal(3)) + 0.5
    tol = {"rtol": 1e-4, "atol": 1e-5}
    cs = [
        case("sync_batch_norm_train", "contrib.SyncBatchNorm", [x, gamma, beta, mean, var],
             {"key": "bn0", "eps": 1e-3, "momentum": 0.8, "__train__": True}, grad_of=[0, 1, 2], **tol),
        case("sync_batch_norm_infer", "contrib.SyncBatchNorm", [x, gamma, beta, mean, var],
             {"key": "bn1", "eps": 1e-3}, **tol),
        case("sync_batch_norm_fix_gamma", "contrib.SyncBatchNorm", [x, gamma, beta, mean, var],
             {"key": "bn2", "fix_gamma": True, "__train__": True}, grad_of=[0, 2], **tol),
        case("fft", "contrib.fft", [normal(3, 8)], **tol),
        case("ifft", "contrib.ifft", [normal(3, 16)], **tol),
        case("count_sketch", "contrib.count_sketch",
             [normal(3, 6), RNG.integers(0, 4, (1, 6)).astype(np.float32),
              RNG.choice([-1.0, 1.0], (1, 6)).astype(np.float32)], {"out_dim": 4}, **tol),
    ]
    # hawkesll: 2 sequences, 3 marks, 4 events (the second sequence holds 3 valid ones)
    lda = uniform(0.5, 1.5, 2, 3)
    alpha, beta_ = uniform(0.1, 0.5, 3), uniform(0.5, 2.0, 3)
    state = np.zeros((2, 3), np.float32)
    lags = uniform(0.1, 1.0, 2, 4)
    marks = RNG.integers(0, 3, (2, 4)).astype(np.int32)
    valid = np.array([4, 3], np.float32)
    max_time = lags.sum(axis=1) + 0.5
    cs.append(case("hawkesll", "contrib.hawkesll", [lda, alpha, beta_, state, lags, marks, valid, max_time],
                   grad_of=[0, 1, 2], n_heads=1, **tol))
    return cs


def quantize_cases() -> list:
    data = uniform(-3, 2, 3, 5)
    lo, hi = np.array([-3.0], np.float32), np.array([2.0], np.float32)
    ulo, uhi = np.array([0.0], np.float32), np.array([4.0], np.float32)
    udata = uniform(0, 4, 3, 5)
    i32 = RNG.integers(-2 ** 20, 2 ** 20, (3, 5)).astype(np.int32)
    rmin, rmax = np.array([-50.0], np.float32), np.array([40.0], np.float32)
    tol = {"rtol": 1e-5, "atol": 1e-5}
    return [
        case("quantize_int8", "contrib.quantize", [data, lo, hi], {"out_type": "int8"}),
        case("quantize_uint8", "contrib.quantize", [udata, ulo, uhi], {"out_type": "uint8"}),
        case("quantize_v2_int8", "contrib.quantize_v2", [data], {"out_type": "int8"}),
        case("quantize_v2_uint8_calib", "contrib.quantize_v2", [udata], {"out_type": "uint8",
                                                                         "min_calib_range": 0.5,
                                                                         "max_calib_range": 3.0}),
        case("quantize_v2_auto", "contrib.quantize_v2", [data], {"out_type": "auto"}),
        case("quantize_v2_auto_positive", "contrib.quantize_v2", [udata], {"out_type": "auto"}),
        case("dequantize_int8", "contrib.dequantize",
             [RNG.integers(-127, 128, (3, 5)).astype(np.int8), lo, hi], **tol),
        case("dequantize_uint8", "contrib.dequantize",
             [RNG.integers(0, 256, (3, 5)).astype(np.uint8), ulo, uhi], **tol),
        case("requantize", "contrib.requantize", [i32, rmin, rmax]),
        case("requantize_calib", "contrib.requantize", [i32, rmin, rmax], {"min_calib_range": -0.01,
                                                                           "max_calib_range": 0.012}),
    ]


def quantized_nn_cases() -> list:
    def codes(kind, *shape):
        lo, hi = (-127, 128) if kind == "int8" else (0, 256)
        return RNG.integers(lo, hi, shape).astype(kind)

    def rng_of(lo, hi):
        return [np.array([lo], np.float32), np.array([hi], np.float32)]

    big = {"rtol": 0, "atol": 512}   # int32 results over +-2^31 from float32 arithmetic in MXNet
    return [
        case("qflatten", "contrib.quantized_flatten", [codes("int8", 2, 3, 4)] + rng_of(-1.5, 1.5)),
        case("qflatten_uint8", "contrib.quantized_flatten", [codes("uint8", 2, 2, 2, 2)] + rng_of(0, 3)),
        case("qact_relu", "contrib.quantized_act", [codes("int8", 3, 5)] + rng_of(-2, 2), {"act_type": "relu"}),
        case("qpool_max", "contrib.quantized_pooling", [codes("int8", 1, 2, 5, 5)] + rng_of(-1, 1),
             {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "max"}),
        case("qpool_avg", "contrib.quantized_pooling", [codes("int8", 2, 2, 6, 6)] + rng_of(-1, 1),
             {"kernel": (3, 3), "stride": (2, 2), "pad": (1, 1), "pool_type": "avg"}),
        case("qpool_avg_uint8_full", "contrib.quantized_pooling", [codes("uint8", 1, 3, 7, 7)] + rng_of(0, 4),
             {"kernel": (2, 2), "stride": (2, 2), "pool_type": "avg", "pooling_convention": "full"}),
        case("qpool_global", "contrib.quantized_pooling", [codes("int8", 2, 3, 4, 5)] + rng_of(-1, 1),
             {"kernel": (1, 1), "global_pool": True, "pool_type": "avg"}),
        case("qembedding", "contrib.quantized_embedding",
             [np.array([[0, 5, 2.7], [-1, 3, 1]], np.float32), codes("int8", 4, 3)] + rng_of(-0.5, 0.5),
             {"input_dim": 4, "output_dim": 3}),
        case("qconcat", "contrib.quantized_concat",
             [codes("int8", 3, 4), codes("int8", 3, 2), codes("int8", 3, 3)] + rng_of(-1, 1) + rng_of(-2.5, 2.5)
             + rng_of(-0.5, 3.0), {"num_args": 3, "dim": 1}),
        case("qconcat_axis0", "contrib.quantized_concat",
             [codes("int8", 2, 4), codes("int8", 1, 4)] + rng_of(-1, 0.5) + rng_of(-0.2, 0.4),
             {"num_args": 2, "dim": 0}),
        case("qadd", "contrib.quantized_elemwise_add",
             [codes("int8", 4, 5), codes("int8", 4, 5)] + rng_of(-1, 1) + rng_of(-2, 1.5), **big),
        case("qadd_calib", "contrib.quantized_elemwise_add",
             [codes("int8", 4, 5), codes("int8", 4, 5)] + rng_of(-1, 1) + rng_of(-2, 1.5),
             {"min_calib_range": -2.0, "max_calib_range": 2.5}),
        case("qfc", "contrib.quantized_fully_connected",
             [codes("int8", 3, 6), codes("int8", 4, 6), codes("int8", 4)] + rng_of(-1.5, 1.5) + rng_of(-0.7, 0.7)
             + rng_of(-3, 3), {"num_hidden": 4}),
        case("qfc_uint8_nobias_flatten", "contrib.quantized_fully_connected",
             [codes("uint8", 2, 2, 3), codes("int8", 5, 6)] + rng_of(0, 2.2) + rng_of(-0.05, 0.05),
             {"num_hidden": 5, "no_bias": True}),
        case("qconv_uint8", "contrib.quantized_conv",
             [codes("uint8", 1, 4, 6, 6), codes("int8", 3, 4, 3, 3)] + rng_of(0, 1.2) + rng_of(-0.3, 0.3),
             {"kernel": (3, 3), "num_filter": 3, "pad": (1, 1), "no_bias": True}),
        case("qconv_uint8_bias_stride", "contrib.quantized_conv",
             [codes("uint8", 2, 2, 7, 7), codes("int8", 4, 2, 3, 3), codes("int8", 4)] + rng_of(0, 1.2)
             + rng_of(-0.3, 0.3) + rng_of(-5, 5), {"kernel": (3, 3), "num_filter": 4, "stride": (2, 2)}),
        case("qconv_int8_refused", "contrib.quantized_conv",
             [codes("int8", 1, 4, 5, 5), codes("int8", 2, 4, 3, 3)] + rng_of(-1, 1) + rng_of(-1, 1),
             {"kernel": (3, 3), "num_filter": 2, "no_bias": True}),
    ]


def deformable_psroi_cases() -> list:
    rois = np.array([[0, 1, 1, 6, 6], [1, 0, 2, 7, 5], [0, 3.4, 0.6, 4.6, 7.7]], np.float32)
    tol = {"rtol": 1e-4, "atol": 1e-5}
    return [
        case("deformable_psroi", "contrib.DeformablePSROIPooling",
             [normal(2, 2 * 9, 8, 8), rois, normal(3, 2, 3, 3, scale=0.5)],
             {"spatial_scale": 1.0, "output_dim": 2, "group_size": 3, "pooled_size": 3, "part_size": 3,
              "sample_per_part": 2, "trans_std": 0.1}, grad_of=[0, 2], **tol),
        case("deformable_psroi_classes_scale", "contrib.DeformablePSROIPooling",
             [normal(2, 4 * 4, 6, 7), rois * np.array([1, 2, 2, 2, 2], np.float32),
              normal(3, 4, 3, 3, scale=0.8)],
             {"spatial_scale": 0.5, "output_dim": 4, "group_size": 2, "pooled_size": 4, "part_size": 3,
              "sample_per_part": 3, "trans_std": 0.2}, grad_of=[0, 2], **tol),
        case("deformable_psroi_no_trans", "contrib.DeformablePSROIPooling", [normal(2, 3 * 4, 8, 8), rois],
             {"spatial_scale": 1.0, "output_dim": 3, "group_size": 2, "pooled_size": 2, "sample_per_part": 2,
              "no_trans": True}, grad_of=[0], **tol),
    ]


def main() -> None:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    groups = {"detection": detection_cases, "roi": roi_cases, "array": array_cases,
              "attention": attention_cases, "norm_signal": norm_signal_cases, "quantize": quantize_cases,
              "quantized_nn": quantized_nn_cases, "deformable_psroi": deformable_psroi_cases}
    for group, make in groups.items():
        print(f"{group}:")
        path = DATA_DIR / f"contrib_{group}.npz"
        cases = [c for c in make() if c is not None]
        save_cases(path, cases)
        print(f"{path.name}: {len(cases)} cases, {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
