"""Exact percentiles from records, and per-group percentiles without a Python loop.

The metric contract fixes the figures every table shows: p50, p90, p95, p99, p99.9 plus
mean/min/max, computed from the exact values (never Locust's rounded buckets). All
percentiles here use numpy's default linear interpolation so the summary, the time
series and the comparison agree on what "p99" means.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    optionally the CDF at CDF_GRID, from one private copy sorted in place (numpy's
    vectorised sort beats a partition at the ~190 ranks a CDF needs:
    tests/bench/bench_report_scale.py)."""
    work = _finite_copy(values)
    work.sort()
    return describe_sorted([work], with_cdf=with_cdf)


def describe_sorted(segments: Sequence[np.ndarray], *, with_cdf: bool = False) -> Distribution:
    """`describe` of the values of several already sorted, finite arrays taken
    together, without joining them: each rank is selected across the segments (the
    `all` row of ten million requests' ITL gaps costs no extra copy)."""
    parts = [s for s in segments if s.size]
    n = sum(s.size for s in parts)
    if n == 0:
        nan = float("nan")
        return Distribution(0, nan, nan, nan, {name: nan for name in PERCENTILE_NAMES})
    fractions = np.array([q / 100.0 for _, q in PERCENTILES])
    if with_cdf:
        fractions = np.concatenate([fractions, CDF_GRID])
    points = quantiles_sorted(parts, fractions)
    named = points[: len(PERCENTILES)]
    return Distribution(
        n=int(n),
        mean=float(sum(float(s.sum()) for s in parts) / n),
        min=float(min(s[0] for s in parts)),
        max=float(max(s[-1] for s in parts)),
        percentiles={name: float(v) for (name, _), v in zip(PERCENTILES, named, strict=True)},
        cdf=(points[len(PERCENTILES) :], CDF_GRID.copy()) if with_cdf else None,
    )


def quantiles_sorted(segments: Sequence[np.ndarray], fractions: np.ndarray) -> np.ndarray:
    """numpy's default (linear) quantiles of the sorted, non-empty `segments` taken
    together."""
    low, high, weight = linear_positions(sum(s.size for s in segments), fractions)
    low_v, high_v = select_ranks(segments, low), select_ranks(segments, high)
    return low_v + (high_v - low_v) * weight


def select_ranks(segments: Sequence[np.ndarray], ranks: np.ndarray) -> np.ndarray:
    """The values at 0-based `ranks` of the sorted `segments` merged (exact).

    For each segment, a binary search (all ranks at once) finds its first value
    whose count of values <= it over every segment exceeds the rank; the smallest of
    those candidates is the ranked value. O(len(ranks) * log(n) * segments**2)."""
    ranks = np.asarray(ranks, dtype=np.int64)
    if len(segments) == 1:
        return segments[0][ranks]
    best = np.full(ranks.size, np.inf)
    for segment in segments:
        lo = np.zeros(ranks.size, dtype=np.int64)
        hi = np.full(ranks.size, segment.size, dtype=np.int64)  # hi = "none found"
        while (open_ := lo < hi).any():
            mid = (lo + hi) // 2
            at = segment[np.minimum(mid, segment.size - 1)]
            enough = _count_at_most(segments, at) > ranks
            hi = np.where(open_ & enough, mid, hi)
            lo = np.where(open_ & ~enough, mid + 1, lo)
        found = hi < segment.size
        best[found] = np.minimum(best[found], segment[hi[found]])
    return best


def _count_at_most(segments: Sequence[np.ndarray], values: np.ndarray) -> np.ndarray:
    total = np.zeros(values.shape, dtype=np.int64)
    for segment in segments:
        total += np.searchsorted(segment, values, side="right")
    return total


def grouped_quantiles(
    codes: np.ndarray, values: np.ndarray, n_groups: int, qs: np.ndarray, *, min_count: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Quantiles `qs` (fractions in [0, 1]) of `values` within each group code.

    Returns `(table, counts)`: `table[g, i]` is the `qs[i]` quantile of group g with
    numpy's linear interpolation (NaN where the group has fewer than `min_count`
    finite values), `counts[g]` the number of finite values. Codes outside
    `[0, n_groups)` are ignored. The values are grouped by a stable sort of the
    codes (none when they already ascend, as a run's time windows do), then each
    group is sorted in place: ~40x faster than one lexsort at 10^7 values
    (tests/bench/bench_report_scale.py).
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
    if (np.diff(codes_k) < 0).any():
        narrow = codes_k.astype(np.int16) if n_groups <= np.iinfo(np.int16).max else codes_k
        sorted_values = values_k[np.argsort(narrow, kind="stable")]  # radix sort if int16
    else:
        sorted_values = values_k  # a private copy already (boolean indexing)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    for g in np.flatnonzero(counts > 1):
        sorted_values[starts[g] : starts[g] + counts[g]].sort()
    has = counts >= max(min_count, 1)
    g_starts = starts[has][:, None]
    lo, hi, frac = linear_positions(counts[has][:, None], qs[None, :])
    low_v = sorted_values[g_starts + lo]
    high_v = sorted_values[g_starts + hi]
    table[has] = low_v + (high_v - low_v) * frac
    return table, counts


def linear_positions(n: int | np.ndarray, fractions: np.ndarray,
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """numpy's default (linear) quantile of `n` sorted values, as ranks: the 0-based
    ranks either side of each fraction and the weight of the upper one (`n` an array
    of group sizes broadcasts against `fractions`)."""
    position = (n - 1) * np.asarray(fractions, dtype=float)
    low = np.floor(position).astype(np.int64)
    return low, np.minimum(low + 1, n - 1), position - low


def numpy_lerp(low: np.ndarray, high: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """`np.quantile`'s own interpolation between the values at `linear_positions`,
    to its last bit: from the nearer end (the report's tables lerp from the lower
    one, `quantiles_sorted`, which may differ in the last bit)."""
    step = high - low
    out = low + step * weight
    upper = weight >= 0.5
    out[upper] = (high - step * (1.0 - weight))[upper]
    return out


def _finite_copy(values: np.ndarray) -> np.ndarray:
    """A private float copy without NaN/inf (exactly one copy either way)."""
    arr = np.asarray(values, dtype=float)
    finite = np.isfinite(arr)
    return arr.copy() if finite.all() else arr[finite]
