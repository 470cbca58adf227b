"""mx.io's native iterators (ImageRecordIter, ImageRecordUInt8Iter, ImageRecordInt8Iter, CSVIter, LibSVMIter,
MNISTIter) and the Python wrappers PrefetchingIter and ResizeIter: batch shapes, values against
numpy references, MXNet's round_batch padding and reset rule, shuffling and threads."""
from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from data_pipeline.image_files import numbered_rec, write_rec


@pytest.fixture
def rec10(tmp_path):
    return numbered_rec(tmp_path, 10, 20, 24)


def _labels(it):
    return [b.label[0].asnumpy().tolist() for b in it]


def test_image_record_iter_center_crop_and_normalization(rec10):
    images, rec, _ = rec10
    it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 16, 20), batch_size=4,
                               mean_r=10, mean_g=20, mean_b=30, std_r=2, std_g=4, std_b=8, scale=0.5,
                               preprocess_threads=2)
    assert it.provide_data[0].shape == (4, 3, 16, 20) and it.provide_label[0].shape == (4,)
    batches = list(it)
    assert [b.pad for b in batches] == [0, 0, 2]
    data = np.concatenate([b.data[0].asnumpy() for b in batches])
    order = list(range(10)) + [0, 1]
    mean = np.array([10, 20, 30], np.float32).reshape(3, 1, 1)
    std = np.array([2, 4, 8], np.float32).reshape(3, 1, 1)
    ref = np.stack([(images[i][2:18, 2:22].transpose(2, 0, 1) - mean) / std * 0.5 for i in order])
    np.testing.assert_allclose(data, ref, rtol=1e-6)
    assert np.concatenate(_labels_of(batches)).tolist() == order


def _labels_of(batches):
    return [b.label[0].asnumpy() for b in batches]


def test_round_batch_reset_continues_after_the_wrapped_samples(rec10):
    _, rec, _ = rec10
    it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=4)
    assert _labels(it) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
    it.reset()
    assert _labels(it) == [[2, 3, 4, 5], [6, 7, 8, 9]]
    it.reset()
    assert _labels(it)[0] == [0, 1, 2, 3]
    it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=4, round_batch=False)
    batches = list(it)
    # as MXNet's ImageRecordIter, the short last batch reports pad 0 (its BatchLoader-based iterators
    # report the missing samples)
    assert batches[-1].pad == 0 and batches[-1].label[0].asnumpy()[:2].tolist() == [8, 9]
    it.reset()
    assert len(list(it)) == 3


def test_uint8_iter_mirror_shuffle_parts_and_label_width(tmp_path, rec10):
    images, rec, idx = rec10
    it = mx.io.ImageRecordUInt8Iter(path_imgrec=rec, data_shape=(3, 20, 24), batch_size=5, mirror=True)
    b = it.next()
    assert b.data[0].dtype == np.uint8
    np.testing.assert_array_equal(b.data[0].asnumpy()[3], images[3][:, ::-1].transpose(2, 0, 1))
    shuffled = mx.io.ImageRecordIter(path_imgrec=rec, path_imgidx=idx, data_shape=(3, 16, 16),
                                     batch_size=5, shuffle=True, seed=3)
    first = sum(_labels(shuffled), [])
    assert sorted(first) == list(range(10)) and first != list(range(10))
    shuffled.reset()
    assert sorted(sum(_labels(shuffled), [])) == list(range(10))
    part = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=5, num_parts=2,
                                 part_index=1)
    assert _labels(part) == [[5, 6, 7, 8, 9]]
    multi = write_rec(str(tmp_path), images[:4], [[i, 10 * i, 100 * i] for i in range(4)], name="multi")[0]
    it = mx.io.ImageRecordIter(path_imgrec=multi, data_shape=(3, 16, 16), batch_size=4, label_width=3)
    assert it.next().label[0].asnumpy().tolist() == [[0, 0, 0], [1, 10, 100], [2, 20, 200], [3, 30, 300]]
    # as MXNet: a record's label array must have exactly label_width numbers
    with pytest.raises(MXNetError, match="3-dimensional label but label_width is set to 2"):
        mx.io.ImageRecordIter(path_imgrec=multi, data_shape=(3, 16, 16), batch_size=4, label_width=2).next()
    with pytest.raises(MXNetError, match="label_width must be 1"):
        mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=4, label_width=2).next()


def test_random_augmentations_are_seeded_and_bounded(rec10):
    _, rec, _ = rec10
    kwargs = dict(path_imgrec=rec, data_shape=(3, 12, 12), batch_size=5, rand_crop=True, rand_mirror=True,
                  resize=16, max_rotate_angle=10, random_h=10, random_s=10, random_l=10, brightness=0.2,
                  contrast=0.2, saturation=0.2, pca_noise=0.1, preprocess_threads=3, seed_aug=5)
    a = np.concatenate([b.data[0].asnumpy() for b in mx.io.ImageRecordIter(**kwargs)])
    b = np.concatenate([b.data[0].asnumpy() for b in mx.io.ImageRecordIter(**dict(kwargs, preprocess_threads=1))])
    np.testing.assert_array_equal(a, b)
    c = np.concatenate([b.data[0].asnumpy() for b in mx.io.ImageRecordIter(**dict(kwargs, seed_aug=6))])
    assert not np.array_equal(a, c)
    rrc = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 10, 10), batch_size=5, random_resized_crop=True,
                                min_random_area=0.3, max_random_area=1.0, max_aspect_ratio=1.5)
    assert rrc.next().data[0].shape == (5, 3, 10, 10)
    u8 = mx.io.ImageRecordUInt8Iter(path_imgrec=rec, data_shape=(3, 12, 12), batch_size=5, rand_crop=True,
                                    max_rotate_angle=20, fill_value=0)
    assert u8.next().data[0].asnumpy().max() <= 255


def test_image_record_iter_errors_and_mean_image(tmp_path, rec10):
    _, rec, _ = rec10
    with pytest.raises(MXNetError, match="data_shape"):
        mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(5, 16, 16), batch_size=2)
    with pytest.raises(MXNetError, match="smaller than input shape"):
        mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 32, 32), batch_size=2).next()
    mean_path = str(tmp_path / "mean.bin")
    it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=10, mean_img=mean_path)
    data = it.next().data[0].asnumpy()
    np.testing.assert_allclose(data.mean(axis=0), 0, atol=1e-4)
    again = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=10, mean_img=mean_path)
    np.testing.assert_allclose(again.next().data[0].asnumpy(), data, atol=1e-5)


def test_csv_iter(tmp_path):
    assert issubclass(mx.io.CSVIter, mx.io.MXDataIter) and issubclass(mx.io.MXDataIter, mx.io.DataIter)
    data = np.arange(30, dtype=np.float32).reshape(5, 6)
    (tmp_path / "d.csv").write_text("\n".join(",".join(str(v) for v in row) for row in data))
    (tmp_path / "l.csv").write_text("\n".join(str(i) for i in range(5)))
    it = mx.io.CSVIter(data_csv=str(tmp_path / "d.csv"), data_shape=(2, 3), label_csv=str(tmp_path / "l.csv"),
                       batch_size=2)
    assert it.provide_data[0].shape == (2, 2, 3) and it.provide_label[0].shape == (2, 1)
    batches = list(it)
    assert [b.pad for b in batches] == [0, 0, 1]
    np.testing.assert_array_equal(batches[2].data[0].asnumpy(), data[[4, 0]].reshape(2, 2, 3))
    np.testing.assert_array_equal(batches[2].label[0].asnumpy(), [[4], [0]])
    it.reset()
    assert [b.label[0].asnumpy()[:, 0].tolist() for b in it] == [[1, 2], [3, 4]]
    ints = mx.io.CSVIter(data_csv=str(tmp_path / "l.csv"), data_shape=(1,), batch_size=5, dtype="int64")
    b = ints.next()
    assert b.data[0].dtype == np.int64 and b.label[0].asnumpy().tolist() == [[0]] * 5
    with pytest.raises(MXNetError, match="do not match size of shape"):
        mx.io.CSVIter(data_csv=str(tmp_path / "d.csv"), data_shape=(4,), batch_size=2)


def test_libsvm_iter(tmp_path):
    (tmp_path / "data.t").write_text("1.0 0:0.5 2:1.2\n-2.0\n-3.0 0:0.6 1:2.4 2:1.2\n4 2:-1.2\n")
    (tmp_path / "label.t").write_text("1.0\n-2.0 0:0.125\n-3.0 2:1.2\n4 1:1.0 2:-1.2\n")
    it = mx.io.LibSVMIter(data_libsvm=str(tmp_path / "data.t"), label_libsvm=str(tmp_path / "label.t"),
                          data_shape=(3,), label_shape=(3,), batch_size=3)
    batches = list(it)
    assert len(batches) == 2 and batches[1].pad == 2
    assert batches[0].data[0].stype == "csr"
    np.testing.assert_allclose(batches[0].data[0].asnumpy(), [[0.5, 0, 1.2], [0, 0, 0], [0.6, 2.4, 1.2]])
    np.testing.assert_allclose(batches[1].data[0].asnumpy(), [[0, 0, -1.2], [0.5, 0, 1.2], [0, 0, 0]])
    np.testing.assert_allclose(batches[0].label[0].asnumpy(), [[0, 0, 0], [0.125, 0, 0], [0, 0, 1.2]])
    dense = mx.io.LibSVMIter(data_libsvm=str(tmp_path / "data.t"), data_shape=(3,), batch_size=2)
    assert [b.label[0].asnumpy().tolist() for b in dense] == [[1, -2], [-3, 4]]
    (tmp_path / "bad.t").write_text("1.0 -1:0.6 1:2.4\n")
    with pytest.raises(MXNetError, match="out of range"):
        mx.io.LibSVMIter(data_libsvm=str(tmp_path / "bad.t"), data_shape=(3,), batch_size=1)


def _write_idx(path, arr, magic):
    with gzip.open(path, "wb") if str(path).endswith(".gz") else open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in arr.shape) + arr.tobytes())


def test_mnist_iter(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (25, 28, 28), dtype=np.uint8)
    labels = (np.arange(25) % 10).astype(np.uint8)
    _write_idx(tmp_path / "img", images, 2051)
    _write_idx(tmp_path / "lab.gz", labels, 2049)
    it = mx.io.MNISTIter(image=str(tmp_path / "img"), label=str(tmp_path / "lab.gz"), batch_size=10, shuffle=False)
    batches = list(it)
    assert len(batches) == 2 and batches[0].data[0].shape == (10, 1, 28, 28)
    np.testing.assert_allclose(batches[1].data[0].asnumpy()[:, 0], images[10:20] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(batches[1].label[0].asnumpy(), labels[10:20])
    flat = mx.io.MNISTIter(image=str(tmp_path / "img"), label=str(tmp_path / "lab.gz"), batch_size=5, flat=True,
                           seed=10)
    flat.iter_next()
    first = flat.getlabel().asnumpy()
    assert flat.getdata().shape == (5, 784)
    flat.iter_next()
    flat.reset()
    flat.iter_next()
    np.testing.assert_array_equal(flat.getlabel().asnumpy(), first)   # shuffled once, at creation
    with pytest.raises(MXNetError, match="no such file"):
        mx.io.MNISTIter(image=str(tmp_path / "none"), label=str(tmp_path / "lab.gz"))


def test_resize_and_prefetching_iters():
    data = np.arange(20, dtype=np.float32).reshape(10, 2)
    base = mx.io.NDArrayIter(data, np.arange(10), batch_size=4, last_batch_handle="discard")
    resized = mx.io.ResizeIter(base, 5)
    firsts = [b.data[0].asnumpy()[0, 0] for b in resized]
    assert firsts == [0, 8, 0, 8, 0]
    resized.reset()
    assert len(list(resized)) == 5
    a = mx.io.NDArrayIter(data, np.arange(10), batch_size=5)
    b = mx.io.NDArrayIter(data * 2, np.arange(10), batch_size=5, data_name="other", label_name="lab2")
    pre = mx.io.PrefetchingIter([a, b], rename_data=[{"data": "x"}, {"other": "y"}])
    assert [d.name for d in pre.provide_data] == ["x", "y"]
    for epoch in range(2):
        batches = list(pre)
        assert len(batches) == 2
        np.testing.assert_array_equal(batches[1].data[1].asnumpy(), data[5:] * 2)
        assert len(batches[0].label) == 2
        pre.reset()


def test_image_record_iter_labels_from_an_image_list(tmp_path, rec10):
    _, rec, _ = rec10
    lst = tmp_path / "labels.lst"
    lst.write_text("".join(f"{i}\t{100 + i}.0\t{-i}.0\timg{i}.jpg\n" for i in range(10)))
    it = mx.io.ImageRecordIter(path_imgrec=rec, path_imglist=str(lst), data_shape=(3, 16, 16), batch_size=5,
                               label_width=2)
    np.testing.assert_array_equal(it.next().label[0].asnumpy(), [[100 + i, -i] for i in range(5)])


def test_prefetching_gives_the_batches_of_the_synchronous_iterator(rec10):
    _, rec, idx = rec10
    kwargs = dict(path_imgrec=rec, path_imgidx=idx, data_shape=(3, 16, 16), batch_size=4, shuffle=True,
                  rand_crop=True, rand_mirror=True, seed=7)
    sync = mx.io.ImageRecordIter(prefetch_buffer=0, **kwargs)
    ahead = mx.io.ImageRecordIter(prefetch_buffer=3, **kwargs)
    for _ in range(3):
        a, b = list(sync), list(ahead)
        assert [x.pad for x in a] == [x.pad for x in b]
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x.data[0].asnumpy(), y.data[0].asnumpy())
            np.testing.assert_array_equal(x.label[0].asnumpy(), y.label[0].asnumpy())
        sync.reset()
        ahead.reset()


def test_int8_iter_subtracts_the_rounded_mean_and_saturates(tmp_path, rec10):
    """MXNet's int8 output: saturate_cast<int8>(pixel - round(mean)) per channel; std and scale
    do not apply; mirror does."""
    images, rec, _ = rec10
    it = mx.io.ImageRecordInt8Iter(path_imgrec=rec, data_shape=(3, 20, 24), batch_size=5, mirror=True,
                                   mean_r=10.4, mean_g=127.6, mean_b=0.0, std_r=50, scale=0.1)
    assert it.provide_data[0].dtype == np.int8
    got = it.next().data[0]
    assert got.dtype == np.int8
    mean = np.array([10, 128, 0], np.int16).reshape(3, 1, 1)
    want = np.clip(np.stack([images[i][:, ::-1].transpose(2, 0, 1) for i in range(5)]).astype(np.int16) - mean,
                   -128, 127).astype(np.int8)
    np.testing.assert_array_equal(got.asnumpy(), want)
    assert want.max() == 127 and want.min() < 0   # both saturation and negative values occur
    same = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 20, 24), batch_size=5, mirror=True,
                                 mean_r=10.4, mean_g=127.6, dtype="int8")
    np.testing.assert_array_equal(same.next().data[0].asnumpy(), want)
    mean_path = str(tmp_path / "mean.bin")
    with_img = mx.io.ImageRecordInt8Iter(path_imgrec=rec, data_shape=(3, 20, 24), batch_size=10, mean_img=mean_path)
    mean_img = np.round(mx.nd.load(mean_path)["mean_img"].asnumpy()).astype(np.int16)
    raw = np.stack([im.transpose(2, 0, 1) for im in images]).astype(np.int16)
    np.testing.assert_array_equal(with_img.next().data[0].asnumpy(), np.clip(raw - mean_img, -128, 127))
    with pytest.raises(MXNetError, match="float32, uint8 or int8"):
        mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 16, 16), batch_size=2, dtype="float16")
