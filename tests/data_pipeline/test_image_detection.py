"""mx.image detection: the box bookkeeping of each detection augmenter against numpy
references (flip, crop, pad), CreateDetAugmenter's chain, and ImageDetIter's label parsing,
-1 padding and label-shape synchronization over a record file."""
from __future__ import annotations

import random

import numpy as np
import pytest

import symjit as mx
from symjit import recordio
from data_pipeline.image_files import encode, picture

LABEL = np.array([[0, 0.1, 0.2, 0.5, 0.6], [1, 0.4, 0.3, 0.9, 0.8]], np.float32)


def test_horizontal_flip_moves_boxes():
    img = picture(8, 10)
    out, lab = mx.image.DetHorizontalFlipAug(1.0)(mx.nd.array(img, dtype=np.uint8), LABEL)
    np.testing.assert_array_equal(out.asnumpy(), img[:, ::-1])
    np.testing.assert_allclose(lab[:, 1:5], [[0.5, 0.2, 0.9, 0.6], [0.1, 0.3, 0.6, 0.8]], rtol=1e-6)
    np.testing.assert_array_equal(lab[:, 0], LABEL[:, 0])


def _box_pixels(label, h, w):
    return np.round(label[:, 1:5] * [w, h, w, h]).astype(int)


def test_random_crop_keeps_boxes_on_the_same_pixels():
    h, w = 40, 50
    img = np.zeros((h, w, 3), np.uint8)
    boxes = _box_pixels(LABEL, h, w)
    for k, (x0, y0, x1, y1) in enumerate(boxes):
        img[y0:y1, x0:x1, k] = 255
    aug = mx.image.DetRandomCropAug(min_object_covered=0.5, area_range=(0.3, 0.9))
    random.seed(4)
    cropped = 0
    for _ in range(10):
        out, lab = aug(mx.nd.array(img, dtype=np.uint8), LABEL)
        out = out.asnumpy()
        if out.shape == img.shape:
            continue
        cropped += 1
        oh, ow = out.shape[:2]
        for row in lab:   # each kept box still frames its object's channel inside the crop
            k = int(row[0])
            x0, y0, x1, y1 = np.round(row[1:5] * [ow, oh, ow, oh]).astype(int)
            assert out[y0:y1, x0:x1, k].mean() > 200
        assert (lab[:, 1:5] >= 0).all() and (lab[:, 1:5] <= 1).all()
    assert cropped


def test_random_pad_and_its_boxes():
    img = picture(20, 20)
    aug = mx.image.DetRandomPadAug(area_range=(2.0, 3.0), pad_val=(1, 2, 3))
    random.seed(2)
    out, lab = aug(mx.nd.array(img, dtype=np.uint8), LABEL)
    out = out.asnumpy()
    oh, ow = out.shape[:2]
    assert oh * ow >= 2 * 400 * 0.9
    ys, xs = np.nonzero((out != [1, 2, 3]).any(axis=2))
    y0, x0 = ys.min(), xs.min()
    np.testing.assert_array_equal(out[y0:y0 + 20, x0:x0 + 20], img)
    np.testing.assert_allclose(lab[:, 1] * ow, LABEL[:, 1] * 20 + x0, atol=1e-3)
    np.testing.assert_allclose(lab[:, 4] * oh, LABEL[:, 4] * 20 + y0, atol=1e-3)


def test_create_det_augmenter_chain():
    augs = mx.image.CreateDetAugmenter((3, 32, 32), resize=40, rand_crop=0.5, rand_pad=0.5, rand_mirror=True,
                                       mean=True, std=True, brightness=0.1, hue=0.1, pca_noise=0.1, rand_gray=0.1)
    names = [type(a).__name__ for a in augs]
    assert names == ["DetBorrowAug", "DetRandomSelectAug", "DetHorizontalFlipAug", "DetRandomSelectAug"] + \
        ["DetBorrowAug"] * 7
    src, lab = mx.nd.array(picture(30, 36), dtype=np.uint8), LABEL
    random.seed(0)
    for a in augs:
        src, lab = a(src, lab)
    assert src.shape == (32, 32, 3) and src.dtype == np.float32 and lab.shape[1] == 5
    multi = mx.image.CreateMultiRandCropAugmenter(min_object_covered=[0.1, 0.5], area_range=(0.1, 1.0))
    assert len(multi.aug_list) == 2 and multi.aug_list[1].min_object_covered == 0.5
    with pytest.raises(TypeError):
        mx.image.DetBorrowAug("not an augmenter")


def _det_rec(tmp_path, counts):
    rec, idx = str(tmp_path / "det.rec"), str(tmp_path / "det.idx")
    w = recordio.MXIndexedRecordIO(idx, rec, "w")
    for i, n in enumerate(counts):
        objs = np.array([[j % 3, 0.1, 0.1, 0.2 + 0.1 * j, 0.5] for j in range(n)], np.float32)
        label = np.concatenate([[2, 5], objs.ravel()]).astype(np.float32)
        w.write_idx(i, recordio.pack(recordio.IRHeader(0, label, i, 0), encode(picture(24, 24, seed=i))))
    w.close()
    return rec, idx


def test_image_det_iter(tmp_path):
    rec, idx = _det_rec(tmp_path, [1, 3, 2, 1, 2])
    it = mx.image.ImageDetIter(2, (3, 16, 16), path_imgrec=rec, path_imgidx=idx)
    assert it.provide_label[0].shape == (2, 3, 5) and it.label_shape == (3, 5)
    batches = list(it)
    assert [b.pad for b in batches] == [0, 0, 1]
    first = batches[0].label[0].asnumpy()
    np.testing.assert_allclose(first[0, 0], [0, 0.1, 0.1, 0.2, 0.5])
    assert (first[0, 1:] == -1).all()
    np.testing.assert_allclose(first[1, 2], [2, 0.1, 0.1, 0.4, 0.5])
    assert batches[0].data[0].shape == (2, 3, 16, 16)
    other = mx.image.ImageDetIter(2, (3, 16, 16), path_imgrec=_det_rec(tmp_path / "..", [4])[0])
    it.sync_label_shape(other)
    assert it.label_shape == other.label_shape == (4, 5)
    with pytest.raises(ValueError, match="reduce label count"):
        it.reshape(label_shape=(2, 5))
    aug = mx.image.ImageDetIter(2, (3, 16, 16), path_imgrec=rec, rand_crop=1, rand_pad=1, rand_mirror=True,
                                mean=True, std=True)
    for b in aug:
        assert b.data[0].shape == (2, 3, 16, 16)
        lab = b.label[0].asnumpy()
        real = lab[lab[:, :, 0] >= 0]
        assert ((real[:, 1:5] >= 0) & (real[:, 1:5] <= 1)).all()
