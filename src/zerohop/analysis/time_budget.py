"""The time budget: where each workload's TTFT and E2E go, per percentile band.

A band is the requests whose latency ranks around one percentile of their workload
(`BANDS`: p50 = ranks 40–60 %, p90 = 85–95 %, p99 = the top 2 %). Its mean latency is
split into parts, each the band's mean of a per-request figure:

- client: how late the load generator's clock may read a timestamp, its event-loop
  lag in the second the request's reading was taken (`loadgen_loop_lag_ms`, stat=mean;
  interval 0 to that second's max): an estimate from the run's own telemetry;
- hop: what a layer in the path said it spent (`Server-Timing: layer;dur=`), exact per
  request where sent;
- queue, prefill (TTFT and E2E) and decode (E2E only): the engine's phase histograms
  apportioned to requests (`engine_phases`): an aggregate, with bucket-edge intervals;
- unexplained: the latency minus every part above (network, HTTP, tokenisation, what
  no witness saw), its interval the parts' intervals carried over.

vLLM's prefill phase ends with token 1, so TTFT's "first decode" is inside prefill.
A part no source measured is absent, and its time lands in "unexplained".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from zerohop.analysis.engine_phases import phase_shares
from zerohop.analysis.server_timing import server_timing_ms

BANDS: tuple[tuple[str, float, float], ...] = (
    ("p50", 0.40, 0.60), ("p90", 0.85, 0.95), ("p99", 0.98, 1.0),
)
MIN_BAND_REQUESTS = 3
LOOP_LAG_METRIC = "loadgen_loop_lag_ms"
# latency column → (its name, the timestamp the client took last for it, engine phases)
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "ttft_ms": ("TTFT", "first_content_ts", ("queue", "prefill")),
    "e2e_ms": ("E2E", "end_ts", ("queue", "prefill", "decode")),
}
SOURCES: dict[str, str] = {
    "client": "the load generator's event-loop lag (estimate)",
    "hop": "Server-Timing layer;dur (per request)",
    "unexplained": "the latency minus every measured part",
}


@dataclass(frozen=True)
class BudgetPart:
    name: str  # client | hop | queue | prefill | decode | unexplained
    mean_ms: float
    low_ms: float  # interval on the band's mean (inf: open above)
    high_ms: float
    n: int  # requests of the band this part was measured for
    source: str
    aggregate: bool = False  # apportioned from histograms, not measured per request


@dataclass(frozen=True)
class BudgetBand:
    band: str  # p50 | p90 | p99
    metric: str  # ttft_ms | e2e_ms
    n: int
    latency_ms: float  # the band's mean latency, what the parts add up to
    parts: list[BudgetPart]

    def part(self, name: str) -> BudgetPart | None:
        return next((p for p in self.parts if p.name == name), None)


@dataclass(frozen=True)
class WorkloadBudget:
    workload: str
    bands: list[BudgetBand]


@dataclass(frozen=True)
class TimeBudget:
    workloads: list[WorkloadBudget]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _PerRequest:
    """One part's per-request figures, aligned with the requests frame."""

    name: str
    value: np.ndarray
    low: np.ndarray
    high: np.ndarray
    source: str
    aggregate: bool
    exact: bool  # measured per request: a t interval, not carried edges


def time_budget(requests: pd.DataFrame, telemetry: pd.DataFrame) -> TimeBudget:
    """The budget of every workload's TTFT and E2E (ok requests only)."""
    notes: list[str] = []
    per_metric = {metric: _parts(requests, telemetry, metric, notes) for metric in METRICS}
    workloads = []
    ok = (requests["outcome"] == "ok").to_numpy()
    names = requests["workload"].astype(str).to_numpy()
    for workload in sorted(set(names[ok].tolist())):
        bands = []
        for metric, parts in per_metric.items():
            rows = np.flatnonzero(ok & (names == workload))
            bands += _bands(requests[metric].to_numpy(dtype=float), rows, metric, parts)
        workloads.append(WorkloadBudget(workload, bands))
    return TimeBudget(workloads, sorted(set(notes)))


def _parts(requests: pd.DataFrame, telemetry: pd.DataFrame, metric: str,
           notes: list[str]) -> list[_PerRequest]:
    parts = []
    client = _client_part(requests, telemetry, METRICS[metric][1])
    if client is not None:
        parts.append(client)
    hop = _hop_part(requests)
    if hop is not None:
        parts.append(hop)
    for phase in METRICS[metric][2]:
        shares = phase_shares(requests, telemetry, metric, phase)
        if shares is None:
            notes.append(f"{phase}: the server keeps no {phase} histogram; its time is "
                         "in 'unexplained'")
            continue
        parts.append(_PerRequest(phase, shares.estimate_ms, shares.low_ms, shares.high_ms,
                                 f"{shares.family} (histogram, apportioned)", True, False))
    return parts


def _client_part(requests: pd.DataFrame, telemetry: pd.DataFrame,
                 read_at: str) -> _PerRequest | None:
    lag = telemetry[telemetry["metric"].astype(str) == LOOP_LAG_METRIC]
    if lag.empty:
        return None
    stat = lag["labels"].astype(str)
    mean = _per_second(lag[stat.str.contains('"mean"', regex=False)])
    peak = _per_second(lag[stat.str.contains('"max"', regex=False)])
    if mean.empty:
        return None
    second = np.floor(requests[read_at].to_numpy(dtype=float))
    value = mean.reindex(second).to_numpy(dtype=float)
    high = peak.reindex(second).to_numpy(dtype=float) if not peak.empty else value
    return _PerRequest("client", value, np.zeros_like(value), np.fmax(high, value),
                       SOURCES["client"], False, False)


def _per_second(rows: pd.DataFrame) -> pd.Series:
    """Samples averaged per whole second (several load-generator processes)."""
    return rows.groupby(np.floor(rows["ts"].to_numpy(dtype=float)))["value"].mean()


def _hop_part(requests: pd.DataFrame) -> _PerRequest | None:
    timing = requests["server_timing"]
    if timing.isna().all():
        return None
    value = np.array([_layer_ms(v) for v in timing], dtype=float)
    if not np.isfinite(value).any():
        return None
    return _PerRequest("hop", value, value, value, SOURCES["hop"], False, True)


def _layer_ms(header: object) -> float:
    """`layer;dur=5.1, route;desc="r1"` → 5.1; NaN when absent."""
    dur = server_timing_ms(header, "layer") if isinstance(header, str) else None
    return math.nan if dur is None else dur


def _bands(latency: np.ndarray, rows: np.ndarray, metric: str,
           parts: list[_PerRequest]) -> list[BudgetBand]:
    rows = rows[np.isfinite(latency[rows])]
    if rows.size < MIN_BAND_REQUESTS:
        return []
    ordered = rows[np.argsort(latency[rows], kind="stable")]
    out = []
    for band, start, stop in BANDS:
        first = math.floor(start * ordered.size)
        last = max(first + 1, math.ceil(stop * ordered.size))
        members = ordered[first:last]
        if members.size < MIN_BAND_REQUESTS:
            continue
        out.append(_band(band, metric, latency, members, parts))
    return out


def _band(band: str, metric: str, latency: np.ndarray, members: np.ndarray,
          parts: list[_PerRequest]) -> BudgetBand:
    total = float(latency[members].mean())
    summed = [_summarise(part, members) for part in parts]
    shown = [p for p in summed if p.n > 0]
    explained = sum(p.mean_ms for p in shown)
    low = sum(p.low_ms for p in shown)
    high = sum(p.high_ms for p in shown)
    shown.append(BudgetPart("unexplained", total - explained, total - high, total - low,
                            int(members.size), SOURCES["unexplained"],
                            any(p.aggregate for p in shown)))
    return BudgetBand(band, metric, int(members.size), total, shown)


def _summarise(part: _PerRequest, members: np.ndarray) -> BudgetPart:
    """The band's mean of one part over the members it was measured for; a part
    measured for only some members counts zero for the others (never measured there)."""
    value = part.value[members]
    have = np.isfinite(value)
    n = int(have.sum())
    if n == 0:
        return BudgetPart(part.name, math.nan, math.nan, math.nan, 0, part.source,
                          part.aggregate)
    scale = n / members.size
    mean = float(value[have].mean()) * scale
    if part.exact:
        spread = float(value[have].std(ddof=1)) / math.sqrt(n) if n > 1 else 0.0
        low, high = mean - 1.96 * spread * scale, mean + 1.96 * spread * scale
    else:
        low = float(part.low[members][have].mean()) * scale
        high = float(part.high[members][have].mean()) * scale
    return BudgetPart(part.name, mean, low, high, n, part.source, part.aggregate)
