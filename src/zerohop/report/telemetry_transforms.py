"""Raw Prometheus series → what a person can read: counters as rates per second,
histogram buckets as quantiles, labelled series in numeric order.

A counter (`_total`, and a histogram's `_sum` / `_count`) only ever climbs, so its
cumulative value drawn over a run says nothing but "the run went on". The change per
window over the window's length is what it counts per second. A histogram's twenty
`le=` buckets are one distribution: the change of each bucket over a window gives that
window's observations, and from them a quantile (as Prometheus's `histogram_quantile`
does: linear within the bucket that holds the rank). Pure numpy; no pandas, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from zerohop.analysis.driver_lanes import counter_rates
from zerohop.core.metrics import needed_n

Role = Literal["bucket", "sum", "count", "counter", "info", "gauge"]
_NUMBER = re.compile(r"([+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|Inf))")


@dataclass(frozen=True)
class Family:
    """What a raw metric name is: its family (`vllm:time_to_first_token_seconds`) and
    its role in it (a bucket, the sum, the count, a plain counter, info, a gauge)."""

    name: str
    role: Role


def family_of(metric: str) -> Family:
    for suffix, role in (("_bucket", "bucket"), ("_sum", "sum"), ("_count", "count")):
        if metric.endswith(suffix):
            return Family(metric[: -len(suffix)], role)  # type: ignore[arg-type]
    if metric.endswith("_total"):
        return Family(metric, "counter")
    if metric.endswith("_info"):
        return Family(metric, "info")
    return Family(metric, "gauge")


def natural_key(text: str) -> tuple[tuple[int, float, str], ...]:
    """Sort key reading numbers as numbers: `le=2.0` before `le=1920.0`, `+Inf` last,
    `gpu=2` before `gpu=10`."""
    parts: list[tuple[int, float, str]] = []
    for piece in _NUMBER.split(text):
        if not piece:
            continue
        if _NUMBER.fullmatch(piece):
            parts.append((0, float(piece.replace("Inf", "inf")), ""))
        else:
            parts.append((1, 0.0, piece))
    return tuple(parts)


def label_sort_key(labels: Mapping[str, str]) -> tuple[tuple[str, tuple], ...]:
    """A label set's sort key: by label name, each value in natural order."""
    return tuple((key, natural_key(labels[key])) for key in sorted(labels))


def counter_rate(window_values: np.ndarray, window_s: float) -> np.ndarray:
    """Per-second rate of a counter from its value per window (mean or last sample):
    the change from the previous window over the window's length. NaN for the first
    window, a window without a value, and a step down (the counter was reset: drawn
    as a gap, where the driver analysis reads it as a restart from zero)."""
    values = np.asarray(window_values, dtype=float)
    if values.size < 2 or window_s <= 0:
        return np.full(values.size, np.nan)
    rate = counter_rates(np.arange(values.size) * window_s, values)
    with np.errstate(invalid="ignore"):
        rate[1:][np.diff(values) < 0] = np.nan
    return rate


@dataclass(frozen=True)
class WindowQuantiles:
    """Quantiles per window from a histogram's bucket deltas, and the observations
    each window holds (`n`); a quantile is NaN where `n` is below `needed_n`."""

    quantiles: dict[float, np.ndarray]
    n: np.ndarray


def bucket_quantiles(
    bounds: Sequence[float], cumulative: np.ndarray, quantiles: Sequence[float]
) -> WindowQuantiles:
    """`bounds`: the buckets' `le` values, ascending, `inf` last; `cumulative`: one row
    per bucket, one column per window, each bucket's cumulative count (a counter) per
    window. The first window has no previous value and gets NaN."""
    upper = np.asarray(bounds, dtype=float)
    counts = np.asarray(cumulative, dtype=float)
    if counts.ndim != 2 or counts.shape[0] != upper.size or upper.size == 0:
        raise ValueError("cumulative must have one row per bucket bound")
    n_windows = counts.shape[1]
    delta = np.full(counts.shape, np.nan)
    if n_windows > 1:
        delta[:, 1:] = np.diff(counts, axis=1)
    delta[delta < 0] = np.nan  # a reset: no reading for that window
    delta = np.fmax.accumulate(delta, axis=0)  # buckets are cumulative in `le`
    total = delta[-1]
    lower = np.concatenate([[0.0], upper[:-1]])
    top_finite = upper[np.isfinite(upper)].max() if np.isfinite(upper).any() else np.nan
    out: dict[float, np.ndarray] = {}
    for q in quantiles:
        values = np.full(n_windows, np.nan)
        for w in range(n_windows):
            column, n = delta[:, w], total[w]
            if not np.isfinite(n) or n < needed_n(q) or np.isnan(column).any():
                continue
            rank = q * n
            b = int(np.searchsorted(column, rank, side="left"))
            b = min(b, upper.size - 1)
            if not np.isfinite(upper[b]):
                values[w] = top_finite
                continue
            below = column[b - 1] if b > 0 else 0.0
            inside = column[b] - below
            share = (rank - below) / inside if inside > 0 else 1.0
            values[w] = lower[b] + (upper[b] - lower[b]) * share
        out[q] = values
    return WindowQuantiles(out, np.where(np.isfinite(total), total, np.nan))
