"""Bootstrap distributions of sample percentiles, drawn without resampling.

Resampling a million latencies two thousand times costs 2·10⁹ draws. It is not
needed: in a resample of size n from sorted values x₍₁₎ ≤ … ≤ x₍ₙ₎, the q-quantile
(inverted-CDF definition: the m-th smallest, m = ⌈q·n⌉) is at most x₍ⱼ₎ exactly when
at least m resampled values are ≤ x₍ⱼ₎, and that count is Binomial(n, j/n). So

    P(bootstrap q-quantile ≤ x₍ⱼ₎) = P(Binomial(n, j/n) ≥ m),

which is the exact bootstrap distribution. It is concentrated on a band of order
statistics around m (±10 binomial standard deviations here), so only that band is
partitioned out and sorted, and draws are inverse-CDF samples from it: seeded,
vectorised, and O(n) per metric whatever the number of draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats

BAND_SDS = 10.0


def quantile_draws(
    values: np.ndarray, qs: Sequence[float], n_draws: int, rng: np.random.Generator,
) -> np.ndarray:
    """Bootstrap draws of each quantile `qs[i]` (fractions) of the finite `values`:
    shape (len(qs), n_draws); NaN rows when there are none."""
    x = np.asarray(values, dtype=float)
    finite = np.isfinite(x)
    if not finite.all():
        x = x[finite]
    bands = [_band(x.size, q) for q in qs] if x.size else []
    edges = sorted({edge - 1 for lo, hi, _ in bands for edge in (lo, hi)})
    part = np.partition(x, edges) if edges else x  # each band's values lie between its edges

    def band(lo: int, hi: int) -> np.ndarray:
        return np.sort(part[lo - 1 : hi])

    return order_statistic_draws(x.size, band, qs, n_draws, rng)


def order_statistic_draws(
    n: int, band: Callable[[int, int], np.ndarray], qs: Sequence[float], n_draws: int,
    rng: np.random.Generator,
) -> np.ndarray:
    """`quantile_draws` of a sample of `n` values read by rank: `band(lo, hi)` gives
    its order statistics lo..hi (1-based), ascending (for a pooled ITL of hundreds of
    millions of gaps, only those few thousand are ever found)."""
    out = np.full((len(qs), n_draws), np.nan)
    if n == 0:
        return out
    for row, q in enumerate(qs):
        lo, hi, m = _band(n, q)
        ordered = band(lo, hi)
        ranks = np.arange(lo, hi + 1)
        cdf = stats.binom.sf(m - 1, n, ranks / n)
        cdf[-1] = 1.0  # mass above the band is < 1e-20: put it on the last point
        picks = np.searchsorted(cdf, rng.random(n_draws), side="left")
        out[row] = ordered[np.minimum(picks, ordered.size - 1)]
    return out


def band_ranks(n: int, qs: Sequence[float]) -> np.ndarray:
    """The 0-based ranks every draw of `qs` of `n` values may read, ascending."""
    if n == 0:
        return np.empty(0, dtype=np.int64)
    return np.unique(np.concatenate([np.arange(lo - 1, hi)
                                     for lo, hi, _ in (_band(n, q) for q in qs)]))


def percentile_interval(draws: np.ndarray, confidence: float) -> tuple[float, float]:
    """Central `confidence` interval of bootstrap draws (the percentile method)."""
    finite = draws[np.isfinite(draws)]
    if finite.size == 0:
        return math.nan, math.nan
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return float(low), float(high)


def _band(n: int, q: float) -> tuple[int, int, int]:
    """(lowest rank, highest rank, m) of the order statistics that matter for q."""
    m = min(n, max(1, math.ceil(q * n - 1e-9)))
    spread = BAND_SDS * math.sqrt(n * q * (1.0 - q)) + 10.0
    lo = max(1, math.floor(m - spread))
    hi = min(n, math.ceil(m + spread))
    return lo, hi, m
