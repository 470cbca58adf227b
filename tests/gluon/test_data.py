"""gluon.data: samplers, datasets, DataLoader (threads included) and vision transforms."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import nd
from symjit.gluon import data
from symjit.gluon.data.vision import transforms


def test_batch_sampler_keep_discard_rollover():
    seq = data.SequentialSampler(15)
    assert list(data.BatchSampler(seq, 4, "keep")) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11],
                                                       [12, 13, 14]]
    assert list(data.BatchSampler(seq, 4, "discard")) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert len(data.BatchSampler(seq, 4, "keep")) == 4
    assert len(data.BatchSampler(seq, 4, "discard")) == 3
    roll = data.BatchSampler(seq, 4, "rollover")
    assert list(roll) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    # the 3 left-over indices start the next pass
    assert len(roll) == 4
    assert list(roll) == [[12, 13, 14, 0], [1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]
    with pytest.raises(ValueError, match="last_batch"):
        data.BatchSampler(seq, 4, "bogus")


def test_sequential_random_and_interval_samplers():
    assert list(data.SequentialSampler(3, start=5)) == [5, 6, 7]
    np.random.seed(0)
    r = list(data.RandomSampler(10))
    assert sorted(r) == list(range(10)) and r != list(range(10))
    assert list(data.IntervalSampler(6, 3)) == [0, 3, 1, 4, 2, 5]
    assert list(data.IntervalSampler(6, 4, rollover=False)) == [0, 4]


def test_datasets_and_transforms():
    a = np.arange(12).reshape(6, 2)
    ds = data.ArrayDataset(a, nd.arange(6))
    assert len(ds) == 6
    x, y = ds[2]
    assert x.tolist() == [4, 5] and y == 2.0
    single = data.ArrayDataset(a)
    assert single[1].tolist() == [2, 3]
    with pytest.raises(ValueError):
        data.ArrayDataset(a, np.arange(5))
    t = ds.transform_first(lambda v: v * 10)
    x, y = t[3]
    assert x.tolist() == [60, 70] and y == 3.0
    both = ds.transform(lambda v, w: (v.sum(), w + 1), lazy=False)
    assert isinstance(both, data.SimpleDataset) and both[1] == (5, 2.0)
    simple = data.SimpleDataset(list(range(10)))
    assert [simple.shard(3, i)[:] for i in range(3)] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert list(simple.take(3)[:]) == [0, 1, 2]
    assert list(simple.filter(lambda v: v % 4 == 0)[:]) == [0, 4, 8]


def test_default_batchify_stacks_ndarrays_numpy_and_scalars():
    out = data.default_batchify_fn([nd.array([1, 2]), nd.array([3, 4])])
    assert out.shape == (2, 2) and out.asnumpy().tolist() == [[1, 2], [3, 4]]
    out = data.default_batchify_fn([(np.ones(3, dtype=np.float32), 1), (np.zeros(3, dtype=np.float32), 2)])
    assert isinstance(out, list) and out[0].shape == (2, 3) and out[1].asnumpy().tolist() == [1, 2]
    assert out[0].dtype == np.float32


def test_dataloader_batches_and_last_batch_modes():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    y = np.arange(10, dtype=np.float32)
    ds = data.ArrayDataset(x, y)
    batches = list(data.DataLoader(ds, batch_size=4))
    assert [b[0].shape for b in batches] == [(4, 2), (4, 2), (2, 2)]
    np.testing.assert_array_equal(batches[1][0].asnumpy(), x[4:8])
    np.testing.assert_array_equal(batches[2][1].asnumpy(), y[8:])
    assert len(data.DataLoader(ds, batch_size=4, last_batch="discard")) == 2
    rolled = data.DataLoader(ds, batch_size=4, last_batch="rollover")
    assert len(list(rolled)) == 2 and len(list(rolled)) == 3
    np.random.seed(1)
    seen = np.concatenate([b[1].asnumpy() for b in data.DataLoader(ds, batch_size=3, shuffle=True)])
    assert sorted(seen.tolist()) == y.tolist() and seen.tolist() != y.tolist()


def test_dataloader_argument_errors():
    ds = data.SimpleDataset(list(range(4)))
    with pytest.raises(ValueError, match="batch_size must be specified"):
        data.DataLoader(ds)
    with pytest.raises(ValueError, match="shuffle must not be specified"):
        data.DataLoader(ds, batch_size=2, shuffle=True, sampler=data.SequentialSampler(4))
    bs = data.BatchSampler(data.SequentialSampler(4), 2)
    with pytest.raises(ValueError, match="must not be specified if batch_sampler"):
        data.DataLoader(ds, batch_size=2, batch_sampler=bs)
    got = [b.asnumpy().tolist() for b in data.DataLoader(ds, batch_sampler=bs)]
    assert got == [[0, 1], [2, 3]]


def test_dataloader_workers_match_serial_and_custom_batchify():
    import threading
    threads = set()

    def slow_item(i):
        threads.add(threading.current_thread().name)
        return np.full((2,), i, dtype=np.float32)

    ds = data.SimpleDataset(list(range(23))).transform(slow_item)
    serial = [b.asnumpy() for b in data.DataLoader(ds, batch_size=5)]
    threads.clear()
    parallel = [b.asnumpy() for b in data.DataLoader(ds, batch_size=5, num_workers=3, pin_memory=True,
                                                     thread_pool=True)]
    assert len(serial) == len(parallel) == 5
    for s, p in zip(serial, parallel):
        np.testing.assert_array_equal(s, p)
    assert all(name.startswith("symjit-dataloader") for name in threads)
    summed = list(data.DataLoader(ds, batch_size=5, batchify_fn=lambda items: sum(float(v[0]) for v in items)))
    assert summed == [10.0, 35.0, 60.0, 85.0, 63.0]


def test_vision_transforms_match_numpy():
    rs = np.random.RandomState(0)
    img = rs.randint(0, 256, size=(4, 5, 3)).astype(np.uint8)
    t = transforms.ToTensor()(nd.array(img, dtype="uint8"))
    ref = img.transpose(2, 0, 1).astype(np.float32) / 255
    np.testing.assert_allclose(t.asnumpy(), ref, rtol=1e-6)
    mean, std = (0.1, 0.2, 0.3), (0.5, 0.25, 2.0)
    norm = transforms.Normalize(mean, std)(t)
    np.testing.assert_allclose(norm.asnumpy(), (ref - np.array(mean)[:, None, None]) / np.array(std)[:, None, None],
                               rtol=1e-5)
    comp = transforms.Compose([transforms.Cast("float32"), transforms.ToTensor(), transforms.Normalize(mean, std)])
    np.testing.assert_allclose(comp(nd.array(img, dtype="uint8")).asnumpy(), norm.asnumpy(), rtol=1e-5)
    assert transforms.Cast("float16")(nd.array(img)).dtype == np.float16
    batch = transforms.ToTensor()(nd.array(np.stack([img, img]), dtype="uint8"))
    assert batch.shape == (2, 3, 4, 5)


def test_dataloader_with_transformed_vision_dataset():
    rs = np.random.RandomState(1)
    imgs = rs.randint(0, 256, size=(6, 4, 4, 3)).astype(np.uint8)
    ds = data.ArrayDataset(nd.array(imgs, dtype="uint8"), np.arange(6)).transform_first(transforms.ToTensor())
    x, y = next(iter(data.DataLoader(ds, batch_size=4, num_workers=2)))
    assert x.shape == (4, 3, 4, 4) and y.asnumpy().tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(x.asnumpy(), imgs[:4].transpose(0, 3, 1, 2) / 255.0, rtol=1e-6)


def _write_idx(root, images, labels, prefix="train"):
    import gzip
    import struct
    stem = "train" if prefix == "train" else "t10k"
    with gzip.open(root / f"{stem}-images-idx3-ubyte.gz", "wb") as f:
        f.write(struct.pack(">IIII", 2051, len(images), images.shape[1], images.shape[2]) + images.tobytes())
    with gzip.open(root / f"{stem}-labels-idx1-ubyte.gz", "wb") as f:
        f.write(struct.pack(">II", 2049, len(labels)) + labels.tobytes())


def test_mnist_reads_local_idx_files(tmp_path):
    from symjit.gluon.data.vision import MNIST, FashionMNIST
    rs = np.random.RandomState(0)
    imgs = rs.randint(0, 256, size=(5, 28, 28)).astype(np.uint8)
    labels = np.array([3, 1, 4, 1, 5], dtype=np.uint8)
    _write_idx(tmp_path, imgs, labels, "test")
    ds = MNIST(root=str(tmp_path), train=False)
    assert len(ds) == 5
    x, y = ds[2]
    assert x.shape == (28, 28, 1) and x.dtype == np.uint8 and y == 4
    np.testing.assert_array_equal(x.asnumpy()[..., 0], imgs[2])
    t = FashionMNIST(root=str(tmp_path), train=False, transform=lambda d, l: (d.astype("float32") / 255, l + 1))
    assert t[0][1] == 4
    with pytest.raises(OSError, match="does not download"):
        MNIST(root=str(tmp_path), train=True)


def test_cifar_reads_local_binary_batches(tmp_path):
    import io
    import tarfile
    from symjit.gluon.data.vision import CIFAR10, CIFAR100
    rs = np.random.RandomState(1)
    imgs = rs.randint(0, 256, size=(3, 3, 32, 32)).astype(np.uint8)  # stored channel-major
    rec10 = np.concatenate([np.array([[7], [2], [9]], dtype=np.uint8), imgs.reshape(3, -1)], axis=1)
    with tarfile.open(tmp_path / "cifar-10-binary.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("cifar-10-batches-bin/test_batch.bin")
        info.size = rec10.nbytes
        tar.addfile(info, io.BytesIO(rec10.tobytes()))
    ds = CIFAR10(root=str(tmp_path), train=False)
    assert len(ds) == 3 and ds[1][1] == 2
    np.testing.assert_array_equal(ds[2][0].asnumpy(), imgs[2].transpose(1, 2, 0))
    folder = tmp_path / "cifar-100-binary"
    folder.mkdir()
    rec100 = np.concatenate([np.array([[1, 11], [2, 22], [3, 33]], dtype=np.uint8), imgs.reshape(3, -1)], axis=1)
    (folder / "train.bin").write_bytes(rec100.tobytes())
    assert [CIFAR100(root=str(tmp_path))[i][1] for i in range(3)] == [1, 2, 3]
    assert [CIFAR100(root=str(tmp_path), fine_label=True)[i][1] for i in range(3)] == [11, 22, 33]


def test_random_flips_are_flips_and_seeded():
    img = nd.array(np.arange(24).reshape(2, 4, 3))
    seen = set()
    mx.random.seed(3)
    first = [transforms.RandomFlipLeftRight()(img).asnumpy() for _ in range(12)]
    for out in first:
        if np.array_equal(out, img.asnumpy()):
            seen.add("same")
        else:
            np.testing.assert_array_equal(out, img.asnumpy()[:, ::-1])
            seen.add("flipped")
    assert seen == {"same", "flipped"}
    mx.random.seed(3)
    again = [transforms.RandomFlipLeftRight()(img).asnumpy() for _ in range(12)]
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    outs = {transforms.RandomFlipTopBottom()(img).asnumpy()[0, 0, 0] for _ in range(20)}
    assert outs == {0.0, 12.0}


def test_resize_is_pixel_center_bilinear_and_center_crop():
    img = np.arange(2 * 4 * 1, dtype=np.float32).reshape(2, 4, 1)  # rows [0..3], [4..7]
    up = transforms.Resize((8, 4))(nd.array(img)).asnumpy()
    assert up.shape == (4, 8, 1)
    # row 0 output x=1 samples source x = (1 + .5) * 0.5 - .5 = 0.25, y = (0 + .5) * .5 - .5 -> clamp 0
    np.testing.assert_allclose(up[0, :, 0], [0, 0.25, 0.75, 1.25, 1.75, 2.25, 2.75, 3], rtol=1e-6)
    # y of output row 1 is 0.25 between source rows 0 and 1 (which differ by 4)
    np.testing.assert_allclose(up[1, :, 0] - up[0, :, 0], 1.0, rtol=1e-6)
    same = transforms.Resize((4, 2))(nd.array(img)).asnumpy()
    np.testing.assert_array_equal(same, img)
    u8 = transforms.Resize(3)(nd.array(np.full((6, 6, 3), 200, dtype=np.uint8), dtype="uint8"))
    assert u8.shape == (3, 3, 3) and u8.dtype == np.uint8 and (u8.asnumpy() == 200).all()
    assert transforms.Resize(4, keep_ratio=True)(nd.zeros((8, 16, 3))).shape == (4, 8, 3)
    big = nd.array(np.arange(6 * 8 * 1).reshape(6, 8, 1))
    np.testing.assert_array_equal(transforms.CenterCrop((4, 2))(big).asnumpy(), big.asnumpy()[2:4, 2:6])
    assert transforms.CenterCrop(10)(big).shape == (10, 10, 1)
