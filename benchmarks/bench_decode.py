"""JPEG/PNG decode speed of the candidate decoders for `mx.image.imdecode`: Pillow, simplejpeg
(libjpeg-turbo, JPEG only) and OpenCV headless, measured in one run on the same encoded bytes.

    python benchmarks/bench_decode.py [--reps 200]

Images are 224x224 and 500x375 (ImageNet-typical) RGB pictures made of smooth gradients plus
noise, encoded once as JPEG (quality 90) and PNG. Each decoder is timed best-of-5 over `reps`
decodes to an HxWx3 uint8 array, interleaved so machine load affects all alike; the ratio is
against Pillow (>1 = faster than Pillow). Decoders that are not installed are skipped. Never
gates CI.

The same run times a bilinear resize of the 500x375 picture to 256x192 (OpenCV and Pillow), the other per-image cost of an augmentation pipeline.
"""
from __future__ import annotations

import argparse
import io
import time

import numpy as np


def _picture(h: int, w: int) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    rng = np.random.default_rng(0)
    img = np.stack([x / w * 255, y / h * 255, (x + y) / (w + h) * 255], axis=-1)
    img += rng.normal(0, 12, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def _encode(img: np.ndarray, fmt: str) -> bytes:
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray(img).save(out, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return out.getvalue()


def _decoders() -> dict:
    from PIL import Image
    dec = {"pillow": lambda b, fmt: np.asarray(Image.open(io.BytesIO(b)).convert("RGB"))}
    try:
        import simplejpeg
        dec["simplejpeg"] = lambda b, fmt: simplejpeg.decode_jpeg(b, colorspace="RGB") if fmt == "JPEG" else None
    except ImportError:
        pass
    try:
        import cv2
        cv2.setNumThreads(1)
        dec["opencv"] = lambda b, fmt: cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR)
    except ImportError:
        pass
    return dec


def _best(fn, reps: int) -> float:
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=200)
    args = p.parse_args()
    decoders = _decoders()
    print(f"{'image':>14} {'decoder':>11} {'us/decode':>10} {'vs pillow':>9}")
    for (h, w) in ((224, 224), (375, 500)):
        img = _picture(h, w)
        for fmt in ("JPEG", "PNG"):
            data = _encode(img, fmt)
            times = {name: float("inf") for name in decoders}
            for _ in range(5):
                for name, fn in decoders.items():
                    if fn(data, fmt) is None:
                        times[name] = None
                        continue
                    times[name] = min(times[name], _best(lambda: fn(data, fmt), args.reps))
            for name, t in times.items():
                if t is None:
                    continue
                print(f"{f'{w}x{h} {fmt}':>14} {name:>11} {t * 1e6:10.1f} {times['pillow'] / t:9.2f}")
    _bench_resize(args.reps)


def _bench_resize(reps: int) -> None:
    from PIL import Image
    img = _picture(375, 500)
    fns = {"pillow": lambda: np.asarray(Image.fromarray(img).resize((256, 192), Image.BILINEAR))}
    try:
        import cv2
        fns["opencv"] = lambda: cv2.resize(img, (256, 192), interpolation=cv2.INTER_LINEAR)
    except ImportError:
        pass
    times = {name: min(_best(fn, max(reps // 10, 1)) for _ in range(3)) for name, fn in fns.items()}
    print(f"{'resize':>14} {'library':>11} {'us/resize':>10} {'vs pillow':>9}")
    for name, t in times.items():
        print(f"{'500x375->256':>14} {name:>11} {t * 1e6:10.1f} {times['pillow'] / t:9.2f}")


if __name__ == "__main__":
    main()
