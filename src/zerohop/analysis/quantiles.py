"""Exact percentiles from records, and per-group percentiles without a Python loop.

The metric contract fixes the figures every table shows: p50, p90, p95, p99, p99.9 plus
mean/min/max, computed from the exact values (never Locust's rounded buckets). All
percentiles here use numpy's default linear interpolation so the summary, the time
series and the comparison agree on what "p99" means.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

PERCENTILES: tuple[tuple[str, float], ...] = (
    ("p50", 50.0),
    ("p90", 90.0),
    ("p95", 95.0),
    ("p99", 99.0),
    ("p99.9", 99.9),
)
PERCENTILE_NAMES: tuple[str, ...] = tuple(name for name, _ in PERCENTILES)

# Quantile grid for CDF charts: even steps in the body, denser in the tail, so a
# chart of a million requests stays a few hundred points and still shows p99.9.
CDF_GRID: np.ndarray = np.unique(
    np.concatenate(
        [
            np.linspace(0.0, 0.9, 91),
            np.linspace(0.9, 0.99, 46),
            np.linspace(0.99, 0.999, 19),
            np.array([0.9995, 1.0]),
        ]
    )
)


@dataclass(frozen=True)
class Distribution:
    """Summary of one latency metric: count, mean/min/max and the named percentiles.
    Every figure is NaN when `n == 0`, so callers never special-case empty data."""

    n: int
    mean: float
    min: float
    max: float
    percentiles: dict[str, float] = field(default_factory=dict)
    cdf: tuple[np.ndarray, np.ndarray] | None = None  # (value, fraction) at CDF_GRID

    def get(self, stat: str) -> float:
        """A figure by name: `p50` ... `p99.9`, `mean`, `min` or `max`."""
        if stat in self.percentiles:
            return self.percentiles[stat]
        if stat in ("mean", "min", "max"):
            return float(getattr(self, stat))
        raise KeyError(f"unknown statistic {stat!r}")


def describe(values: np.ndarray, *, with_cdf: bool = False) -> Distribution:
    """Count, mean, min, max and p50..p99.9 of the finite values in `values`, and
    optionally the CDF at CDF_GRID — all from one copy and one partition of the data,
    which matters for tens of millions of pooled ITL values."""
    work = _finite_copy(values)
    n = work.size
    if n == 0:
        nan = float("nan")
        return Distribution(0, nan, nan, nan, {name: nan for name in PERCENTILE_NAMES})
    fractions = np.array([q / 100.0 for _, q in PERCENTILES])
    if with_cdf:
        fractions = np.concatenate([fractions, CDF_GRID])
    points = _quantiles_in_place(work, fractions)
    named = points[: len(PERCENTILES)]
    return Distribution(
        n=int(n),
        mean=float(work.mean()),
        min=float(work.min()),
        max=float(work.max()),
        percentiles={name: float(v) for (name, _), v in zip(PERCENTILES, named, strict=True)},
        cdf=(points[len(PERCENTILES) :], CDF_GRID.copy()) if with_cdf else None,
    )


def grouped_quantiles(
    codes: np.ndarray, values: np.ndarray, n_groups: int, qs: np.ndarray, *, min_count: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Quantiles `qs` (fractions in [0, 1]) of `values` within each group code.

    Returns `(table, counts)`: `table[g, i]` is the `qs[i]` quantile of group g with
    numpy's linear interpolation (NaN where the group has fewer than `min_count`
    finite values), `counts[g]` the number of finite values. Codes outside
    `[0, n_groups)` are ignored. One lexsort for all groups: fast for 10^6 values.
    """
    qs = np.asarray(qs, dtype=float)
    codes = np.asarray(codes)
    values = np.asarray(values, dtype=float)
    keep = np.isfinite(values) & (codes >= 0) & (codes < n_groups)
    codes_k = codes[keep].astype(np.int64)
    values_k = values[keep]
    counts = np.bincount(codes_k, minlength=n_groups)[:n_groups]
    table = np.full((n_groups, qs.size), np.nan)
    if codes_k.size == 0:
        return table, counts
    order = np.lexsort((values_k, codes_k))
    sorted_values = values_k[order]
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    has = counts >= max(min_count, 1)
    g_starts = starts[has][:, None]
    g_last = (counts[has] - 1)[:, None]
    pos = g_last * qs[None, :]
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, g_last)
    frac = pos - lo
    low_v = sorted_values[g_starts + lo]
    high_v = sorted_values[g_starts + hi]
    table[has] = low_v + (high_v - low_v) * frac
    return table, counts


def cdf_points(values: np.ndarray, grid: np.ndarray = CDF_GRID) -> tuple[np.ndarray, np.ndarray]:
    """(latency, cumulative fraction) pairs at fixed quantiles: a CDF of any size in
    a few hundred points."""
    finite = _finite(values)
    if finite.size == 0:
        return np.array([]), np.array([])
    return np.quantile(finite, grid), grid.copy()


def _quantiles_in_place(work: np.ndarray, fractions: np.ndarray) -> np.ndarray:
    """numpy's default (linear) quantiles, partitioning `work` in place: one
    partition for every requested quantile instead of a copy per call."""
    position = (work.size - 1) * fractions
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, work.size - 1)
    work.partition(np.unique(np.concatenate([low, high])))
    low_v, high_v = work[low], work[high]
    return low_v + (high_v - low_v) * (position - low)


def _finite_copy(values: np.ndarray) -> np.ndarray:
    """A private float copy without NaN/inf (exactly one copy either way)."""
    arr = np.asarray(values, dtype=float)
    finite = np.isfinite(arr)
    return arr.copy() if finite.all() else arr[finite]


def _finite(values: np.ndarray) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    return arr[np.isfinite(arr)]
