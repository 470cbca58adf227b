"""`mx.image` for object detection (MXNet 1.9.1's `mxnet.image.detection`): augmenters that
transform an image together with its boxes, `CreateDetAugmenter` and ImageDetIter.

A detection label is a float array (objects, width >= 5): [class id, xmin, ymin, xmax, ymax,
...] per object with coordinates normalized to [0, 1]. In a record file it is stored flat
after a header: [header width, object width, (other header values), objects...], as MXNet's
im2rec writes it. Randomness comes from Python's `random`, as in MXNet.
"""
from __future__ import annotations

import json
import logging
import math
import numbers
import random
import warnings

import numpy as np

from .. import io as _io
from .image import (IMAGENET_EIGVAL, IMAGENET_EIGVEC, Augmenter, CastAug, ColorJitterAug,
                    ColorNormalizeAug, ForceResizeAug, HueJitterAug, ImageIter, LightingAug,
                    RandomGrayAug, ResizeAug, _channel_stats, _hwc, _nd, _np, copyMakeBorder,
                    fixed_crop)

__all__ = ["DetAugmenter", "DetBorrowAug", "DetRandomSelectAug", "DetHorizontalFlipAug",
           "DetRandomCropAug", "DetRandomPadAug", "CreateMultiRandCropAugmenter",
           "CreateDetAugmenter", "ImageDetIter"]


class DetAugmenter:
    """Detection augmenter base class: `aug(src, label)` returns (image, label)."""

    def __init__(self, **kwargs):
        self._kwargs = {k: (_np(v).tolist() if hasattr(v, "asnumpy") or isinstance(v, np.ndarray) else v)
                        for k, v in kwargs.items()}

    def dumps(self):
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])

    def __call__(self, src, label):
        raise NotImplementedError("Must override implementation.")


class DetBorrowAug(DetAugmenter):
    """A plain image Augmenter applied to the image only (for augmenters that move no pixel
    relative to the boxes: resizes, colour changes, normalization)."""

    def __init__(self, augmenter):
        if not isinstance(augmenter, Augmenter):
            raise TypeError("Borrowing from invalid Augmenter")
        super().__init__(augmenter=augmenter.dumps())
        self.augmenter = augmenter

    def dumps(self):
        return [self.__class__.__name__.lower(), self.augmenter.dumps()]

    def __call__(self, src, label):
        return self.augmenter(src), label


class DetRandomSelectAug(DetAugmenter):
    """One augmenter of `aug_list`, chosen at random, or none with probability `skip_prob`."""

    def __init__(self, aug_list, skip_prob=0):
        super().__init__(skip_prob=skip_prob)
        if not isinstance(aug_list, (list, tuple)):
            aug_list = [aug_list]
        for aug in aug_list:
            if not isinstance(aug, DetAugmenter):
                raise ValueError("Allow DetAugmenter in list only")
        if not aug_list:
            skip_prob = 1
        self.aug_list = list(aug_list)
        self.skip_prob = skip_prob

    def dumps(self):
        return [self.__class__.__name__.lower(), [x.dumps() for x in self.aug_list]]

    def __call__(self, src, label):
        if random.random() < self.skip_prob:
            return src, label
        random.shuffle(self.aug_list)
        return self.aug_list[0](src, label)


class DetHorizontalFlipAug(DetAugmenter):
    """Flips image and boxes left-right with probability `p`."""

    def __init__(self, p):
        super().__init__(p=p)
        self.p = p

    def __call__(self, src, label):
        if random.random() < self.p:
            src = _nd(_hwc(src, "DetHorizontalFlipAug")[:, ::-1])
            label = flip_boxes(label)
        return src, label


def flip_boxes(label: np.ndarray) -> np.ndarray:
    """Boxes of a left-right flipped image: xmin, xmax -> 1 - xmax, 1 - xmin."""
    out = np.array(label, dtype=np.float64 if np.asarray(label).dtype == np.float64 else np.float32)
    xmin = 1.0 - out[:, 3]
    out[:, 3] = 1.0 - out[:, 1]
    out[:, 1] = xmin
    return out


def box_areas(boxes: np.ndarray) -> np.ndarray:
    """Areas of (xmin, ymin, xmax, ymax) rows (0 for empty boxes)."""
    return np.maximum(0, boxes[:, 3] - boxes[:, 1]) * np.maximum(0, boxes[:, 2] - boxes[:, 0])


def intersect_boxes(boxes: np.ndarray, xmin, ymin, xmax, ymax) -> np.ndarray:
    """Each (xmin, ymin, xmax, ymax) row clipped to the window (all zeros when disjoint)."""
    left, right = np.maximum(boxes[:, 0], xmin), np.minimum(boxes[:, 2], xmax)
    top, bot = np.maximum(boxes[:, 1], ymin), np.minimum(boxes[:, 3], ymax)
    out = np.stack([left, top, right, bot], axis=1)
    out[(left >= right) | (top >= bot)] = 0
    return out


def _range(value, what: str):
    """A (low, high) range from a pair or a single number."""
    if isinstance(value, (tuple, list)):
        return tuple(value)
    if not isinstance(value, numbers.Number):
        raise AssertionError(f"{what} must be a number or a (low, high) pair, got {value!r}")
    logging.info("Using fixed %s: %s", what, value)
    return (value, value)


def _proposal_draws(aug, height: int, width: int):
    """(aspect ratio, min box height, max box height, min area, max area) for each of
    `aug.max_attempts` draws of a box whose area is `aug.area_range` times the image's."""
    min_area = aug.area_range[0] * height * width
    max_area = aug.area_range[1] * height * width
    for _ in range(aug.max_attempts):
        ratio = random.uniform(*aug.aspect_ratio_range)
        if ratio <= 0:
            continue
        yield (ratio, int(round(math.sqrt(min_area / ratio))), int(round(math.sqrt(max_area / ratio))),
               min_area, max_area)


class _BoxProposalAug(DetAugmenter):
    """A detection augmenter drawing boxes of area `area_range` times the image's and aspect
    ratio in `aspect_ratio_range` (`max_attempts` draws); disabled, with a warning, when the
    ranges are invalid (an area range must reach above `area_floor`)."""
    area_floor = 0.0

    def __init__(self, aspect_ratio_range, area_range, max_attempts, **kwargs):
        aspect_ratio_range = _range(aspect_ratio_range, "aspect ratio")
        area_range = _range(area_range, "area range")
        super().__init__(aspect_ratio_range=aspect_ratio_range, area_range=area_range,
                         max_attempts=max_attempts, **kwargs)
        self.aspect_ratio_range = aspect_ratio_range
        self.area_range = area_range
        self.max_attempts = max_attempts
        self.enabled = False
        name = type(self).__name__
        if area_range[1] <= self.area_floor or area_range[0] > area_range[1]:
            warnings.warn(f"Skip {name} due to invalid area_range: {area_range}")
        elif aspect_ratio_range[0] <= 0 or aspect_ratio_range[0] > aspect_ratio_range[1]:
            warnings.warn(f"Skip {name} due to invalid aspect_ratio_range: {aspect_ratio_range}")
        else:
            self.enabled = True


class DetRandomCropAug(_BoxProposalAug):
    """A random crop (area fraction in `area_range`, aspect ratio in `aspect_ratio_range`) that
    covers more than `min_object_covered` of every object it touches; boxes are clipped to it
    and objects keeping less than `min_eject_coverage` of their area are dropped. Up to
    `max_attempts` proposals; the sample is unchanged when none fits."""

    def __init__(self, min_object_covered=0.1, aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 1.0),
                 min_eject_coverage=0.3, max_attempts=50):
        super().__init__(aspect_ratio_range, area_range, max_attempts, min_object_covered=min_object_covered,
                         min_eject_coverage=min_eject_coverage)
        self.min_object_covered = min_object_covered
        self.min_eject_coverage = min_eject_coverage

    def __call__(self, src, label):
        img = _hwc(src, "DetRandomCropAug")
        crop = self._random_crop_proposal(np.asarray(label), img.shape[0], img.shape[1])
        if crop:
            x, y, w, h, label = crop
            src = fixed_crop(img, x, y, w, h, None)
        return src, label

    def _satisfies(self, label, xmin, ymin, xmax, ymax, width, height) -> bool:
        if (xmax - xmin) * (ymax - ymin) < 2:
            return False
        areas = box_areas(label[:, 1:])
        valid = np.where(areas * width * height > 2)[0]
        if valid.size < 1:
            return False
        inter = intersect_boxes(label[valid, 1:], xmin / width, ymin / height, xmax / width, ymax / height)
        coverages = box_areas(inter) / areas[valid]
        coverages = coverages[coverages > 0]
        return coverages.size > 0 and np.amin(coverages) > self.min_object_covered

    def _update_labels(self, label, crop_box, height, width):
        x0, y0 = crop_box[0] / width, crop_box[1] / height
        w, h = crop_box[2] / width, crop_box[3] / height
        out = label.astype(np.float64).copy()
        out[:, (1, 3)] = (out[:, (1, 3)] - x0) / w
        out[:, (2, 4)] = (out[:, (2, 4)] - y0) / h
        out[:, 1:5] = np.clip(out[:, 1:5], 0, 1)
        coverage = box_areas(out[:, 1:]) * w * h / box_areas(label[:, 1:])
        valid = (out[:, 3] > out[:, 1]) & (out[:, 4] > out[:, 2]) & (coverage > self.min_eject_coverage)
        if not valid.any():
            return None
        return out[valid].astype(label.dtype)

    def _random_crop_proposal(self, label, height, width):
        if not self.enabled or height <= 0 or width <= 0:
            return ()
        for ratio, h, max_h, min_area, max_area in _proposal_draws(self, height, width):
            if round(max_h * ratio) > width:
                max_h = int((width + 0.4999999) / ratio)   # the largest h with round(h * ratio) <= width
            max_h = min(max_h, height)
            h = min(h, max_h)
            if h < max_h:
                h = random.randint(h, max_h)
            w = int(round(h * ratio))
            area = w * h
            if area < min_area:
                h += 1
                w = int(round(h * ratio))
                area = w * h
            if area > max_area:
                h -= 1
                w = int(round(h * ratio))
                area = w * h
            if not (min_area <= area <= max_area and 0 <= w <= width and 0 <= h <= height):
                continue
            y = random.randint(0, max(0, height - h))
            x = random.randint(0, max(0, width - w))
            if self._satisfies(label, x, y, x + w, y + h, width, height):
                new_label = self._update_labels(label, (x, y, w, h), height, width)
                if new_label is not None:
                    return x, y, w, h, new_label
        return ()


class DetRandomPadAug(_BoxProposalAug):
    """Places the image at a random position on a larger canvas filled with `pad_val` (area
    `area_range` times the image's, aspect ratio in `aspect_ratio_range`); boxes follow."""
    area_floor = 1.0

    def __init__(self, aspect_ratio_range=(0.75, 1.33), area_range=(1.0, 3.0), max_attempts=50,
                 pad_val=(128, 128, 128)):
        if not isinstance(pad_val, (list, tuple)):
            if not isinstance(pad_val, numbers.Number):
                raise AssertionError(f"pad_val must be a number or a sequence, got {pad_val!r}")
            pad_val = (pad_val,)
        super().__init__(aspect_ratio_range, area_range, max_attempts, pad_val=pad_val)
        self.pad_val = pad_val

    def __call__(self, src, label):
        img = _hwc(src, "DetRandomPadAug")
        height, width, _ = img.shape
        pad = self._random_pad_proposal(np.asarray(label), height, width)
        if pad:
            x, y, w, h, label = pad
            values = tuple(self.pad_val) * (img.shape[2] if len(self.pad_val) == 1 else 1)
            src = copyMakeBorder(img, y, h - y - height, x, w - x - width, 0, values=values)
        return src, label

    @staticmethod
    def _update_labels(label, pad_box, height, width):
        out = label.astype(np.float64).copy()
        out[:, (1, 3)] = (out[:, (1, 3)] * width + pad_box[0]) / pad_box[2]
        out[:, (2, 4)] = (out[:, (2, 4)] * height + pad_box[1]) / pad_box[3]
        return out.astype(label.dtype)

    def _random_pad_proposal(self, label, height, width):
        if not self.enabled or height <= 0 or width <= 0:
            return ()
        for ratio, h, max_h, _, _ in _proposal_draws(self, height, width):
            if round(h * ratio) < width:
                h = int((width + 0.499999) / ratio)
            h = min(max(h, height), max_h)
            if h < max_h:
                h = random.randint(h, max_h)
            w = int(round(h * ratio))
            if (h - height) < 2 or (w - width) < 2:
                continue    # marginal padding is not helpful
            y = random.randint(0, max(0, h - height))
            x = random.randint(0, max(0, w - width))
            return x, y, w, h, self._update_labels(label, (x, y, w, h), height, width)
        return ()


def _as_list(p):
    return list(p) if isinstance(p, list) else [p]


def CreateMultiRandCropAugmenter(min_object_covered=0.1, aspect_ratio_range=(0.75, 1.33),
                                 area_range=(0.05, 1.0), min_eject_coverage=0.3, max_attempts=50,
                                 skip_prob=0):
    """A DetRandomSelectAug over DetRandomCropAugs: each argument may be a list (one crop
    augmenter per entry; single values are repeated)."""
    params = [_as_list(p) for p in (min_object_covered, aspect_ratio_range, area_range,
                                    min_eject_coverage, max_attempts)]
    num = max(len(p) for p in params)
    for k, p in enumerate(params):
        if len(p) != num:
            if len(p) != 1:
                raise AssertionError("CreateMultiRandCropAugmenter: list arguments must have the same length")
            params[k] = p * num
    augs = [DetRandomCropAug(min_object_covered=moc, aspect_ratio_range=arr, area_range=ar,
                             min_eject_coverage=mec, max_attempts=ma)
            for moc, arr, ar, mec, ma in zip(*params)]
    return DetRandomSelectAug(augs, skip_prob=skip_prob)


def CreateDetAugmenter(data_shape, resize=0, rand_crop=0, rand_pad=0, rand_gray=0, rand_mirror=False,
                       mean=None, std=None, brightness=0, contrast=0, saturation=0, pca_noise=0, hue=0,
                       inter_method=2, min_object_covered=0.1, aspect_ratio_range=(0.75, 1.33),
                       area_range=(0.05, 3.0), min_eject_coverage=0.3, max_attempts=50,
                       pad_val=(127, 127, 127)):
    """MXNet's standard detection augmenters: short-edge resize, random crops (probability
    `rand_crop`), mirror, random padding (probability `rand_pad`), forced resize to
    data_shape, cast, colour jitters, lighting, random gray and mean/std normalization."""
    auglist = []
    if resize > 0:
        auglist.append(DetBorrowAug(ResizeAug(resize, inter_method)))
    if rand_crop > 0:
        auglist.append(CreateMultiRandCropAugmenter(min_object_covered, aspect_ratio_range, area_range,
                                                    min_eject_coverage, max_attempts, skip_prob=1 - rand_crop))
    if rand_mirror > 0:
        auglist.append(DetHorizontalFlipAug(0.5))
    if rand_pad > 0:
        pad_aug = DetRandomPadAug(aspect_ratio_range, (1.0, area_range[1]), max_attempts, pad_val)
        auglist.append(DetRandomSelectAug([pad_aug], 1 - rand_pad))
    auglist.append(DetBorrowAug(ForceResizeAug((data_shape[2], data_shape[1]), inter_method)))
    auglist.append(DetBorrowAug(CastAug()))
    if brightness or contrast or saturation:
        auglist.append(DetBorrowAug(ColorJitterAug(brightness, contrast, saturation)))
    if hue:
        auglist.append(DetBorrowAug(HueJitterAug(hue)))
    if pca_noise > 0:
        auglist.append(DetBorrowAug(LightingAug(pca_noise, IMAGENET_EIGVAL, IMAGENET_EIGVEC)))
    if rand_gray > 0:
        auglist.append(DetBorrowAug(RandomGrayAug(rand_gray)))
    mean = _channel_stats(mean, (123.68, 116.28, 103.53), "mean")
    std = _channel_stats(std, (58.395, 57.12, 57.375), "std")
    if mean is not None or std is not None:
        auglist.append(DetBorrowAug(ColorNormalizeAug(mean, std)))
    return auglist


class ImageDetIter(ImageIter):
    """ImageIter for detection: labels are (batch_size, max objects, object width) float32,
    padded with -1; the object count is the largest in the data set (read once at creation;
    `reshape` / `sync_label_shape` enlarge it). Further keyword arguments go to
    CreateDetAugmenter when `aug_list` is None."""

    def __init__(self, batch_size, data_shape, path_imgrec=None, path_imglist=None, path_root=None,
                 path_imgidx=None, shuffle=False, part_index=0, num_parts=1, aug_list=None, imglist=None,
                 data_name="data", label_name="label", last_batch_handle="pad", **kwargs):
        super().__init__(batch_size=batch_size, data_shape=data_shape, path_imgrec=path_imgrec,
                         path_imglist=path_imglist, path_root=path_root, path_imgidx=path_imgidx,
                         shuffle=shuffle, part_index=part_index, num_parts=num_parts, aug_list=[],
                         imglist=imglist, data_name=data_name, label_name=label_name,
                         last_batch_handle=last_batch_handle)
        self.auglist = CreateDetAugmenter(data_shape, **kwargs) if aug_list is None else aug_list
        self.label_shape = self._estimate_label_shape()
        self.provide_label = [_io.DataDesc(label_name, (self.batch_size,) + self.label_shape)]

    def _estimate_label_shape(self) -> tuple:
        max_count, width = 0, 5
        self.reset()
        try:
            while True:
                label, _ = self.next_sample()
                label = self._parse_label(label)
                max_count, width = max(max_count, label.shape[0]), label.shape[1]
        except StopIteration:
            pass
        self.reset()
        return (max_count, width)

    @staticmethod
    def _parse_label(label) -> np.ndarray:
        """(objects, width) of a flat [header width, object width, ..., objects...] label,
        without boxes of zero or negative size."""
        raw = np.asarray(_np(label), dtype=np.float32).ravel()
        if raw.size < 7:
            raise RuntimeError(f"Label shape is invalid: {raw.shape}")
        header_width, obj_width = int(raw[0]), int(raw[1])
        if obj_width <= 0 or (raw.size - header_width) % obj_width != 0:
            raise RuntimeError(f"Label shape {raw.shape} inconsistent with annotation width {obj_width}.")
        out = raw[header_width:].reshape(-1, obj_width)
        valid = (out[:, 3] > out[:, 1]) & (out[:, 4] > out[:, 2])
        if not valid.any():
            raise RuntimeError("Encounter sample with no valid label.")
        return out[valid]

    @staticmethod
    def _check_valid_label(label):
        if len(label.shape) != 2 or label.shape[1] < 5:
            raise RuntimeError(f"Label with shape (1+, 5+) required, {label} received.")
        valid = (label[:, 0] >= 0) & (label[:, 3] > label[:, 1]) & (label[:, 4] > label[:, 2])
        if not valid.any():
            raise RuntimeError("Invalid label occurs.")

    def _empty_label(self) -> np.ndarray:
        return np.full(self.provide_label[0].shape, -1, np.float32)

    def _prepare(self, img, label):
        self.check_valid_image([img])
        img, label = self.augmentation_transform(img, self._parse_label(label))
        self._check_valid_label(label)
        return img, label

    @staticmethod
    def _store_label(batch_label: np.ndarray, i: int, label) -> None:
        """Objects beyond the batch's object count are dropped, missing ones are -1."""
        n = min(label.shape[0], batch_label.shape[1])
        batch_label[i] = -1
        batch_label[i, :n] = label[:n, :batch_label.shape[2]]

    def augmentation_transform(self, data, label):
        """(image, label) through every detection augmenter."""
        for aug in self.auglist:
            data, label = aug(data, label)
        return data, label

    def check_label_shape(self, label_shape):
        """A new label shape may only grow the object count and keeps the object width."""
        if len(label_shape) != 2:
            raise ValueError("label_shape should have length 2")
        if label_shape[0] < self.label_shape[0]:
            raise ValueError(f"Attempts to reduce label count from {self.label_shape[0]} to {label_shape[0]}, "
                             f"not allowed.")
        if label_shape[1] != self.provide_label[0].shape[2]:
            raise ValueError(f"label_shape object width inconsistent: {self.provide_label[0].shape[2]} vs "
                             f"{label_shape[1]}.")

    def reshape(self, data_shape=None, label_shape=None):
        """Change the data shape (C, H, W) and/or the label shape (objects, width)."""
        if data_shape is not None:
            self.check_data_shape(data_shape)
            self.provide_data = [_io.DataDesc(self.provide_data[0].name, (self.batch_size,) + tuple(data_shape))]
            self.data_shape = tuple(data_shape)
        if label_shape is not None:
            self.check_label_shape(label_shape)
            self.provide_label = [_io.DataDesc(self.provide_label[0].name, (self.batch_size,) + tuple(label_shape))]
            self.label_shape = tuple(label_shape)

    def sync_label_shape(self, it, verbose=False):
        """Give this iterator and `it` (another ImageDetIter) the same, larger object count."""
        if not isinstance(it, ImageDetIter):
            raise AssertionError("Synchronize with invalid iterator.")
        mine, theirs = self.label_shape, it.label_shape
        if mine[1] != theirs[1]:
            raise AssertionError("object width mismatch.")
        max_count = max(mine[0], theirs[0])
        if max_count > mine[0]:
            self.reshape(None, (max_count, mine[1]))
        if max_count > theirs[0]:
            it.reshape(None, (max_count, theirs[1]))
        if verbose and max_count > min(mine[0], theirs[0]):
            logging.info("Resized label_shape to (%d, %d).", max_count, mine[1])
        return it
