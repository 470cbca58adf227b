"""Decoded + augmented images per second of symjit's image pipelines against the same pipeline
written in plain Pillow + numpy (torchvision-style), measured in one run on the same record file.

    python benchmarks/bench_data.py [--images 256] [--threads 2] [--workers 2]

The record file holds `--images` JPEG pictures of 500x375 (quality 90). Every pipeline does:
decode -> resize the shorter edge to 256 -> random 224x224 crop -> random horizontal flip ->
float32 CHW normalized by ImageNet's mean/std, batched by 32:
  * ImageRecordIter (resize=256, rand_crop, rand_mirror, mean/std, preprocess_threads);
  * gluon DataLoader over ImageRecordDataset with transforms Resize(256, keep_ratio) ->
    RandomCrop(224) -> RandomFlipLeftRight -> ToTensor -> Normalize, `--workers` processes,
    and the same with `--workers` threads (thread_pool=True);
  * baseline: one Python loop with Pillow (decode, BILINEAR resize, crop, flip) and numpy.
Each is timed over two passes after a warm-up pass (iterators and loaders are built once, as
in training); ratios are against the baseline
(>1 = faster). Never gates CI.
"""
from __future__ import annotations

import argparse
import io
import os
import tempfile
import time

import numpy as np

MEAN = np.array([123.68, 116.28, 103.53], np.float32)
STD = np.array([58.395, 57.12, 57.375], np.float32)
BATCH = 32


def _write_records(path: str, n: int) -> tuple:
    from PIL import Image
    import symjit as mx
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:375, 0:500]
    rec, idx = path + ".rec", path + ".idx"
    w = mx.recordio.MXIndexedRecordIO(idx, rec, "w")
    for i in range(n):
        img = np.stack([x * 255 // 499, y * 255 // 374, (x + y + 7 * i) % 256], -1)
        img = np.clip(img + rng.integers(-25, 26, img.shape), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format="JPEG", quality=90)
        w.write_idx(i, mx.recordio.pack(mx.recordio.IRHeader(0, float(i % 10), i, 0), buf.getvalue()))
    w.close()
    return rec, idx


def _pillow_baseline(rec: str, idx: str):
    """Batches from a plain Pillow + numpy loop (records read with recordio)."""
    from PIL import Image
    import symjit as mx
    reader = mx.recordio.MXIndexedRecordIO(idx, rec, "r")
    rng = np.random.default_rng(1)
    batch = []
    for key in reader.keys:
        header, payload = mx.recordio.unpack(reader.read_idx(key))
        img = Image.open(io.BytesIO(payload)).convert("RGB")
        w, h = img.size
        nw, nh = (256, h * 256 // w) if h > w else (w * 256 // h, 256)
        img = img.resize((nw, nh), Image.BILINEAR)
        x0, y0 = rng.integers(0, nw - 224 + 1), rng.integers(0, nh - 224 + 1)
        img = img.crop((x0, y0, x0 + 224, y0 + 224))
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
        arr = (np.asarray(img, np.float32) - MEAN) / STD
        batch.append(arr.transpose(2, 0, 1))
        if len(batch) == BATCH:
            yield np.stack(batch)
            batch = []
    if batch:
        yield np.stack(batch)


def _record_iter(rec: str, idx: str, threads: int):
    """A function giving one pass of batches over one ImageRecordIter."""
    import symjit as mx
    it = mx.io.ImageRecordIter(path_imgrec=rec, path_imgidx=idx, data_shape=(3, 224, 224), batch_size=BATCH,
                               resize=256, rand_crop=True, rand_mirror=True, mean_r=MEAN[0], mean_g=MEAN[1],
                               mean_b=MEAN[2], std_r=STD[0], std_g=STD[1], std_b=STD[2],
                               preprocess_threads=threads, round_batch=False)

    def one_pass():
        it.reset()
        for b in it:
            yield b.data[0].asnumpy()
    return one_pass


def _data_loader(rec: str, workers: int, thread_pool: bool = False):
    """A function giving one pass of batches over one DataLoader (its workers are kept)."""
    from symjit.gluon.data import DataLoader
    from symjit.gluon.data.vision import ImageRecordDataset, transforms as T
    pipeline = T.Compose([T.Resize(256, keep_ratio=True), T.RandomCrop(224), T.RandomFlipLeftRight(),
                          T.ToTensor(), T.Normalize(tuple(MEAN / 255), tuple(STD / 255))])
    loader = DataLoader(ImageRecordDataset(rec).transform_first(pipeline), batch_size=BATCH, num_workers=workers,
                        thread_pool=thread_pool)

    def one_pass():
        for data, _ in loader:
            yield data.asnumpy()
    return one_pass


def _images_per_second(make) -> float:
    for _ in make():                                    # warm-up pass: pools, JIT compiles
        pass
    count, start = 0, time.perf_counter()
    for _ in range(2):
        for batch in make():
            count += len(batch)
    return count / (time.perf_counter() - start)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--images", type=int, default=256)
    p.add_argument("--threads", type=int, default=2, help="ImageRecordIter preprocess_threads")
    p.add_argument("--workers", type=int, default=2, help="DataLoader worker processes")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rec, idx = _write_records(os.path.join(tmp, "bench"), args.images)
        base = _images_per_second(lambda: _pillow_baseline(rec, idx))
        results = {
            "pillow+numpy loop (baseline)": base,
            f"ImageRecordIter, {args.threads} threads": _images_per_second(_record_iter(rec, idx, args.threads)),
            f"DataLoader, {args.workers} workers": _images_per_second(_data_loader(rec, args.workers)),
            f"DataLoader, {args.workers} threads": _images_per_second(_data_loader(rec, args.workers, True)),
        }
    print(f"{args.images} JPEG 500x375 -> 224x224 float32, batch {BATCH}, {os.cpu_count()} CPUs")
    print(f"{'pipeline':>34} {'images/s':>9} {'vs baseline':>11}")
    for name, ips in results.items():
        print(f"{name:>34} {ips:9.1f} {ips / base:11.2f}")


if __name__ == "__main__":
    main()
