"""Golden data of the data pipeline, made with MXNet 1.9.1 (run with the reference environment:
`/work/mxref/bin/python tests/golden/make_data.py`; never imported by the tests).

Inputs: small pictures encoded as PNG by this script (a minimal lossless encoder, so every
decoder must give the same pixels) and `data/data_input.jpg` (a committed JPEG input; JPEG
decoders may differ by a unit per pixel). Written to `tests/golden/data/`:

  data_images.rec/.idx  the pictures packed with MXNet's recordio (labels i and (i, 10 + i))
  data_det.rec/.idx     the same pictures with detection labels of 1 to 3 objects
  data_image.npz        mx.image: imdecode (colour, gray, BGR), imresize (each interp),
                        resize_short, center_crop, fixed_crop, color_normalize, copyMakeBorder
  data_ndimage.npz      nd.image: to_tensor, normalize, resize, crop, flips, adjust_lighting and the
                        random_* colour ops with a degenerate (fixed) range
  data_iters.npz        batches of ImageRecordIter / ImageRecordUInt8Iter / ImageDetRecordIter with
                        deterministic settings, plus statistics of MXNet's random augmentations

Each npz holds `<case>.out` outputs (float32 outputs holding only pixel values 0..255 are
stored as uint8 with a `<case>.float32` flag), `<case>.args` (a JSON string of the call's arguments) and,
for the iterators, `<case>.labels` / `<case>.pads`; the inputs are rebuilt from
`data_pictures.npz` (the pictures, arr_0..arr_3) and the files above, so the tests repeat each
call with symjit.
"""
from __future__ import annotations

import json
import os
import struct
import tempfile
import zlib

import mxnet as mx
import numpy as np

from data_fits import crop_extent, first_box, run_epochs, jitter_fit, lightness_offset, red_gradient_angle

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
SIZES = [(20, 24), (27, 18), (32, 32), (17, 40)]


def png(img: np.ndarray) -> bytes:
    """A PNG (8-bit, no filtering) of an HxWxC uint8 image (C = 1, 3 or 4)."""
    h, w, c = img.shape
    raw = b"".join(b"\x00" + img[y].tobytes() for y in range(h))

    def chunk(tag, body):
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", w, h, 8, {1: 0, 3: 2, 4: 6}[c], 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def picture(h: int, w: int, seed: int) -> np.ndarray:
    """Gradients plus noise, uint8 HxWx3 RGB."""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x * 7 + y * 3) % 256], -1)
    return np.clip(img + rng.randint(-30, 31, img.shape), 0, 255).astype(np.uint8)


def det_label(i: int) -> np.ndarray:
    """[header_width=3, object_width=6, extra header, objects of (id, x0, y0, x1, y1, difficult)];
    the last object of image 2 is empty (x1 < x0) and gets dropped."""
    objs = [[i % 3, 0.1, 0.15, 0.55, 0.6, 0.0], [1.0, 0.4, 0.3, 0.95, 0.9, 1.0], [2.0, 0.6, 0.1, 0.3, 0.5, 0.0]]
    return np.array([3, 6, 7.5] + sum(objs[:i % 3 + 1], []), np.float32)


class Store:
    """Arrays and call arguments of the cases of one npz file."""

    def __init__(self):
        self.arrays = {}

    def add(self, name: str, out, args: dict | None = None, **inputs):
        out = out.asnumpy() if hasattr(out, "asnumpy") else np.asarray(out)
        out = out.astype(np.float32) if out.dtype == np.float64 else out
        if out.dtype == np.float32 and np.all(np.isfinite(out)) and np.array_equal(out, np.clip(np.round(out), 0, 255)):
            out = out.astype(np.uint8)                    # pixel values: stored small, read back as float32
            self.arrays[name + ".float32"] = np.array(True)
        self.arrays[name + ".out"] = out
        self.arrays[name + ".args"] = np.array(json.dumps(args or {}))
        for key, val in inputs.items():
            self.arrays[f"{name}.{key}"] = val.asnumpy() if hasattr(val, "asnumpy") else np.asarray(val)

    def save(self, fname: str):
        np.savez_compressed(os.path.join(DATA, fname), **self.arrays)


def write_recs(pictures, jpeg: bytes):
    """The two .rec/.idx pairs (records 0..3 PNG pictures, record 4 the JPEG)."""
    payloads = [png(p) for p in pictures] + [jpeg]
    plain = mx.recordio.MXIndexedRecordIO(os.path.join(DATA, "data_images.idx"),
                                          os.path.join(DATA, "data_images.rec"), "w")
    det = mx.recordio.MXIndexedRecordIO(os.path.join(DATA, "data_det.idx"), os.path.join(DATA, "data_det.rec"), "w")
    for i, buf in enumerate(payloads):
        plain.write_idx(i, mx.recordio.pack(mx.recordio.IRHeader(0, np.array([i, 10 + i], np.float32), i, 0), buf))
        det.write_idx(i, mx.recordio.pack(mx.recordio.IRHeader(0, det_label(i), i, 0), buf))
    plain.close()
    det.close()


def image_cases(pictures, jpeg: bytes) -> Store:
    st = Store()
    buf = png(pictures[0])
    st.add("imdecode_png", mx.image.imdecode(buf), {})
    st.add("imdecode_png_gray", mx.image.imdecode(buf, flag=0), {"flag": 0})
    st.add("imdecode_png_bgr", mx.image.imdecode(buf, to_rgb=0), {"to_rgb": 0})
    st.add("imdecode_jpeg", mx.image.imdecode(jpeg), {})
    st.add("imdecode_jpeg_gray", mx.image.imdecode(jpeg, flag=0), {"flag": 0})
    src = mx.nd.array(pictures[1], dtype=np.uint8)
    for interp in range(5):
        st.add(f"imresize_up_{interp}", mx.image.imresize(src, 22, 31, interp=interp), {"w": 22, "h": 31, "interp": interp})
        st.add(f"imresize_down_{interp}", mx.image.imresize(src, 11, 9, interp=interp), {"w": 11, "h": 9, "interp": interp})
    src = mx.nd.array(pictures[3], dtype=np.uint8)
    st.add("resize_short", mx.image.resize_short(src, 12), {"size": 12})
    st.add("resize_short_nn", mx.image.resize_short(src, 25, interp=0), {"size": 25, "interp": 0})
    out, box = mx.image.center_crop(src, (16, 12))
    st.add("center_crop", out, {"size": [16, 12]}, box=np.array(box))
    out, box = mx.image.center_crop(src, (30, 20), interp=1)
    st.add("center_crop_resized", out, {"size": [30, 20], "interp": 1}, box=np.array(box))
    st.add("fixed_crop", mx.image.fixed_crop(src, 3, 2, 15, 10), {"x0": 3, "y0": 2, "w": 15, "h": 10})
    st.add("fixed_crop_resized", mx.image.fixed_crop(src, 3, 2, 15, 10, size=(9, 7), interp=1),
           {"x0": 3, "y0": 2, "w": 15, "h": 10, "size": [9, 7], "interp": 1})
    fsrc = src.astype(np.float32)
    mean, std = mx.nd.array([120.0, 110.0, 100.0]), mx.nd.array([50.0, 60.0, 70.0])
    st.add("color_normalize", mx.image.color_normalize(fsrc, mean, std), {})
    st.add("copyMakeBorder", mx.image.copyMakeBorder(src, 1, 2, 3, 4, type=0, value=9.0),
           {"top": 1, "bot": 2, "left": 3, "right": 4, "type": 0, "value": 9.0})
    return st


def ndimage_cases(pictures) -> Store:
    st = Store()
    src = mx.nd.array(pictures[0], dtype=np.uint8)
    batch = mx.nd.array(np.stack([pictures[0], pictures[0][::-1]]), dtype=np.uint8)
    st.add("to_tensor", mx.nd.image.to_tensor(src), {})
    st.add("to_tensor_batch", mx.nd.image.to_tensor(batch), {})
    t = mx.nd.image.to_tensor(src)
    args = {"mean": [0.4, 0.5, 0.6], "std": [0.2, 0.25, 0.3]}
    st.add("normalize", mx.nd.image.normalize(t, **args), args)
    st.add("normalize_batch", mx.nd.image.normalize(mx.nd.image.to_tensor(batch), **args), args)
    for name, args in [("resize", {"size": [30, 15]}), ("resize_keep", {"size": 10, "keep_ratio": True}),
                       ("resize_nn", {"size": [13, 29], "interp": 0}), ("resize_cubic", {"size": [30, 15], "interp": 2}),
                       ("resize_area", {"size": [10, 7], "interp": 3})]:
        st.add(name, mx.nd.image.resize(src, **args), args)
    st.add("resize_batch", mx.nd.image.resize(batch, size=(12, 9)), {"size": [12, 9]})
    args = {"x": 2, "y": 3, "width": 10, "height": 8}
    st.add("crop", mx.nd.image.crop(src, **args), args)
    st.add("crop_batch", mx.nd.image.crop(batch, **args), args)
    st.add("flip_left_right", mx.nd.image.flip_left_right(src), {})
    st.add("flip_top_bottom", mx.nd.image.flip_top_bottom(src), {})
    f = src.astype(np.float32)
    args = {"alpha": [0.05, -0.1, 0.2]}
    st.add("adjust_lighting", mx.nd.image.adjust_lighting(f, **args), args)
    for name, args in [("random_brightness", {"min_factor": 1.3, "max_factor": 1.3}),
                       ("random_contrast", {"min_factor": 0.7, "max_factor": 0.7}),
                       ("random_saturation", {"min_factor": 0.6, "max_factor": 0.6}),
                       ("random_hue", {"min_factor": 1.2, "max_factor": 1.2})]:
        st.add(name, getattr(mx.nd.image, name)(f, **args), args)
    for name, args in [("random_brightness_u8", {"min_factor": 1.5, "max_factor": 1.5}),
                       ("random_contrast_u8", {"min_factor": 1.4, "max_factor": 1.4}),
                       ("random_saturation_u8", {"min_factor": 1.6, "max_factor": 1.6}),
                       ("adjust_lighting_u8", {"alpha": [0.5, -0.2, 0.3]})]:
        st.add(name, getattr(mx.nd.image, name[:-3])(src, **args), args)     # uint8: saturated, truncated
    gray = mx.nd.array(pictures[0][:, :, :1], dtype=np.float32)
    for name, args in [("random_contrast_gray", {"min_factor": 0.6, "max_factor": 0.6}),
                       ("random_saturation_gray", {"min_factor": 0.6, "max_factor": 0.6})]:
        st.add(name, getattr(mx.nd.image, name[:-5])(gray, **args), args)
    for name, spec in GLUON_TRANSFORMS:
        out = mx.gluon.data.vision.transforms.Compose(
            [getattr(mx.gluon.data.vision.transforms, cls)(*a, **kw) for cls, a, kw in spec])(src)
        st.add(name, out, {"transforms": spec})
    return st


#: gluon.data.vision.transforms chains applied to picture 0: (case, [(class, args, kwargs)...])
GLUON_TRANSFORMS = [
    ("gluon_compose", [("Resize", [20], {"keep_ratio": True}), ("CenterCrop", [14], {}), ("ToTensor", [], {}),
                       ("Normalize", [[0.4, 0.5, 0.6], [0.2, 0.25, 0.3]], {})]),
    ("gluon_resize_pair_cubic", [("Resize", [[15, 11]], {"interpolation": 2})]),
    ("gluon_crop_resize", [("CropResize", [2, 3, 10, 8], {"size": [7, 9], "interpolation": 1})]),
    ("gluon_center_crop_pad", [("CenterCrop", [[30, 30]], {})]),
]


def _batches(it, epochs: int = 1):
    data, labels, pads = run_epochs(it, epochs)
    return data, labels, np.array(pads)


#: the cases run for two passes (the round_batch continuation); the others for one
TWO_EPOCHS = ("rec_center", "rec_resize_norm", "rec_mirror_labels", "rec_no_round", "rec_part", "det_default",
              "pyiter_image", "pyiter_det")

#: stands for a fresh file path: the iterator computes the mean image, saves it there (its
#: content is stored as `<case>.mean_img`) and uses it
MEAN_FILE = "<new mean image file>"

ITER_CASES = [   # the records of data_images.rec have 2 labels, which MXNet requires label_width to match
    # (case, iterator, arguments)
    ("rec_center", "ImageRecordIter", {"label_width": 2, "data_shape": [3, 16, 16], "batch_size": 2}),
    ("rec_resize_norm", "ImageRecordIter", {"label_width": 2, "data_shape": [3, 14, 18], "batch_size": 3, "resize": 20,
                                            "mean_r": 123.0, "mean_g": 117.0, "mean_b": 104.0, "std_r": 58.0,
                                            "std_g": 57.0, "std_b": 57.5, "scale": 0.5}),
    ("rec_std_only", "ImageRecordIter", {"label_width": 2, "data_shape": [3, 16, 16], "batch_size": 5, "std_r": 2.0, "std_g": 4.0,
                                         "std_b": 8.0}),
    ("rec_resize_cubic", "ImageRecordIter", {"label_width": 2, "data_shape": [3, 20, 20], "batch_size": 5, "resize": 24,
                                             "inter_method": 2}),
    ("rec_resize_area", "ImageRecordIter", {"label_width": 2, "data_shape": [3, 10, 10], "batch_size": 5, "resize": 12,
                                            "inter_method": 3}),
    ("rec_pad_fill", "ImageRecordIter", {"label_width": 2, "data_shape": [3, 18, 18], "batch_size": 5, "pad": 2, "fill_value": 40}),
    ("rec_crop_size", "ImageRecordIter", {"label_width": 2, "data_shape": [3, 12, 12], "batch_size": 5, "max_crop_size": 16,
                                          "min_crop_size": 16}),
    ("rec_mirror_labels", "ImageRecordIter", {"label_width": 2, "data_shape": [3, 16, 16], "batch_size": 4, "mirror": True}),
    ("rec_gray", "ImageRecordIter", {"label_width": 2, "data_shape": [1, 16, 16], "batch_size": 5, "mean_r": 100.0}),
    ("rec_no_round", "ImageRecordIter", {"label_width": 2, "data_shape": [3, 16, 16], "batch_size": 3, "round_batch": False}),
    ("rec_part", "ImageRecordIter", {"label_width": 2, "data_shape": [3, 16, 16], "batch_size": 2, "num_parts": 2, "part_index": 1}),
    ("rec_rotate_scale", "ImageRecordUInt8Iter", {"label_width": 2, "data_shape": [3, 16, 16], "batch_size": 5,
                                                  "rotate": 30, "max_random_scale": 0.9, "min_random_scale": 0.9,
                                                  "fill_value": 0, "resize": 24}),
    ("rec_half_turn", "ImageRecordUInt8Iter", {"label_width": 2, "data_shape": [3, 16, 16], "batch_size": 5,
                                               "rotate": 180, "fill_value": 3}),
    ("rec_min_img_size", "ImageRecordUInt8Iter", {"label_width": 2, "data_shape": [3, 20, 20], "batch_size": 5,
                                                  "min_img_size": 34, "fill_value": 7}),
    ("rec_mean_img", "ImageRecordIter", {"label_width": 2, "data_shape": [3, 10, 10], "batch_size": 5,
                                         "mean_img": MEAN_FILE, "std_r": 2.0, "std_g": 3.0, "std_b": 4.0,
                                         "scale": 0.5}),
    ("rec_uint8", "ImageRecordUInt8Iter", {"label_width": 2, "data_shape": [3, 16, 16], "batch_size": 5, "resize": 18}),
    ("det_default", "ImageDetRecordIter", {"data_shape": [3, 16, 16], "batch_size": 2}),
    ("det_shrink", "ImageDetRecordIter", {"data_shape": [3, 16, 16], "batch_size": 5, "resize_mode": "shrink",
                                          "mean_r": 100.0, "mean_g": 90.0, "mean_b": 80.0, "std_r": 50.0,
                                          "std_g": 40.0, "std_b": 30.0}),
    ("det_fit_pad_width", "ImageDetRecordIter", {"data_shape": [3, 12, 18], "batch_size": 5, "resize_mode": "fit",
                                                 "label_pad_width": 30, "label_pad_value": -2.0, "scale": 0.25}),
    ("det_mean_img", "ImageDetRecordIter", {"data_shape": [3, 10, 10], "batch_size": 5, "mean_img": MEAN_FILE,
                                            "std_r": 2.0, "scale": 0.5}),
    ("det_gray_nn", "ImageDetRecordIter", {"data_shape": [1, 16, 16], "batch_size": 5, "inter_method": 0,
                                           "mean_r": 100.0, "std_r": 20.0}),
    ("det_resize_mirror", "ImageDetRecordIter", {"data_shape": [3, 12, 12], "batch_size": 5, "resize": 14,
                                                 "rand_mirror_prob": 1.0, "inter_method": 2}),
]


PYTHON_ITER_CASES = [
    # mx.image's Python iterators with deterministic augmenter lists (CreateAugmenter /
    # CreateDetAugmenter arguments under "aug")
    ("pyiter_image", "ImageIter", {"batch_size": 2, "data_shape": [3, 16, 16], "label_width": 2,
                                   "aug": {"resize": 20, "mean": True, "std": True}}),
    ("pyiter_det", "ImageDetIter", {"batch_size": 2, "data_shape": [3, 16, 16],
                                    "aug": {"resize": 20, "mean": True, "std": True}}),
]


def python_iter(cls: str, args: dict, rec_dir: str):
    """The mx.image iterator of a PYTHON_ITER_CASES entry over the golden record files."""
    args = dict(args, data_shape=tuple(args["data_shape"]))
    aug = args.pop("aug")
    rec = "data_det" if cls == "ImageDetIter" else "data_images"
    create = mx.image.CreateDetAugmenter if cls == "ImageDetIter" else mx.image.CreateAugmenter
    return getattr(mx.image, cls)(path_imgrec=os.path.join(rec_dir, rec + ".rec"),
                                  path_imgidx=os.path.join(rec_dir, rec + ".idx"),
                                  aug_list=create(tuple(args["data_shape"]), **aug), **args)


def iter_cases() -> Store:
    st = Store()
    for name, cls, args in PYTHON_ITER_CASES:
        data, labels, pads = _batches(python_iter(cls, args, DATA), epochs=2)
        st.add(name, data, {"cls": cls, "epochs": 2, **args}, labels=labels, pads=pads)
    for name, cls, args in ITER_CASES:
        rec = "data_det.rec" if cls == "ImageDetRecordIter" else "data_images.rec"
        with tempfile.TemporaryDirectory() as tmp:
            mean_file = os.path.join(tmp, "mean.bin")
            call = {k: mean_file if v == MEAN_FILE else v for k, v in args.items()}
            it = getattr(mx.io, cls)(path_imgrec=os.path.join(DATA, rec), verbose=False, preprocess_threads=1, **call)
            epochs = 2 if name in TWO_EPOCHS else 1
            data, labels, pads = _batches(it, epochs=epochs)
            extra = {"mean_img": mx.nd.load(mean_file)["mean_img"]} if os.path.exists(mean_file) else {}
        st.add(name, data, {"cls": cls, "rec": rec, "epochs": epochs, **args}, labels=labels, pads=pads, **extra)
    random_statistics(st)
    return st


def random_statistics(st: Store):
    """Per-image statistics of MXNet's random augmentations over many draws (one iterator run
    for several epochs: MXNet seeds its augmentation engines once): the contrast factor and
    illumination offset of ImageRecordIter, its mirror rate, and the labels produced by
    ImageDetRecordIter's random colour, mirror, pad and crop."""
    rec = os.path.join(DATA, "data_images.rec")
    base = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=5, label_width=2,
                                 verbose=False).next()
    base = base.data[0].asnumpy()
    args = {"data_shape": [3, 16, 16], "batch_size": 5, "label_width": 2, "mean_r": 1.0, "mean_g": 1.0, "mean_b": 1.0,
            "max_random_contrast": 0.4, "max_random_illumination": 20.0}
    data = _batches(mx.io.ImageRecordIter(path_imgrec=rec, verbose=False, **args), epochs=40)[0]
    x = np.broadcast_to(base - 1, data.shape).reshape(-1, 3 * 16 * 16)
    fits = np.array([np.polyfit(a, b, 1) for a, b in zip(x, data.reshape(-1, 3 * 16 * 16))])  # out = c0 x + c1
    st.add("stat_contrast_illumination", fits, args)
    args = {"data_shape": [3, 16, 16], "batch_size": 5, "label_width": 2, "rand_mirror": True}
    data = _batches(mx.io.ImageRecordIter(path_imgrec=rec, verbose=False, **args), epochs=40)[0]
    flips = [bool(np.array_equal(o, b[:, :, ::-1])) for batch in data for o, b in zip(batch, base)]
    st.add("stat_rand_mirror", np.array(flips), args)
    for kind in ("brightness", "contrast", "saturation"):
        args = {"data_shape": [3, 16, 16], "batch_size": 5, "label_width": 2, kind: 0.3}
        data = _batches(mx.io.ImageRecordIter(path_imgrec=rec, verbose=False, **args), epochs=8)[0]
        st.add(f"stat_{kind}", [jitter_fit(kind, a, b) for batch in data for a, b in zip(batch, base)], args)
    args = {"data_shape": [3, 16, 16], "batch_size": 5, "label_width": 2, "random_l": 20}
    data = _batches(mx.io.ImageRecordUInt8Iter(path_imgrec=rec, verbose=False, **args), epochs=40)[0]
    st.add("stat_random_l", [lightness_offset(a, b) for batch in data for a, b in zip(batch, base)], args)
    args = {"data_shape": [3, 16, 16], "batch_size": 5, "label_width": 2, "resize": 24, "max_rotate_angle": 30,
            "fill_value": 0}
    data = _batches(mx.io.ImageRecordUInt8Iter(path_imgrec=rec, verbose=False, **args), epochs=40)[0]
    st.add("stat_rotate", [red_gradient_angle(a) for batch in data for a in batch], args)
    args = {"data_shape": [3, 16, 16], "batch_size": 5, "label_width": 2, "random_resized_crop": True,
            "min_random_area": 0.2, "max_random_area": 1.0, "min_aspect_ratio": 0.75, "max_aspect_ratio": 1.33}
    data = _batches(mx.io.ImageRecordUInt8Iter(path_imgrec=rec, verbose=False, **args), epochs=40)[0]
    st.add("stat_random_resized_crop", [crop_extent(a) for batch in data for a in batch[:4]], args)  # PNG pictures
    for name, extra in (("stat_affine_scale_aspect", {"max_aspect_ratio": 0.3, "max_random_scale": 1.2,
                                                      "min_random_scale": 0.8}),
                        ("stat_affine_aspect_range", {"max_aspect_ratio": 0.3, "min_aspect_ratio": 0.8})):
        args = {"data_shape": [3, 16, 16], "batch_size": 5, "label_width": 2, "resize": 24, **extra}
        data = _batches(mx.io.ImageRecordUInt8Iter(path_imgrec=rec, verbose=False, **args), epochs=40)[0]
        st.add(name, [crop_extent(a) for batch in data for a in batch[:4]], args)
    det = os.path.join(DATA, "data_det.rec")
    args = {"data_shape": [3, 16, 16], "batch_size": 5}
    det_base = mx.io.ImageDetRecordIter(path_imgrec=det, verbose=False, **args).next().data[0].asnumpy()
    args.update(random_contrast_prob=1.0, max_random_contrast=0.5)
    data = _batches(mx.io.ImageDetRecordIter(path_imgrec=det, verbose=False, **args), epochs=8)[0]
    st.add("stat_det_contrast", [jitter_fit("brightness", a, b) for batch in data for a, b in zip(batch, det_base)], args)
    crop = {"rand_crop_prob": 1.0, "min_crop_scales": [0.3], "max_crop_scales": [1.0],
            "min_crop_aspect_ratios": [0.5], "max_crop_aspect_ratios": [2.0]}
    for name, extra in (("stat_det_crop_boxes", crop), ("stat_det_pad_boxes", {"rand_pad_prob": 1.0, "max_pad_scale": 2.0})):
        args = {"data_shape": [3, 16, 16], "batch_size": 5, **extra}
        labels = _batches(mx.io.ImageDetRecordIter(path_imgrec=det, verbose=False, **args), epochs=60)[1]
        st.add(name, first_box(labels.reshape(-1, labels.shape[-1])), args)
    args = {"data_shape": [3, 16, 16], "batch_size": 5, "rand_crop_prob": 1.0, "min_crop_scales": [0.3],
            "max_crop_scales": [1.0], "min_crop_aspect_ratios": [0.5], "max_crop_aspect_ratios": [2.0],
            "rand_pad_prob": 0.5, "max_pad_scale": 2.0, "rand_mirror_prob": 0.5,
            "random_contrast_prob": 0.5, "max_random_contrast": 0.3}
    labels = _batches(mx.io.ImageDetRecordIter(path_imgrec=det, verbose=False, **args), epochs=20)[1]
    st.add("stat_det_random", labels.reshape(-1, labels.shape[-1]), args)


def main():
    os.makedirs(DATA, exist_ok=True)
    pictures = [picture(h, w, seed) for seed, (h, w) in enumerate(SIZES)]
    with open(os.path.join(DATA, "data_input.jpg"), "rb") as f:
        jpeg = f.read()
    write_recs(pictures, jpeg)
    image_cases(pictures, jpeg).save("data_image.npz")
    ndimage_cases(pictures).save("data_ndimage.npz")
    iter_cases().save("data_iters.npz")
    np.savez_compressed(os.path.join(DATA, "data_pictures.npz"), *pictures)


if __name__ == "__main__":
    main()
