"""A small synthetic image classification set written as JPEG files in class folders
(`root/<class>/<n>.jpg`, the layout of ImageFolderDataset and of im2rec's `--recursive` lists).

Each class is a coloured shape on a noisy grey background, placed and sized at random, so the
classes are told apart by colour and shape, not by position; random crops and flips keep the
class. Files are encoded by OpenCV, as MXNet's im2rec does."""
from __future__ import annotations

import os

import cv2
import numpy as np

#: class name -> (RGB colour, shape)
CLASSES = {
    "blue_bar": ((40, 60, 220), "bar"),
    "green_disc": ((40, 200, 60), "disc"),
    "red_square": ((220, 40, 40), "square"),
    "yellow_cross": ((230, 210, 30), "cross"),
}


def draw(shape: str, colour, side: int, rng: np.random.Generator) -> np.ndarray:
    """One side x side RGB uint8 picture of `shape` in `colour`."""
    img = np.clip(rng.normal(128, 25, (side, side, 3)), 0, 255).astype(np.uint8)
    r = int(rng.integers(side // 5, side // 3 + 1))
    cy, cx = (int(v) for v in rng.integers(r, side - r, 2))
    c = tuple(int(v) for v in colour)
    if shape == "square":
        cv2.rectangle(img, (cx - r, cy - r), (cx + r, cy + r), c, -1)
    elif shape == "disc":
        cv2.circle(img, (cx, cy), r, c, -1)
    elif shape == "bar":
        cv2.rectangle(img, (0, cy - r // 2), (side - 1, cy + r // 2), c, -1)
    else:
        t = max(1, r // 3)
        cv2.rectangle(img, (cx - r, cy - t), (cx + r, cy + t), c, -1)
        cv2.rectangle(img, (cx - t, cy - r), (cx + t, cy + r), c, -1)
    return img


def write_image_folder(root, per_class: int, side: int, seed: int = 0) -> list:
    """Writes per_class JPEGs per class under root/<class>/; returns [(relative path, label)]
    in class order (labels are the indices of the sorted class names)."""
    rng = np.random.default_rng(seed)
    items = []
    for label, name in enumerate(sorted(CLASSES)):
        colour, shape = CLASSES[name]
        os.makedirs(os.path.join(root, name), exist_ok=True)
        for n in range(per_class):
            rel = os.path.join(name, f"{n:04d}.jpg")
            bgr = np.ascontiguousarray(draw(shape, colour, side, rng)[:, :, ::-1])
            assert cv2.imwrite(os.path.join(root, rel), bgr, [cv2.IMWRITE_JPEG_QUALITY, 95])
            items.append((rel, label))
    return items
