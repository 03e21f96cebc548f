"""Cumulative series turned into what they counted: a counter's rate and a histogram's
quantile, with one reset rule for both.

A Prometheus counter (`_total`, a histogram's `_count`, `_sum` and `_bucket`s) only
climbs while its process lives. A reading lower than the one before means the process
restarted and counted again from zero, so the increase since the previous reading is
the new value itself, as Prometheus's `rate()` reads it; for a histogram one bucket going
down restarts all of them. A quantile follows Prometheus's `histogram_quantile`: linear
inside the bucket holding the rank. The telemetry scraper, the driver analysis and the
report's appendix all compute here, so they agree on every figure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from zerohop.core.metrics import needed_n


def went_down(values: np.ndarray) -> np.ndarray:
    """Where a counter restarted: each reading (after the first, along the last axis)
    lower than the one before it. A missing (NaN) reading is no restart."""
    return np.diff(np.asarray(values, dtype=float), axis=-1) < 0


def counter_increases(values: np.ndarray, restarted: np.ndarray | None = None) -> np.ndarray:
    """Each reading's increase over the one before (along the last axis); NaN at the
    first. Where `restarted` (by default `went_down(values)`) the counter began again
    from zero, so the increase is the reading itself."""
    values = np.asarray(values, dtype=float)
    out = np.full(values.shape, np.nan)
    if values.shape[-1] < 2:
        return out
    if restarted is None:
        restarted = went_down(values)
    out[..., 1:] = np.where(restarted, values[..., 1:], np.diff(values, axis=-1))
    return out


def counter_rates(ts: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per-second increase since the previous reading (`counter_increases` over the
    time between them); NaN at the first reading and where no time passed."""
    ts = np.asarray(ts, dtype=float)
    increases = counter_increases(values)
    rates = np.full(increases.shape, np.nan)
    if ts.size < 2:
        return rates
    elapsed = np.diff(ts)
    with np.errstate(invalid="ignore", divide="ignore"):
        rates[1:] = np.where(elapsed > 0, increases[1:] / elapsed, np.nan)
    return rates


def counter_rate(prev_value: float, prev_ts: float, value: float, ts: float) -> float | None:
    """The per-second rate between two readings (`counter_rates` on the pair); None
    when no time passed or a reading is missing."""
    rate = counter_rates(np.array([prev_ts, ts]), np.array([prev_value, value]))[1]
    return None if math.isnan(rate) else float(rate)


def window_rates(window_values: np.ndarray, window_s: float) -> np.ndarray:
    """A counter's rate per window from its value per window (mean or last reading);
    NaN for the first window and around a window without a value."""
    values = np.asarray(window_values, dtype=float)
    if window_s <= 0:
        return np.full(values.size, np.nan)
    return counter_rates(np.arange(values.size) * window_s, values)


def bucket_increases(cumulative: np.ndarray) -> np.ndarray:
    """A histogram's observations per interval: `cumulative` has one row per bucket
    (ascending `le`), one column per reading; each column of the answer holds the
    cumulative counts of what was observed since the reading before (NaN in the
    first). A column where any bucket went down is a restart: its counts are its own."""
    counts = np.asarray(cumulative, dtype=float)
    if counts.ndim != 2:
        raise ValueError("cumulative must have one row per bucket, one column per reading")
    return counter_increases(counts, np.asarray(went_down(counts).any(axis=0)))


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float:
    """The q-quantile of a classic histogram given as (upper bound, cumulative count)
    pairs sorted by bound with +Inf last, following Prometheus' histogram_quantile:
    linear interpolation inside the bucket holding the rank, the lower edge of the first
    bucket taken as 0, and a rank in the +Inf bucket answered with the highest finite
    bound. NaN without observations, without a +Inf bucket, or with a count missing."""
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    if len(buckets) < 2 or not math.isinf(buckets[-1][0]):
        return math.nan
    bounds = [b for b, _ in buckets]
    counts: list[float] = []
    running = 0.0
    for _, c in buckets:  # repair non-monotonic input as Prometheus does
        if math.isnan(c):
            return math.nan
        running = max(running, c)
        counts.append(running)
    observations = counts[-1]
    if observations <= 0:
        return math.nan
    rank = q * observations
    b = next(i for i, c in enumerate(counts) if c >= rank)
    if b == len(buckets) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, count = 0.0, bounds[b], counts[b]
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    if count <= 0:  # q == 0 on an empty first bucket
        return start
    return start + (end - start) * (rank / count)


@dataclass(frozen=True)
class WindowQuantiles:
    """Quantiles per window from a histogram's bucket increases, and the observations
    each window holds (`n`); a quantile is NaN where `n` is below `needed_n`."""

    quantiles: dict[float, np.ndarray]
    n: np.ndarray


def window_quantiles(
    bounds: Sequence[float], cumulative: np.ndarray, quantiles: Sequence[float]
) -> WindowQuantiles:
    """`bounds`: the buckets' `le` values, ascending, `inf` last; `cumulative`: one row
    per bucket, one column per window, each bucket's cumulative count per window. Each
    window's quantiles are `histogram_quantile` of its `bucket_increases`; the first
    window has no previous value and gets NaN."""
    upper = [float(b) for b in bounds]
    counts = np.asarray(cumulative, dtype=float)
    if counts.ndim != 2 or counts.shape[0] != len(upper) or not upper:
        raise ValueError("cumulative must have one row per bucket bound")
    increases = bucket_increases(counts)
    n = np.fmax.accumulate(increases, axis=0)[-1]  # buckets are cumulative in `le`
    out = {q: np.full(counts.shape[1], np.nan) for q in quantiles}
    for w, column in enumerate(increases.T.tolist()):
        pairs = list(zip(upper, column, strict=True))
        for q in quantiles:
            if n[w] >= needed_n(q):
                out[q][w] = histogram_quantile(q, pairs)
    return WindowQuantiles(out, n)
