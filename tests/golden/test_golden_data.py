"""The data pipeline against golden data made with MXNet 1.9.1 (tests/golden/make_data.py):
mx.image functions, nd.image operators, ImageRecordIter / ImageRecordUInt8Iter /
ImageDetRecordIter batches on .rec files packed by MXNet, and the statistics of MXNet's random
augmentations.

Tolerances: PNG and the committed JPEG decode to MXNet's exact pixels (measured difference 0;
JPEG decoders may in general differ by 1 per pixel, so JPEG is allowed 1). Bicubic resizing
(interp 2) is allowed 1 per uint8 pixel: MXNet's OpenCV 3.x rounds its fixed-point bicubic
differently from the OpenCV symjit uses (measured maximum: 1); every other interpolation
matches exactly. The affine step (rotate / scale / min_img_size, OpenCV's warpAffine) is
allowed 2 per pixel and a mean difference of 0.2 (measured: maximum 2 at two corner pixels,
11% of the pixels off by 1, mean 0.12). Float outputs are compared at rtol 1e-5 (the hue rotation at 1e-3 absolute,
a float32 HLS round trip).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import symjit as mx
from symjit import recordio
from golden.data_fits import crop_extent, first_box, run_epochs, jitter_fit, lightness_offset, red_gradient_angle

DATA = Path(__file__).resolve().parent / "data"


def _cases(fname: str) -> tuple:
    z = np.load(DATA / fname)
    return z, sorted({k.rsplit(".", 1)[0] for k in z.files})


def _out(z, name: str) -> np.ndarray:
    """A case's output (float32 pixel values are stored as uint8 with a `.float32` flag)."""
    out = z[name + ".out"]
    return out.astype(np.float32) if name + ".float32" in z.files else out


def _args(z, name: str) -> dict:
    args = json.loads(str(z[name + ".args"]))
    return {k: tuple(v) if k in ("size", "data_shape") and isinstance(v, list) else v for k, v in args.items()}


@pytest.fixture(scope="module")
def pictures():
    z = np.load(DATA / "data_pictures.npz")
    return [z[f"arr_{i}"] for i in range(len(z.files))]


IMAGE, IMAGE_CASES = _cases("data_image.npz")
NDIMAGE, NDIMAGE_CASES = _cases("data_ndimage.npz")
ITERS, ITER_NAMES = _cases("data_iters.npz")
ITER_CASES = [n for n in ITER_NAMES if not n.startswith("stat_")]


def _png_of_picture0() -> bytes:
    r = recordio.MXIndexedRecordIO(str(DATA / "data_images.idx"), str(DATA / "data_images.rec"), "r")
    try:
        return recordio.unpack(r.read_idx(0))[1]
    finally:
        r.close()


def _image_call(name: str, args: dict, pictures):
    src1 = mx.nd.array(pictures[1], dtype=np.uint8)
    src3 = mx.nd.array(pictures[3], dtype=np.uint8)
    if name.startswith("imdecode"):
        buf = _png_of_picture0() if "png" in name else (DATA / "data_input.jpg").read_bytes()
        return mx.image.imdecode(buf, **args)
    if name.startswith("imresize"):
        return mx.image.imresize(src1, **args)
    if name.startswith("center_crop"):
        return mx.image.center_crop(src3, **args)[0]
    if name == "color_normalize":
        return mx.image.color_normalize(src3.astype(np.float32), mx.nd.array([120.0, 110.0, 100.0]),
                                        mx.nd.array([50.0, 60.0, 70.0]))
    fn = {"resize_short": mx.image.resize_short, "fixed_crop": mx.image.fixed_crop,
          "copyMakeBorder": mx.image.copyMakeBorder}[name.split("_nn")[0].replace("_resized", "")]
    return fn(src3, **args)


def _uint8_tolerance(name: str, args: dict) -> int:
    """1 for JPEG decoding and bicubic resizing (see the module docstring), else 0."""
    bicubic = args.get("interp") == 2 or (name.startswith("resize_short") and "interp" not in args)
    return 1 if bicubic or "jpeg" in name else 0


@pytest.mark.parametrize("name", IMAGE_CASES)
def test_mx_image_functions_match_mxnet(name, pictures):
    args = _args(IMAGE, name)
    out = _image_call(name, args, pictures).asnumpy()
    ref = _out(IMAGE, name)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    if ref.dtype == np.uint8:
        assert np.abs(out.astype(int) - ref).max() <= _uint8_tolerance(name, args)
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-5)
    if name.startswith("center_crop"):
        box = mx.image.center_crop(mx.nd.array(pictures[3], dtype=np.uint8), **args)[1]
        assert tuple(box) == tuple(IMAGE[name + ".box"])


def _ndimage_input(name: str, pictures):
    src = pictures[0]
    if name.endswith("_batch"):
        src = np.stack([pictures[0], pictures[0][::-1]])
    x = mx.nd.array(src, dtype=np.uint8)
    op = name.replace("_batch", "")
    if op.startswith("resize"):
        op = "resize"
    if op.endswith("_u8"):                 # the colour ops on uint8 pixels
        return op[:-3], x
    if op.endswith("_gray"):               # on one float channel
        return op[:-5], mx.nd.array(pictures[0][:, :, :1], dtype=np.float32)
    if op == "adjust_lighting" or op.startswith("random_"):
        x = x.astype(np.float32)
    if op == "normalize":
        x = mx.nd.image.to_tensor(x)
    return op, x


def _gluon_transforms(spec):
    T = mx.gluon.data.vision.transforms
    return T.Compose([getattr(T, cls)(*[tuple(v) if isinstance(v, list) and cls != "Normalize" else v for v in a],
                                      **{k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()})
                      for cls, a, kw in spec])


@pytest.mark.parametrize("name", NDIMAGE_CASES)
def test_nd_image_ops_match_mxnet(name, pictures):
    args = _args(NDIMAGE, name)
    op, x = _ndimage_input(name, pictures)
    mx.random.seed(0)
    if name.startswith("gluon_"):     # gluon.data.vision.transforms chains on picture 0
        out = _gluon_transforms(args["transforms"])(x).asnumpy()
        args = {"interp": 2} if "cubic" in name else {}
    else:
        out = getattr(mx.nd.image, op)(x, **args).asnumpy()
    ref = _out(NDIMAGE, name)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    if ref.dtype == np.uint8:
        assert np.abs(out.astype(int) - ref).max() <= (1 if args.get("interp") == 2 else 0)
    else:
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-3 if op == "random_hue" else 1e-4)


def _run_epochs(it, epochs: int = 2):
    return run_epochs(it, epochs)


def _first_batch(cls: str = "ImageRecordIter") -> np.ndarray:
    """The first batch (5 images, 16x16, no augmentation) of data_images.rec."""
    it = getattr(mx.io, cls)(path_imgrec=str(DATA / "data_images.rec"), data_shape=(3, 16, 16), batch_size=5,
                             label_width=2)
    return it.next().data[0].asnumpy()


def _filled_slots(args: dict, num_batches: int, num_records: int = 5) -> list:
    """How many slots of each batch hold a sample (MXNet leaves the rest of a short batch
    unset, and its ImageRecordIter reports pad 0 for it)."""
    if args.get("round_batch", True):
        return [args["batch_size"]] * num_batches
    per_epoch = -(-num_records // args["batch_size"])
    return [min(args["batch_size"], num_records - (i % per_epoch) * args["batch_size"]) for i in range(num_batches)]


def _make_iter(cls: str, args: dict):
    """The iterator of a golden case: an mx.io record iterator, or an mx.image Python iterator
    whose augmenter list CreateAugmenter / CreateDetAugmenter makes from args["aug"]."""
    if cls in ("ImageIter", "ImageDetIter"):
        aug = args.pop("aug")
        rec = "data_det" if cls == "ImageDetIter" else "data_images"
        create = mx.image.CreateDetAugmenter if cls == "ImageDetIter" else mx.image.CreateAugmenter
        return getattr(mx.image, cls)(path_imgrec=str(DATA / (rec + ".rec")), path_imgidx=str(DATA / (rec + ".idx")),
                                      aug_list=create(tuple(args["data_shape"]), **aug), **args)
    return getattr(mx.io, cls)(path_imgrec=str(DATA / args.pop("rec")), **args)


@pytest.mark.parametrize("name", ITER_CASES)
def test_record_iterators_match_mxnet(name, tmp_path):
    args = _args(ITERS, name)
    cls, epochs = args.pop("cls"), args.pop("epochs")
    mean_file = tmp_path / "mean.bin"          # a case's new mean image file (see make_data.MEAN_FILE)
    call = {k: str(mean_file) if k == "mean_img" else v for k, v in args.items()}
    data, labels, pads = _run_epochs(_make_iter(cls, call), epochs)
    if "mean_img" in args:                    # computed and saved as MXNet does
        np.testing.assert_allclose(mx.nd.load(str(mean_file))["mean_img"].asnumpy(), ITERS[name + ".mean_img"],
                                   rtol=1e-5)
    ref = _out(ITERS, name)
    assert data.shape == ref.shape and data.dtype == ref.dtype
    assert pads == ITERS[name + ".pads"].tolist()
    std = min([args.get(k, 1.0 if cls != "ImageDetRecordIter" else 0.0) or 1.0 for k in ("std_r", "std_g", "std_b")])
    pixel = args.get("scale", 1.0) / std      # one uint8 step at the output
    if "aug" in args:                         # bicubic resize, then ImageNet's std (about 57)
        pixel = 1 / 57.0 if args["aug"].get("std") else 1.0
    affine = any(k in args for k in ("rotate", "min_img_size", "max_random_scale"))
    bicubic = args.get("inter_method") == 2 or "aug" in args
    atol = pixel * (2 if affine else 1 if bicubic else 1e-4)
    for k, n in enumerate(_filled_slots(args, len(data))):
        np.testing.assert_allclose(data[k, :n], ref[k, :n], rtol=1e-6, atol=atol)
        np.testing.assert_allclose(labels[k, :n], ITERS[name + ".labels"][k, :n], rtol=1e-6)
    if affine:   # OpenCV's fixed-point warpAffine rounds a few pixels differently across versions
        assert np.mean(np.abs(data.astype(np.float64) - ref)) <= 0.2 * pixel


def test_image_record_iter_contrast_and_illumination_ranges():
    """Per image, MXNet gives out = c * (x - mean) + i with c in [1 - 0.4, 1 + 0.4] and i in
    [-20, 20]: symjit's draws lie in the same ranges and spread over them alike."""
    args = _args(ITERS, "stat_contrast_illumination")
    ref = _out(ITERS, "stat_contrast_illumination")
    rec = str(DATA / "data_images.rec")
    x = _first_batch().reshape(5, -1) - 1
    data = _run_epochs(mx.io.ImageRecordIter(path_imgrec=rec, **args), epochs=40)[0]
    fits = np.array([np.polyfit(a, b, 1) for batch in data for a, b in zip(x, batch.reshape(5, -1))])
    for got, want, (lo, hi) in ((fits[:, 0], ref[:, 0], (0.6, 1.4)), (fits[:, 1], ref[:, 1], (-20, 20))):
        assert lo - 1e-3 <= want.min() and want.max() <= hi + 1e-3        # MXNet's documented range
        assert lo - 1e-3 <= got.min() and got.max() <= hi + 1e-3
        assert got.std() > 0.3 * (hi - lo) / np.sqrt(12) and abs(got.mean() - want.mean()) < 0.25 * (hi - lo)


def test_image_record_iter_rand_mirror_rate():
    args = _args(ITERS, "stat_rand_mirror")
    ref = _out(ITERS, "stat_rand_mirror")
    rec = str(DATA / "data_images.rec")
    base = _first_batch()
    data = _run_epochs(mx.io.ImageRecordIter(path_imgrec=rec, **args), epochs=40)[0]
    flips = [np.array_equal(o, b[:, :, ::-1]) for batch in data for o, b in zip(batch, base)]
    assert 0.35 < np.mean(ref) < 0.65 and 0.35 < np.mean(flips) < 0.65


def test_det_random_augmentations_keep_labels_valid_like_mxnet():
    """Random colour, mirror, pad and crop: as in MXNet's output, every kept object's box lies
    in [0, 1] with positive size, the header is kept, images keep at least one object, and
    the crop / pad change the boxes (their spread resembles MXNet's)."""
    args = _args(ITERS, "stat_det_random")
    ref = _out(ITERS, "stat_det_random")
    it = mx.io.ImageDetRecordIter(path_imgrec=str(DATA / "data_det.rec"), **args)
    rows = _run_epochs(it, 20)[1].reshape(-1, ref.shape[1])
    assert rows.shape[1] == ref.shape[1]

    def boxes(table):
        out = []
        for row in table:
            n = int(row[3])
            label = row[4:4 + n]
            assert label[:3].tolist() == [3, 6, 7.5] and (n - 3) % 6 == 0 and n >= 9
            assert np.all(row[4 + n:] == -1)
            out.append(label[3:].reshape(-1, 6))
        return np.concatenate(out)
    got, want = boxes(rows), boxes(ref)
    for b in (got, want):
        assert np.all((b[:, 1:5] >= 0) & (b[:, 1:5] <= 1))
        assert np.all((b[:, 3] > b[:, 1]) & (b[:, 4] > b[:, 2]))
    widths_got, widths_want = got[:, 3] - got[:, 1], want[:, 3] - want[:, 1]
    assert abs(widths_got.mean() - widths_want.mean()) < 0.15
    assert widths_got.std() > 0.05 and widths_want.std() > 0.05


@pytest.mark.parametrize("kind", ["brightness", "contrast", "saturation"])
def test_image_record_iter_colour_jitter_follows_mxnet(kind):
    """MXNet's iterator rounds each jitter to uint8 and weighs (R, G, B) by (0.114, 0.587, 0.299):
    symjit's output fits the same model (residual <= 1, as MXNet's) with alpha in [0.7, 1.3]."""
    args = _args(ITERS, f"stat_{kind}")
    ref = _out(ITERS, f"stat_{kind}")
    rec = str(DATA / "data_images.rec")
    base = _first_batch()
    data = _run_epochs(mx.io.ImageRecordIter(path_imgrec=rec, **args), epochs=8)[0]
    got = np.array([jitter_fit(kind, a, b) for batch in data for a, b in zip(batch, base)])
    for fits in (ref, got):
        assert fits[:, 1].max() <= 1.0
        assert 0.7 - 1e-2 <= fits[:, 0].min() and fits[:, 0].max() <= 1.3 + 1e-2
        assert fits[:, 0].std() > 0.1


def test_image_record_iter_hls_offsets_are_peaked_as_mxnet():
    """random_l: MXNet draws the lightness offset int((2 r - 1) v), r = (u1 + 4 u2) / 5 (std
    0.48 v, mean |offset| 0.38 v, where a uniform draw gives 0.58 v and 0.5 v): symjit's
    offsets have MXNet's spread."""
    args = _args(ITERS, "stat_random_l")
    ref = _out(ITERS, "stat_random_l")
    rec = str(DATA / "data_images.rec")
    base = _first_batch("ImageRecordUInt8Iter")
    data = _run_epochs(mx.io.ImageRecordUInt8Iter(path_imgrec=rec, **args), epochs=40)[0]
    got = np.array([lightness_offset(a, b) for batch in data for a, b in zip(batch, base)])
    for offsets in (ref, got):
        assert np.abs(offsets).max() <= 20
        assert 0.40 * 20 < offsets.std() < 0.53 * 20       # between the peaked (0.48) and uniform (0.58) laws
    assert abs(got.std() - ref.std()) < 0.08 * 20


def test_image_record_iter_rotation_angles_spread_as_mxnet():
    """max_rotate_angle=30: the angle each picture's red gradient turned (uniform integer
    angles in [-30, 30], std 17.6) spreads as in MXNet's output, and rotates the same way."""
    args = _args(ITERS, "stat_rotate")
    ref = np.asarray(_out(ITERS, "stat_rotate"))
    data = _run_epochs(mx.io.ImageRecordUInt8Iter(path_imgrec=str(DATA / "data_images.rec"), **args), epochs=40)[0]
    got = np.array([red_gradient_angle(a) for batch in data for a in batch])
    assert abs(got.std() - ref.std()) < 2.5 and abs(got.mean() - ref.mean()) < 4
    assert np.percentile(got, 5) < -20 and np.percentile(got, 95) > 15


@pytest.mark.parametrize("name", ["stat_random_resized_crop", "stat_affine_scale_aspect", "stat_affine_aspect_range"])
def test_image_record_iter_random_crop_and_scale_spread_as_mxnet(name):
    """random_resized_crop (area in [0.2, 1], aspect ratio in [0.75, 1.33]) and the affine
    step's random scale and aspect ratio (1 +- max_aspect_ratio, or [min_aspect_ratio,
    max_aspect_ratio] in either order): the kept width and height fractions (read from the
    pictures' gradients) have MXNet's percentiles."""
    args = _args(ITERS, name)
    ref = np.asarray(_out(ITERS, name))
    data = _run_epochs(mx.io.ImageRecordUInt8Iter(path_imgrec=str(DATA / "data_images.rec"), **args), epochs=40)[0]
    got = np.array([crop_extent(a) for batch in data for a in batch[:4]])
    for q in (5, 50, 95):
        np.testing.assert_allclose(np.percentile(got, q, axis=0), np.percentile(ref, q, axis=0), atol=0.07)
        assert abs(np.percentile(got.prod(1), q) - np.percentile(ref.prod(1), q)) < 0.07


@pytest.mark.parametrize("name", ["stat_det_crop_boxes", "stat_det_pad_boxes"])
def test_det_random_crop_and_pad_move_boxes_as_mxnet(name):
    """ImageDetRecordIter's crop samplers (scale in [0.3, 1], aspect ratio in [0.5, 2]) and
    random pad (scale up to 2): the first object's box (x0, y0, width, height) after the
    augmentation has MXNet's percentiles (300 draws each)."""
    args = _args(ITERS, name)
    ref = np.asarray(_out(ITERS, name))
    labels = _run_epochs(mx.io.ImageDetRecordIter(path_imgrec=str(DATA / "data_det.rec"), **args), epochs=60)[1]
    got = first_box(labels.reshape(-1, labels.shape[-1]))
    for q in (10, 50, 90):
        np.testing.assert_allclose(np.percentile(got, q, axis=0), np.percentile(ref, q, axis=0), atol=0.05)


@pytest.mark.parametrize("stem", ["data_images", "data_det"])
def test_recordio_writes_mxnet_files_byte_for_byte(stem, tmp_path):
    """Repacking the records of a file MXNet's recordio wrote (headers, label arrays, image
    bytes) with symjit's recordio gives the same .rec and .idx bytes."""
    reader = recordio.MXIndexedRecordIO(str(DATA / f"{stem}.idx"), str(DATA / f"{stem}.rec"), "r")
    writer = recordio.MXIndexedRecordIO(str(tmp_path / "x.idx"), str(tmp_path / "x.rec"), "w")
    for key in reader.keys:
        header, payload = recordio.unpack(reader.read_idx(key))
        label = header.label if header.flag else float(header.label)
        writer.write_idx(key, recordio.pack(recordio.IRHeader(0, label, header.id, header.id2), payload))
    reader.close()
    writer.close()
    assert (tmp_path / "x.rec").read_bytes() == (DATA / f"{stem}.rec").read_bytes()
    assert (tmp_path / "x.idx").read_bytes() == (DATA / f"{stem}.idx").read_bytes()


def test_det_contrast_scales_pixels_as_mxnet():
    """ImageDetRecordIter's contrast (probability 1, max 0.5): each picture becomes rint(c * x)
    with c = 1 + U(-0.5, 0.5) (OpenCV's convertTo) before the final resize, so the fitted c
    spreads over [0.5, 1.5] and the fit's residuals (from pixels saturated before resizing)
    are as small as in MXNet's output."""
    args = _args(ITERS, "stat_det_contrast")
    ref = _out(ITERS, "stat_det_contrast")
    rec = str(DATA / "data_det.rec")
    base = mx.io.ImageDetRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=5).next().data[0].asnumpy()
    data = _run_epochs(mx.io.ImageDetRecordIter(path_imgrec=rec, **args), epochs=8)[0]
    got = np.array([jitter_fit("brightness", a, b) for batch in data for a, b in zip(batch, base)])
    for fits in (ref, got):
        assert 0.5 - 1e-2 <= fits[:, 0].min() and fits[:, 0].max() <= 1.5 + 1e-2 and fits[:, 0].std() > 0.15
    assert np.median(got[:, 1]) <= np.median(ref[:, 1]) + 2
