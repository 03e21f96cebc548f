"""The time budget: where each workload's TTFT and E2E go, per percentile band.

A band is the requests whose latency ranks around one percentile of their workload
(`BANDS`: p50 = ranks 40–60 %, p90 = 85–95 %, p99 = the top 2 %), per arm in an
interleaved `--compare-layer` run (a layer's hop is its arm's, not pooled). Its mean
latency is split into parts, each the band's mean of a per-request figure:

- client: how late the load generator's clock may read a timestamp, its event-loop
  lag in the second the request's reading was taken (`loadgen_loop_lag_ms`, stat=mean;
  interval 0 to that second's max): an estimate from the run's own telemetry;
- hop: what a layer in the path said it spent (`Server-Timing: layer;dur=`), exact per
  request where sent;
- queue, prefill (TTFT and E2E) and decode (E2E only): exact per request where the
  server sends them as `Server-Timing` (`queue;dur=`, `prefill;dur=`, `decode;dur=`:
  the virtual clock of `zerohop simulate` does); else the engine's phase histograms,
  bounded per request (`phase_bounds`): an aggregate;
- unexplained: the latency minus every part above (network, HTTP, tokenisation, what
  no witness saw), its interval from the bounds on the parts together.

A part whose interval is wider than half its band's latency is not resolvable at this
scrape interval: shown as such, not as a figure. `noise_ms` is how far below zero the
unexplained rest may fall from clock readings alone (the client part's upper edge and
the hop's 95 % half-width). vLLM's prefill phase ends with token 1, so TTFT's "first
decode" is inside prefill. A part no source measured is absent, and its time lands in
"unexplained".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from zerohop.analysis.run_data import category_codes, category_mask
from zerohop.analysis.server.phase_bounds import PhaseBound, request_phases
from zerohop.analysis.server_timing import server_timing_ms

BANDS: tuple[tuple[str, float, float], ...] = (
    ("p50", 0.40, 0.60), ("p90", 0.85, 0.95), ("p99", 0.98, 1.0),
)
MIN_BAND_REQUESTS = 3
RESOLVABLE_SHARE = 0.5  # an interval wider than this share of the band says nothing
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
NOT_RESOLVABLE = "not resolvable at this scrape interval"


@dataclass(frozen=True)
class BudgetPart:
    name: str  # client | hop | queue | prefill | decode | unexplained
    mean_ms: float
    low_ms: float  # interval on the band's mean (inf: open above)
    high_ms: float
    n: int  # requests of the band this part was measured for
    source: str
    aggregate: bool = False  # bounded from histograms, not measured per request
    resolvable: bool = True  # its interval is at most half the band's latency


@dataclass(frozen=True)
class BudgetBand:
    band: str  # p50 | p90 | p99
    metric: str  # ttft_ms | e2e_ms
    n: int
    latency_ms: float  # the band's mean latency, what the parts add up to
    parts: list[BudgetPart]
    noise_ms: float = 0.0  # how far below 0 'unexplained' may fall from clock readings

    def part(self, name: str) -> BudgetPart | None:
        return next((p for p in self.parts if p.name == name), None)


@dataclass(frozen=True)
class WorkloadBudget:
    workload: str
    bands: list[BudgetBand]
    arm: str | None = None  # an interleaved comparison's arm


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
    exact: bool  # measured per request: a t interval, not carried bounds


@dataclass(frozen=True)
class _MetricParts:
    parts: list[_PerRequest]
    engine_low: np.ndarray  # per request: its engine parts together (NaN: their sum)
    engine_high: np.ndarray


def time_budget(requests: pd.DataFrame, telemetry: pd.DataFrame) -> TimeBudget:
    """The budget of every workload's TTFT and E2E (ok requests only), per arm."""
    notes: list[str] = []
    per_metric = _all_parts(requests, telemetry, notes)
    ok = (requests["outcome"] == "ok").to_numpy()
    codes, names = category_codes(requests["workload"])  # codes: no string per row
    arm_codes, arm_names = _arm_codes(requests)

    def arm_name(code: int) -> str:
        return arm_names[code] if code >= 0 else ""

    workloads = []
    for workload in sorted(set(codes[ok & (codes >= 0)].tolist()), key=names.__getitem__):
        mine = ok & (codes == workload)
        for arm in sorted(set(arm_codes[mine].tolist()), key=arm_name):
            rows = np.flatnonzero(mine & (arm_codes == arm))
            bands = []
            for metric, parts in per_metric.items():
                bands += _bands(requests[metric].to_numpy(dtype=float), rows, metric, parts)
            workloads.append(WorkloadBudget(names[workload], bands, arm_name(arm) or None))
    return TimeBudget(workloads, sorted(set(notes)))


def _arm_codes(requests: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Each request's arm as a code into the names (-1: none, a run without arms)."""
    if "arm" not in requests:
        return np.full(len(requests), -1, dtype=np.int64), []
    return category_codes(requests["arm"])


def _all_parts(requests: pd.DataFrame, telemetry: pd.DataFrame,
               notes: list[str]) -> dict[str, _MetricParts]:
    hop = _hop_part(requests)
    known = {}
    witnessed: dict[str, list[_PerRequest]] = {}
    for metric, (_, read_at, _) in METRICS.items():
        client = _client_part(requests, telemetry, read_at)
        witnessed[metric] = [p for p in (client, hop) if p is not None]
        known[metric] = sum((np.nan_to_num(p.value) for p in witnessed[metric]),
                            np.zeros(len(requests)))
    timed = {phase: _timed_part(requests, phase) for phase in ("queue", "prefill", "decode")}
    bounded = None
    if not all(timed.values()):
        bounded = request_phases(requests, telemetry, known)
    out = {}
    for metric, (_, _, phases) in METRICS.items():
        parts = list(witnessed[metric])
        engine_low = np.full(len(requests), np.nan)
        engine_high = np.full(len(requests), np.nan)
        for phase in phases:
            part = timed[phase]
            if part is None and bounded is not None and phase in bounded.phases:
                part = _bounded_part(phase, bounded.phases[phase])
                if not any(timed.values()):  # the joint bounds cover the histograms' only
                    engine_low = bounded.engine_low[metric]
                    engine_high = bounded.engine_high[metric]
            if part is None:
                notes.append(f"{phase}: the server keeps no {phase} histogram and sends "
                             f"no {phase};dur; its time is in 'unexplained'")
                continue
            parts.append(part)
        out[metric] = _MetricParts(parts, engine_low, engine_high)
    return out


def _bounded_part(phase: str, bound: PhaseBound) -> _PerRequest:
    return _PerRequest(phase, bound.estimate, bound.low, bound.high,
                       f"{bound.family} (histogram, bounded per request)", True, False)


def _timed_part(requests: pd.DataFrame, name: str) -> _PerRequest | None:
    """`name;dur=` of Server-Timing, exact per request; None where no response sent it."""
    value = _server_timing_column(requests, name)
    if value is None:
        return None
    return _PerRequest(name, value, value, value, f"Server-Timing {name};dur (per request)",
                       False, True)


def _client_part(requests: pd.DataFrame, telemetry: pd.DataFrame,
                 read_at: str) -> _PerRequest | None:
    lag = telemetry[category_mask(telemetry["metric"], lambda m: m == LOOP_LAG_METRIC)]
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
    value = _server_timing_column(requests, "layer")
    if value is None:
        return None
    return _PerRequest("hop", value, value, value, SOURCES["hop"], False, True)


def _server_timing_column(requests: pd.DataFrame, name: str) -> np.ndarray | None:
    if "server_timing" not in requests or requests["server_timing"].isna().all():
        return None
    value = np.array([_dur_ms(v, name) for v in requests["server_timing"]], dtype=float)
    return value if np.isfinite(value).any() else None


def _dur_ms(header: object, name: str) -> float:
    """`layer;dur=5.1, route;desc="r1"` → 5.1 for `layer`; NaN when absent."""
    dur = server_timing_ms(header, name) if isinstance(header, str) else None
    return math.nan if dur is None else dur


def _bands(latency: np.ndarray, rows: np.ndarray, metric: str,
           parts: _MetricParts) -> list[BudgetBand]:
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
          parts: _MetricParts) -> BudgetBand:
    total = float(latency[members].mean())
    shown = [p for p in (_summarise(part, members, latency[members])
                         for part in parts.parts) if p.n > 0 or p.aggregate]
    explained = sum(p.mean_ms for p in shown if math.isfinite(p.mean_ms))
    low, high = _rest_bounds(latency, members, parts)
    rest = total - explained
    shown.append(BudgetPart("unexplained", rest, min(low, rest), max(high, rest),
                            int(members.size), SOURCES["unexplained"],
                            any(p.aggregate for p in shown),
                            max(high, rest) - min(low, rest) <= RESOLVABLE_SHARE * total))
    return BudgetBand(band, metric, int(members.size), total, shown, _noise(shown))


def _rest_bounds(latency: np.ndarray, members: np.ndarray, parts: _MetricParts
                 ) -> tuple[float, float]:
    """Bounds on the band's mean rest: its latency less the engine's parts together
    (their joint bounds where the histograms gave them), less the witnessed ones."""
    engine = [p for p in parts.parts if p.name in ("queue", "prefill", "decode")]
    witnessed = [p for p in parts.parts if p.name not in ("queue", "prefill", "decode")]
    zeros = np.zeros(members.size)
    part_low = sum((np.nan_to_num(p.low[members]) for p in engine), zeros)
    part_high = np.minimum(sum((np.nan_to_num(p.high[members], nan=latency[members])
                                for p in engine), zeros), latency[members])
    engine_low = np.where(np.isfinite(parts.engine_low[members]),
                          parts.engine_low[members], part_low)
    engine_high = np.where(np.isfinite(parts.engine_high[members]),
                           parts.engine_high[members], part_high)
    seen_low = sum((np.nan_to_num(p.low[members]) for p in witnessed), zeros)
    seen_high = sum((np.nan_to_num(p.high[members]) for p in witnessed), zeros)
    lat = latency[members]
    return (float((lat - engine_high - seen_high).mean()),
            float((lat - engine_low - seen_low).mean()))


def _noise(parts: list[BudgetPart]) -> float:
    """How far below zero the rest may fall from clock readings alone."""
    noise = 0.0
    for part in parts:
        if part.name == "client" and math.isfinite(part.high_ms):
            noise += part.high_ms
        elif part.name == "hop" and math.isfinite(part.high_ms):
            noise += part.high_ms - part.mean_ms
    return noise


def _summarise(part: _PerRequest, members: np.ndarray, latency: np.ndarray) -> BudgetPart:
    """The band's mean of one part over the members it was measured for; a part
    measured for only some members counts zero for the others (its time is in
    'unexplained'). A bounded engine phase not placed for a member (its end after the
    last scrape) may have been anything from 0 to that member's latency; placed for none
    of the band, it is shown as not resolvable over that whole range."""
    value = part.value[members]
    have = np.isfinite(value)
    n = int(have.sum())
    if n == 0:  # a bounded phase placed for none of them: anything up to their latency
        bounds = (0.0, float(latency.mean())) if part.aggregate else (math.nan, math.nan)
        return BudgetPart(part.name, math.nan, *bounds, 0, part.source, part.aggregate,
                          resolvable=not part.aggregate)
    scale = n / members.size
    mean = float(value[have].mean()) * scale
    if part.exact:
        spread = float(value[have].std(ddof=1)) / math.sqrt(n) if n > 1 else 0.0
        low, high = mean - 1.96 * spread * scale, mean + 1.96 * spread * scale
    elif part.aggregate:
        low = float(np.where(have, part.low[members], 0.0).mean())
        high = float(np.where(have, part.high[members], latency).mean())
    else:
        low = float(part.low[members][have].mean()) * scale
        high = float(part.high[members][have].mean()) * scale
    resolvable = high - low <= RESOLVABLE_SHARE * float(latency.mean())
    return BudgetPart(part.name, mean, low, high, n, part.source, part.aggregate,
                      resolvable)
