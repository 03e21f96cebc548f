"""Each request's share of the engine's phase histograms (queue, prefill, decode).

A server that keeps per-phase histograms (vLLM's `vllm:request_queue_time_seconds`,
`..._prefill_time_seconds`, `..._decode_time_seconds`; SGLang's
`sglang:queue_time_seconds`) tells no request its own figure, only how many requests
fell in each bucket between two scrapes. vLLM observes all three when a request
finishes, so the bucket deltas of one scrape interval describe the requests that
finished in it. Those requests are the client's records whose `end_ts` falls in the
interval; matched to the deltas by rank (the k-th slowest request of the interval gets
the k-th slowest observation), each gets the bucket its rank falls in: an estimate
(linear inside the bucket, as Prometheus' histogram_quantile) and the bucket's edges
as its interval, its upper edge no later than the request's own latency (a phase lies
inside it). The rank follows the latency being explained, so a p99 request gets the
interval's long waits, not its average. An aggregate, said so wherever shown.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from zerohop.analysis.run_data import category_mask

# phase → histogram families that measure it (first found wins), as the engines name them
PHASE_FAMILIES: dict[str, tuple[str, ...]] = {
    "queue": ("vllm:request_queue_time_seconds", "sglang:queue_time_seconds"),
    "prefill": ("vllm:request_prefill_time_seconds",),
    "decode": ("vllm:request_decode_time_seconds",),
}
MATCH_ROUNDS = 20  # edge-clipping rounds of `matched_to_mean` (each fixes some values)
RAW_SOURCE_MARK = "-raw:"  # telemetry keeps untouched Prometheus series under prom-raw:…


@dataclass(frozen=True)
class BucketWindow:
    """The observations one histogram gained between two scrapes of one endpoint."""

    start_ts: float
    end_ts: float
    bounds: np.ndarray  # upper bounds in seconds, ascending, +inf last
    cumulative: np.ndarray  # observations ≤ each bound
    mean_s: float  # the _sum's increase over the count's: exact, unlike the buckets


@dataclass(frozen=True)
class PhaseShares:
    """Per request (aligned with the requests frame): estimate and bucket edges in
    ms, NaN where no window covered the request's end (a window reaches over the
    intervals after it in which the server observed nothing)."""

    family: str
    estimate_ms: np.ndarray
    low_ms: np.ndarray
    high_ms: np.ndarray


def histogram_windows(telemetry: pd.DataFrame, family: str) -> list[BucketWindow]:
    """Bucket deltas of `family` per scrape interval, label sets other than `le`
    summed (several engines behind one endpoint), one list per endpoint merged."""
    raw = raw_rows(telemetry)
    rows = telemetry[raw & category_mask(telemetry["metric"], lambda m: m == family + "_bucket")]
    sums = telemetry[raw & category_mask(telemetry["metric"], lambda m: m == family + "_sum")]
    if rows.empty:
        return []
    les = [_le(text) for text in rows["labels"].astype(str)]
    frame = pd.DataFrame({"source": rows["source"].astype(str).to_numpy(),
                          "ts": rows["ts"].to_numpy(dtype=float), "le": les,
                          "value": rows["value"].to_numpy(dtype=float)}).dropna()
    windows: list[BucketWindow] = []
    for source, per_source in frame.groupby("source", sort=True):
        table = per_source.pivot_table(index="ts", columns="le", values="value", aggfunc="sum")
        table = table.sort_index().sort_index(axis=1)
        if not np.isinf(table.columns.to_numpy(dtype=float)[-1]):
            continue
        bounds = table.columns.to_numpy(dtype=float)
        counts = table.fillna(0.0).to_numpy(dtype=float)
        stamps = table.index.to_numpy(dtype=float)
        total = sums[sums["source"].astype(str) == source].groupby("ts")["value"].sum()
        total = total.reindex(stamps).to_numpy(dtype=float)
        last: int | None = None  # this endpoint's latest window in `windows`
        for i in range(1, len(stamps)):
            before, now = counts[i - 1], counts[i]
            reset = bool((now < before).any())
            delta = now if reset else now - before  # a reset: the histogram counts anew
            if delta[-1] <= 0:
                # nothing observed: the server counts a request before its last bytes
                # reach the client, so one whose end the client saw in this interval
                # was counted in the window before; that window reaches over it
                if last is not None and not reset:
                    windows[last] = replace(windows[last], end_ts=float(stamps[i]))
                continue
            added = total[i] if reset else total[i] - total[i - 1]
            last = len(windows)
            windows.append(BucketWindow(float(stamps[i - 1]), float(stamps[i]), bounds,
                                        np.maximum.accumulate(delta), added / delta[-1]))
    return windows


def raw_rows(telemetry: pd.DataFrame) -> np.ndarray:
    """The rows of the untouched Prometheus series (sources `prom-raw:…`), found per
    source name rather than per row (telemetry holds millions of rows)."""
    return category_mask(telemetry["source"],
                         lambda names: names.str.contains(RAW_SOURCE_MARK, regex=False))


def phase_shares(requests: pd.DataFrame, telemetry: pd.DataFrame, rank_by: str,
                 phase: str) -> PhaseShares | None:
    """Each request's share of `phase` (a key of PHASE_FAMILIES), ranked within its
    scrape interval by the column `rank_by`; None when the server keeps no such
    histogram."""
    for family in PHASE_FAMILIES[phase]:
        windows = histogram_windows(telemetry, family)
        if windows:
            return _apportion(requests, windows, rank_by, family)
    return None


def _apportion(requests: pd.DataFrame, windows: list[BucketWindow], rank_by: str,
               family: str) -> PhaseShares:
    n = len(requests)
    estimate, low, high = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    end = requests["end_ts"].to_numpy(dtype=float)
    key = requests[rank_by].to_numpy(dtype=float)
    observed = np.flatnonzero((requests["outcome"] == "ok").to_numpy() & np.isfinite(end)
                              & np.isfinite(key))
    observed = observed[np.argsort(end[observed], kind="stable")]
    ends = end[observed]
    for window in windows:
        first, last = np.searchsorted(ends, [window.start_ts, window.end_ts], side="right")
        members = observed[first:last]
        if members.size == 0:
            continue
        members = members[np.argsort(key[members], kind="stable")]
        fractions = (np.arange(members.size) + 0.5) / members.size
        placed, lower, upper = buckets_at(window, fractions)
        # a phase lies inside the latency it explains: no request waited longer than
        # its own TTFT (the client's clock starts before the server's)
        upper = np.minimum(upper, key[members] / 1e3)
        lower = np.minimum(lower, upper)
        placed = np.clip(placed, lower, upper)
        low[members], high[members] = lower, upper
        estimate[members] = matched_to_mean(placed, lower, upper, window.mean_s)
    return PhaseShares(family, estimate * 1e3, low * 1e3, high * 1e3)


def buckets_at(window: BucketWindow, fractions: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where the observations at `fractions` of the way through the window's lie:
    (estimates, lower edges, upper edges) in seconds, each estimate linear inside its
    bucket; a rank in the +Inf bucket reads as the highest finite edge, with no upper
    edge (inf)."""
    counts, bounds = window.cumulative, window.bounds
    rank = fractions * counts[-1]
    b = np.minimum(np.searchsorted(counts, rank, side="left"), counts.size - 1)
    lower = np.where(b == 0, 0.0, bounds[np.maximum(b - 1, 0)])
    upper = bounds[b]
    below = np.where(b == 0, 0.0, counts[np.maximum(b - 1, 0)])
    inside = counts[b] - below
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(inside > 0, (rank - below) / inside, 0.0)
        placed = np.where(np.isinf(upper), lower, lower + (upper - lower) * share)
    return placed, lower, upper


def matched_to_mean(values: np.ndarray, low: np.ndarray, high: np.ndarray,
                    mean: float) -> np.ndarray:
    """`values` scaled so that their mean is the window's exact mean, each kept inside
    its bucket: the buckets say where each observation lies, the sum how large they
    are together (vLLM's first bucket spans 0–300 ms, where linear placement alone
    would read a 5 ms queue as 150 ms). A value that reaches the edge it moves towards
    stays there and the others take up the rest; a mean the edges cannot reach is met as nearly as
    they allow."""
    out = values.astype(float)
    target = mean * out.size
    if not math.isfinite(target):
        return out
    for _ in range(MATCH_ROUNDS):
        gap = target - float(out.sum())
        free = out > low if gap < 0 else out < high  # what can still move that way
        movable = float(out[free].sum())
        if abs(gap) <= 1e-9 * max(1.0, abs(target)) or movable <= 0:
            break
        out[free] = np.clip(out[free] * (1.0 + gap / movable), low[free], high[free])
    return out


def _le(labels: str) -> float:
    try:
        parsed = json.loads(labels)
        return float(parsed["le"])
    except (ValueError, KeyError, TypeError):
        return math.nan
