"""Per-workload summary: volume, errors, throughput, latency distributions, goodput.

Definitions: only `ok` requests contribute latency figures (errors
are counted separately); ITL is pooled over all gaps of a workload's ok requests;
rates (req/s, tokens/s, goodput) count the requests that ended inside the run's one
measured window (`analysis.measured_window`) and divide by its length, the same for
every workload; goodput is the requests meeting every SLO among them, and
`good_fraction` counts every request, errors included, in the denominator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from zerohop.analysis.itl_pools import ItlPools
from zerohop.analysis.measured_window import MeasuredWindow, window_of
from zerohop.analysis.quantiles import Distribution, describe
from zerohop.analysis.run_data import ItlColumn, category_codes
from zerohop.analysis.timeseries import request_start_ts
from zerohop.core.metrics import REQUEST_LATENCIES, SCHEDULE_LATENCIES

PER_USER_OUTPUT_RATE = "output_tokens_per_s_per_user"
TTFO = "ttfo_ms"
QUEUE_WAIT = "queue_wait_ms"
ITEMS = "items"  # a pooling request's batch size

ALL_WORKLOADS = "all"
LATENCY_COLUMNS: tuple[str, ...] = REQUEST_LATENCIES
SCHEDULE_COLUMNS: tuple[str, ...] = SCHEDULE_LATENCIES


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
    # per-request figures beyond the latency table: the per-user output rate (always),
    # TTFO, the --max-concurrency queue wait and a pooling request's batch size, `items`
    # (where any request has one)
    figures: dict[str, Distribution] = field(default_factory=dict)
    # pooling requests (embedding, rerank): texts embedded or ranked per second; None
    # where no request carried any
    items_per_s: float | None = None
    # what was offered (`MeasuredWindow.offered`: arrivals per second), beside
    # `req_per_s`, what the target completed
    offered_rps: float = math.nan
    open_loop: bool = False  # some of its requests had arrival times (open loop, traces)

    @property
    def pooling_only(self) -> bool:
        """Every request here is a pooling one (items, no TTFT): its rows show items/s,
        input tokens/s and the batch size instead of token streaming's columns."""
        ttft = self.latency.get("ttft_ms")
        return self.items_per_s is not None and (ttft is None or ttft.n == 0)


def summarise_workloads(
    requests: pd.DataFrame,
    itl: ItlColumn,
    good: np.ndarray,
    window: MeasuredWindow | None = None,
    pools: ItlPools | None = None,
) -> list[WorkloadSummary]:
    """One row per workload (in order of first appearance) and, when there is more
    than one workload, a final `all` row over every request. Rates are over `window`
    (default: the records' own span, for records without a manifest); the pooled ITL
    comes from `pools` (built here when not given)."""
    if window is None:
        window = window_of(requests, {})
    if pools is None:
        pools = ItlPools(requests, itl)
    codes, names = category_codes(requests["workload"])
    order = _workload_order(requests)
    rows = [
        summarise(
            requests, itl, good, codes == names.index(name), name, window, True,
            itl_ms=pools.distribution([name], with_cdf=True),
        )
        for name in order
    ]
    if len(order) > 1:
        everything = np.ones(len(requests), dtype=bool)
        rows.append(
            summarise(
                requests, itl, good, everything, ALL_WORKLOADS, window,
                itl_ms=pools.distribution(None),
            )
        )
    return rows


def summarise(
    requests: pd.DataFrame,
    itl: ItlColumn,
    good: np.ndarray,
    mask: np.ndarray,
    name: str,
    window: MeasuredWindow,
    with_cdf: bool = False,
    *,
    itl_ms: Distribution | None = None,
) -> WorkloadSummary:
    """The summary of the requests selected by `mask` (with CDF points for the
    distribution charts when `with_cdf`: one pass over the values for both).
    `itl_ms`: their pooled ITL when already known (`ItlPools`)."""
    ok = mask & (requests["outcome"] == "ok").to_numpy()
    n_requests = int(mask.sum())
    n_ok = int(ok.sum())
    window_s = window.duration_s
    carried = ok & window.counts(requests)  # what the rates count
    latency = {
        column: describe(requests[column].to_numpy(dtype=float)[ok], with_cdf=with_cdf)
        for column in LATENCY_COLUMNS
        if column != "itl_ms"
    }
    latency["itl_ms"] = (
        itl_ms if itl_ms is not None else describe(itl.pooled(ok), with_cdf=with_cdf)
    )
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
    figures = _figures(requests, ok, mask)
    n_good_carried = int((good & carried).sum())
    items = requests.get("items", None)
    has_items = items is not None and bool(np.isfinite(items.to_numpy(dtype=float)[mask]).any())
    return WorkloadSummary(
        workload=name,
        requests=n_requests,
        ok=n_ok,
        errors=n_requests - n_ok,
        error_pct=_ratio(n_requests - n_ok, n_requests) * 100.0,
        window_s=window_s,
        req_per_s=window.rate(int(carried.sum())),
        input_tokens_per_s=window.rate(_sum(requests["input_tokens"], carried)),
        output_tokens_per_s=window.rate(_sum(requests["output_tokens"], carried)),
        latency=latency,
        good=n_good,
        goodput_rps=window.rate(n_good_carried),
        good_fraction=_ratio(n_good, n_requests),
        figures=figures,
        items_per_s=window.rate(_sum(items, carried)) if has_items and items is not None
        else None,
        offered_rps=window.offered(requests, mask, None if name == ALL_WORKLOADS else name),
        open_loop=bool(np.isfinite(requests["scheduled_ts"].to_numpy(dtype=float)[mask]).any()),
    )


def _figures(requests: pd.DataFrame, ok: np.ndarray, mask: np.ndarray) -> dict[str, Distribution]:
    """The per-user output rate (1000 ÷ TPOT of each ok request: what one user reads
    at once the first token came), TTFO of ok requests, and the queue wait of every
    request that waited for a --max-concurrency slot (a failed one waited too), and the
    batch size of ok pooling requests."""
    tpot = requests["tpot_ms"].to_numpy(dtype=float)[ok]
    with np.errstate(divide="ignore", invalid="ignore"):
        per_user = np.where(tpot > 0, 1000.0 / tpot, np.nan)
    figures = {PER_USER_OUTPUT_RATE: describe(per_user)}
    for column, rows in ((TTFO, ok), (QUEUE_WAIT, mask), (ITEMS, ok)):
        if column not in requests:  # `items`: absent from runs that predate it
            continue
        values = requests[column].to_numpy(dtype=float)[rows]
        if np.isfinite(values).any():
            figures[column] = describe(values)
    return figures


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
