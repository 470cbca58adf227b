"""mx.io.ImageDetRecordIter: label layout and padding, MXNet's detection augmenter (mirror,
pad, crop samplers and their constraints, emit modes, colour, resize modes), normalization
and its argument errors; and the ImageRecordIter arguments shared with it (min/max_crop_size,
rotate_list, max_img_size, max_random_contrast / max_random_illumination). Values that MXNet
computes deterministically are also compared with MXNet itself in tests/golden."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.dataio.detection_record import DetAugmentParams, DetLabel, det_augment
from data_pipeline.image_files import numbered_rec, picture, write_rec

HEADER = [2.0, 5.0]
OBJ_A = [0.0, 0.1, 0.2, 0.5, 0.6]
OBJ_B = [1.0, 0.55, 0.5, 0.9, 0.95]


@pytest.fixture
def det_rec(tmp_path):
    """Six 24x32 pictures; image i has objects A (and B when i is odd)."""
    images = [picture(24, 32, seed=i) for i in range(6)]
    labels = [np.array(HEADER + OBJ_A + (OBJ_B if i % 2 else []), np.float32) for i in range(6)]
    rec, idx = write_rec(str(tmp_path), images, labels, name="det")
    return images, labels, rec


def _objects(row):
    n = int(row[3])
    return row[4 + 2:4 + n].reshape(-1, 5)


def test_labels_are_padded_to_the_widest_label_plus_four(det_rec):
    images, labels, rec = det_rec
    it = mx.io.ImageDetRecordIter(path_imgrec=rec, data_shape=(3, 24, 32), batch_size=4)
    assert it.provide_label[0].shape == (4, 12 + 4) and it.provide_data[0].shape == (4, 3, 24, 32)
    b = it.next()
    lab = b.label[0].asnumpy()
    for k in range(4):
        n = labels[k].size
        assert lab[k, :4].tolist() == [3, 24, 32, n]
        np.testing.assert_allclose(lab[k, 4:4 + n], labels[k])
        assert np.all(lab[k, 4 + n:] == -1)
    np.testing.assert_array_equal(b.data[0].asnumpy(), np.stack([im.transpose(2, 0, 1) for im in images[:4]]))
    wide = mx.io.ImageDetRecordIter(path_imgrec=rec, data_shape=(3, 24, 32), batch_size=4, label_pad_width=20,
                                    label_pad_value=-7)
    row = wide.next().label[0].asnumpy()[0]
    assert row.shape == (24,) and np.all(row[4 + 7:] == -7)
    with pytest.raises(MXNetError, match="label_pad_width 8 smaller than estimated width: 12"):
        mx.io.ImageDetRecordIter(path_imgrec=rec, data_shape=(3, 24, 32), batch_size=4, label_pad_width=8)
    with pytest.raises(MXNetError, match="7-dimensional label but label_width is set to 12"):
        mx.io.ImageDetRecordIter(path_imgrec=rec, data_shape=(3, 24, 32), batch_size=4, label_width=12)


def test_label_format_errors(tmp_path):
    img = [picture(8, 8)]
    for bad, msg in [([2, 5, 0, 0.1, 0.1], "at least 7"), ([1, 5, 0, 0.1, 0.1, 0.5, 0.5], "header width"),
                     ([2, 5, 0, 0.1, 0.1, 0.5, 0.5, 9], "not a header of 2 plus objects of 5")]:
        rec = write_rec(str(tmp_path), img, [np.array(bad, np.float32)], name="bad")[0]
        with pytest.raises(MXNetError, match=msg):
            mx.io.ImageDetRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=1).next()
    _, rec, _ = numbered_rec(tmp_path, 2, 8, 8)     # single float labels
    with pytest.raises(MXNetError, match="Not enough label"):
        mx.io.ImageDetRecordIter(path_imgrec=rec, data_shape=(3, 8, 8), batch_size=1)


def test_empty_objects_are_dropped():
    label = DetLabel.parse([2, 5] + OBJ_A + [1, 0.5, 0.5, 0.4, 0.9])
    assert label.objects.tolist() == [pytest.approx(OBJ_A)]


def test_mirror_flips_image_and_boxes(det_rec):
    images, labels, rec = det_rec
    it = mx.io.ImageDetRecordIter(path_imgrec=rec, data_shape=(3, 24, 32), batch_size=2, rand_mirror_prob=1.0)
    b = it.next()
    np.testing.assert_array_equal(b.data[0].asnumpy()[1], images[1][:, ::-1].transpose(2, 0, 1))
    objs = _objects(b.label[0].asnumpy()[1])
    want = np.array([OBJ_A, OBJ_B])
    want[:, 1], want[:, 3] = 1 - want[:, 3], 1 - want[:, 1]
    np.testing.assert_allclose(objs, want, rtol=1e-6)


def test_random_pad_places_the_image_on_a_filled_canvas():
    img = picture(20, 20)
    p = DetAugmentParams.create((3, 60, 60), {"rand_pad_prob": 1.0, "max_pad_scale": 3.0, "fill_value": 9,
                                              "resize_mode": "shrink"})
    seen_pad = False
    for seed in range(10):
        out, label = det_augment(img, np.array(HEADER + OBJ_A, np.float32), p, np.random.default_rng(seed))
        box = label[2:].reshape(-1, 5)[0]
        if out.shape[:2] == (20, 20):
            np.testing.assert_array_equal(out, img)    # a scale under 1.05 pads nothing
            continue
        seen_pad = True
        assert np.all((box[1:] >= 0) & (box[1:] <= 1))
        width = box[3] - box[1]
        assert width < OBJ_A[3] - OBJ_A[1]             # the object shrinks relative to the canvas
        assert (out == 9).all(axis=2).sum() > 0        # filled border
    assert seen_pad


def test_crop_samplers_keep_objects_by_centre_or_overlap():
    img = picture(40, 40)
    raw = np.array(HEADER + OBJ_A + OBJ_B, np.float32)
    args = {"rand_crop_prob": 1.0, "min_crop_scales": 0.3, "max_crop_scales": 0.7,
            "min_crop_aspect_ratios": 0.5, "max_crop_aspect_ratios": 2.0, "resize_mode": "shrink"}
    for mode, extra in (("center", {}), ("overlap", {"emit_overlap_thresh": 0.5})):
        p = DetAugmentParams.create((3, 40, 40), {**args, "crop_emit_mode": mode, **extra})
        cropped = 0
        for seed in range(30):
            out, label = det_augment(img, raw, p, np.random.default_rng(seed))
            objs = label[2:].reshape(-1, 5)
            assert len(objs) >= 1 and np.all((objs[:, 1:] >= 0) & (objs[:, 1:] <= 1))
            cropped += out.shape[:2] != (40, 40)
        assert cropped > 20


def test_crop_constraints_apply_only_when_all_restrict():
    """MXNet checks overlap and coverages only when all six bounds restrict; impossible bounds
    then leave the image uncropped."""
    img = picture(30, 30)
    raw = np.array(HEADER + OBJ_A, np.float32)
    strict = {"rand_crop_prob": 1.0, "min_crop_scales": 0.3, "max_crop_scales": 0.5, "max_crop_trials": 5,
              "min_crop_overlaps": 0.99, "max_crop_overlaps": 0.999, "min_crop_sample_coverages": 0.99,
              "max_crop_sample_coverages": 0.999, "min_crop_object_coverages": 0.99,
              "max_crop_object_coverages": 0.999, "resize_mode": "shrink"}
    p = DetAugmentParams.create((3, 30, 30), strict)
    out, label = det_augment(img, raw, p, np.random.default_rng(0))
    assert out.shape == img.shape and np.allclose(label, raw)
    loose = dict(strict, max_crop_overlaps=1.0)         # one bound not restricting: no check
    p = DetAugmentParams.create((3, 30, 30), loose)
    shapes = {det_augment(img, raw, p, np.random.default_rng(s))[0].shape for s in range(10)}
    assert any(sh != img.shape for sh in shapes)


def test_sampler_arguments_broadcast_and_are_checked():
    p = DetAugmentParams.create((3, 8, 8), {"num_crop_sampler": 3, "min_crop_scales": (0.1, 0.2, 0.3),
                                            "max_crop_scales": 0.9})
    assert p.max_crop_scales == (0.9, 0.9, 0.9) and p.max_crop_trials == (25, 25, 25)
    for bad, msg in [({"num_crop_sampler": 2, "min_crop_scales": (0.1, 0.2, 0.3)}, "crop_samplers mismatch"),
                     ({"min_crop_scales": (0.1, 0.2)}, "expected 1"),
                     ({"min_crop_scales": 0.5, "max_crop_scales": 0.4}, "max_crop_scales > min_crop_scales"),
                     ({"inter_method": 5}, "invalid inter_method"), ({"resize_mode": "stretch"}, "resize_mode"),
                     ({"crop_emit_mode": "edge"}, "crop_emit_mode"), ({"emit_overlap_thresh": -1}, "emit_overlap")]:
        with pytest.raises(MXNetError, match=msg):
            DetAugmentParams.create((3, 8, 8), bad)


def test_colour_contrast_scales_pixels():
    img = picture(10, 12)
    p = DetAugmentParams.create((3, 10, 12), {"random_contrast_prob": 1.0, "max_random_contrast": 0.5})
    rng = np.random.default_rng(4)
    out, _ = det_augment(img, np.array(HEADER + OBJ_A, np.float32), p, rng)
    c = np.random.default_rng(4).uniform(-1, 1) * 0.5    # the first draw (no HLS offsets are drawn)
    np.testing.assert_array_equal(out, np.clip(np.rint(img * np.float32(1 + c)), 0, 255).astype(np.uint8))


def test_resize_modes_and_normalization(det_rec):
    images, _, rec = det_rec
    fit = mx.io.ImageDetRecordIter(path_imgrec=rec, data_shape=(3, 30, 30), batch_size=2, resize_mode="fit",
                                   mean_r=10, mean_g=20, mean_b=30, std_r=2, std_b=4, scale=0.5)
    b = fit.next()
    lab = b.label[0].asnumpy()
    assert lab[0, :3].tolist() == [3, 22, 30]          # 24x32 scaled by 30/32
    data = b.data[0].asnumpy()[0]
    # as MXNet: means subtracted everywhere (also the unused rows), std only where positive
    np.testing.assert_allclose(data[:, 22:], np.broadcast_to(np.array([-2.5, -10, -3.75])[:, None, None],
                                                             (3, 8, 30)), rtol=1e-6)
    shrink = mx.io.ImageDetRecordIter(path_imgrec=rec, data_shape=(3, 30, 40), batch_size=2, resize_mode="shrink")
    b = shrink.next()
    assert b.label[0].asnumpy()[0, :3].tolist() == [3, 24, 32]
    np.testing.assert_array_equal(b.data[0].asnumpy()[0, :, :24, :32], images[0].transpose(2, 0, 1))


def test_seeded_shuffle_parts_and_threads_are_reproducible(det_rec):
    _, _, rec = det_rec
    args = dict(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=3, shuffle=True, seed=5, rand_crop_prob=0.7,
                min_crop_scales=0.4, rand_mirror_prob=0.5, rand_pad_prob=0.5, max_pad_scale=2.0)
    one = [b.label[0].asnumpy() for b in mx.io.ImageDetRecordIter(preprocess_threads=1, **args)]
    four = [b.label[0].asnumpy() for b in mx.io.ImageDetRecordIter(preprocess_threads=4, **args)]
    np.testing.assert_array_equal(np.stack(one), np.stack(four))
    part = mx.io.ImageDetRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=3, num_parts=2,
                                    part_index=1)
    assert part.next().label[0].asnumpy()[:, 4].tolist() == [2, 2, 2] and len(list(part)) == 0


def test_det_labels_from_an_image_list(det_rec, tmp_path):
    _, _, rec = det_rec
    lst = tmp_path / "det.lst"
    lst.write_text("".join(f"{i}\t2\t5\t{i}\t0.2\t0.2\t0.8\t0.8\timg{i}.png\n" for i in range(6)))
    it = mx.io.ImageDetRecordIter(path_imgrec=rec, path_imglist=str(lst), data_shape=(3, 24, 32), batch_size=3)
    lab = it.next().label[0].asnumpy()
    assert lab.shape == (3, 11) and lab[:, 6].tolist() == [0, 1, 2]


# ---- ImageRecordIter arguments ---------------------------------------------------------------
@pytest.fixture
def rec6(tmp_path):
    return numbered_rec(tmp_path, 6, 24, 30)


def test_crop_size_range_crops_squares_and_resizes(rec6):
    images, rec, _ = rec6
    it = mx.io.ImageRecordUInt8Iter(path_imgrec=rec, data_shape=(3, 10, 10), batch_size=6, max_crop_size=20,
                                    min_crop_size=20)
    got = it.next().data[0].asnumpy()
    from symjit.ops import image_kernels as K
    want = np.stack([K.resize(im[2:22, 5:25], 10, 10, 1).transpose(2, 0, 1) for im in images])
    np.testing.assert_array_equal(got, want)
    ranged = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 10, 10), batch_size=6, max_crop_size=24,
                                   min_crop_size=8, rand_crop=True)
    assert ranged.next().data[0].shape == (6, 3, 10, 10)
    with pytest.raises(MXNetError, match="smaller than max_crop_size"):
        mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 10, 10), batch_size=6, max_crop_size=25,
                              min_crop_size=8).next()


def test_rotate_list_and_image_size_bounds(rec6):
    images, rec, _ = rec6
    it = mx.io.ImageRecordUInt8Iter(path_imgrec=rec, data_shape=(3, 24, 30), batch_size=6, rotate_list="180",
                                    fill_value=0)
    got = it.next().data[0].asnumpy()
    # a half turn with MXNet's matrix (translation (w, h), so pixel (y, x) comes from (h - y, w - x)):
    # the picture reversed both ways, shifted by one pixel, the first row and column filled
    want = np.stack([im[::-1, ::-1].transpose(2, 0, 1) for im in images])
    np.testing.assert_array_equal(got[:, :, 1:, 1:], want[:, :, :-1, :-1])
    assert (got[:, :, 0] == 0).all() and (got[:, :, :, 0] == 0).all()
    big = mx.io.ImageRecordUInt8Iter(path_imgrec=rec, data_shape=(3, 30, 30), batch_size=6, min_img_size=30,
                                     fill_value=7)
    out = big.next().data[0].asnumpy()     # the canvas grows to 30x30, the picture stays 24x30
    assert (out[:, :, :3] == 7).all() and (out[:, :, -3:] == 7).all()
    with pytest.raises(MXNetError, match="invalid inter_method 0 for the affine step"):   # as MXNet
        mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 24, 30), batch_size=6, max_rotate_angle=10,
                              inter_method=0).next()


def test_contrast_and_illumination_are_drawn_per_image(rec6):
    images, rec, _ = rec6
    args = dict(path_imgrec=rec, data_shape=(3, 24, 30), batch_size=6, mean_r=5, mean_g=5, mean_b=5, std_r=2,
                std_g=2, std_b=2)
    base = mx.io.ImageRecordIter(**args).next().data[0].asnumpy()
    out = mx.io.ImageRecordIter(max_random_contrast=0.3, max_random_illumination=10, **args).next().data[0].asnumpy()
    fits = np.array([np.polyfit(b.ravel(), o.ravel(), 1) for b, o in zip(base, out)])
    assert np.all(np.abs(fits[:, 0] - 1) <= 0.3 + 1e-4) and np.all(np.abs(fits[:, 1]) <= 10 / 2 + 1e-3)
    assert np.ptp(fits[:, 0]) > 0.05 and np.ptp(fits[:, 1]) > 0.5


def test_four_channel_output_needs_four_channel_images(tmp_path):
    """As MXNet: data_shape with 4 channels decodes the file's own channels, and an RGB image
    is an error; an RGBA PNG keeps its alpha."""
    rgba = np.concatenate([picture(12, 12), np.full((12, 12, 1), 77, np.uint8)], axis=2)
    rec = write_rec(str(tmp_path), [rgba], [np.array(HEADER + OBJ_A, np.float32)], name="rgba")[0]
    for cls in (mx.io.ImageRecordUInt8Iter, mx.io.ImageDetRecordIter):
        kwargs = {"label_width": 7} if cls is mx.io.ImageRecordUInt8Iter else {}
        out = cls(path_imgrec=rec, data_shape=(4, 12, 12), batch_size=1, **kwargs).next().data[0].asnumpy()[0]
        np.testing.assert_array_equal(out, rgba.transpose(2, 0, 1))
    rgb = write_rec(str(tmp_path), [rgba[:, :, :3]], [np.array(HEADER + OBJ_A, np.float32)], name="rgb")[0]
    with pytest.raises(MXNetError, match="Expected 4 channels, got 3"):
        mx.io.ImageRecordIter(path_imgrec=rgb, data_shape=(4, 12, 12), batch_size=1, label_width=7).next()


def test_colour_arguments_reach_the_augmenter(det_rec):
    """max_random_contrast / max_random_illumination are the detection augmenter's colour
    arguments (with their probabilities), not a normalization."""
    images, _, rec = det_rec
    args = dict(path_imgrec=rec, data_shape=(3, 24, 32), batch_size=6)
    base = mx.io.ImageDetRecordIter(**args).next().data[0].asnumpy()
    out = mx.io.ImageDetRecordIter(random_contrast_prob=1.0, max_random_contrast=0.5, **args).next().data[0].asnumpy()
    ratios = [np.polyfit(b.ravel(), o.ravel(), 1)[0] for b, o in zip(base, out)]
    assert np.ptp(ratios) > 0.1 and all(0.45 < r < 1.55 for r in ratios)
    lit = mx.io.ImageDetRecordIter(random_illumination_prob=1.0, max_random_illumination=40, **args)
    assert not np.array_equal(lit.next().data[0].asnumpy(), base)


@pytest.mark.parametrize("cls", ["ImageRecordIter", "ImageDetRecordIter"])
def test_arguments_are_parsed_as_mxnet(cls, det_rec):
    """Typed arguments parse as MXNet's parameters (strings accepted, an int takes no
    fraction, a bool is 0/1/True/False); unknown arguments are ignored, as MXNet ignores them."""
    _, _, rec = det_rec
    make = getattr(mx.io, cls)
    base = dict(path_imgrec=rec, data_shape=(3, 24, 32), batch_size=1)
    if cls == "ImageRecordIter":
        base["label_width"] = 7     # the first record's label array
    for bad, msg in [({"resize": "abc"}, "resize expect int"), ({"inter_method": 2.5}, "inter_method expect int"),
                     ({"fill_value": "x"}, "fill_value expect int")]:
        with pytest.raises(MXNetError, match=msg):
            make(**base, **bad)
    if cls == "ImageRecordIter":
        with pytest.raises(MXNetError, match="rand_mirror expect boolean but value='yes'"):
            make(**base, rand_mirror="yes")
        assert make(**base, resize="30", mirror="True", no_such_argument=3).next().data[0].shape == (1, 3, 24, 32)
    else:
        with pytest.raises(MXNetError, match="max_random_illumination expect int"):
            make(**base, max_random_illumination=0.5)
        assert make(**base, resize="30", rand_mirror_prob="1", no_such_argument=3).next().data[0].shape == \
            (1, 3, 24, 32)
