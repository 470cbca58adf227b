"""Small images and record files the data-pipeline tests build (encoded with OpenCV, which
MXNet's im2rec uses, so the files are what MXNet tools write)."""
from __future__ import annotations

import os

import cv2
import numpy as np

from symjit import recordio


def picture(h: int, w: int, seed: int = 0) -> np.ndarray:
    """A uint8 HxWx3 (RGB) picture: gradients plus noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) % 256], -1)
    return np.clip(img + rng.integers(-20, 21, img.shape), 0, 255).astype(np.uint8)


def encode(rgb: np.ndarray, ext: str = ".png") -> bytes:
    """`rgb` (RGB or RGBA) encoded by OpenCV (which takes BGR / BGRA)."""
    order = [2, 1, 0, 3][:rgb.shape[2]]
    ok, buf = cv2.imencode(ext, np.ascontiguousarray(rgb[:, :, order]))
    assert ok
    return buf.tobytes()


def write_rec(dirpath, images, labels, name="data", ext=".png"):
    """A .rec/.idx pair of `images` (RGB arrays) under keys 0..n-1; returns (rec, idx) paths."""
    rec, idx = os.path.join(dirpath, name + ".rec"), os.path.join(dirpath, name + ".idx")
    w = recordio.MXIndexedRecordIO(idx, rec, "w")
    for i, (img, lab) in enumerate(zip(images, labels)):
        w.write_idx(i, recordio.pack(recordio.IRHeader(0, lab, i, 0), encode(img, ext)))
    w.close()
    return rec, idx


def numbered_rec(dirpath, count: int, h: int, w: int):
    """(images, rec, idx): `count` pictures of h x w labelled 0.0, 1.0, ... under keys 0, 1, ..."""
    images = [picture(h, w, seed=i) for i in range(count)]
    rec, idx = write_rec(str(dirpath), images, [float(i) for i in range(count)])
    return images, rec, idx
