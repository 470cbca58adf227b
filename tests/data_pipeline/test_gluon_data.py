"""gluon.data pieces of the image pipeline: record/folder/list datasets of encoded images,
FilterSampler, every vision transform (shapes, value ranges, numpy references), the vision
datasets' clear errors for missing files, and DataLoader worker processes (same batches as
num_workers=0, worker errors surfacing in the parent, no hang)."""
from __future__ import annotations

import os
import random

import numpy as np
import pytest

import symjit as mx
from symjit import nd
from symjit.gluon import data
from symjit.gluon.data import vision
from symjit.gluon.data.vision import transforms as T
from data_pipeline.image_files import encode, picture, write_rec


@pytest.fixture
def images():
    return [picture(10, 12, seed=i) for i in range(6)]


def test_record_file_and_image_record_datasets(tmp_path, images):
    rec, _ = write_rec(str(tmp_path), images, [float(i) for i in range(6)])
    raw = data.RecordFileDataset(rec)
    assert len(raw) == 6 and isinstance(raw[2], bytes)
    ds = vision.ImageRecordDataset(rec)
    img, label = ds[3]
    np.testing.assert_array_equal(img.asnumpy(), images[3])
    assert label == 3.0
    gray = vision.ImageRecordDataset(rec, flag=0)
    assert gray[0][0].shape == (10, 12, 1)
    t = vision.ImageRecordDataset(rec, transform=lambda x, y: (x.shape, y + 1))
    assert t[1] == ((10, 12, 3), 2.0)
    os.remove(str(tmp_path / "data.idx"))
    with pytest.raises(OSError, match="data.idx"):
        data.RecordFileDataset(rec)


def test_image_folder_and_list_datasets(tmp_path, images):
    for cls, idxs in (("cat", (0, 1)), ("dog", (2, 3, 4))):
        (tmp_path / cls).mkdir()
        for i in idxs:
            (tmp_path / cls / f"{i}.png").write_bytes(encode(images[i]))
    (tmp_path / "dog" / "notes.txt").write_text("not an image")
    with pytest.warns(UserWarning, match="notes.txt"):
        ds = vision.ImageFolderDataset(str(tmp_path))
    assert ds.synsets == ["cat", "dog"] and len(ds) == 5
    img, label = ds[2]
    assert label == 1
    np.testing.assert_array_equal(img.asnumpy(), images[2])
    os.remove(str(tmp_path / "dog" / "notes.txt"))
    tds = vision.ImageFolderDataset(str(tmp_path), transform=lambda x, y: (x.asnumpy().mean(), y))
    assert tds[0][1] == 0
    (tmp_path / "list.lst").write_text("0\t5.0\tcat/0.png\n7\t1.5\t2.5\tdog/3.png\n")
    lst = vision.ImageListDataset(str(tmp_path), "list.lst")
    assert len(lst) == 2
    img, label = lst[1]
    np.testing.assert_array_equal(img.asnumpy(), images[3])
    np.testing.assert_array_equal(label.asnumpy(), [1.5, 2.5])
    from_list = vision.ImageListDataset(str(tmp_path), [[4.0, "dog/4.png"], [1.0, 2.0, "cat/1.png"]])
    assert from_list[0][1].asnumpy().tolist() == [4.0] and from_list[1][1].asnumpy().tolist() == [1.0, 2.0]


def test_filter_sampler_and_filter():
    ds = data.SimpleDataset(list(range(10)))
    sampler = data.FilterSampler(lambda v: v % 3 == 0, ds)
    assert list(sampler) == [0, 3, 6, 9] and len(sampler) == 4
    odd = ds.filter(lambda v: v % 2)
    assert len(odd) == 5 and odd[4] == 9


@pytest.mark.parametrize("cls, files", [
    (vision.MNIST, "train-labels-idx1-ubyte.gz"),
    (vision.FashionMNIST, "train-labels-idx1-ubyte.gz"),
    (vision.CIFAR10, "cifar-10-binary.tar.gz"),
    (vision.CIFAR100, "cifar-100-binary.tar.gz"),
])
def test_vision_datasets_name_the_missing_file(tmp_path, cls, files):
    with pytest.raises(OSError, match=files):
        cls(root=str(tmp_path))


def test_geometric_transforms(images):
    x = nd.array(images[0], dtype=np.uint8)
    assert T.Resize((6, 5))(x).shape == (5, 6, 3)
    assert T.Resize((6, 5), interpolation=0)(nd.array(np.stack(images[:2]), dtype=np.uint8)).shape == (2, 5, 6, 3)
    np.testing.assert_array_equal(T.CropResize(2, 1, 4, 3)(x).asnumpy(), images[0][1:4, 2:6])
    assert T.CropResize(2, 1, 4, 3, size=(8, 6))(x).shape == (6, 8, 3)
    np.testing.assert_array_equal(T.CenterCrop((4, 2))(x).asnumpy(), images[0][4:6, 4:8])
    random.seed(0)
    assert T.RandomResizedCrop(7)(x).shape == (7, 7, 3)
    out = T.RandomCrop((12, 10), pad=2)(x).asnumpy()
    assert out.shape == (10, 12, 3)
    padded = np.pad(images[0], ((2, 2), (2, 2), (0, 0)))
    assert any(np.array_equal(padded[y:y + 10, x0:x0 + 12], out) for y in range(5) for x0 in range(5))
    t = T.ToTensor()(x)
    square = T.ToTensor()(nd.array(images[0][:10, :10], dtype=np.uint8))
    rot = T.Rotate(90)(square).asnumpy()
    np.testing.assert_allclose(rot, np.rot90(square.asnumpy(), k=1, axes=(1, 2)), atol=1e-5)
    np.testing.assert_allclose(T.Rotate(0)(t).asnumpy(), t.asnumpy(), atol=1e-6)
    zoomed = T.Rotate(45, zoom_in=True)(square).asnumpy()
    assert zoomed.shape == (3, 10, 10) and (zoomed[:, 0, 0] != 0).any()   # no empty corner
    np.random.seed(1)
    assert T.RandomRotation((-30, 30))(t).shape == t.shape
    with pytest.raises(TypeError, match="float32"):
        T.Rotate(10)(x)


def test_colour_transforms_ranges_and_formulas(images):
    f = nd.array(images[1].astype(np.float32))
    mx.random.seed(2)
    for block in (T.RandomBrightness(0.3), T.RandomContrast(0.3), T.RandomSaturation(0.3), T.RandomHue(0.1),
                  T.RandomColorJitter(0.2, 0.2, 0.2, 0.1), T.RandomLighting(0.1)):
        out = block(f)
        assert out.shape == f.shape and out.dtype == np.float32
    u8 = nd.array(images[1], dtype=np.uint8)
    for block in (T.RandomBrightness(0.9), T.RandomColorJitter(0.5, 0.5, 0.5, 0.2)):
        out = block(u8).asnumpy()
        assert out.dtype == np.uint8 and out.min() >= 0 and out.max() <= 255
    # brightness factor from [max(0, 1 - b), 1 + b]: every output is input * one factor
    out = T.RandomBrightness(0.5)(f).asnumpy()
    ratio = out[f.asnumpy() > 0] / f.asnumpy()[f.asnumpy() > 0]
    assert np.ptp(ratio) < 1e-5 and 0.5 <= ratio[0] <= 1.5
    assert T.Cast("float16")(u8).dtype == np.float16
    norm = T.Normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25))(T.ToTensor()(u8)).asnumpy()
    np.testing.assert_allclose(norm, (images[1].transpose(2, 0, 1) / 255 - 0.5) / 0.25, rtol=1e-5, atol=1e-6)


def test_compose_random_apply_and_hybrid_random_apply(images):
    x = nd.array(images[2], dtype=np.uint8)
    pipeline = T.Compose([T.Resize(8), T.RandomFlipLeftRight(), T.RandomColorJitter(0.1, 0.1, 0.1),
                          T.ToTensor(), T.Normalize(0.5, 0.25)])
    assert pipeline(x).shape == (3, 8, 8)
    hc = T.HybridCompose([T.Resize(8), T.ToTensor()])
    assert hc(x).shape == (3, 8, 8)
    flip = T.RandomApply(T.Compose([T.CropResize(0, 0, 4, 4)]), p=1.0)
    assert flip(x).shape == (4, 4, 3)
    assert T.RandomApply(T.CropResize(0, 0, 4, 4), p=0.0)(x).shape == x.shape
    f = nd.array(images[2].astype(np.float32))
    always = T.HybridRandomApply(T.RandomBrightness(0.0), p=1.0)
    np.testing.assert_allclose(always(f).asnumpy(), f.asnumpy())
    never = T.HybridRandomApply(T.Cast("float32"), p=0.0)
    np.testing.assert_array_equal(never(f).asnumpy(), f.asnumpy())


def _square(i):
    return np.full((2, 2), i, dtype=np.float32), i * 10


def test_dataloader_processes_match_serial(tmp_path, images):
    ds = data.SimpleDataset(list(range(17))).transform(_square)
    serial = [[f.asnumpy() for f in b] for b in data.DataLoader(ds, batch_size=4)]
    loader = data.DataLoader(ds, batch_size=4, num_workers=2)
    for _ in range(2):                                   # the worker pool is reused across epochs
        procs = [[f.asnumpy() for f in b] for b in loader]
        assert len(procs) == len(serial) == 5
        for s, p in zip(serial, procs):
            for a, b in zip(s, p):
                np.testing.assert_array_equal(a, b)
    rec, _ = write_rec(str(tmp_path), images, [float(i) for i in range(6)])
    vds = vision.ImageRecordDataset(rec).transform_first(T.Compose([T.Resize(8), T.ToTensor()]))
    serial = [b[0].asnumpy() for b in data.DataLoader(vds, batch_size=4)]
    procs = [b[0].asnumpy() for b in data.DataLoader(vds, batch_size=4, num_workers=2)]
    for s, p in zip(serial, procs):
        np.testing.assert_allclose(s, p)


def _fails_on_five(i):
    if i == 5:
        raise ValueError("sample five is broken")
    return np.float32(i)


def test_dataloader_worker_errors_surface_in_the_parent():
    ds = data.SimpleDataset(list(range(8))).transform(_fails_on_five)
    with pytest.raises(RuntimeError, match="sample five is broken"):
        list(data.DataLoader(ds, batch_size=2, num_workers=2, timeout=60))
    with pytest.raises(ValueError, match="sample five is broken"):
        list(data.DataLoader(ds, batch_size=2, num_workers=2, thread_pool=True))


def _dies(i):
    os._exit(3)


def test_dataloader_dead_worker_raises_instead_of_hanging():
    ds = data.SimpleDataset(list(range(4))).transform(_dies)
    with pytest.raises(RuntimeError, match="died"):
        list(data.DataLoader(ds, batch_size=2, num_workers=1, timeout=60))


def test_dataloader_stopped_early_frees_its_shared_blocks():
    before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else None
    ds = data.SimpleDataset(list(range(40))).transform(_square)
    loader = data.DataLoader(ds, batch_size=2, num_workers=2, prefetch=6)
    for i, _ in enumerate(loader):
        if i == 1:
            break
    del loader
    import gc
    gc.collect()
    if before is not None:
        import time
        for _ in range(50):                       # the discarded batches are freed as they complete
            leaked = {n for n in set(os.listdir("/dev/shm")) - before if n.startswith("psm_")}
            if not leaked:
                break
            time.sleep(0.1)
        assert not leaked


def test_hybridized_random_transforms_draw_anew_each_call():
    img = nd.array(np.arange(24, dtype=np.float32).reshape(2, 4, 3))
    block = T.HybridCompose([T.RandomFlipLeftRight(), T.RandomBrightness(0.5)])
    mx.random.seed(11)
    outs = [block(img).asnumpy() for _ in range(12)]
    flips = {bool(o[0, 0, 1] > o[0, -1, 1]) for o in outs}
    factors = {round(float(o.sum() / img.asnumpy().sum()), 4) for o in outs}
    assert flips == {True, False} and len(factors) > 6
    assert all(0.5 <= f <= 1.5 for f in factors)


def _slow(i):
    import time
    time.sleep(3)
    return np.float32(i)


def test_dataloader_timeout_raises_instead_of_hanging():
    ds = data.SimpleDataset(list(range(2))).transform(_slow)
    loader = data.DataLoader(ds, batch_size=2, num_workers=1, timeout=0.5)
    with pytest.raises(RuntimeError, match="timeout=0.5"):
        next(iter(loader))


def test_record_datasets_read_safely_from_many_threads(tmp_path, images):
    from concurrent.futures import ThreadPoolExecutor
    rec, _ = write_rec(str(tmp_path), images * 5, [float(i) for i in range(30)])
    ds = vision.ImageRecordDataset(rec)
    with ThreadPoolExecutor(4) as pool:
        labels = list(pool.map(lambda i: ds[i][1], [i % 30 for i in range(300)]))
    assert labels == [float(i % 30) for i in range(300)]
    batches = list(data.DataLoader(ds.transform_first(T.ToTensor()), batch_size=5, num_workers=3, thread_pool=True))
    assert np.concatenate([b[1].asnumpy() for b in batches]).tolist() == [float(i) for i in range(30)]
