"""Shared timing helpers for the benchmark scripts: medians of repeated runs, and a printed
table of ratios against baselines measured in the same process (machines are noisy)."""
from __future__ import annotations

import statistics
import time
from typing import Callable


def median_time(fn: Callable[[], object], repeat: int = 20, warmup: int = 3, inner: int = 1) -> float:
    """Median seconds per call of `fn` over `repeat` samples of `inner` calls each."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def report(title: str, rows: list[tuple[str, float]], baseline: str) -> None:
    """Print each row's time and its ratio to the baseline row."""
    base = dict(rows)[baseline]
    print(f"== {title}")
    for name, t in rows:
        unit, scale = ("us", 1e6) if t < 1e-3 else ("ms", 1e3)
        print(f"  {name:38s} {t * scale:10.3f} {unit}   x{t / base:6.3f} of {baseline}")
