"""Region proposal networks' proposal layer (MXNet 1.9.1's `_contrib_Proposal` and
`_contrib_MultiProposal`, Faster R-CNN), computed in float32 as MXNet's CPU kernel.

Per image, with A = len(ratios) * len(scales) anchors per feature-map cell:
  1. anchors: the base box (0, 0, s - 1, s - 1), s = feature_stride, reshaped for each ratio r
     (outer) and scale k (inner): size = s * s, w = floor(sqrt(floor(size / r)) + .5) * k,
     h = floor(w / k * r + .5) * k, centred on the base box; shifted by (x * s, y * s) to
     every cell; the proposal of cell (y, x) and anchor a is number (y * W + x) * A + a and
     its score is cls_prob[a + A, y, x] (the foreground half of the channels);
  2. each anchor moved by its deltas bbox_pred[4a .. 4a + 3, y, x]: (dx, dy, dw, dh) on the
     centre and log-size (`iou_loss`: added to the corners), clipped to the image
     (im_info = height, width, scale); cells at or beyond int(height / s), int(width / s)
     get score -1;
  3. boxes narrower or lower than rpn_min_size * scale grow by half that size on every side
     and get score -1;
  4. the rpn_pre_nms_top_n best scores (all if <= 0; ties keep proposal order) go through
     greedy non-maximum suppression (IoU with the +1 pixel convention above `threshold`
     suppresses), keeping at most rpn_post_nms_top_n;
  5. rpn_post_nms_top_n rows (batch index, x1, y1, x2, y2) and scores are output, repeating the
     kept boxes cyclically when fewer survive.
Proposal takes one image; MultiProposal stacks the rows of each image of the batch. Neither
has a gradient beyond zeros (MXNet's backward writes zeros).
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Float, FloatTuple, Int, Param
from .registry import Op, merge_shape, register

_F32 = np.float32

_PARAMS = {
    "rpn_pre_nms_top_n": Param(Int, 6000, "proposals kept before NMS (<= 0: all)"),
    "rpn_post_nms_top_n": Param(Int, 300, "proposals kept after NMS (the output rows per image)"),
    "threshold": Param(Float, 0.7, "NMS IoU threshold"),
    "rpn_min_size": Param(Int, 16, "minimum height or width of a proposal (in image pixels / scale)"),
    "scales": Param(FloatTuple, (4.0, 8.0, 16.0, 32.0), "anchor scales"),
    "ratios": Param(FloatTuple, (0.5, 1.0, 2.0), "anchor aspect ratios"),
    "feature_stride": Param(Int, 16, "image pixels per feature-map cell"),
    "output_score": Param(Bool, False, "also output the scores"),
    "iou_loss": Param(Bool, False, "deltas are corner offsets (IoU loss) instead of centre/size"),
}


def _err(op: str, msg: str) -> MXNetError:
    return MXNetError(f"{op}: {msg}")


def base_anchors(feature_stride: int, ratios, scales) -> np.ndarray:
    """(len(ratios) * len(scales), 4) float32 anchors of one cell, ratios outer."""
    s = _F32(feature_stride)
    w = h = s                                          # base box (0, 0, s - 1, s - 1)
    ctr = _F32(0.5 * (w - 1))
    out = []
    for r in ratios:
        size_ratios = np.floor(_F32(w * h) / _F32(r))
        for k in scales:
            nw = _F32(np.floor(np.sqrt(size_ratios) + _F32(0.5)) * _F32(k))
            nh = _F32(np.floor(nw / _F32(k) * _F32(r) + _F32(0.5)) * _F32(k))
            out.append([ctr - _F32(0.5) * (nw - 1), ctr - _F32(0.5) * (nh - 1),
                        ctr + _F32(0.5) * (nw - 1), ctr + _F32(0.5) * (nh - 1)])
    return np.array(out, dtype=_F32)


def _decode(anchors: np.ndarray, deltas: np.ndarray, iou_loss: bool) -> np.ndarray:
    """Boxes (K, 4) moved by deltas (K, 4), in float32 with MXNet's double intermediates."""
    a = anchors.astype(np.float64)
    d = deltas.astype(_F32)
    if iou_loss:
        return (a + d).astype(_F32)
    width = (a[:, 2] - a[:, 0] + 1.0).astype(_F32)
    height = (a[:, 3] - a[:, 1] + 1.0).astype(_F32)
    ctr_x = (a[:, 0] + 0.5 * (width - 1.0)).astype(_F32)
    ctr_y = (a[:, 1] + 0.5 * (height - 1.0)).astype(_F32)
    px = d[:, 0] * width + ctr_x
    py = d[:, 1] * height + ctr_y
    pw = np.exp(d[:, 2]) * width
    ph = np.exp(d[:, 3]) * height
    half_w = 0.5 * (pw.astype(np.float64) - 1.0)
    half_h = 0.5 * (ph.astype(np.float64) - 1.0)
    return np.stack([px - half_w, py - half_h, px + half_w, py + half_h], axis=1).astype(_F32)


def nms_keep(boxes: np.ndarray, thresh: float, limit: int) -> list:
    """Greedy NMS over boxes (K, 4) sorted by score: indices kept, at most `limit`; a box is
    suppressed by a kept one when their IoU (areas with +1 pixel) exceeds `thresh`."""
    b = boxes.astype(_F32)
    area = (b[:, 2] - b[:, 0] + _F32(1)) * (b[:, 3] - b[:, 1] + _F32(1))
    t = _F32(thresh)
    suppressed = np.zeros(len(b), dtype=bool)
    keep = []
    for i in range(len(b)):
        if len(keep) >= limit:
            break
        if suppressed[i]:
            continue
        keep.append(i)
        rest = b[i + 1:]
        w = np.maximum(_F32(0), np.minimum(b[i, 2], rest[:, 2]) - np.maximum(b[i, 0], rest[:, 0]) + _F32(1))
        h = np.maximum(_F32(0), np.minimum(b[i, 3], rest[:, 3]) - np.maximum(b[i, 1], rest[:, 1]) + _F32(1))
        inter = w * h
        suppressed[i + 1:] |= inter / (area[i] + area[i + 1:] - inter) > t
    return keep


def _propose(attrs, cls_prob: np.ndarray, bbox_pred: np.ndarray, im_info: np.ndarray, op: str):
    """Rows (post, 4) and scores (post,) for one image: cls_prob (2A, H, W), bbox_pred (4A, H, W)."""
    fs = attrs["feature_stride"]
    anchors = base_anchors(fs, attrs["ratios"], attrs["scales"])
    a = len(anchors)
    _, h, w = cls_prob.shape
    if cls_prob.shape[0] != 2 * a:
        raise _err(op, f"cls_prob must have 2 * {a} channels (2 * ratios * scales), got {cls_prob.shape[0]}")
    count = a * h * w
    pre = attrs["rpn_pre_nms_top_n"]
    pre = min(pre if pre > 0 else count, count)
    post = min(attrs["rpn_post_nms_top_n"], pre)
    shift_x = (np.arange(w) * fs).astype(_F32)
    shift_y = (np.arange(h) * fs).astype(_F32)
    shifts = np.stack(np.broadcast_arrays(shift_x[None, :], shift_y[:, None],
                                          shift_x[None, :], shift_y[:, None]), axis=-1)  # (H, W, 4)
    boxes = (anchors[None, None] + shifts[:, :, None]).reshape(count, 4)
    scores = cls_prob[a:].astype(_F32).transpose(1, 2, 0).reshape(count).copy()
    deltas = bbox_pred.astype(_F32).reshape(a, 4, h, w).transpose(2, 3, 0, 1).reshape(count, 4)
    im_h, im_w, im_scale = (_F32(v) for v in im_info)
    boxes = _decode(boxes, deltas, attrs["iou_loss"])
    boxes[:, 0::2] = np.clip(boxes[:, 0::2], _F32(0), im_w - _F32(1))
    boxes[:, 1::2] = np.clip(boxes[:, 1::2], _F32(0), im_h - _F32(1))
    real_h, real_w = int(im_h / _F32(fs)), int(im_w / _F32(fs))
    if real_h > h or real_w > w:
        raise _err(op, f"im_info size ({float(im_h)}, {float(im_w)}) exceeds the feature map "
                       f"({h}, {w}) times feature_stride {fs}")
    cell_y = np.repeat(np.arange(h), w * a)
    cell_x = np.tile(np.repeat(np.arange(w), a), h)
    scores[(cell_y >= real_h) | (cell_x >= real_w)] = -1.0
    min_size = _F32(attrs["rpn_min_size"]) * im_scale
    small = ((boxes[:, 2] - boxes[:, 0] + _F32(1)) < min_size) | ((boxes[:, 3] - boxes[:, 1] + _F32(1)) < min_size)
    grow = np.array([-1, -1, 1, 1], dtype=_F32) * (min_size / _F32(2))
    boxes[small] += grow
    scores[small] = -1.0
    order = np.argsort(-scores, kind="stable")[:pre]
    boxes, scores = boxes[order], scores[order]
    keep = nms_keep(boxes, attrs["threshold"], post)
    rows = np.array(keep)[np.arange(attrs["rpn_post_nms_top_n"]) % len(keep)]
    return boxes[rows], scores[rows]


class _ProposalBase(Op):
    params = _PARAMS
    inputs = ("cls_prob", "bbox_pred", "im_info")
    outputs = ("output", "score")
    kernel = "sort"
    single_image = True

    def num_visible_outputs(self, attrs):
        return 2 if attrs["output_score"] else 1

    def _check_attrs(self, attrs):
        if attrs["rpn_post_nms_top_n"] < 1:
            raise _err(self.name, f"rpn_post_nms_top_n must be positive, got {attrs['rpn_post_nms_top_n']}")
        if attrs["feature_stride"] < 1:
            raise _err(self.name, f"feature_stride must be positive, got {attrs['feature_stride']}")
        if not attrs["scales"] or not attrs["ratios"] or min(attrs["ratios"]) <= 0:
            raise _err(self.name, f"scales and ratios must be non-empty and ratios positive, got "
                                  f"{attrs['scales']}, {attrs['ratios']}")

    def infer_shape(self, attrs, in_shapes):
        self._check_attrs(attrs)
        c, b, info = in_shapes
        if c is not None and len(c) != 4:
            raise _err(self.name, f"cls_prob must be 4-D (N, 2A, H, W), got shape {tuple(c)}")
        if c is None:
            return [c, b, info], [None, None]
        if self.single_image and c[0] not in (0, 1):
            raise _err(self.name, f"takes one image (batch 1), got cls_prob shape {tuple(c)}; use MultiProposal")
        b = merge_shape(self.name, "input 'bbox_pred'", (c[0], c[1] * 2, c[2], c[3]), b)
        info = merge_shape(self.name, "input 'im_info'", (c[0], 3), info)
        rows = attrs["rpn_post_nms_top_n"] * (1 if self.single_image else (c[0] or 0))
        return [c, b, info], [(rows, 5), (rows, 1)]

    def infer_type(self, attrs, in_types):
        for name, t in zip(self.inputs, in_types):
            if t is not None and t != "float32":
                raise _err(self.name, f"input {name!r} must be float32, got {t}")
        return ["float32"] * 3, ["float32", "float32"]

    def compute(self, attrs, inputs, ctx):
        cls_prob, bbox_pred, im_info = inputs
        self.infer_shape(attrs, [a.shape for a in inputs])
        expect = (cls_prob.shape[0], cls_prob.shape[1] * 2) + cls_prob.shape[2:]
        if bbox_pred.shape != expect or im_info.shape != (cls_prob.shape[0], 3):
            raise _err(self.name, f"bbox_pred must be {expect} and im_info {(cls_prob.shape[0], 3)}, got "
                                  f"{bbox_pred.shape} and {im_info.shape}")
        rows, scores = [], []
        for i in range(cls_prob.shape[0]):
            boxes, score = _propose(attrs, cls_prob[i], bbox_pred[i], im_info[i], self.name)
            rows.append(np.concatenate([np.full((len(boxes), 1), i, dtype=_F32), boxes], axis=1))
            scores.append(score[:, None])
        return [np.concatenate(rows).astype(_F32), np.concatenate(scores).astype(_F32)]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.zeros_like(x) for x in inputs]


@register("_contrib_Proposal")
class Proposal(_ProposalBase):
    """Region proposals of one image from RPN scores and box deltas."""


@register("_contrib_MultiProposal")
class MultiProposal(_ProposalBase):
    """Region proposals of every image of a batch (rows carry their batch index)."""
    single_image = False
