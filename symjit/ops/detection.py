"""Object-detection operators of MXNet 1.9.1's contrib namespace: box_nms (alias
box_non_maximum_suppression), box_iou, bipartite_matching, box_encode, box_decode and the SSD
operators MultiBoxPrior, MultiBoxTarget, MultiBoxDetection (`_contrib_<name>`, reached as
`mx.nd.contrib.<name>` / `mx.sym.contrib.<name>`).

Boxes are "corner" [xmin, ymin, xmax, ymax] or "center" [x, y, width, height]. Overlaps follow
MXNet's kernels: a side's intersection is max(0, min(right) - max(left)); an area is 0 when a
width or height is negative; box_iou gives 0 where the intersection is not positive.

box_nms (per batch element, the leading dims flattened): boxes with score > valid_thresh (and,
when id_index >= 0, id != background_id) are sorted by descending score (stable), the first
`topk` of them (all when topk < 0) go through greedy suppression (IoU > overlap_thresh, only
within one class unless force_suppress or id_index < 0, class ids compared as ints); the kept
rows are written first, in score order, the other rows are -1; coordinates are converted to
out_format when it differs (rows whose first coordinate is negative are left as they are).
topk = 0 returns the input. A hidden second output records each output row's source row; the
gradient copies each output row's gradient back to its source row (other rows get 0).

bipartite_matching: per batch element, all (row, col) scores sorted (descending, or ascending
when is_ascend, stable); pairs whose row and column are both free are matched while their score
passes the threshold (> threshold, or < threshold when is_ascend); the first free pair that
fails it ends the matching; as MXNet 1.9.1, a positive topk stops the matching only once the
count of matches exceeds topk. Outputs: the matched column of each row and the matched row of
each column (-1 where none).

box_iou, bipartite_matching, box_encode, box_decode and the MultiBox operators have zero
gradients, as in MXNet. Arithmetic follows MXNet's float32 kernels where it matters for
rounding (MultiBox*); box_encode / box_decode compute in float64 and round to the input dtype.
"""
from __future__ import annotations

import numpy as np

from ..base import MXNetError
from .attrs import Bool, Enum, Float, FloatTuple, Int, Param
from .registry import LikeInput, Op, merge_shape, register

_FORMAT = Enum("corner", "center")
_F32 = np.float32


def _err(op: str, msg: str) -> MXNetError:
    return MXNetError(f"{op}: {msg}")


def _float_types(op: str, names, in_types, n_out: int, skip=()) -> tuple[list, list]:
    """One floating-point dtype shared by every input (but those in `skip`) and every output."""
    t = next((x for i, x in enumerate(in_types) if x is not None and i not in skip), None)
    if t is not None and np.dtype(t).kind != "f":
        raise _err(op, f"only supports floating-point data, got {np.dtype(t).name}")
    for i, (name, x) in enumerate(zip(names, in_types)):
        if i not in skip and x is not None and x != t:
            raise _err(op, f"dtype mismatch for input {name!r}: expected {t}, got {x}")
    ins = [x if i in skip else t for i, x in enumerate(in_types)]
    return ins, [t] * n_out


class _DetectionOp(Op):
    """Floating-point inputs and outputs of one dtype; zero gradients (MXNet's rule for every
    detection op but box_nms)."""
    kernel = "sort"

    def infer_type(self, attrs, in_types):
        return _float_types(self.name, self.input_names(attrs), in_types, self.num_outputs(attrs))

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.zeros_like(x) for x in inputs]


# ------------------------------------------------------------------------------------------
# Box geometry (MXNet's Intersect / BoxArea)
# ------------------------------------------------------------------------------------------

def box_edges(boxes: np.ndarray, fmt: str) -> tuple:
    """(left, top, right, bottom) of boxes (..., 4) in their dtype."""
    if fmt == "corner":
        return boxes[..., 0], boxes[..., 1], boxes[..., 2], boxes[..., 3]
    two = boxes.dtype.type(2)
    hw, hh = boxes[..., 2] / two, boxes[..., 3] / two
    return boxes[..., 0] - hw, boxes[..., 1] - hh, boxes[..., 0] + hw, boxes[..., 1] + hh


def box_area(boxes: np.ndarray, fmt: str) -> np.ndarray:
    """Areas of boxes (..., 4); 0 where a width or height is negative."""
    if fmt == "corner":
        w, h = boxes[..., 2] - boxes[..., 0], boxes[..., 3] - boxes[..., 1]
    else:
        w, h = boxes[..., 2], boxes[..., 3]
    return np.where((w < 0) | (h < 0), boxes.dtype.type(0), w * h)


def pairwise_intersection(a: np.ndarray, b: np.ndarray, fmt: str) -> np.ndarray:
    """(len(a), len(b)) intersection areas of boxes a (A, 4) and b (B, 4)."""
    al, at, ar, ab = (e[:, None] for e in box_edges(a, fmt))
    bl, bt, br, bb = (e[None, :] for e in box_edges(b, fmt))
    zero = a.dtype.type(0)
    w = np.maximum(np.minimum(ar, br) - np.maximum(al, bl), zero)
    h = np.maximum(np.minimum(ab, bb) - np.maximum(at, bt), zero)
    return w * h


def pairwise_iou(a: np.ndarray, b: np.ndarray, fmt: str) -> np.ndarray:
    """box_iou's overlaps: intersection / union, 0 where the intersection is not positive."""
    inter = pairwise_intersection(a, b, fmt)
    union = box_area(a, fmt)[:, None] + box_area(b, fmt)[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = inter / union
    return np.where(inter <= 0, a.dtype.type(0), iou).astype(a.dtype)


def convert_format(rows: np.ndarray, start: int, to: str) -> None:
    """Convert the 4 coordinates at `start` of each row (R, W) in place to `to`, skipping rows
    whose first coordinate is negative (MXNet's suppressed-row marker)."""
    live = rows[:, start] >= 0
    c = rows[live, start:start + 4]
    if to == "center":
        two = rows.dtype.type(2)
        new = np.stack([(c[:, 0] + c[:, 2]) / two, (c[:, 1] + c[:, 3]) / two,
                        c[:, 2] - c[:, 0], c[:, 3] - c[:, 1]], axis=1)
    else:
        new = np.stack(box_edges(c, "center"), axis=1)
    rows[live, start:start + 4] = new


# ------------------------------------------------------------------------------------------
# box_nms
# ------------------------------------------------------------------------------------------

_NMS_PARAMS = {
    "overlap_thresh": Param(Float, 0.5, "IoU above which the lower-scored box is suppressed"),
    "valid_thresh": Param(Float, 0.0, "boxes need a score greater than this"),
    "topk": Param(Int, -1, "suppress among the topk best-scored boxes only (-1: all)"),
    "coord_start": Param(Int, 2, "index of the first of the 4 coordinates"),
    "score_index": Param(Int, 1, "index of the score"),
    "id_index": Param(Int, -1, "index of the class id (-1: none)"),
    "background_id": Param(Int, -1, "class id of the background, ignored"),
    "force_suppress": Param(Bool, False, "suppress across classes too"),
    "in_format": Param(_FORMAT, "corner", "box encoding of the input"),
    "out_format": Param(_FORMAT, "corner", "box encoding of the output"),
}


def _check_nms_layout(op: str, attrs, width: int) -> None:
    """MXNet's BoxNMSShape checks of the column indices against the row width."""
    cs, si, ii = attrs["coord_start"], attrs["score_index"], attrs["id_index"]
    expected = 6 if ii >= 0 else 5
    if width < expected:
        raise _err(op, f"the last dimension must have at least {expected} elements (score, 4 "
                       f"coordinates{', id' if ii >= 0 else ''}), got {width}")
    if not 0 <= si < width:
        raise _err(op, f"score_index {si} is out of range [0, {width})")
    if cs <= si <= cs + 3:
        raise _err(op, f"score_index {si} conflicts with the coordinates [{cs}, {cs + 3}]")
    if cs < 0 or cs + 3 >= width:
        raise _err(op, f"coordinates [{cs}, {cs + 3}] are out of range [0, {width})")
    if ii >= 0:
        if ii >= width:
            raise _err(op, f"id_index {ii} is out of range [0, {width})")
        if cs <= ii <= cs + 3:
            raise _err(op, f"id_index {ii} conflicts with the coordinates [{cs}, {cs + 3}]")
        if ii == si:
            raise _err(op, f"id_index {ii} conflicts with score_index {si}")


def greedy_suppress(n: int, suppresses) -> np.ndarray:
    """Greedy non-maximum suppression over n boxes in priority order: each box still alive
    suppresses the later boxes it overlaps. `suppresses(start, stop)` gives the boolean
    (stop - start, n - start) matrix "box start + i suppresses box start + j"; rows are asked
    for in blocks, so memory stays linear in n. Returns which boxes survive."""
    alive = np.ones(n, dtype=bool)
    block = max(1, min(256, 4_000_000 // max(n, 1)))
    for start in range(0, n, block):
        stop = min(n, start + block)
        if not alive[start:stop].any():
            continue
        over = suppresses(start, stop)
        for r in range(start, stop):
            if alive[r]:
                alive[r + 1:] &= ~over[r - start, r + 1 - start:]
    return alive


def nms_boxes(boxes: np.ndarray, classes: np.ndarray | None, overlaps) -> np.ndarray:
    """Survivors of greedy suppression of boxes (n, 4) in priority order, only within a class
    when `classes` is given (each class then runs on its own, in the same order).
    `overlaps(a, b)` gives the boolean (len(a), len(b)) "a suppresses b" for box arrays."""
    def run(sub: np.ndarray) -> np.ndarray:
        return greedy_suppress(len(sub), lambda start, stop: overlaps(sub[start:stop], sub[start:]))
    if classes is None:
        return run(boxes)
    alive = np.zeros(len(boxes), dtype=bool)
    for c in np.unique(classes):
        idx = np.flatnonzero(classes == c)
        alive[idx] = run(boxes[idx])
    return alive


def _nms_survivors(attrs, boxes: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """Which of the candidate rows `cand` (in descending score order) survive suppression."""
    cs, ii = attrs["coord_start"], attrs["id_index"]
    fmt = attrs["in_format"]
    same_class = ii >= 0 and not attrs["force_suppress"]

    def overlaps(a, b):
        inter = pairwise_intersection(a, b, fmt)
        with np.errstate(divide="ignore", invalid="ignore"):
            iou = inter / (box_area(a, fmt)[:, None] + box_area(b, fmt)[None, :] - inter)
        return iou > attrs["overlap_thresh"]
    return nms_boxes(boxes[cand, cs:cs + 4], boxes[cand, ii].astype(np.int64) if same_class else None, overlaps)


@register("_contrib_box_nms", aliases=("_contrib_box_non_maximum_suppression",))
class BoxNMS(Op):
    """Non-maximum suppression of boxes (..., N, W); output of the input's shape (kept rows
    first, by descending score, the rest -1) and a hidden record of source rows."""
    params = _NMS_PARAMS
    outputs = ("output0", "output1")            # MXNet's default names: (result, hidden record)
    kernel = "sort"

    def num_visible_outputs(self, attrs):
        return 1

    def infer_shape(self, attrs, in_shapes):
        d = in_shapes[0]
        if d is None:
            return [d], [None, None]
        if len(d) < 2:
            raise _err(self.name, f"data must have at least 2 dimensions (boxes, box width), got shape {tuple(d)}")
        if d[-1]:
            _check_nms_layout(self.name, attrs, d[-1])
        return [d], [tuple(d), tuple(d[:-1]) + (1,)]

    def infer_type(self, attrs, in_types):
        return _float_types(self.name, ["data"], in_types, 2)

    def compute(self, attrs, inputs, ctx):
        data = inputs[0]
        self.infer_shape(attrs, [data.shape])
        n, width = data.shape[-2], data.shape[-1]
        x = data.reshape(-1, n, width)
        batch = x.shape[0]
        topk = n if attrs["topk"] < 0 else min(n, attrs["topk"])
        if topk < 1:
            record = np.arange(batch * n, dtype=data.dtype)
            return [data.copy(), record.reshape(data.shape[:-1] + (1,))]
        out = np.full(x.shape, -1, dtype=data.dtype)
        record = np.full((batch, n), -1, dtype=data.dtype)
        scores = x[..., attrs["score_index"]]
        valid = scores > attrs["valid_thresh"]
        if attrs["id_index"] >= 0:
            valid &= x[..., attrs["id_index"]] != attrs["background_id"]
        for b in range(batch):
            idx = np.flatnonzero(valid[b])
            cand = idx[np.argsort(-scores[b, idx], kind="stable")][:topk]
            kept = cand[_nms_survivors(attrs, x[b], cand)]
            out[b, :len(kept)] = x[b, kept]
            record[b, :len(kept)] = b * n + kept
        if attrs["in_format"] != attrs["out_format"]:
            convert_format(out.reshape(-1, width), attrs["coord_start"], attrs["out_format"])
        return [out.reshape(data.shape), record.reshape(data.shape[:-1] + (1,))]

    def grad(self, F, attrs, inputs, outputs, ograds):
        return [F.apply("_backward_contrib_box_nms", [ograds[0], outputs[1]], **attrs)[0]]


@register("_backward_contrib_box_nms")
class BackwardBoxNMS(LikeInput):
    """d data of box_nms from (d output, record): each output row's gradient goes back to the
    row it was copied from."""
    params = _NMS_PARAMS
    inputs = ("ograd", "record")
    hidden = True
    differentiable = False

    def compute(self, attrs, inputs, ctx):
        g, record = inputs
        width = g.shape[-1]
        rows = g.reshape(-1, width)
        src = record.reshape(-1)
        if src.size != rows.shape[0]:
            raise _err(self.name, f"record shape {record.shape} does not match gradient shape {g.shape}")
        out = np.zeros_like(rows)
        live = src >= 0
        out[src[live].astype(np.int64)] = rows[live]
        return [out.reshape(g.shape)]


# ------------------------------------------------------------------------------------------
# box_iou, bipartite_matching
# ------------------------------------------------------------------------------------------

def _boxes_shape(op: str, what: str, s):
    if s is not None and (len(s) < 2 or (s[-1] and s[-1] != 4)):
        raise _err(op, f"{what} must have at least 2 dimensions and a last dimension of 4, got shape {tuple(s)}")


@register("_contrib_box_iou")
class BoxIoU(_DetectionOp):
    """IoU of every box of lhs (..., 4) with every box of rhs (..., 4): shape
    lhs.shape[:-1] + rhs.shape[:-1]."""
    inputs = ("lhs", "rhs")
    params = {"format": Param(_FORMAT, "corner", "box encoding")}

    def infer_shape(self, attrs, in_shapes):
        lhs, rhs = in_shapes
        _boxes_shape(self.name, "lhs", lhs)
        _boxes_shape(self.name, "rhs", rhs)
        if lhs is None or rhs is None:
            return [lhs, rhs], [None]
        return [lhs, rhs], [tuple(lhs[:-1]) + tuple(rhs[:-1])]

    def compute(self, attrs, inputs, ctx):
        lhs, rhs = inputs
        (shape,) = self.infer_shape(attrs, [lhs.shape, rhs.shape])[1]
        iou = pairwise_iou(lhs.reshape(-1, 4), rhs.reshape(-1, 4).astype(lhs.dtype), attrs["format"])
        return [iou.reshape(shape)]


@register("_contrib_bipartite_matching")
class BipartiteMatching(_DetectionOp):
    """Greedy matching of a score matrix (..., N, M): (column of each row, row of each column)."""
    params = {
        "is_ascend": Param(Bool, False, "match the lowest scores first"),
        "threshold": Param(Float, doc="scores must exceed it (be below it when is_ascend)"),
        "topk": Param(Int, -1, "limit on the matches (-1: none)"),
    }
    outputs = ("output0", "output1")            # (column of each row, row of each column)

    def infer_shape(self, attrs, in_shapes):
        d = in_shapes[0]
        if d is None:
            return [d], [None, None]
        if len(d) < 2:
            raise _err(self.name, f"score matrix must have at least 2 dimensions, got shape {tuple(d)}")
        return [d], [tuple(d[:-1]), tuple(d[:-2]) + (d[-1],)]

    def compute(self, attrs, inputs, ctx):
        data = inputs[0]
        _, (rshape, cshape) = self.infer_shape(attrs, [data.shape])
        n, m = data.shape[-2:]
        scores = data.reshape(-1, n * m)
        rows = np.full((scores.shape[0], n), -1, dtype=data.dtype)
        cols = np.full((scores.shape[0], m), -1, dtype=data.dtype)
        for b, s in enumerate(scores):
            self._match(attrs, s, n, m, rows[b], cols[b])
        return [rows.reshape(rshape), cols.reshape(cshape)]

    @staticmethod
    def _match(attrs, s, n, m, rmark, cmark) -> None:
        ascend, thr, topk = attrs["is_ascend"], attrs["threshold"], attrs["topk"]
        order = np.argsort(s if ascend else -s, kind="stable")
        count = 0
        for flat in order:
            r, c = divmod(int(flat), m)
            if rmark[r] != -1 or cmark[c] != -1:
                continue
            if not (s[flat] < thr if ascend else s[flat] > thr):
                break
            rmark[r], cmark[c] = c, r
            count += 1
            if 0 < topk < count:
                break


# ------------------------------------------------------------------------------------------
# box_encode, box_decode
# ------------------------------------------------------------------------------------------

def _corner_to_center64(boxes: np.ndarray) -> tuple:
    """(x, y, w, h) in float64 of corner boxes (..., 4)."""
    b = boxes.astype(np.float64)
    w, h = b[..., 2] - b[..., 0], b[..., 3] - b[..., 1]
    return b[..., 0] + 0.5 * w, b[..., 1] + 0.5 * h, w, h


@register("_contrib_box_encode")
class BoxEncode(_DetectionOp):
    """Regression targets of anchors (B, N, 4) towards their matched references refs (B, M, 4):
    ((ref_x - a_x) / a_w, (ref_y - a_y) / a_h, log(ref_w / a_w), log(ref_h / a_h)), minus
    means and divided by stds, where samples > 0.5 (elsewhere 0); masks are 1 there, else 0."""
    inputs = ("samples", "matches", "anchors", "refs", "means", "stds")
    outputs = ("output0", "output1")            # (targets, masks)

    def infer_shape(self, attrs, in_shapes):
        s, mt, a, r, mean, std = in_shapes
        for what, shp in (("anchors", a), ("refs", r)):
            if shp is not None and (len(shp) != 3 or (shp[2] and shp[2] != 4)):
                raise _err(self.name, f"{what} must have shape (B, N, 4), got {tuple(shp)}")
        if a is not None:
            s = merge_shape(self.name, "input 'samples'", tuple(a[:2]), s)
            mt = merge_shape(self.name, "input 'matches'", tuple(a[:2]), mt)
            if r is not None:
                r = merge_shape(self.name, "input 'refs'", (a[0], r[1], 4), r)
        mean = merge_shape(self.name, "input 'means'", (4,), mean)
        std = merge_shape(self.name, "input 'stds'", (4,), std)
        return [s, mt, a, r, mean, std], [a, a]

    def compute(self, attrs, inputs, ctx):
        samples, matches, anchors, refs, means, stds = inputs
        self.infer_shape(attrs, [x.shape for x in inputs])
        m = refs.shape[1]
        idx = np.clip(matches.astype(np.int64), 0, max(m - 1, 0))
        valid = samples > 0.5
        if m == 0 and valid.any():
            raise _err(self.name, "refs holds no box for the positive samples")
        ref = np.take_along_axis(refs, idx[..., None], axis=1) if m else np.zeros_like(anchors)
        rx, ry, rw, rh = _corner_to_center64(ref)
        ax, ay, aw, ah = _corner_to_center64(anchors)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = np.stack([(rx - ax) / aw, (ry - ay) / ah, np.log(rw / aw), np.log(rh / ah)], axis=-1)
            t = (t - means.astype(np.float64)) / stds.astype(np.float64)
        mask = np.broadcast_to(valid[..., None], t.shape)
        dt = anchors.dtype
        return [np.where(mask, t, 0.0).astype(dt), mask.astype(dt)]


@register("_contrib_box_decode")
class BoxDecode(_DetectionOp):
    """Corner boxes from encoded offsets data (B, N, 4) and anchors (1, N, 4) (in `format`):
    centre += data * std * anchor size, size *= exp(data * std) (the exponent clipped at `clip`
    when clip > 0)."""
    inputs = ("data", "anchors")
    params = {
        "std0": Param(Float, 1.0), "std1": Param(Float, 1.0),
        "std2": Param(Float, 1.0), "std3": Param(Float, 1.0),
        "clip": Param(Float, -1.0, "upper bound of the size exponents when positive"),
        "format": Param(_FORMAT, "center", "encoding of the anchors"),
    }

    def infer_shape(self, attrs, in_shapes):
        d, a = in_shapes
        if d is not None and (len(d) != 3 or (d[2] and d[2] != 4)):
            raise _err(self.name, f"data must have shape (B, N, 4), got {tuple(d)}")
        if a is not None and (len(a) < 3 or (a[-1] and a[-1] != 4)):
            raise _err(self.name, f"anchors must have shape (1, N, 4), got {tuple(a)}")
        if d is not None and a is not None and d[1] and all(a) and int(np.prod(a)) != d[1] * 4:
            raise _err(self.name, f"anchors {tuple(a)} must hold one box per data box ({d[1]})")
        return [d, a], [d]

    def compute(self, attrs, inputs, ctx):
        data, anchors = inputs
        self.infer_shape(attrs, [data.shape, anchors.shape])
        a = anchors.reshape(1, -1, 4)
        if attrs["format"] == "corner":
            ax, ay, aw, ah = _corner_to_center64(a)
        else:
            ax, ay, aw, ah = (a[..., k].astype(np.float64) for k in range(4))
        x = data.astype(np.float64)
        ox = x[..., 0] * attrs["std0"] * aw + ax
        oy = x[..., 1] * attrs["std1"] * ah + ay
        dw, dh = x[..., 2] * attrs["std2"], x[..., 3] * attrs["std3"]
        if attrs["clip"] > 0:
            dw, dh = np.minimum(dw, attrs["clip"]), np.minimum(dh, attrs["clip"])
        ow, oh = np.exp(dw) * aw * 0.5, np.exp(dh) * ah * 0.5
        return [np.stack([ox - ow, oy - oh, ox + ow, oy + oh], axis=-1).astype(data.dtype)]


# ------------------------------------------------------------------------------------------
# MultiBoxPrior
# ------------------------------------------------------------------------------------------

def _pair(op: str, name: str, v) -> tuple:
    if len(v) != 2:
        raise _err(op, f"{name} must hold 2 values (y, x), got {v}")
    return v


@register("_contrib_MultiBoxPrior")
class MultiBoxPrior(_DetectionOp):
    """SSD anchor boxes (1, H * W * (len(sizes) + len(ratios) - 1), 4) of a feature map (B, C, H, W).

    Cell (r, c) has centre ((c + offsets[1]) * step_x, (r + offsets[0]) * step_y), steps
    (y, x) defaulting to 1 / H, 1 / W when not positive; its anchors are every size with the
    first ratio, then sizes[0] with each further ratio; a box of size s and ratio q has
    half-width s * H / W * sqrt(q) / 2 and half-height s / sqrt(q) / 2 (float32 arithmetic).
    `clip` clips every coordinate to [0, 1]."""
    params = {
        "sizes": Param(FloatTuple, (1.0,), "box sizes relative to the image"),
        "ratios": Param(FloatTuple, (1.0,), "aspect ratios (width / height)"),
        "clip": Param(Bool, False, "clip the boxes to [0, 1]"),
        "steps": Param(FloatTuple, (-1.0, -1.0), "distance between centres (y, x); <= 0: 1 / size"),
        "offsets": Param(FloatTuple, (0.5, 0.5), "centre offset within a cell (y, x)"),
    }

    def _check(self, attrs) -> None:
        if not attrs["sizes"] or min(attrs["sizes"]) <= 0:
            raise _err(self.name, f"sizes must be non-empty and positive, got {attrs['sizes']}")
        if not attrs["ratios"] or min(attrs["ratios"]) <= 0:
            raise _err(self.name, f"ratios must be non-empty and positive, got {attrs['ratios']}")
        _pair(self.name, "steps", attrs["steps"])
        _pair(self.name, "offsets", attrs["offsets"])

    def infer_shape(self, attrs, in_shapes):
        self._check(attrs)
        d = in_shapes[0]
        if d is None:
            return [d], [None]
        if len(d) != 4:
            raise _err(self.name, f"data must be 4-D (B, C, H, W), got shape {tuple(d)}")
        per_cell = len(attrs["sizes"]) + len(attrs["ratios"]) - 1
        return [d], [(1, d[2] * d[3] * per_cell, 4)]

    def compute(self, attrs, inputs, ctx):
        data = inputs[0]
        self.infer_shape(attrs, [data.shape])
        h, w = data.shape[2:]
        sy, sx = attrs["steps"]
        oy, ox = attrs["offsets"]
        step_y = _F32(sy) if sy > 0 else _F32(1) / _F32(h)
        step_x = _F32(sx) if sx > 0 else _F32(1) / _F32(w)
        cy = ((np.arange(h, dtype=_F32) + _F32(oy)) * step_y)[:, None, None]
        cx = ((np.arange(w, dtype=_F32) + _F32(ox)) * step_x)[None, :, None]
        sizes = np.array(attrs["sizes"], dtype=_F32)
        roots = np.sqrt(np.array(attrs["ratios"], dtype=_F32))
        size = np.concatenate([sizes, np.full(len(roots) - 1, sizes[0], dtype=_F32)])
        root = np.concatenate([np.full(len(sizes), roots[0], dtype=_F32), roots[1:]])
        half_w = (size * _F32(h) / _F32(w) * root / _F32(2))[None, None, :]
        half_h = (size / root / _F32(2))[None, None, :]
        cy, cx = np.broadcast_arrays(cy, cx, half_w)[:2]
        boxes = np.stack([cx - half_w, cy - half_h, cx + half_w, cy + half_h], axis=-1)
        if attrs["clip"]:
            boxes = np.clip(boxes, _F32(0), _F32(1))
        return [boxes.reshape(1, -1, 4).astype(data.dtype)]


# ------------------------------------------------------------------------------------------
# MultiBoxTarget
# ------------------------------------------------------------------------------------------

def _valid_labels(op: str, labels: np.ndarray) -> int:
    """Number of leading labels before the first padding row (class id -1, box all -1)."""
    for i, row in enumerate(labels):
        if float(row[0]) == -1.0:
            if np.any(row[1:5].astype(np.float32) != -1.0):
                raise _err(op, f"label row {i} has class -1 but a box {row[1:5].tolist()} "
                               "(padding rows must be all -1)")
            return i
    return len(labels)


def _multibox_overlaps(anchors: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """(A, G) IoU of anchors with ground-truth boxes (corner), 0 where the union is 0."""
    inter = pairwise_intersection(anchors, boxes, "corner")
    union = ((anchors[:, 2] - anchors[:, 0]) * (anchors[:, 3] - anchors[:, 1]))[:, None] \
        + ((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]))[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union == 0, anchors.dtype.type(0), inter / union)


def _match_anchors(overlaps: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MXNet's greedy matching: (anchor flags (1 positive, -1 undecided), best overlap per
    anchor (-1 if never computed), its ground truth). Ties go to the first anchor, then the
    first ground truth, as MXNet's scans."""
    n_anchor, n_gt = overlaps.shape
    flags = np.full(n_anchor, -1, dtype=np.int8)
    best = np.full(n_anchor, -1.0, dtype=np.float32)
    best_gt = np.full(n_anchor, -1, dtype=np.int64)
    free = overlaps.astype(np.float32).copy()
    for _ in range(n_gt):                       # each round matches one ground truth
        flat = int(np.argmax(free))
        top = free.reshape(-1)[flat]
        if not top > 1e-6:
            break
        a, g = divmod(flat, n_gt)
        flags[a], best[a], best_gt[a] = 1, top, g
        free[a, :] = -np.inf
        free[:, g] = -np.inf
    if threshold > 0:
        _fill_best(overlaps, flags != 1, best, best_gt)
        flags[(flags != 1) & (best > threshold)] = 1
    return flags, best, best_gt


def _fill_best(overlaps: np.ndarray, which: np.ndarray, best: np.ndarray, best_gt: np.ndarray) -> None:
    """best / best_gt of the anchors selected by `which`: their largest overlap and its
    (first) ground truth."""
    best_gt[which] = np.argmax(overlaps[which], axis=1)
    best[which] = overlaps[which].max(axis=1)


def _background_probs(cls_pred: np.ndarray) -> np.ndarray:
    """Softmax probability of class 0 for every anchor (cls_pred: (C, A)), in float32."""
    col = cls_pred.astype(_F32)
    e = np.exp(col - col.max(axis=0))
    return e[0] / e.sum(axis=0, dtype=_F32)


def _mine_negatives(op: str, attrs, flags, best, best_gt, overlaps, cls_pred) -> None:
    """Mark anchors as negatives (flag 0): all non-positives, or with negative mining the
    int(ratio * positives) ones of overlap below negative_mining_thresh whose background
    probability is lowest (ties in anchor order)."""
    ratio = attrs["negative_mining_ratio"]
    if ratio <= 0:
        flags[flags != 1] = 0
        return
    if attrs["negative_mining_thresh"] <= 0:
        raise _err(op, f"negative_mining_thresh must be positive, got {attrs['negative_mining_thresh']}")
    n_pos = int(np.count_nonzero(flags == 1))
    n_neg = min(int(n_pos * ratio), len(flags) - n_pos)
    if n_neg <= 0:
        return
    _fill_best(overlaps, (flags != 1) & (best < 0), best, best_gt)
    pool = np.flatnonzero((flags == -1) & (best < attrs["negative_mining_thresh"]))
    if len(pool) < n_neg:
        raise _err(op, f"negative mining needs {n_neg} candidates, found {len(pool)}")
    probs = _background_probs(cls_pred)[pool]
    flags[pool[np.argsort(probs, kind="stable")[:n_neg]]] = 0


def _loc_targets(anchors: np.ndarray, boxes: np.ndarray, variances) -> np.ndarray:
    """(A, 4) centre/size offsets of boxes from anchors divided by the variances (float32)."""
    a, g = anchors.astype(_F32), boxes.astype(_F32)
    aw, ah = a[:, 2] - a[:, 0], a[:, 3] - a[:, 1]
    ax, ay = (a[:, 0] + a[:, 2]) * _F32(0.5), (a[:, 1] + a[:, 3]) * _F32(0.5)
    gw, gh = g[:, 2] - g[:, 0], g[:, 3] - g[:, 1]
    gx, gy = (g[:, 0] + g[:, 2]) * _F32(0.5), (g[:, 1] + g[:, 3]) * _F32(0.5)
    vx, vy, vw, vh = (_F32(v) for v in variances)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.stack([(gx - ax) / aw / vx, (gy - ay) / ah / vy,
                         np.log(gw / aw) / vw, np.log(gh / ah) / vh], axis=1)


@register("_contrib_MultiBoxTarget")
class MultiBoxTarget(_DetectionOp):
    """SSD training targets from anchors (1, A, 4), labels (B, L, >= 5: class, corner box)
    padded with -1 rows, and class predictions (B, C, A): loc_target (B, A * 4), loc_mask
    (B, A * 4), cls_target (B, A).

    Per image: each ground truth is matched greedily to its best free anchor (largest overlap
    first, overlap > 1e-6); with overlap_threshold > 0 every other anchor whose best overlap
    exceeds it is positive too. Negatives: all other anchors, or with negative_mining_ratio > 0
    the int(positives * ratio) anchors of best overlap < negative_mining_thresh with the lowest
    background probability. Positives get class + 1 and masked offsets (divided by the
    variances); negatives class 0; the rest ignore_label."""
    inputs = ("anchor", "label", "cls_pred")
    outputs = ("loc_target", "loc_mask", "cls_target")
    params = {
        "overlap_threshold": Param(Float, 0.5, "overlap above which an anchor is positive"),
        "ignore_label": Param(Float, -1.0, "class target of ignored anchors"),
        "negative_mining_ratio": Param(Float, -1.0, "negatives per positive (-1: no mining)"),
        "negative_mining_thresh": Param(Float, 0.5, "overlap below which an anchor may be a negative"),
        "minimum_negative_samples": Param(Int, 0, "minimum number of negatives (unused by MXNet's CPU kernel)"),
        "variances": Param(FloatTuple, (0.1, 0.1, 0.2, 0.2), "variances of the box offsets"),
    }

    def infer_shape(self, attrs, in_shapes):
        a, lab, cls = in_shapes
        if len(attrs["variances"]) != 4:
            raise _err(self.name, f"variances must hold 4 values, got {attrs['variances']}")
        if a is not None and (len(a) != 3 or a[0] not in (0, 1) or (a[2] and a[2] != 4)):
            raise _err(self.name, f"anchor must have shape (1, A, 4), got {tuple(a)}")
        if lab is not None and (len(lab) != 3 or (lab[2] and lab[2] < 5)):
            raise _err(self.name, f"label must have shape (B, L, >= 5), got {tuple(lab)}")
        if cls is not None and len(cls) != 3:
            raise _err(self.name, f"cls_pred must have shape (B, C, A), got {tuple(cls)}")
        if a is not None and cls is not None:
            cls = merge_shape(self.name, "input 'cls_pred'", (cls[0], cls[1], a[1]), cls)
        if a is None or lab is None:
            return [a, lab, cls], [None, None, None]
        return [a, lab, cls], [(lab[0], a[1] * 4), (lab[0], a[1] * 4), (lab[0], a[1])]

    def compute(self, attrs, inputs, ctx):
        anchor, label, cls_pred = inputs
        self.infer_shape(attrs, [x.shape for x in inputs])
        anchors = anchor.reshape(-1, 4)
        n_batch, n_anchor = label.shape[0], anchors.shape[0]
        dt = anchor.dtype
        loc = np.zeros((n_batch, n_anchor, 4), dtype=dt)
        mask = np.zeros((n_batch, n_anchor, 4), dtype=dt)
        cls = np.full((n_batch, n_anchor), attrs["ignore_label"], dtype=dt)
        for b in range(n_batch):
            n_gt = _valid_labels(self.name, label[b])
            if n_gt == 0:
                continue
            gt = label[b, :n_gt]
            overlaps = _multibox_overlaps(anchors, gt[:, 1:5].astype(dt))
            flags, best, best_gt = _match_anchors(overlaps, attrs["overlap_threshold"])
            _mine_negatives(self.name, attrs, flags, best, best_gt, overlaps, cls_pred[b])
            pos = np.flatnonzero(flags == 1)
            cls[b, pos] = gt[best_gt[pos], 0] + 1
            cls[b, flags == 0] = 0
            mask[b, pos] = 1
            loc[b, pos] = _loc_targets(anchors[pos], gt[best_gt[pos], 1:5], attrs["variances"])
        return [loc.reshape(n_batch, -1), mask.reshape(n_batch, -1), cls]


# ------------------------------------------------------------------------------------------
# MultiBoxDetection
# ------------------------------------------------------------------------------------------

def _decode_corners(anchors: np.ndarray, loc: np.ndarray, clip: bool, variances) -> np.ndarray:
    """MXNet's TransformLocations in float32: (A, 4) corner boxes from anchors and offsets."""
    a, p = anchors.astype(_F32), loc.astype(_F32)
    aw, ah = a[:, 2] - a[:, 0], a[:, 3] - a[:, 1]
    ax, ay = (a[:, 0] + a[:, 2]) / _F32(2), (a[:, 1] + a[:, 3]) / _F32(2)
    vx, vy, vw, vh = (_F32(v) for v in variances)
    ox, oy = p[:, 0] * vx * aw + ax, p[:, 1] * vy * ah + ay
    ow, oh = np.exp(p[:, 2] * vw) * aw / _F32(2), np.exp(p[:, 3] * vh) * ah / _F32(2)
    boxes = np.stack([ox - ow, oy - oh, ox + ow, oy + oh], axis=1)
    return np.clip(boxes, _F32(0), _F32(1)) if clip else boxes


def _detection_nms(rows: np.ndarray, attrs) -> None:
    """Sort the valid rows (R, 6) by score, cut to nms_topk and suppress in place (id -1);
    overlaps are 0 where the union is not positive and suppress from nms_threshold on."""
    order = np.argsort(-rows[:, 1], kind="stable")
    unsorted = rows.copy()
    keep = len(order)
    topk = attrs["nms_topk"]
    if 0 < topk < keep:
        rows[topk:, 0] = -1                      # rows past topk keep their unsorted values
        keep = topk
    rows[:keep] = unsorted[order[:keep]]
    ids = rows[:keep, 0]

    def overlaps(a, b):
        inter = pairwise_intersection(a, b, "corner")
        union = ((a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1]))[:, None] \
            + ((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]))[None, :] - inter
        with np.errstate(divide="ignore", invalid="ignore"):
            iou = np.where(union <= 0, a.dtype.type(0), inter / union)
        return iou >= attrs["nms_threshold"]
    alive = nms_boxes(rows[:keep, 2:6], None if attrs["force_suppress"] else ids, overlaps)
    rows[:keep, 0] = np.where(alive, ids, -1)


@register("_contrib_MultiBoxDetection")
class MultiBoxDetection(_DetectionOp):
    """SSD detections (B, A, 6) [class id, score, xmin, ymin, xmax, ymax] from class
    probabilities (B, C, A), offsets (B, A * 4) and anchors (1, A, 4).

    Each anchor takes its most probable non-background class (class 0 is background; scores
    below `threshold` make it background); its box is the anchor moved by the offsets (times
    the variances), clipped to [0, 1] when `clip`. Detections are compacted to the front in
    anchor order; when 0 < nms_threshold <= 1 they are sorted by score (stable), cut to
    nms_topk and suppressed greedily (IoU >= nms_threshold, same class unless force_suppress),
    suppressed rows keeping their values with id -1. Rows past the detections are -1."""
    inputs = ("cls_prob", "loc_pred", "anchor")
    params = {
        "clip": Param(Bool, True, "clip boxes to [0, 1]"),
        "threshold": Param(Float, 0.01, "lowest score of a detection"),
        "background_id": Param(Int, 0, "background class id (MXNet's kernel always treats class 0 as background)"),
        "nms_threshold": Param(Float, 0.5, "NMS overlap threshold"),
        "force_suppress": Param(Bool, False, "suppress across classes"),
        "variances": Param(FloatTuple, (0.1, 0.1, 0.2, 0.2), "variances of the box offsets"),
        "nms_topk": Param(Int, -1, "detections kept before NMS (-1: all)"),
    }

    def infer_shape(self, attrs, in_shapes):
        c, loc, a = in_shapes
        if len(attrs["variances"]) != 4:
            raise _err(self.name, f"variances must hold 4 values, got {attrs['variances']}")
        if c is not None and len(c) != 3:
            raise _err(self.name, f"cls_prob must have shape (B, C, A), got {tuple(c)}")
        if loc is not None and len(loc) != 2:
            raise _err(self.name, f"loc_pred must have shape (B, A * 4), got {tuple(loc)}")
        if a is not None and (len(a) != 3 or (a[2] and a[2] != 4)):
            raise _err(self.name, f"anchor must have shape (1, A, 4), got {tuple(a)}")
        if c is None:
            return [c, loc, a], [None]
        loc = merge_shape(self.name, "input 'loc_pred'", (c[0], c[2] * 4), loc)
        a = merge_shape(self.name, "input 'anchor'", (a[0] if a else 0, c[2], 4), a)
        return [c, loc, a], [(c[0], c[2], 6)]

    def compute(self, attrs, inputs, ctx):
        cls_prob, loc_pred, anchor = inputs
        self.infer_shape(attrs, [x.shape for x in inputs])
        n_batch, n_cls, n_anchor = cls_prob.shape
        anchors = anchor.reshape(-1, 4)[:n_anchor]
        out = np.full((n_batch, n_anchor, 6), -1, dtype=_F32)
        nms_on = 0 < attrs["nms_threshold"] <= 1
        for b in range(n_batch):
            probs = cls_prob[b, 1:].astype(_F32)
            if n_cls > 1:
                cls_id = np.argmax(probs, axis=0) + 1
                score = probs[cls_id - 1, np.arange(n_anchor)]
                better = score > _F32(-1)
                cls_id = np.where(better, cls_id, 0)
                score = np.where(better, score, _F32(-1))
            else:
                cls_id, score = np.zeros(n_anchor, np.int64), np.full(n_anchor, -1, _F32)
            cls_id = np.where((cls_id > 0) & (score < _F32(attrs["threshold"])), 0, cls_id)
            boxes = _decode_corners(anchors, loc_pred[b].reshape(-1, 4), attrs["clip"], attrs["variances"])
            rows = np.concatenate([(cls_id - 1)[:, None].astype(_F32), score[:, None], boxes], axis=1)
            rows = rows[rows[:, 0] >= 0]
            if len(rows) and nms_on:
                _detection_nms(rows, attrs)
            out[b, :len(rows)] = rows
        return [out.astype(cls_prob.dtype)]
