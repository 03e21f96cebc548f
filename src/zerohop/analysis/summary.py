"""Per-workload summary: volume, errors, throughput, latency distributions, goodput.

Definitions: only `ok` requests contribute latency figures (errors
are counted separately); ITL is pooled over all gaps of a workload's ok requests;
rates divide by the workload's measured window (first send → last end); goodput is
requests meeting every SLO ÷ that window, and `good_fraction` counts errors in the
denominator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from zerohop.analysis.quantiles import Distribution, describe
from zerohop.analysis.run_data import ItlColumn, category_codes
from zerohop.analysis.timeseries import request_start_ts

ALL_WORKLOADS = "all"
LATENCY_COLUMNS: tuple[str, ...] = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
SCHEDULE_COLUMNS: tuple[str, ...] = ("ttft_from_schedule_ms", "e2e_from_schedule_ms")


@dataclass(frozen=True)
class WorkloadSummary:
    workload: str
    requests: int
    ok: int
    errors: int
    error_pct: float
    window_s: float
    req_per_s: float
    input_tokens_per_s: float
    output_tokens_per_s: float
    latency: dict[str, Distribution]
    good: int
    goodput_rps: float
    good_fraction: float


def summarise_workloads(
    requests: pd.DataFrame,
    itl: ItlColumn,
    good: np.ndarray,
    *,
    fallback_window_s: float | None = None,
) -> list[WorkloadSummary]:
    """One row per workload (in order of first appearance) and, when there is more
    than one workload, a final `all` row over every request."""
    codes, names = category_codes(requests["workload"])
    order = _workload_order(requests)
    rows = [
        summarise(requests, itl, good, codes == names.index(name), name, fallback_window_s, True)
        for name in order
    ]
    if len(order) > 1:
        everything = np.ones(len(requests), dtype=bool)
        rows.append(summarise(requests, itl, good, everything, ALL_WORKLOADS, fallback_window_s))
    return rows


def summarise(
    requests: pd.DataFrame,
    itl: ItlColumn,
    good: np.ndarray,
    mask: np.ndarray,
    name: str,
    fallback_window_s: float | None = None,
    with_cdf: bool = False,
) -> WorkloadSummary:
    """The summary of the requests selected by `mask` (with CDF points for the
    distribution charts when `with_cdf`: one pass over the values for both)."""
    ok = mask & (requests["outcome"] == "ok").to_numpy()
    n_requests = int(mask.sum())
    n_ok = int(ok.sum())
    window_s = measured_window_s(requests, mask, fallback_window_s)
    latency = {
        column: describe(requests[column].to_numpy(dtype=float)[ok], with_cdf=with_cdf)
        for column in LATENCY_COLUMNS
        if column != "itl_ms"
    }
    latency["itl_ms"] = describe(itl.pooled(ok), with_cdf=with_cdf)
    for column in SCHEDULE_COLUMNS:
        values = requests[column].to_numpy(dtype=float)[ok]
        if np.isfinite(values).any():
            latency[column] = describe(values)
    latency = {
        column: latency[column]
        for column in (*LATENCY_COLUMNS, *SCHEDULE_COLUMNS)
        if column in latency
    }
    n_good = int((good & mask).sum())
    return WorkloadSummary(
        workload=name,
        requests=n_requests,
        ok=n_ok,
        errors=n_requests - n_ok,
        error_pct=_ratio(n_requests - n_ok, n_requests) * 100.0,
        window_s=window_s,
        req_per_s=_ratio(n_ok, window_s),
        input_tokens_per_s=_ratio(_sum(requests["input_tokens"], ok), window_s),
        output_tokens_per_s=_ratio(_sum(requests["output_tokens"], ok), window_s),
        latency=latency,
        good=n_good,
        goodput_rps=_ratio(n_good, window_s),
        good_fraction=_ratio(n_good, n_requests),
    )


def measured_window_s(
    requests: pd.DataFrame, mask: np.ndarray, fallback_s: float | None = None
) -> float:
    """First send (or scheduled start) → last end among the selected requests;
    the manifest's duration when the records carry no timestamps."""
    start = request_start_ts(requests)[mask]
    end = requests["end_ts"].to_numpy(dtype=float)[mask]
    start, end = start[np.isfinite(start)], end[np.isfinite(end)]
    if start.size and end.size and end.max() > start.min():
        return float(end.max() - start.min())
    return float(fallback_s) if fallback_s and fallback_s > 0 else math.nan


def _workload_order(requests: pd.DataFrame) -> list[str]:
    """Workload names by first send time (names without any timestamp last)."""
    codes, names = category_codes(requests["workload"])
    start = request_start_ts(requests)
    first = np.full(len(names), np.inf)
    valid = (codes >= 0) & np.isfinite(start)
    np.minimum.at(first, codes[valid], start[valid])
    present = np.bincount(codes[codes >= 0], minlength=len(names)) > 0
    order = np.argsort(first, kind="stable")
    return [names[i] for i in order if present[i]]


def _sum(series: pd.Series, mask: np.ndarray) -> float:
    values = series.to_numpy(dtype=float)[mask]
    return float(np.nansum(values))


def _ratio(num: float, den: float) -> float:
    if not den or math.isnan(den):
        return math.nan
    return num / den
