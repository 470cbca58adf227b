"""MXNet's ImageRecordIter (and ImageRecordUInt8Iter, ImageRecordInt8Iter): batches of decoded, augmented images
from an image RecordIO file, processed by `preprocess_threads` worker threads.

Per image, in MXNet's order (its default image augmenter): decode (RGB; grayscale when
data_shape has 1 channel) -> short-edge `resize` -> affine transform (`max_rotate_angle` /
`rotate` / `rotate_list`, `max_shear_ratio`, `min/max_random_scale`, `min/max_aspect_ratio`,
output size clamped to `min/max_img_size`, borders filled with `fill_value`) -> `pad` -> crop
(`random_resized_crop` with `min/max_random_area` and `min/max_aspect_ratio`; else a random
square of [`min_crop_size`, `max_crop_size`] resized to data_shape, or the data_shape window;
at a random position with `rand_crop`, else the centre; an image smaller than the crop is an
error, as in MXNet) -> HLS jitter (`random_h/s/l`: offsets peaked at 0, as MXNet draws them)
-> mirror (`rand_mirror` with probability
1/2, or `mirror` always) -> colour jitter (`brightness`, `contrast`, `saturation`,
`pca_noise`: the formulas of mx.image's augmenters with the luma weights (0.114, 0.587,
0.299) for (R, G, B) that MXNet's iterator uses, each step rounded to uint8) -> output: float32
((x - mean) * c + i) * scale / std per channel with c = 1 + U(-max_random_contrast,
max_random_contrast) and i = U(-max_random_illumination, max_random_illumination) per image
(`mean_r/g/b/a`, `std_r/g/b/a`, or a `mean_img` file, computed over the data set and saved
when absent), the raw uint8 pixels (`dtype='uint8'`, ImageRecordUInt8Iter), or int8 pixels
minus the rounded mean, saturated to [-128, 127] with no std or scale (`dtype='int8'`,
ImageRecordInt8Iter, for quantized networks).

A background thread prepares up to `prefetch_buffer` batches ahead (MXNet's prefetcher), so
decoding overlaps the training step. Randomness is reproducible: the pass order comes from (`seed`, pass) and each image's
augmentation from (`seed_aug` or `seed`, pass, position), whatever the thread count.
Batching follows MXNet's round_batch rule (batching.py). Unknown keyword arguments (and
MXNet's arguments without effect here: `verbose`, `ctx`, `device_id`, `aug_seq`,
`shuffle_chunk_size`, `shuffle_chunk_seed`) are ignored, as MXNet's native iterators ignore
unknown arguments (InitAllowUnknown).
"""
from __future__ import annotations

import dataclasses
import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from .. import recordio
from ..base import MXNetError
from ..ops import image_kernels as codec
from ..io import DataDesc
from .batching import BatchedIter, BatchPlan
from .text import _nd

__all__ = ["ImageRecordIter", "ImageRecordUInt8Iter", "ImageRecordInt8Iter", "AugmentParams"]


@dataclass(frozen=True)
class AugmentParams:
    """The augmentation arguments of ImageRecordIter (MXNet's names and defaults)."""
    data_shape: tuple
    resize: int = -1
    rand_crop: bool = False
    random_resized_crop: bool = False
    min_random_area: float = 1.0
    max_random_area: float = 1.0
    min_aspect_ratio: float | None = None
    max_aspect_ratio: float = 0.0
    max_rotate_angle: int = 0
    rotate: int = -1
    max_shear_ratio: float = 0.0
    max_random_scale: float = 1.0
    min_random_scale: float = 1.0
    max_img_size: float = 1e10
    min_img_size: float = 0.0
    max_crop_size: int = -1
    min_crop_size: int = -1
    rotate_list: tuple = ()
    pad: int = 0
    fill_value: int = 255
    inter_method: int = 1
    random_h: int = 0
    random_s: int = 0
    random_l: int = 0
    rand_mirror: bool = False
    mirror: bool = False
    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    pca_noise: float = 0.0

    @property
    def affine(self) -> bool:
        """Whether the affine step runs (outside random_resized_crop)."""
        return (self.max_rotate_angle > 0 or self.rotate > 0 or bool(self.rotate_list)
                or self.max_shear_ratio > 0 or self.max_random_scale != 1.0 or self.min_random_scale != 1.0
                or self.max_aspect_ratio != 0.0 or self.max_img_size != 1e10 or self.min_img_size != 0.0)

    @property
    def sized_crop(self) -> bool:
        """Whether a random square of [min_crop_size, max_crop_size] is cropped and resized."""
        return self.max_crop_size != -1 or self.min_crop_size != -1


_BOOL_TEXT = {"1": True, "0": False, "true": True, "false": False}


def parse_param(what: str, name: str, value, kind: type):
    """An iterator argument as `kind` (bool, int or float), read as MXNet's parameter parser
    reads it (an int takes no fraction, a bool is 0/1/True/False); MXNetError otherwise."""
    text = str(value).strip()
    try:
        if kind is bool:
            return _BOOL_TEXT[text.lower()]
        if kind is int:
            return int(text)
        return float(text)
    except (KeyError, ValueError):
        expected = {bool: "boolean", int: "int", float: "float"}[kind]
        raise MXNetError(f"{what}: Invalid Parameter format for {name} expect {expected} but value='{value}'") from None


def parse_fields(what: str, cls, values: dict) -> dict:
    """`values` of a parameter dataclass parsed by the type of each field's default."""
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    return {k: parse_param(what, k, v, type(defaults[k])) if type(defaults[k]) in (bool, int, float) else v
            for k, v in values.items()}


def _interp(code: int, rng, old_hw, new_hw) -> int:
    """inter_method as an OpenCV code: 9 picks by the size change, 10 a random one."""
    if code == 9:
        (oh, ow), (nh, nw) = old_hw, new_hw
        if nh > oh and nw > ow:
            return 2
        return 3 if nh < oh and nw < ow else 1
    if code == 10:
        return int(rng.integers(0, 5))
    return codec.check_interp(code)


def _resize_short(img, size, p, rng):
    h, w = img.shape[:2]
    nh, nw = (size * h // w, size) if h > w else (size, size * w // h)
    return codec.resize(img, nw, nh, _interp(p.inter_method, rng, (h, w), (nh, nw)))


def uniform_between(rng, lo: float, hi: float) -> float:
    """lo + (hi - lo) * U(0, 1), also for lo > hi (as MXNet's C++ distributions compute it)."""
    return lo + (hi - lo) * rng.random()


def _affine(img, p: AugmentParams, rng):
    """Rotation, shear, scale and aspect-ratio change about the centre, output size
    clamped to [min_img_size, max_img_size] (MXNet's warpAffine step)."""
    if p.inter_method == 0:
        raise MXNetError("ImageRecordIter: invalid inter_method 0 for the affine step (rotation, shear, random "
                         "scale or aspect ratio, image size bounds): MXNet accepts 1, 2, 3, 4, 9, 10 there")
    h, w = img.shape[:2]
    shear = rng.uniform(-p.max_shear_ratio, p.max_shear_ratio) if p.max_shear_ratio > 0 else 0.0
    angle = int(rng.integers(-p.max_rotate_angle, p.max_rotate_angle + 1)) if p.max_rotate_angle > 0 else 0
    if p.rotate > 0:
        angle = p.rotate
    if p.rotate_list:
        angle = int(p.rotate_list[int(rng.integers(0, len(p.rotate_list)))])
    s = rng.uniform(p.min_random_scale, p.max_random_scale)
    if p.min_aspect_ratio is not None:
        ratio = uniform_between(rng, p.min_aspect_ratio, p.max_aspect_ratio)
    else:
        ratio = rng.uniform(1 - p.max_aspect_ratio, 1 + p.max_aspect_ratio)
    hs = 2 * s / (1 + ratio)
    ws = ratio * hs
    a, b = math.cos(math.radians(angle)), math.sin(math.radians(angle))
    new_w = np.float32(max(p.min_img_size, min(p.max_img_size, s * w)))   # float for the centring,
    new_h = np.float32(max(p.min_img_size, min(p.max_img_size, s * h)))   # truncated for the size
    m = np.array([[hs * a - shear * b * ws, hs * b + shear * a * ws, 0.0],
                  [-b * ws, a * ws, 0.0]], np.float32)
    m[0, 2] = (new_w - (m[0, 0] * np.float32(w) + m[0, 1] * np.float32(h))) / 2
    m[1, 2] = (new_h - (m[1, 0] * np.float32(w) + m[1, 1] * np.float32(h))) / 2
    size = (int(new_w), int(new_h))
    out = codec.opencv().warpAffine(img, m, size, flags=_interp(p.inter_method, rng, (h, w), size[::-1]),
                                    borderMode=0, borderValue=[float(p.fill_value)] * 4)
    return out[:, :, None] if out.ndim == 2 else out


def _random_resized_crop(img, p: AugmentParams, rng):
    """A crop of random area fraction and aspect ratio resized to data_shape (centre crop of
    the target's aspect after 10 failed draws)."""
    h, w = img.shape[:2]
    oh, ow = p.data_shape[1], p.data_shape[2]
    hi = p.max_aspect_ratio if p.max_aspect_ratio > 0 else 1.0
    lo = p.min_aspect_ratio if p.min_aspect_ratio is not None else 1.0 / hi
    for _ in range(10):
        area = rng.uniform(p.min_random_area, p.max_random_area) * h * w
        ratio = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        cw, ch = int(round(math.sqrt(area * ratio))), int(round(math.sqrt(area / ratio)))
        if 0 < cw <= w and 0 < ch <= h:
            x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
            crop = img[y0:y0 + ch, x0:x0 + cw]
            return codec.resize(crop, ow, oh, _interp(p.inter_method, rng, (ch, cw), (oh, ow)))
    cw, ch = min(w, int(h * ow / oh)), min(h, int(w * oh / ow))
    x0, y0 = (w - cw) // 2, (h - ch) // 2
    return codec.resize(img[y0:y0 + ch, x0:x0 + cw], ow, oh, _interp(p.inter_method, rng, (ch, cw), (oh, ow)))


def _crop(img, p: AugmentParams, rng, random_position: bool):
    """The data_shape window (or, with min/max_crop_size, a random square resized to
    data_shape) at a random position or the centre."""
    oh, ow = p.data_shape[1], p.data_shape[2]
    h, w = img.shape[:2]
    if p.sized_crop:
        if not (w >= p.max_crop_size and h >= p.max_crop_size and p.max_crop_size >= p.min_crop_size):
            raise MXNetError(f"ImageRecordIter: input image size smaller than max_crop_size: image {h}x{w}, "
                             f"crop sizes [{p.min_crop_size}, {p.max_crop_size}]")
        ch = cw = int(rng.integers(p.min_crop_size, p.max_crop_size + 1))
    else:
        if h < oh or w < ow:
            raise MXNetError(f"ImageRecordIter: input image size smaller than input shape: image "
                             f"{h}x{w}, data_shape {tuple(p.data_shape)} (use resize to enlarge it)")
        ch, cw = oh, ow
    if random_position:
        y0, x0 = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
    else:
        y0, x0 = (h - ch) // 2, (w - cw) // 2
    out = img[y0:y0 + ch, x0:x0 + cw]
    if p.sized_crop:
        out = codec.resize(out, ow, oh, _interp(p.inter_method, rng, (ch, cw), (oh, ow)))
    return out


def hls_offsets(rng, *limits) -> list:
    """One integer offset per limit v, drawn as MXNet does: int(U(-v, v)), truncated toward 0."""
    return [int(rng.uniform(-v, v)) if v else 0 for v in limits]


def hls_shift(img, dh: int, dl: int, ds: int):
    """`img` (HxWx3 uint8 RGB) with offsets added to hue, lightness and saturation in OpenCV's
    HLS space (clipped to [0, 180], [0, 255], [0, 255])."""
    if img.shape[2] != 3 or not (dh or dl or ds):
        return img
    cv2 = codec.opencv()
    hls = cv2.cvtColor(np.ascontiguousarray(img), cv2.COLOR_RGB2HLS).astype(np.int32)
    hls[:, :, 0] = np.clip(hls[:, :, 0] + dh, 0, 180)
    hls[:, :, 1] = np.clip(hls[:, :, 1] + dl, 0, 255)
    hls[:, :, 2] = np.clip(hls[:, :, 2] + ds, 0, 255)
    return cv2.cvtColor(hls.astype(np.uint8), cv2.COLOR_HLS2RGB)


def _peaked_offsets(rng, *limits) -> list:
    """One integer offset in [-v, v] per limit v, drawn as MXNet's image record iterator does:
    int((2 r - 1) v) with r = (u1 + 4 u2) / 5, u1, u2 ~ U(0, 1) (peaked at 0, std 0.48 v)."""
    return [int(((rng.random() + 4 * rng.random()) / 5 * 2 - 1) * v) if v else 0 for v in limits]


def _hls_jitter(img, p: AugmentParams, rng):
    """Random offsets in [-random_h, random_h] etc. added in HLS space."""
    dh, ds, dl = _peaked_offsets(rng, p.random_h, p.random_s, p.random_l)
    return hls_shift(img, dh, dl, ds)


#: the luma weights MXNet's image record iterator gives R, G, B: it applies (0.299, 0.587, 0.114)
#: to OpenCV's B, G, R channels
_ITER_GREY = codec.GRAY_COEF[::-1].copy()


def _colour_jitter(img: np.ndarray, p: AugmentParams, rng) -> np.ndarray:
    """Brightness, contrast, saturation (each alpha = 1 + U(-v, v)) and PCA lighting noise on a
    uint8 HxWx3 RGB image, each step rounded and saturated to uint8 as MXNet's iterator does."""
    if p.brightness > 0:
        img = codec.adjust_brightness(img, 1 + rng.uniform(-p.brightness, p.brightness))
    if p.contrast > 0:
        img = codec.adjust_contrast(img, 1 + rng.uniform(-p.contrast, p.contrast), _ITER_GREY)
    if p.saturation > 0:
        img = codec.adjust_saturation(img, 1 + rng.uniform(-p.saturation, p.saturation), _ITER_GREY)
    if p.pca_noise > 0:
        offset = codec.lighting_offset(rng.normal(0, p.pca_noise, 3))
        img = np.clip(np.rint(img + offset), 0, 255).astype(np.uint8)
    return img


def augment(img: np.ndarray, p: AugmentParams, rng, train: bool = True) -> np.ndarray:
    """One decoded HxWxC uint8 RGB image through the augmentation chain, as HxWxC uint8.
    `train=False` skips every random step (the mean image is computed that way)."""
    if p.resize > 0:
        img = _resize_short(img, p.resize, p, rng)
    if p.random_resized_crop and train:
        img = _random_resized_crop(img, p, rng)
    else:
        if p.affine and train:
            img = _affine(img, p, rng)
        if p.pad > 0:
            img = codec.make_border(img, p.pad, p.pad, p.pad, p.pad, 0, float(p.fill_value))
        img = _crop(img, p, rng, p.rand_crop and train)
    if train and (p.random_h or p.random_s or p.random_l):
        img = _hls_jitter(img, p, rng)
    if p.mirror or (train and p.rand_mirror and rng.random() < 0.5):
        img = img[:, ::-1]
    if train and img.shape[2] == 3 and (p.brightness or p.contrast or p.saturation or p.pca_noise):
        return _colour_jitter(np.ascontiguousarray(img), p, rng)
    return img


_AUG_FIELDS = set(AugmentParams.__dataclass_fields__) - {"data_shape"}


def _rotate_list(value) -> tuple:
    """MXNet's `rotate_list` ("10,20,30" or a sequence) as a tuple of int angles."""
    if isinstance(value, str):
        return tuple(int(v) for v in value.split(",") if v.strip())
    return tuple(int(v) for v in value)


def _channel_values(values, c: int) -> np.ndarray:
    """Per-channel (R, G, B, A) values for `c` channels as a (c, 1, 1) float32 array."""
    return np.array(values[:c], np.float32).reshape(c, 1, 1)


@dataclass(frozen=True)
class _Normalization:
    """MXNet's per-image output step: ((x - mean) * contrast + illumination) * scale / std,
    contrast = 1 + U(-max_random_contrast, max_random_contrast) and illumination =
    U(-max_random_illumination, max_random_illumination) drawn per image."""
    mean: np.ndarray
    std: np.ndarray
    scale: float
    max_contrast: float
    max_illumination: float

    def __call__(self, img: np.ndarray, rng) -> np.ndarray:
        x = img.astype(np.float32) - self.mean
        if self.max_contrast > 0:
            x *= np.float32(1 + rng.uniform(-self.max_contrast, self.max_contrast))
        if self.max_illumination > 0:
            x += np.float32(rng.uniform(-self.max_illumination, self.max_illumination))
        return x * np.float32(self.scale) / self.std


class ImageRecordIter(BatchedIter):
    """Batches (batch_size, C, H, W) of images from `path_imgrec` (see the module docstring),
    labels (batch_size,) float32, or (batch_size, label_width) when label_width > 1 (from the
    records' label arrays, or from `path_imglist` lines keyed by record id).

    Subclasses (ImageDetRecordIter) change the augmentation (`_make_aug`, `_process`), the
    normalization (`_normalization`) and the labels (`_label_shape`, `_stack_labels`)."""

    _default_dtype = "float32"
    _what = "ImageRecordIter"
    _short_batch_pad = False      # as MXNet's ImageRecordIter: a short last batch reports pad 0
    _dtypes = ("float32", "uint8", "int8")

    def __init__(self, path_imgrec, data_shape, batch_size, path_imgidx="", path_imglist="",
                 label_width=1, shuffle=False, seed=0, seed_aug=None, num_parts=1, part_index=0,
                 round_batch=True, preprocess_threads=4, prefetch_buffer=4, dtype=None, data_name="data",
                 label_name="softmax_label", mean_img="", mean_r=0.0, mean_g=0.0, mean_b=0.0,
                 mean_a=0.0, std_r=1.0, std_g=1.0, std_b=1.0, std_a=1.0, scale=1.0,
                 max_random_contrast=0.0, max_random_illumination=0.0, **kwargs):
        data_shape = tuple(int(d) for d in data_shape)
        if len(data_shape) != 3 or data_shape[0] not in (1, 3, 4):
            raise MXNetError(f"{self._what}: data_shape must be (channels, height, width) with 1, 3 "
                             f"or 4 channels, got {data_shape}")
        self._dtype = dtype or self._default_dtype
        if self._dtype not in self._dtypes:
            raise MXNetError(f"{self._what}: unknown dtype {self._dtype!r}: dtype must be "
                             f"{', '.join(self._dtypes[:-1])} or {self._dtypes[-1]}")
        self._aug = self._make_aug(data_shape, kwargs)
        self._rec = recordio.MXIndexedRecordIO(path_imgidx, path_imgrec, "r") if path_imgidx \
            else recordio.MXRecordIO(path_imgrec, "r")
        self._locations = self._record_locations(path_imgidx)
        if not 0 <= part_index < num_parts:
            raise MXNetError(f"{self._what}: part_index {part_index} not in [0, {num_parts})")
        per = (len(self._locations) + num_parts - 1) // num_parts
        self._locations = self._locations[part_index * per:(part_index + 1) * per]
        self._label_width = int(label_width)
        self._imglist = self._read_imglist(path_imglist) if path_imglist else None
        self._seed_aug = seed if seed_aug is None else seed_aug
        self._pool = ThreadPoolExecutor(max_workers=max(1, int(preprocess_threads)),
                                        thread_name_prefix="symjit-imagerecord")
        n = len(self._locations)
        order = (lambda k: np.random.default_rng((seed, k)).permutation(n)) if shuffle else (lambda k: np.arange(n))
        self._plan = plan = BatchPlan(n, int(batch_size), round_batch, order, self._what)
        label_shape = self._label_shape(batch_size)
        self._norm = self._normalization(mean_img, (mean_r, mean_g, mean_b, mean_a), (std_r, std_g, std_b, std_a),
                                         float(scale), float(max_random_contrast), float(max_random_illumination))
        super().__init__(plan, [DataDesc(data_name, (batch_size,) + data_shape, np.dtype(self._dtype).type)],
                         [DataDesc(label_name, label_shape, np.float32)], prefetch=prefetch_buffer)

    def _make_aug(self, data_shape, kwargs):
        """The augmentation parameters among the keyword arguments (others are ignored, as MXNet
        ignores unknown arguments of its native iterators)."""
        fields = parse_fields(self._what, AugmentParams, {k: v for k, v in kwargs.items() if k in _AUG_FIELDS})
        if fields.get("min_aspect_ratio") is not None:
            fields["min_aspect_ratio"] = parse_param(self._what, "min_aspect_ratio", fields["min_aspect_ratio"], float)
        if "rotate_list" in fields:
            fields["rotate_list"] = _rotate_list(fields["rotate_list"])
        aug = AugmentParams(data_shape, **fields)
        if aug.inter_method not in (9, 10):
            codec.check_interp(aug.inter_method)
        return aug

    def _label_shape(self, batch_size) -> tuple:
        return (batch_size,) if self._label_width == 1 else (batch_size, self._label_width)

    # ---- records -----------------------------------------------------------------------------
    def _record_locations(self, path_imgidx) -> list:
        """Index keys (with an .idx file) or byte offsets (scanned) of every record."""
        if path_imgidx:
            return list(self._rec.keys)
        offsets, handle = [], self._rec.handle
        handle.seek(0)
        while True:
            pos = handle.tell()
            if recordio._read_record(handle, self._rec.uri) is None:
                break
            offsets.append(pos)
        handle.seek(0)
        return offsets

    def _read(self, i: int) -> bytes:
        loc = self._locations[i]
        if isinstance(self._rec, recordio.MXIndexedRecordIO):
            return self._rec.read_idx(loc)
        self._rec.handle.seek(loc)
        return self._rec.read()

    @staticmethod
    def _read_imglist(path: str) -> dict:
        """{record id: float32 labels} of a .lst file."""
        from ..image.image import read_image_list_file
        table, _ = read_image_list_file(path, "float32")
        return {key: labels for key, (labels, _) in table.items()}

    def _label(self, header) -> np.ndarray:
        """The record's labels: its image-list line, else its label array, which must have
        exactly label_width numbers, else its single label (label_width must then be 1)."""
        if self._imglist is not None:
            lab = self._imglist[int(header.id)]
            if lab.size < self._label_width:
                raise MXNetError(f"{self._what}: image list gives {lab.size} labels for record {header.id}, "
                                 f"label_width is {self._label_width}")
            return lab[:self._label_width]
        lab = np.atleast_1d(np.asarray(header.label, np.float32))
        if header.flag > 0 and lab.size != self._label_width:
            raise MXNetError(f"{self._what}: rec file provide {lab.size}-dimensional label but label_width is "
                             f"set to {self._label_width}")
        if header.flag <= 0 and self._label_width != 1:
            raise MXNetError(f"{self._what}: label_width must be 1 unless an imglist is provided or the rec file "
                             f"is packed with multi dimensional label (label_width is {self._label_width})")
        return lab

    # ---- processing --------------------------------------------------------------------------
    def _normalization(self, mean_img, means, stds, scale, max_contrast, max_illumination):
        """The per-image output step: None (uint8: raw pixels), the rounded int16 mean (int8)
        or a _Normalization (float32)."""
        c = self._aug.data_shape[0]
        if self._dtype == "uint8":
            return None
        std = _channel_values(stds, c)
        if self._dtype == "int8":   # integer means (per pixel with a mean image), no std
            mean = self._mean_image(mean_img) if mean_img else _channel_values(means, c)
            return np.round(mean).astype(np.int16)
        mean = self._mean_image(mean_img, np.float32(scale) / std) if mean_img else _channel_values(means, c)
        return _Normalization(mean, std, scale, max_contrast, max_illumination)

    def _mean_image(self, path: str, factor=1.0) -> np.ndarray:
        """The (C, H, W) mean image stored at `path` (nd.save format); when the file is absent,
        the mean over the records (without random augmentation) of the pixels times `factor`,
        saved there: MXNet averages its iterator's output before a mean exists, which is
        x * scale / std for float32 output (and subtracts that image from x afterwards)."""
        from .. import ndarray as nd
        if os.path.isfile(path):
            loaded = nd.load(path)
            arr = next(iter(loaded.values())) if isinstance(loaded, dict) else loaded[0]
            return arr.asnumpy().astype(np.float32)
        total = np.zeros(self._aug.data_shape, np.float64)
        for i in range(len(self._locations)):
            total += self._decode_augment(i, None, train=False)[0]
        mean = (total / max(len(self._locations), 1) * factor).astype(np.float32)
        nd.save(path, {"mean_img": nd.array(mean)})
        return mean

    def _decode_augment(self, i: int, rng, train: bool = True):
        header, payload = recordio.unpack(self._read(i))
        return self._process(header, payload, rng if rng is not None else np.random.default_rng(0), train)

    def _decode(self, header, payload) -> np.ndarray:
        """The record's HxWxC RGB(A) pixels: grayscale for 1 channel, colour for 3, the file's
        own channels for 4, which must then be 4 (as MXNet)."""
        c = self._aug.data_shape[0]
        img = codec.decode(payload, {1: 0, 3: 1, 4: -1}[c], True)
        if img.shape[2] != c:
            raise MXNetError(f"{self._what}: Invalid image with index {int(header.id)}. Expected {c} channels, "
                             f"got {img.shape[2]}")
        return img

    def _process(self, header, payload, rng, train=True):
        """(CxHxW image, label) of one record."""
        out = augment(self._decode(header, payload), self._aug, rng, train)
        return np.transpose(out, (2, 0, 1)), self._label(header)

    def _output(self, img: np.ndarray, rng) -> np.ndarray:
        """One processed CxHxW image as the output dtype (normalized for float32)."""
        if self._dtype == "uint8":
            return img
        if self._dtype == "int8":
            return np.clip(np.rint(img).astype(np.int16) - self._norm, -128, 127)
        return self._norm(img, rng)

    def _stack_labels(self, labels: list, batch: int) -> np.ndarray:
        """The batch's label array from the per-sample labels (None for a missing slot)."""
        out = np.zeros((batch, self._label_width), np.float32)
        for k, lab in enumerate(labels):
            if lab is not None:
                out[k] = lab
        return out[:, 0] if self._label_width == 1 else out

    def _load(self, indices, pad):
        plan_pass = self._plan.pass_number
        payloads = [None if i is None else recordio.unpack(self._read(i)) for i in indices]

        def work(k):
            if payloads[k] is None:
                return None
            rng = np.random.default_rng((self._seed_aug, plan_pass, k, indices[k]))
            img, label = self._process(payloads[k][0], payloads[k][1], rng)
            return self._output(img, rng), label
        results = list(self._pool.map(work, range(len(indices))))
        c, h, w = self._aug.data_shape
        data = np.zeros((len(indices), c, h, w), np.dtype(self._dtype))
        for k, res in enumerate(results):
            if res is not None:
                img = res[0]
                data[k, :, :img.shape[1], :img.shape[2]] = img
        label = self._stack_labels([None if r is None else r[1] for r in results], len(indices))
        return [_nd(data)], [_nd(label)]

    def __del__(self):
        super().__del__()
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)


class ImageRecordUInt8Iter(ImageRecordIter):
    """ImageRecordIter with uint8 output (raw pixels, no mean/std normalization)."""

    _default_dtype = "uint8"


class ImageRecordInt8Iter(ImageRecordIter):
    """ImageRecordIter with int8 output (pixels minus the rounded mean, saturated)."""

    _default_dtype = "int8"
