"""MXNet's ImageDetRecordIter: batches of images and object-detection labels from an image
RecordIO file, with MXNet's default detection augmenter (`det_aug_default`).

Labels. A record's label array is `[header_width, object_width, extra headers...,
(id, xmin, ymin, xmax, ymax, extra...) per object]` with coordinates relative to the image
(header_width >= 2, object_width >= 5, at least one object's worth: 7 numbers); objects with
xmax <= xmin or ymax <= ymin are dropped. `path_imglist` lines (index, labels..., path) replace
the records' labels. Each output label row is `[channels, height, width, n, label (n numbers
after augmentation)..., label_pad_value...]` of width `label_pad_width + 4`, where
label_pad_width (when 0 or -1) becomes the widest label of the data set (a positive value
smaller than that is an error); with `label_width` > 0 every record must have that many.

Per image, in MXNet's order: decode -> short-edge `resize` -> colour (when any of
`random_hue_prob`, `random_saturation_prob`, `random_illumination_prob`, `random_contrast_prob`
is positive: HLS offsets int(U(-1, 1) * max_random_hue / _saturation / _illumination) and a
contrast factor 1 + U(-1, 1) * max_random_contrast, each applied with its probability) ->
mirror (`rand_mirror_prob`) -> pad (`rand_pad_prob`: a canvas `U(1, max_pad_scale)` times the
size, skipped under 1.05, filled with `fill_value`) -> crop (`rand_crop_prob`: samplers tried
in random order, each up to `max_crop_trials` boxes of area scale in [min_crop_scales,
max_crop_scales] and aspect ratio in [min_crop_aspect_ratios, max_crop_aspect_ratios]; a box
passes when an object meets the overlap / sample-coverage / object-coverage ranges (checked
only when all six are restricting, as MXNet does) and keeps at least one object: by centre
(`crop_emit_mode='center'`) or by covered fraction > `emit_overlap_thresh` ('overlap')) ->
`resize_mode` ('force': to data_shape; 'shrink': down to fit, aspect kept; 'fit': to fit,
aspect kept; the rest of the output is 0) -> normalization as MXNet's detection iterator: the
means are subtracted when one of them is positive (else a `mean_img` file's image), a
channel is divided by its std when that std is positive, then multiplied by `scale`.

Randomness, threads, shuffling, partitioning and round_batch are those of ImageRecordIter.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from .. import recordio
from ..base import MXNetError
from ..ops import image_kernels as codec
from .record import (ImageRecordIter, _channel_values, _interp, _resize_short, hls_offsets, hls_shift,
                     parse_fields, uniform_between)

__all__ = ["ImageDetRecordIter", "DetAugmentParams", "DetLabel", "det_augment"]

_RESIZE_MODES = ("force", "shrink", "fit")
_EMIT_MODES = ("center", "overlap")
#: the per-sampler crop arguments (tuples, one value per crop sampler)
_SAMPLER_FIELDS = ("min_crop_scales", "max_crop_scales", "min_crop_aspect_ratios", "max_crop_aspect_ratios",
                   "min_crop_overlaps", "max_crop_overlaps", "min_crop_sample_coverages",
                   "max_crop_sample_coverages", "min_crop_object_coverages", "max_crop_object_coverages",
                   "max_crop_trials")


@dataclass(frozen=True)
class DetAugmentParams:
    """The augmentation arguments of ImageDetRecordIter (MXNet's names and defaults)."""
    data_shape: tuple
    resize: int = -1
    rand_crop_prob: float = 0.0
    min_crop_scales: tuple = (0.0,)
    max_crop_scales: tuple = (1.0,)
    min_crop_aspect_ratios: tuple = (1.0,)
    max_crop_aspect_ratios: tuple = (1.0,)
    min_crop_overlaps: tuple = (0.0,)
    max_crop_overlaps: tuple = (1.0,)
    min_crop_sample_coverages: tuple = (0.0,)
    max_crop_sample_coverages: tuple = (1.0,)
    min_crop_object_coverages: tuple = (0.0,)
    max_crop_object_coverages: tuple = (1.0,)
    num_crop_sampler: int = 1
    crop_emit_mode: str = "center"
    emit_overlap_thresh: float = 0.3
    max_crop_trials: tuple = (25,)
    rand_pad_prob: float = 0.0
    max_pad_scale: float = 1.0
    max_random_hue: int = 0
    random_hue_prob: float = 0.0
    max_random_saturation: int = 0
    random_saturation_prob: float = 0.0
    max_random_illumination: int = 0
    random_illumination_prob: float = 0.0
    max_random_contrast: float = 0.0
    random_contrast_prob: float = 0.0
    rand_mirror_prob: float = 0.0
    fill_value: int = 127
    inter_method: int = 1
    resize_mode: str = "force"

    @classmethod
    def create(cls, data_shape, kwargs: dict) -> "DetAugmentParams":
        """Parameters from keyword arguments, validated and with the per-sampler tuples
        broadcast to num_crop_sampler entries (as MXNet's ValidateCropParameters)."""
        known = {f.name for f in fields(cls)} - {"data_shape"}
        args = parse_fields("ImageDetRecordIter", cls, {k: v for k, v in kwargs.items() if k in known})
        n = int(args.get("num_crop_sampler", 1))
        for name in _SAMPLER_FIELDS:
            if name in args:
                args[name] = _sampler_tuple(name, args[name], n)
            elif n > 1:
                args[name] = getattr(cls, name) * n
        p = cls(tuple(data_shape), **args)
        p.validate()
        return p

    def validate(self):
        what = "ImageDetRecordIter"
        if not (0 <= self.inter_method <= 4 or self.inter_method in (9, 10)):
            raise MXNetError(f"{what}: invalid inter_method {self.inter_method}: valid values are 0-4, 9, 10")
        if self.resize_mode not in _RESIZE_MODES:
            raise MXNetError(f"{what}: resize_mode must be one of {_RESIZE_MODES}, got {self.resize_mode!r}")
        if self.crop_emit_mode not in _EMIT_MODES:
            raise MXNetError(f"{what}: crop_emit_mode must be one of {_EMIT_MODES}, got {self.crop_emit_mode!r}")
        for name in _SAMPLER_FIELDS:
            if self.num_crop_sampler >= 1 and len(getattr(self, name)) != self.num_crop_sampler:
                raise MXNetError(f"{what}: {name} has {len(getattr(self, name))} values for "
                                 f"{self.num_crop_sampler} crop samplers")
        for i in range(max(self.num_crop_sampler, 0)):
            checks = [(self.min_crop_scales[i] >= 0, "min_crop_scales >= 0"),
                      (self.max_crop_scales[i] <= 1, "max_crop_scales <= 1"),
                      (self.max_crop_scales[i] > self.min_crop_scales[i], "max_crop_scales > min_crop_scales"),
                      (self.min_crop_aspect_ratios[i] >= 0, "min_crop_aspect_ratios >= 0"),
                      (self.max_crop_aspect_ratios[i] >= self.min_crop_aspect_ratios[i],
                       "max_crop_aspect_ratios >= min_crop_aspect_ratios"),
                      (self.max_crop_overlaps[i] >= self.min_crop_overlaps[i],
                       "max_crop_overlaps >= min_crop_overlaps"),
                      (self.max_crop_sample_coverages[i] >= self.min_crop_sample_coverages[i],
                       "max_crop_sample_coverages >= min_crop_sample_coverages"),
                      (self.max_crop_object_coverages[i] >= self.min_crop_object_coverages[i],
                       "max_crop_object_coverages >= min_crop_object_coverages")]
            for ok, rule in checks:
                if not ok:
                    raise MXNetError(f"{what}: crop sampler {i} breaks the rule {rule}")
        if self.emit_overlap_thresh < 0:
            raise MXNetError(f"{what}: emit_overlap_thresh must be >= 0, got {self.emit_overlap_thresh}")

    @property
    def colour(self) -> bool:
        return (self.random_hue_prob > 0 or self.random_saturation_prob > 0
                or self.random_illumination_prob > 0 or self.random_contrast_prob > 0)


def _sampler_tuple(name: str, value, n: int) -> tuple:
    """A per-sampler argument as a tuple of n values (a single value is repeated when n > 1)."""
    conv = int if name == "max_crop_trials" else float
    vals = tuple(conv(v) for v in (value if isinstance(value, (tuple, list)) else (value,)))
    if n > 1 and len(vals) == 1:
        vals = vals * n
    if n >= 1 and len(vals) != n:
        raise MXNetError(f"ImageDetRecordIter: {name} has {len(vals)} values, expected {n} "
                         f"(# of parameters/crop_samplers mismatch)")
    return vals


# ---- labels ------------------------------------------------------------------------------------
@dataclass
class DetLabel:
    """A detection label: the header numbers and an (N, object_width) array of objects
    (id, xmin, ymin, xmax, ymax, extra...) in relative coordinates."""
    header: np.ndarray
    objects: np.ndarray

    @classmethod
    def parse(cls, raw) -> "DetLabel":
        raw = np.asarray(raw, np.float32).ravel()
        if raw.size < 7:
            raise MXNetError(f"ImageDetRecordIter: a detection label needs at least 7 numbers (2 header + 5 "
                             f"object), got {raw.size}")
        hw, ow = int(raw[0]), int(raw[1])
        if hw < 2 or ow < 5:
            raise MXNetError(f"ImageDetRecordIter: label header width {hw} (>= 2) and object width {ow} (>= 5) "
                             f"are invalid")
        if (raw.size - hw) % ow:
            raise MXNetError(f"ImageDetRecordIter: label of {raw.size} numbers is not a header of {hw} plus "
                             f"objects of {ow}")
        objs = raw[hw:].reshape(-1, ow)
        valid = (objs[:, 3] > objs[:, 1]) & (objs[:, 4] > objs[:, 2])
        return cls(raw[:hw].copy(), objs[valid].copy())

    def to_array(self) -> np.ndarray:
        return np.concatenate([self.header, self.objects.ravel()]).astype(np.float32)

    def project(self, box) -> None:
        """Coordinates relative to `box` (x, y, w, h), clipped to [0, 1]."""
        x, y, w, h = box
        o = self.objects
        o[:, 1] = np.maximum(0, (o[:, 1] - x) / w)
        o[:, 2] = np.maximum(0, (o[:, 2] - y) / h)
        o[:, 3] = np.minimum(1, (o[:, 3] - x) / w)
        o[:, 4] = np.minimum(1, (o[:, 4] - y) / h)

    def mirror(self) -> None:
        o = self.objects
        o[:, 1], o[:, 3] = 1 - o[:, 3], 1 - o[:, 1].copy()


def _intersection(box, objs) -> np.ndarray:
    """Intersection areas of the box (x, y, w, h) with each object's box (0 when disjoint)."""
    x, y, w, h = box
    iw = np.minimum(x + w, objs[:, 3]) - np.maximum(x, objs[:, 1])
    ih = np.minimum(y + h, objs[:, 4]) - np.maximum(y, objs[:, 2])
    return np.where((iw > 0) & (ih > 0), iw * ih, 0.0)


def _crop_passes(label: DetLabel, box, p: DetAugmentParams, i: int) -> bool:
    """MXNet's TryCrop: whether the crop box is accepted, updating the objects when it is."""
    objs = label.objects
    if len(objs) == 0:
        return True
    limits = [(p.min_crop_overlaps[i], p.max_crop_overlaps[i]),
              (p.min_crop_sample_coverages[i], p.max_crop_sample_coverages[i]),
              (p.min_crop_object_coverages[i], p.max_crop_object_coverages[i])]
    if all(lo > 0 and hi < 1 for lo, hi in limits):
        inter = _intersection(box, objs)
        gt_area = (objs[:, 3] - objs[:, 1]) * (objs[:, 4] - objs[:, 2])
        box_area = box[2] * box[3]
        iou = np.where(inter > 0, inter / np.maximum(box_area + gt_area - inter, 1e-12), 0.0)
        ok = np.ones(len(objs), bool)
        for (lo, hi), val in zip(limits, (iou, inter / box_area, inter / gt_area)):
            ok &= (val >= lo) & (val <= hi)
        if not ok.any():
            return False
    x, y, w, h = box
    if p.crop_emit_mode == "center":
        cx, cy = (objs[:, 1] + objs[:, 3]) * 0.5, (objs[:, 2] + objs[:, 4]) * 0.5
        keep = (cx >= x) & (cx < x + w) & (cy >= y) & (cy < y + h)
    else:
        gt_area = (objs[:, 3] - objs[:, 1]) * (objs[:, 4] - objs[:, 2])
        keep = _intersection(box, objs) / gt_area > p.emit_overlap_thresh
    if not keep.any():
        return False
    label.objects = objs[keep]
    label.project(box)
    return True


def _crop_box(p: DetAugmentParams, i: int, rng, img_aspect: float) -> tuple:
    """A random crop box (x, y, w, h) in relative coordinates (MXNet's GenerateCropBox)."""
    scale = uniform_between(rng, p.min_crop_scales[i], p.max_crop_scales[i]) + 1e-12
    lo = max(p.min_crop_aspect_ratios[i] / img_aspect, scale * scale)
    hi = min(p.max_crop_aspect_ratios[i] / img_aspect, 1.0 / (scale * scale))
    ratio = math.sqrt(uniform_between(rng, lo, hi))
    w, h = min(1.0, scale * ratio), min(1.0, scale / ratio)
    return uniform_between(rng, 0.0, 1 - w), uniform_between(rng, 0.0, 1 - h), w, h


def _random_crop(img, label: DetLabel, p: DetAugmentParams, rng):
    h, w = img.shape[:2]
    for i in rng.permutation(p.num_crop_sampler):
        for _ in range(p.max_crop_trials[i]):
            box = _crop_box(p, int(i), rng, w / h)
            if _crop_passes(label, box, p, int(i)):
                x0, y0 = int(box[0] * w), int(box[1] * h)
                return img[y0:y0 + int(box[3] * h), x0:x0 + int(box[2] * w)]
    return img


def _random_pad(img, label: DetLabel, p: DetAugmentParams, rng):
    scale = uniform_between(rng, 1.0, p.max_pad_scale)
    if scale < 1.05:
        return img
    x0, y0 = uniform_between(rng, 0.0, scale - 1), uniform_between(rng, 0.0, scale - 1)
    label.project((-x0, -y0, scale, scale))
    h, w = img.shape[:2]
    left, top = int(x0 * w), int(y0 * h)
    right, bot = int((scale - x0 - 1) * w), int((scale - y0 - 1) * h)
    return codec.make_border(img, top, bot, left, right, 0, float(p.fill_value))


def _colour(img, p: DetAugmentParams, rng):
    dh, ds, dl = hls_offsets(rng, p.max_random_hue, p.max_random_saturation, p.max_random_illumination)
    c = rng.uniform(-1, 1) * p.max_random_contrast
    dh = dh if rng.random() < p.random_hue_prob else 0
    ds = ds if rng.random() < p.random_saturation_prob else 0
    dl = dl if rng.random() < p.random_illumination_prob else 0
    c = c if rng.random() < p.random_contrast_prob else 0.0
    img = hls_shift(img, dh, dl, ds)
    if abs(c) > 1e-3:
        img = np.clip(np.rint(img.astype(np.float32) * np.float32(c + 1)), 0, 255).astype(np.uint8)
    return img


def _fit(img, p: DetAugmentParams, rng):
    """The image sized by resize_mode."""
    h, w = img.shape[:2]
    oh, ow = p.data_shape[1], p.data_shape[2]
    if p.resize_mode == "force":
        nh, nw = oh, ow
    elif p.resize_mode == "shrink" and h <= oh and w <= ow:
        return img
    else:
        ratio = min(oh / h, ow / w)
        nh, nw = int(ratio * h), int(ratio * w)
    return codec.resize(img, nw, nh, _interp(p.inter_method, rng, (h, w), (nh, nw)))


def det_augment(img: np.ndarray, raw_label, p: DetAugmentParams, rng):
    """One decoded HxWxC uint8 RGB image and its raw detection label through MXNet's
    det_aug_default: (augmented image, augmented raw label)."""
    if p.resize > 0:
        img = _resize_short(img, p.resize, p, rng)
    label = DetLabel.parse(raw_label)
    if p.colour:
        img = _colour(img, p, rng)
    if p.rand_mirror_prob > 0 and rng.random() < p.rand_mirror_prob:
        label.mirror()
        img = img[:, ::-1]
    if p.rand_pad_prob > 0 and p.max_pad_scale > 1 and rng.random() < p.rand_pad_prob:
        img = _random_pad(img, label, p, rng)
    if p.rand_crop_prob > 0 and p.num_crop_sampler > 0 and rng.random() < p.rand_crop_prob:
        img = _random_crop(img, label, p, rng)
    img = _fit(np.ascontiguousarray(img), p, rng)
    if img.ndim == 2:
        img = img[:, :, None]
    return img, label.to_array()


@dataclass(frozen=True)
class _DetNormalization:
    """MXNet's detection normalization (see the module docstring)."""
    mean: np.ndarray | None
    std: np.ndarray
    scale: float

    def __call__(self, img: np.ndarray, rng) -> np.ndarray:
        x = img.astype(np.float32)
        if self.mean is not None:
            x = x - self.mean
        return x / self.std * np.float32(self.scale)


class ImageDetRecordIter(ImageRecordIter):
    """Batches (batch_size, C, H, W) float32 of images and (batch_size, label_pad_width + 4)
    labels from a detection RecordIO file (see the module docstring)."""

    _what = "ImageDetRecordIter"
    _short_batch_pad = True       # MXNet's BatchLoader: a short last batch reports its missing samples
    _dtypes = ("float32",)

    def __init__(self, path_imgrec, data_shape, batch_size, path_imglist="", label_width=-1,
                 label_pad_width=0, label_pad_value=-1.0, mean_r=0.0, mean_g=0.0, mean_b=0.0, mean_a=0.0,
                 std_r=0.0, std_g=0.0, std_b=0.0, std_a=0.0, dtype=None, max_random_contrast=0.0,
                 max_random_illumination=0, **kwargs):
        self._label_pad_width = int(label_pad_width)
        self._label_pad_value = float(label_pad_value)
        # here max_random_contrast / max_random_illumination belong to the augmenter's colour step
        self._colour_args = {"max_random_contrast": max_random_contrast,
                             "max_random_illumination": max_random_illumination}
        super().__init__(path_imgrec, data_shape, batch_size, path_imglist=path_imglist, label_width=label_width,
                         mean_r=mean_r, mean_g=mean_g, mean_b=mean_b, mean_a=mean_a, std_r=std_r, std_g=std_g,
                         std_b=std_b, std_a=std_a, dtype="float32" if dtype in (None, "float32") else dtype,
                         **kwargs)

    def _make_aug(self, data_shape, kwargs):
        return DetAugmentParams.create(data_shape, {**kwargs, **self._colour_args})

    @staticmethod
    def _read_imglist(path: str) -> dict:
        """{record id: float32 labels} of a .lst file with any number of labels per line."""
        table = {}
        with open(path) as f:
            for line in f:
                parts = line.split()
                if not parts:
                    continue
                if len(parts) < 3:
                    raise MXNetError(f"ImageDetRecordIter: Bad ImageList format: empty label in {path!r}: {line!r}")
                table[int(float(parts[0]))] = np.array([float(v) for v in parts[1:-1]], np.float32)
        return table

    def _raw_label(self, header) -> np.ndarray:
        if self._imglist is not None:
            if int(header.id) not in self._imglist:
                raise MXNetError(f"ImageDetRecordIter: fail to find imagelabel for id {int(header.id)}")
            lab = self._imglist[int(header.id)]
            if self._label_width > 0 and lab.size != self._label_width:
                raise MXNetError(f"ImageDetRecordIter: image list gives {lab.size} labels for id "
                                 f"{int(header.id)}, label_width is {self._label_width}")
            return lab
        if header.flag <= 0:
            raise MXNetError("ImageDetRecordIter: Not enough label packed in img_list or rec file "
                             f"(record {int(header.id)} has a single label)")
        lab = np.asarray(header.label, np.float32).ravel()
        if self._label_width > 0 and lab.size != self._label_width:
            raise MXNetError(f"ImageDetRecordIter: rec file provide {lab.size}-dimensional label but label_width "
                             f"is set to {self._label_width}")
        return lab

    def _label_shape(self, batch_size) -> tuple:
        widest = self._widest_label()
        if widest > self._label_pad_width:
            if self._label_pad_width > 0:
                raise MXNetError(f"ImageDetRecordIter: label_pad_width {self._label_pad_width} smaller than "
                                 f"estimated width: {widest}")
            self._label_pad_width = widest
        return (batch_size, self._label_pad_width + 4)

    def _widest_label(self) -> int:
        if self._imglist is not None:
            return max((lab.size for lab in self._imglist.values()), default=0)
        return max((self._raw_label(recordio.unpack(self._read(i))[0]).size
                    for i in range(len(self._locations))), default=0)

    def _process(self, header, payload, rng, train=True):
        c = self._aug.data_shape[0]
        img, label = det_augment(self._decode(header, payload), self._raw_label(header), self._aug, rng)
        canvas = np.zeros((c,) + tuple(self._aug.data_shape[1:]), np.uint8)   # MXNet normalizes the unused rest too
        canvas[:, :img.shape[0], :img.shape[1]] = np.transpose(img, (2, 0, 1))
        row = np.full(self._label_pad_width + 4, self._label_pad_value, np.float32)
        row[:4] = (img.shape[2], img.shape[0], img.shape[1], label.size)
        row[4:4 + label.size] = label
        return canvas, row

    def _normalization(self, mean_img, means, stds, scale, max_contrast, max_illumination):
        c = self._aug.data_shape[0]
        std = _channel_values(stds, c)
        std = np.where(std > 0, std, 1).astype(np.float32)
        if any(m > 0 for m in means):
            mean = _channel_values(means, c)
        else:
            mean = self._mean_image(mean_img, np.float32(scale) / std) if mean_img else None
        return _DetNormalization(mean, std, scale)

    def _output(self, img: np.ndarray, rng) -> np.ndarray:
        return self._norm(img, rng)

    def _stack_labels(self, labels: list, batch: int) -> np.ndarray:
        out = np.full((batch, self._label_pad_width + 4), self._label_pad_value, np.float32)
        for k, lab in enumerate(labels):
            if lab is not None:
                out[k] = lab
        return out
