"""mx.image: decoding (against OpenCV's decoder, which MXNet uses), resizing and cropping
(against numpy references), the augmenters (against their formulas with the same random
draws) and ImageIter's batches, padding and resets over record files and image lists."""
from __future__ import annotations

import json
import random

import cv2
import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from data_pipeline.image_files import encode, numbered_rec, picture


def bilinear_reference(img: np.ndarray, w: int, h: int) -> np.ndarray:
    """Bilinear resize with pixel centres aligned (src = (dst + 0.5) * scale - 0.5, clamped)."""
    def coords(n_out, n_in):
        pos = np.clip((np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5, 0, n_in - 1)
        lo = np.floor(pos).astype(int)
        return lo, np.minimum(lo + 1, n_in - 1), pos - lo
    y0, y1, fy = coords(h, img.shape[0])
    x0, x1, fx = coords(w, img.shape[1])
    s = img.astype(np.float64)
    top = s[y0][:, x0] * (1 - fx)[None, :, None] + s[y0][:, x1] * fx[None, :, None]
    bot = s[y1][:, x0] * (1 - fx)[None, :, None] + s[y1][:, x1] * fx[None, :, None]
    return top * (1 - fy)[:, None, None] + bot * fy[:, None, None]


@pytest.fixture
def rgb():
    return picture(30, 40)


def test_imdecode_png_is_lossless_and_channel_orders(rgb):
    buf = encode(rgb)
    out = mx.image.imdecode(buf)
    assert isinstance(out, mx.nd.NDArray) and out.dtype == np.uint8 and out.shape == (30, 40, 3)
    np.testing.assert_array_equal(out.asnumpy(), rgb)
    np.testing.assert_array_equal(mx.image.imdecode(buf, to_rgb=0).asnumpy(), rgb[:, :, ::-1])
    gray = mx.image.imdecode(buf, flag=0)
    assert gray.shape == (30, 40, 1)
    ref_gray = cv2.imdecode(np.frombuffer(buf, np.uint8), cv2.IMREAD_GRAYSCALE)   # MXNet's decoder
    np.testing.assert_array_equal(gray.asnumpy()[:, :, 0], ref_gray)
    assert np.abs(ref_gray.astype(int) - cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)).max() <= 1
    # numpy and NDArray buffers decode the same
    np.testing.assert_array_equal(mx.image.imdecode(np.frombuffer(buf, np.uint8)).asnumpy(), rgb)
    np.testing.assert_array_equal(mx.image.imdecode(mx.nd.array(np.frombuffer(buf, np.uint8))).asnumpy(), rgb)


def test_imdecode_jpeg_matches_opencv(rgb):
    buf = encode(rgb, ".jpg")
    ref = cv2.imdecode(np.frombuffer(buf, np.uint8), cv2.IMREAD_COLOR)[:, :, ::-1]
    np.testing.assert_array_equal(mx.image.imdecode(buf).asnumpy(), ref)
    ref_gray = cv2.imdecode(np.frombuffer(buf, np.uint8), cv2.IMREAD_GRAYSCALE)
    assert np.abs(mx.image.imdecode(buf, flag=0).asnumpy()[:, :, 0].astype(int) - ref_gray).max() <= 1


def test_imdecode_and_imread_errors(tmp_path, rgb):
    with pytest.raises(MXNetError, match="Decoding failed"):
        mx.image.imdecode(b"not an image at all")
    with pytest.raises(ValueError, match="bytes"):
        mx.image.imdecode("a string")
    with pytest.raises(MXNetError, match="missing.png"):
        mx.image.imread(str(tmp_path / "missing.png"))
    path = tmp_path / "a.png"
    path.write_bytes(encode(rgb))
    np.testing.assert_array_equal(mx.image.imread(str(path)).asnumpy(), rgb)


def test_imresize_bilinear_and_nearest(rgb):
    out = mx.image.imresize(mx.nd.array(rgb, dtype=np.uint8), 17, 11)
    assert out.shape == (11, 17, 3) and out.dtype == np.uint8
    assert np.abs(out.asnumpy() - bilinear_reference(rgb, 17, 11)).max() <= 1.0
    up = mx.image.imresize(mx.nd.array(rgb), 80, 60, interp=0)      # exact 2x nearest
    np.testing.assert_array_equal(up.asnumpy(), np.repeat(np.repeat(rgb, 2, 0), 2, 1).astype(np.float32))
    for interp in (2, 3, 4):
        assert mx.image.imresize(mx.nd.array(rgb), 20, 15, interp=interp).shape == (15, 20, 3)
    with pytest.raises(ValueError, match="interp"):
        mx.image.imresize(mx.nd.array(rgb), 20, 15, interp=7)


def test_scale_down_resize_short_and_crops(rgb):
    assert mx.image.scale_down((640, 480), (720, 120)) == (640, 106)
    assert mx.image.scale_down((100, 100), (50, 60)) == (50, 60)
    src = mx.nd.array(rgb, dtype=np.uint8)
    assert mx.image.resize_short(src, 15).shape == (15, 20, 3)
    assert mx.image.resize_short(mx.nd.array(rgb.transpose(1, 0, 2)), 15).shape == (20, 15, 3)
    np.testing.assert_array_equal(mx.image.fixed_crop(src, 3, 4, 10, 5).asnumpy(), rgb[4:9, 3:13])
    assert mx.image.fixed_crop(src, 3, 4, 10, 5, size=(20, 10)).shape == (10, 20, 3)
    out, (x0, y0, w, h) = mx.image.center_crop(src, (20, 10))
    assert (x0, y0, w, h) == (10, 10, 20, 10)
    np.testing.assert_array_equal(out.asnumpy(), rgb[10:20, 10:30])
    random.seed(3)
    for _ in range(5):
        out, (x0, y0, w, h) = mx.image.random_crop(src, (12, 9))
        assert (w, h) == (12, 9) and 0 <= x0 <= 28 and 0 <= y0 <= 21
        np.testing.assert_array_equal(out.asnumpy(), rgb[y0:y0 + 9, x0:x0 + 12])
    out, (x0, y0, w, h) = mx.image.random_crop(src, (80, 60))    # scaled down, then resized up
    assert out.shape == (60, 80, 3) and (w, h) == (40, 30)
    for _ in range(5):
        out, (x0, y0, w, h) = mx.image.random_size_crop(src, (16, 16), (0.3, 0.6), (0.75, 1.33))
        assert out.shape == (16, 16, 3) and x0 + w <= 40 and y0 + h <= 30


def test_color_normalize_and_copy_make_border(rgb):
    mean, std = np.array([10.0, 20.0, 30.0]), np.array([2.0, 4.0, 8.0])
    src = mx.nd.array(rgb)
    out = mx.image.color_normalize(src, mx.nd.array(mean), mx.nd.array(std))
    np.testing.assert_allclose(out.asnumpy(), (rgb - mean) / std, rtol=1e-6)
    assert out is src                       # as MXNet: a float NDArray is normalized in place
    scalar = mx.image.color_normalize(mx.nd.array(rgb), 100.0, 20.0)
    assert scalar.dtype == np.float32
    np.testing.assert_allclose(scalar.asnumpy(), (rgb - 100.0) / 20.0, rtol=1e-6)
    src = mx.nd.array(rgb, dtype=np.uint8)
    pad = mx.image.copyMakeBorder(src, 1, 2, 3, 4, type=0, values=(5, 6, 7))
    ref = np.stack([np.pad(rgb[:, :, c], ((1, 2), (3, 4)), constant_values=v) for c, v in enumerate((5, 6, 7))], -1)
    np.testing.assert_array_equal(pad.asnumpy(), ref)
    edge = mx.image.copyMakeBorder(src, 2, 0, 0, 1, type=1)
    np.testing.assert_array_equal(edge.asnumpy(), np.pad(rgb, ((2, 0), (0, 1), (0, 0)), mode="edge"))


def _seeded(aug, src, seed=7):
    random.seed(seed)
    np.random.seed(seed)
    return aug(mx.nd.array(src)).asnumpy()


def test_colour_augmenters_follow_their_formulas(rgb):
    x = rgb.astype(np.float32)
    coef = np.array([0.299, 0.587, 0.114], np.float32)

    def draw(lim):
        random.seed(7)
        return random.uniform(-lim, lim)
    np.testing.assert_allclose(_seeded(mx.image.BrightnessJitterAug(0.3), x), x * (1 + draw(0.3)), rtol=1e-5)
    a = 1 + draw(0.4)
    ref = x * a + 3 * (1 - a) / x.size * np.sum(x * coef)
    np.testing.assert_allclose(_seeded(mx.image.ContrastJitterAug(0.4), x), ref, rtol=1e-4)
    a = 1 + draw(0.5)
    ref = x * a + np.sum(x * coef, axis=2, keepdims=True) * (1 - a)
    np.testing.assert_allclose(_seeded(mx.image.SaturationJitterAug(0.5), x), ref, rtol=1e-4, atol=1e-3)
    out = _seeded(mx.image.HueJitterAug(0.2), x)
    alpha = draw(0.2)
    tyiq = np.array([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]])
    ityiq = np.array([[1.0, 0.956, 0.621], [1.0, -0.272, -0.647], [1.0, -1.107, 1.705]])
    u, w = np.cos(alpha * np.pi), np.sin(alpha * np.pi)
    rot = np.array([[1, 0, 0], [0, u, -w], [0, w, u]])
    np.testing.assert_allclose(out, x @ (ityiq @ rot @ tyiq).T, rtol=1e-4, atol=1e-3)
    # a hue rotation keeps the luma (Y of YIQ) of every pixel, up to the rounding of the matrices
    np.testing.assert_allclose(out @ coef, x @ coef, atol=0.5)
    np.testing.assert_allclose(_seeded(mx.image.HueJitterAug(0.0), x), x, atol=1.0)
    eigval = np.array([55.46, 4.794, 1.148])
    eigvec = np.eye(3)
    np.random.seed(7)
    noise = eigvec @ (np.random.normal(0, 0.1, 3) * eigval)
    np.testing.assert_allclose(_seeded(mx.image.LightingAug(0.1, eigval, eigvec), x), x + noise, rtol=1e-5)
    gray = _seeded(mx.image.RandomGrayAug(1.0), x)
    np.testing.assert_allclose(gray, np.repeat((x @ np.array([0.21, 0.72, 0.07]))[:, :, None], 3, 2), rtol=1e-5)
    np.testing.assert_array_equal(_seeded(mx.image.RandomGrayAug(0.0), x), x)
    np.testing.assert_array_equal(_seeded(mx.image.HorizontalFlipAug(1.0), x), x[:, ::-1])
    norm = mx.image.ColorNormalizeAug(np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0]))
    np.testing.assert_allclose(norm(mx.nd.array(x)).asnumpy(), (x - [1, 2, 3]) / 2, rtol=1e-6)
    assert mx.image.CastAug()(mx.nd.array(rgb, dtype=np.uint8)).dtype == np.float32


def test_geometric_augmenters_and_create_augmenter(rgb):
    src = mx.nd.array(rgb, dtype=np.uint8)
    assert mx.image.ResizeAug(20)(src).shape == (20, 26, 3)
    assert mx.image.ForceResizeAug((25, 12))(src).shape == (12, 25, 3)
    assert mx.image.RandomCropAug((10, 8))(src).shape == (8, 10, 3)
    assert mx.image.RandomSizedCropAug((10, 8), 0.2, (0.5, 2.0))(src).shape == (8, 10, 3)
    assert mx.image.CenterCropAug((10, 8))(src).shape == (8, 10, 3)
    augs = mx.image.CreateAugmenter((3, 24, 24), resize=26, rand_crop=True, rand_resize=True,
                                    rand_mirror=True, mean=True, std=True, brightness=0.1,
                                    contrast=0.1, saturation=0.1, hue=0.1, pca_noise=0.1, rand_gray=0.1)
    names = [type(a).__name__ for a in augs]
    assert names == ["ResizeAug", "RandomSizedCropAug", "HorizontalFlipAug", "CastAug", "ColorJitterAug",
                     "HueJitterAug", "LightingAug", "RandomGrayAug", "ColorNormalizeAug"]
    out = src
    for a in augs:
        out = a(out)
    assert out.shape == (24, 24, 3) and out.dtype == np.float32
    assert json.loads(augs[0].dumps()) == ["resizeaug", {"size": 26, "interp": 2}]
    plain = mx.image.CreateAugmenter((3, 8, 8))
    assert [type(a).__name__ for a in plain] == ["CenterCropAug", "CastAug"]
    seq = mx.image.SequentialAug(plain)
    np.testing.assert_array_equal(seq(src).asnumpy(), rgb[11:19, 16:24].astype(np.float32))


@pytest.fixture
def rec_files(tmp_path):
    return numbered_rec(tmp_path, 10, 12, 16)


def _chw(img):
    return img.transpose(2, 0, 1).astype(np.float32)


def test_image_iter_pads_from_the_start(rec_files):
    images, rec, idx = rec_files
    it = mx.image.ImageIter(4, (3, 12, 16), path_imgrec=rec)
    assert it.provide_data[0].shape == (4, 3, 12, 16) and it.provide_label[0].shape == (4,)
    batches = list(it)
    assert [b.pad for b in batches] == [0, 0, 2]
    order = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]
    data = np.concatenate([b.data[0].asnumpy() for b in batches])
    labels = np.concatenate([b.label[0].asnumpy() for b in batches])
    np.testing.assert_array_equal(labels, order)
    np.testing.assert_array_equal(data, np.stack([_chw(images[i]) for i in order]))
    it.reset()
    assert len(list(it)) == 3


def test_image_iter_discard_and_roll_over(rec_files):
    _, rec, idx = rec_files
    it = mx.image.ImageIter(4, (3, 12, 16), path_imgrec=rec, path_imgidx=idx, last_batch_handle="discard")
    assert [b.label[0].asnumpy().tolist() for b in it] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    it = mx.image.ImageIter(4, (3, 12, 16), path_imgrec=rec, path_imgidx=idx, last_batch_handle="roll_over")
    assert len(list(it)) == 2
    it.reset()
    first = next(it)
    assert first.label[0].asnumpy().tolist() == [8, 9, 0, 1] and first.pad == 2
    assert [b.label[0].asnumpy().tolist() for b in it] == [[2, 3, 4, 5], [6, 7, 8, 9]]


def test_image_iter_shuffle_parts_and_image_lists(tmp_path, rec_files):
    images, rec, idx = rec_files
    random.seed(1)
    it = mx.image.ImageIter(5, (3, 12, 16), path_imgrec=rec, path_imgidx=idx, shuffle=True)
    labels = np.concatenate([b.label[0].asnumpy() for b in it])
    assert sorted(labels.tolist()) == list(range(10)) and labels.tolist() != list(range(10))
    part = mx.image.ImageIter(5, (3, 12, 16), path_imgrec=rec, path_imgidx=idx, num_parts=2, part_index=1)
    assert next(part).label[0].asnumpy().tolist() == [5, 6, 7, 8, 9]
    for i in range(3):
        (tmp_path / f"im{i}.png").write_bytes(encode(images[i]))
    lst = tmp_path / "x.lst"
    lst.write_text("".join(f"{i}\t{i * 2}.0\t{i + 1}.0\tim{i}.png\n" for i in range(3)))
    it = mx.image.ImageIter(3, (3, 12, 16), label_width=2, path_imglist=str(lst), path_root=str(tmp_path))
    b = next(it)
    assert b.label[0].shape == (3, 2)
    np.testing.assert_array_equal(b.label[0].asnumpy(), [[0, 1], [2, 2], [4, 3]])
    np.testing.assert_array_equal(b.data[0].asnumpy()[2], _chw(images[2]))
    it = mx.image.ImageIter(2, (3, 8, 8), imglist=[[1.0, "im0.png"], [2.0, "im1.png"]],
                            path_root=str(tmp_path), rand_crop=True, rand_mirror=True)
    b = next(it)
    assert b.data[0].shape == (2, 3, 8, 8) and b.label[0].asnumpy().tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="3 channels"):
        mx.image.ImageIter(2, (1, 8, 8), path_imgrec=rec)


def test_image_iter_names_a_broken_record(tmp_path):
    from symjit import recordio
    rec = str(tmp_path / "bad.rec")
    w = recordio.MXRecordIO(rec, "w")
    w.write(recordio.pack(recordio.IRHeader(0, 1.0, 0, 0), b"garbage"))
    w.close()
    with pytest.raises(RuntimeError, match="Broken image index: 0"):
        next(mx.image.ImageIter(1, (3, 4, 4), path_imgrec=rec))
