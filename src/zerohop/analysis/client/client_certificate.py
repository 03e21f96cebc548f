"""The client's certificate: can this machine's load generator carry the intended load
and still measure what the target sent?

A self-check drives the embedded target at the intended load, with ground truth on, and
judges three figures against their bounds: the client's TTFT error p99 (against the
target's first-token write), the open loop's schedule lag p99, and the CPU headroom of
the busiest load-generator process. It also says how many processes the load needs:
ceil(CPU per request × rate / (CORE_BUDGET × one core)), each kept under 80 % of a core
so that the hub has time left to stamp reads when they arrive.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from zerohop.analysis.client.fidelity_check import TimingErrors

CERTIFICATE_SCHEMA = "zerohop.selfcheck"
CERTIFICATE_SCHEMA_VERSION = 1
DEFAULT_MAX_ERROR_MS = 1.0
SCHEDULE_LAG_P99_BOUND_MS = 5.0
MIN_CPU_HEADROOM_PCT = 20.0
CORE_BUDGET = 0.8  # the share of one core a load-generator process may use
MIN_REQUESTS = 50  # fewer judged requests make a p99 one or two requests' word
MIN_ACHIEVED_SHARE = 0.8  # below it the check did not carry the load it was asked for
CPU_METRIC = "loadgen_cpu_pct"


@dataclass(frozen=True)
class Bounds:
    max_ttft_error_ms: float = DEFAULT_MAX_ERROR_MS
    max_schedule_lag_ms: float = SCHEDULE_LAG_P99_BOUND_MS
    min_cpu_headroom_pct: float = MIN_CPU_HEADROOM_PCT
    min_requests: int = MIN_REQUESTS
    min_achieved_share: float = MIN_ACHIEVED_SHARE


@dataclass(frozen=True)
class ProcessCpu:
    """One load-generator process over the judged window: its CPU as % of one core."""

    source: str
    mean_pct: float
    peak_pct: float
    cpu_s: float


@dataclass(frozen=True)
class ClientCpu:
    processes: tuple[ProcessCpu, ...]
    window_s: float
    requests_per_s: float
    cpu_us_per_request: float
    headroom_pct: float  # 100 − the busiest process's mean, or the cores' share if less


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reasons: tuple[str, ...]
    processes_needed: int
    recommendation: str


@dataclass(frozen=True)
class LoadFacts:
    """What the self-check was asked to carry, and how."""

    mode: str  # "open" or "closed"
    intended_rps: float | None  # the asked rate (open loop); None in a closed loop
    users: int | None
    processes: int  # processes that generate load (Locust workers, or the one process)
    duration_s: float
    warmup_s: float
    client_cores: int


@dataclass(frozen=True)
class Figures:
    timing: TimingErrors
    schedule_lag_p99_ms: float  # NaN in a closed loop (nothing is scheduled)
    cpu: ClientCpu
    achieved_rps: float  # requests that ended per second over the judged window


def client_cpu(
    telemetry: pd.DataFrame,
    requests: pd.DataFrame,
    *,
    start_ts: float,
    end_ts: float,
    client_cores: int,
) -> ClientCpu:
    """CPU of each load-generator process from the run's `loadgen_cpu_pct` samples
    (each sample: CPU % of one core since the previous one), over [start_ts, end_ts],
    and the CPU one request costs: the processes' summed CPU per second over the
    requests that ended per second in the same span."""
    rows = telemetry[telemetry["metric"].astype(str) == CPU_METRIC]
    ts = rows["ts"].to_numpy(dtype=float)
    rows = rows[(ts >= start_ts) & (ts <= end_ts)]
    processes: list[ProcessCpu] = []
    first, last = math.inf, -math.inf
    for source, group in rows.groupby(rows["source"].astype(str), sort=True):
        group = group.sort_values("ts")
        times = group["ts"].to_numpy(dtype=float)
        values = group["value"].to_numpy(dtype=float)
        if times.size < 2:
            continue
        span = float(times[-1] - times[0])
        cpu_s = float(np.nansum(values[1:] / 100.0 * np.diff(times)))
        processes.append(ProcessCpu(str(source), 100.0 * cpu_s / span if span > 0 else math.nan,
                                    float(np.nanmax(values[1:])), cpu_s))
        first, last = min(first, float(times[0])), max(last, float(times[-1]))
    if not processes or not last > first:
        return ClientCpu(tuple(processes), math.nan, math.nan, math.nan, math.nan)
    window_s = last - first
    end = requests["end_ts"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        done = int(np.count_nonzero((end > first) & (end <= last)))
    rps = done / window_s
    cores_used = sum(p.cpu_s for p in processes) / window_s
    busiest = max(p.mean_pct for p in processes)
    shared = 100.0 * cores_used / max(client_cores, 1)
    return ClientCpu(
        processes=tuple(processes),
        window_s=window_s,
        requests_per_s=rps,
        cpu_us_per_request=cores_used / rps * 1e6 if rps > 0 else math.nan,
        headroom_pct=100.0 - max(busiest, shared),
    )


def schedule_lag_p99_ms(requests: pd.DataFrame, *, after_ts: float) -> float:
    """p99 of sent − scheduled over the open-loop requests sent after `after_ts`."""
    lag = requests["schedule_lag_ms"].to_numpy(dtype=float)
    sent = requests["sent_ts"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        lag = lag[np.isfinite(lag) & (sent > after_ts)]
    return float(np.percentile(lag, 99)) if lag.size else math.nan


def processes_needed(cpu_us_per_request: float, rate_rps: float,
                     budget: float = CORE_BUDGET) -> int:
    """ceil(CPU per request × rate / (budget × one core)), at least one; 0 when the
    CPU per request is unknown."""
    if not (math.isfinite(cpu_us_per_request) and math.isfinite(rate_rps)):
        return 0
    demand = cpu_us_per_request * 1e-6 * rate_rps / budget
    return max(1, math.ceil(demand - 1e-9))


def workers_flag(processes: int) -> str:
    """The `zerohop run` flag that gives `processes` load-generating processes."""
    return "--workers 0" if processes <= 1 else f"--workers {processes}"


def judge(figures: Figures, load: LoadFacts, bounds: Bounds, *, machine_cpus: int) -> Verdict:
    """PASS when the TTFT error p99, the schedule lag p99 (open loop) and the CPU
    headroom are all within their bounds, on enough requests; else FAIL with why."""
    timing, cpu = figures.timing, figures.cpu
    reasons: list[str] = []
    if timing.requests < bounds.min_requests:
        reasons.append(f"only {timing.requests} requests to judge (need {bounds.min_requests}): "
                       "run longer or at a higher rate")
    if not timing.ttft.p99_ms <= bounds.max_ttft_error_ms:
        reasons.append(f"TTFT error p99 {_ms(timing.ttft.p99_ms)} > "
                       f"{bounds.max_ttft_error_ms:g} ms")
    if load.mode == "open" and not figures.schedule_lag_p99_ms <= bounds.max_schedule_lag_ms:
        reasons.append(f"schedule lag p99 {_ms(figures.schedule_lag_p99_ms)} > "
                       f"{bounds.max_schedule_lag_ms:g} ms")
    if (load.intended_rps and math.isfinite(figures.achieved_rps)
            and figures.achieved_rps < bounds.min_achieved_share * load.intended_rps):
        reasons.append(f"only {figures.achieved_rps:.0f} of {load.intended_rps:g} req/s asked "
                       "completed: the check did not carry the intended load (the embedded "
                       "target saturated, or arrivals were dropped at the in-flight cap)")
    if not cpu.headroom_pct >= bounds.min_cpu_headroom_pct:
        reasons.append("no CPU telemetry from the load generator" if math.isnan(cpu.headroom_pct)
                       else f"CPU headroom {cpu.headroom_pct:.0f} % < "
                       f"{bounds.min_cpu_headroom_pct:g} %")
    rate = load.intended_rps if load.intended_rps is not None else figures.achieved_rps
    needed = processes_needed(cpu.cpu_us_per_request, rate)
    return Verdict(not reasons, tuple(reasons), needed,
                   _recommendation(not reasons, needed, load, machine_cpus))


def _recommendation(passed: bool, needed: int, load: LoadFacts, machine_cpus: int) -> str:
    if needed == 0:
        return "no CPU figure: the processes the load needs are unknown"
    fits = f"the load needs {needed} process{'es' if needed > 1 else ''} ({workers_flag(needed)})"
    if needed > machine_cpus:
        return f"{fits}: more than this machine's {machine_cpus} CPUs; spread it over machines"
    if passed:
        return fits
    if needed > load.processes:
        return f"run with {workers_flag(needed)}: {fits}"
    had = f"{load.processes} process{'es' if load.processes > 1 else ''}"
    return (f"{fits} and had {had}: the error is not the load's CPU demand but what else holds "
            "the client's cores or its event loop (other processes on this machine, blocking "
            "code in a Locust plugin); quiet the machine or give the client cores of its own")


def certificate_document(
    figures: Figures, load: LoadFacts, bounds: Bounds, verdict: Verdict,
    machine: Mapping[str, Any], *, run_id: str, created_at: str,
) -> dict[str, Any]:
    """selfcheck.json: figures, bounds, verdict and machine facts (docs/selfcheck.md)."""
    timing, cpu = figures.timing, figures.cpu
    return {
        "schema": CERTIFICATE_SCHEMA,
        "schema_version": CERTIFICATE_SCHEMA_VERSION,
        "run_id": run_id,
        "created_at": created_at,
        "load": asdict(load),
        "figures": {
            "requests_judged": timing.requests,
            "tokens_judged": timing.tokens,
            "content_events_per_s": timing.events_per_s,
            "achieved_rps": figures.achieved_rps,
            "ttft_error": asdict(timing.ttft),
            "e2e_error": asdict(timing.e2e),
            "itl_error": asdict(timing.itl),
            "itl_unpaired_requests": timing.itl_unpaired,
            "late_gaps": timing.late_gaps,
            "late_gaps_by_position": list(timing.late_gaps_by_position),
            "schedule_lag_p99_ms": figures.schedule_lag_p99_ms,
            "cpu_processes": [asdict(p) for p in cpu.processes],
            "cpu_window_s": cpu.window_s,
            "cpu_us_per_request": cpu.cpu_us_per_request,
            "cpu_headroom_pct": cpu.headroom_pct,
        },
        "bounds": {**asdict(bounds), "core_budget": CORE_BUDGET},
        "verdict": {
            "result": "PASS" if verdict.passed else "FAIL",
            "reasons": list(verdict.reasons),
            "processes_needed": verdict.processes_needed,
            "workers_flag": workers_flag(verdict.processes_needed)
            if verdict.processes_needed else None,
            "recommendation": verdict.recommendation,
        },
        "machine": dict(machine),
    }


@dataclass(frozen=True)
class CertificateView:
    """The few fields of a selfcheck.json a reader shows, read defensively: a manifest
    may carry a certificate written by another version."""

    result: str
    ttft_error_p99_ms: float
    schedule_lag_p99_ms: float
    cpu_headroom_pct: float
    max_ttft_error_ms: float
    reasons: list[str] = field(default_factory=list)
    recommendation: str = ""
    load: dict[str, Any] = field(default_factory=dict)


def certificate_view(document: Mapping[str, Any]) -> CertificateView:
    figures = _mapping(document.get("figures"))
    verdict = _mapping(document.get("verdict"))
    bounds = _mapping(document.get("bounds"))
    ttft = _mapping(figures.get("ttft_error"))
    reasons = verdict.get("reasons")
    return CertificateView(
        result=str(verdict.get("result") or "unknown"),
        ttft_error_p99_ms=_number(ttft.get("p99_ms")),
        schedule_lag_p99_ms=_number(figures.get("schedule_lag_p99_ms")),
        cpu_headroom_pct=_number(figures.get("cpu_headroom_pct")),
        max_ttft_error_ms=_number(bounds.get("max_ttft_error_ms")),
        reasons=[str(r) for r in reasons] if isinstance(reasons, list) else [],
        recommendation=str(verdict.get("recommendation") or ""),
        load=_mapping(document.get("load")),
    )


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else math.nan


def _ms(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.3g} ms"

