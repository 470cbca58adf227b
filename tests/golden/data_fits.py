"""Helpers shared by the data-pipeline golden generator (make_data.py) and its tests: numpy only
(they work on MXNet's and symjit's iterators alike)."""
from __future__ import annotations

import numpy as np


def run_epochs(it, epochs: int = 1) -> tuple:
    """(data, labels, pads) of every batch of `epochs` passes of a data iterator, stacked; reset
    between passes only (MXNet prefetches from its construction, so a reset before the first
    pass is racy)."""
    data, labels, pads = [], [], []
    for epoch in range(epochs):
        if epoch:
            it.reset()
        for b in it:
            data.append(b.data[0].asnumpy())
            labels.append(b.label[0].asnumpy())
            pads.append(b.pad)
    return np.stack(data), np.stack(labels), pads

def jitter_fit(kind: str, out: np.ndarray, src: np.ndarray) -> tuple:
    """(alpha, largest residual) of out = rint(alpha * src + (1 - alpha) * grey) for one CxHxW
    image, grey being 0 (brightness), the mean or the per-pixel luma with the weights
    (0.114, 0.587, 0.299) for (R, G, B) (contrast, saturation), fitted on unsaturated pixels."""
    luma = np.tensordot(np.array([0.114, 0.587, 0.299]), src, axes=1)[None]
    grey = {"brightness": 0.0, "contrast": luma.mean(), "saturation": luma}[kind]
    free = (out > 0) & (out < 255)
    d_out, d_src = np.where(free, out - grey, 0), np.where(free, src - grey, 0)
    alpha = float(np.sum(d_out * d_src) / np.sum(d_src * d_src))
    model = np.clip(np.rint(alpha * src + (1 - alpha) * grey), 0, 255)
    return alpha, float(np.abs(out - model).max())


def lightness_offset(out: np.ndarray, src: np.ndarray) -> float:
    """The median change of HLS lightness ((max + min) / 2 of the channels) between two CxHxW
    RGB images: the offset an HLS lightness jitter added."""
    def lightness(img):
        img = img.astype(np.float64)
        return (img.max(axis=0) + img.min(axis=0)) / 2
    return float(np.median(lightness(out) - lightness(src)))


def red_gradient_angle(img: np.ndarray, margin: int = 3) -> float:
    """The direction (degrees) of the red channel's gradient inside a CxHxW image, away from
    `margin` border pixels: on pictures whose red grows along x, the angle a rotation turned."""
    red = img[0].astype(np.float64)[margin:-margin, margin:-margin]
    y, x = np.mgrid[0:red.shape[0], 0:red.shape[1]]
    design = np.stack([x.ravel(), y.ravel(), np.ones(red.size)], 1)
    gx, gy, _ = np.linalg.lstsq(design, red.ravel(), rcond=None)[0]
    return float(np.degrees(np.arctan2(gy, gx)))


def crop_extent(img: np.ndarray) -> tuple:
    """(width, height) fractions of a picture that a crop resized to the CxHxW `img` kept, read
    from the slopes of its red (grows along x) and green (grows along y) channels."""
    h, w = img.shape[1:]
    y, x = np.mgrid[0:h, 0:w]
    design = np.stack([x.ravel(), y.ravel(), np.ones(h * w)], 1)
    red = np.linalg.lstsq(design, img[0].astype(np.float64).ravel(), rcond=None)[0]
    green = np.linalg.lstsq(design, img[1].astype(np.float64).ravel(), rcond=None)[0]
    return float(red[0] * (w - 1) / 255), float(green[1] * (h - 1) / 255)


def first_box(rows: np.ndarray) -> np.ndarray:
    """(x0, y0, width, height) of the first object of each ImageDetRecordIter label row
    ([c, h, w, n, header (3 numbers), objects of 6...])."""
    obj = rows[:, 4 + 3:4 + 3 + 6]
    return np.stack([obj[:, 1], obj[:, 2], obj[:, 3] - obj[:, 1], obj[:, 4] - obj[:, 2]], 1)
