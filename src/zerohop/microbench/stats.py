"""Summary statistics for repeated timing samples, and the unit conversions around them.

Medians and high percentiles, not means, are the headline: timing noise is one-sided
(interrupts, clock ramps, other tenants only ever add time), so the median says what a
request usually costs and p99 what the tail costs. The spread (min, max, stdev) travels
with every figure so that two runs can be compared against their own noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from zerohop.microbench.schema import Stat

GB = 1e9  # GB/s means 1e9 bytes per second


def summarize(samples: Sequence[float], *, unit: str, description: str = "") -> Stat:
    """Median/p50, p99 (linear interpolation between order statistics, numpy's default),
    min, max, mean and sample standard deviation of `samples`."""
    values = np.asarray(samples, dtype=np.float64)
    if values.size == 0:
        raise ValueError(f"no samples to summarize ({description or unit})")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"non-finite sample in {description or unit}")
    p50, p99 = (float(v) for v in np.percentile(values, [50.0, 99.0]))
    stdev = float(np.std(values, ddof=1)) if values.size > 1 else 0.0
    lo, hi = float(values.min()), float(values.max())
    # The mean of floats can land a rounding error outside [min, max] on constant input.
    mean = min(max(float(values.mean()), lo), hi)
    return Stat(
        unit=unit,
        median=p50,
        p50=p50,
        p99=p99,
        min=lo,
        max=hi,
        mean=mean,
        stdev=stdev,
        n=int(values.size),
        description=description,
    )


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear between order statistics."""
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile {q} outside 0..100")
    values = np.asarray(samples, dtype=np.float64)
    if values.size == 0:
        raise ValueError("no samples")
    return float(np.percentile(values, q))


def gbps(size_bytes: float, seconds: float) -> float:
    """Achieved throughput in GB/s (1e9 bytes per second)."""
    if seconds <= 0 or not math.isfinite(seconds):
        raise ValueError(f"elapsed time must be positive, got {seconds}")
    return size_bytes / seconds / GB
