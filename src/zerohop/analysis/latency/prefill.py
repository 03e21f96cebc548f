"""TTFT against prompt length: the fitted prefill slope, robust to queueing outliers.

Time to first token grows with the prompt because prefill does work per input
token; the slope (ms per 1,000 input tokens) is the figure to compare across stacks.
A least-squares line is dragged by the few requests that queued behind others, so
the fit is Theil–Sen (median of pairwise slopes, scipy) on a seeded subsample of at
most `max_fit_points` ok requests — O(n²) pairs stays cheap that way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from zerohop.analysis.run_data import category_codes

MIN_POINTS = 10


@dataclass(frozen=True)
class PrefillFit:
    workload: str
    n: int  # ok requests with both a TTFT and an input token count
    slope_ms_per_1k: float
    slope_ci_ms_per_1k: tuple[float, float]  # 95 % (Theil–Sen's own interval)
    intercept_ms: float
    note: str | None  # why there is no slope, when there is none
    points_tokens: np.ndarray  # a subsample for the scatter chart
    points_ttft_ms: np.ndarray


def fit_prefill(
    requests: pd.DataFrame,
    *,
    max_fit_points: int = 1500,
    max_plot_points: int = 1500,
    seed: int = 0,
) -> list[PrefillFit]:
    """One fit per workload (ok requests only), in name order."""
    ok = (requests["outcome"] == "ok").to_numpy()
    tokens = requests["input_tokens"].to_numpy(dtype=float)
    ttft = requests["ttft_ms"].to_numpy(dtype=float)
    usable = ok & np.isfinite(tokens) & np.isfinite(ttft)
    codes, names = category_codes(requests["workload"])
    fits = []
    for code in sorted(set(codes[usable].tolist()), key=lambda c: names[c]):
        name = names[code]
        mask = usable & (codes == code)
        fits.append(fit_one(name, tokens[mask], ttft[mask], max_fit_points, max_plot_points, seed))
    return fits


def fit_one(
    name: str,
    tokens: np.ndarray,
    ttft_ms: np.ndarray,
    max_fit_points: int,
    max_plot_points: int,
    seed: int,
) -> PrefillFit:
    """Theil–Sen fit of ttft_ms on input tokens for one workload."""
    rng = np.random.default_rng(seed)
    plot = _subsample(tokens.size, max_plot_points, rng)
    n = int(tokens.size)
    nan = math.nan
    note: str | None = None
    if n < MIN_POINTS:
        note = f"only {n} ok requests with TTFT and prompt length (need {MIN_POINTS})"
    elif np.unique(tokens).size < 2:
        note = f"every prompt has {int(tokens[0])} tokens: no slope to fit"
    if note is not None:
        return PrefillFit(name, n, nan, (nan, nan), nan, note, tokens[plot], ttft_ms[plot])
    pick = _subsample(n, max_fit_points, rng)
    x, y = tokens[pick] / 1000.0, ttft_ms[pick]
    slope, intercept, low, high = stats.theilslopes(y, x, alpha=0.95)
    return PrefillFit(
        workload=name,
        n=n,
        slope_ms_per_1k=float(slope),
        slope_ci_ms_per_1k=(float(low), float(high)),
        intercept_ms=float(intercept),
        note=None,
        points_tokens=tokens[plot],
        points_ttft_ms=ttft_ms[plot],
    )


def _subsample(n: int, limit: int, rng: np.random.Generator) -> np.ndarray:
    if n <= limit:
        return np.arange(n)
    return np.sort(rng.choice(n, size=limit, replace=False))
