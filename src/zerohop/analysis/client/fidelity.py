"""Client fidelity: could the load generator keep up, so that the latencies are the
server's and not the client's?

Three witnesses: the manifest's own verdict (written by the run), the schedule lag
of open-loop requests (sent − scheduled), and the load generator's CPU and event-loop
lag telemetry. Any one over its limit flags the run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from zerohop.analysis.quantiles import Distribution, describe
from zerohop.analysis.timeseries import Lane

SCHEDULE_LAG_P99_LIMIT_MS = 10.0
LOADGEN_CPU_LIMIT_PCT = 90.0
LOOP_LAG_P99_LIMIT_MS = 10.0


@dataclass(frozen=True)
class ClientFidelity:
    ok: bool
    reasons: list[str] = field(default_factory=list)
    schedule_lag: Distribution | None = None
    cpu_max_pct: float = math.nan
    loop_lag_p99_ms: float = math.nan
    rss_max_bytes: float = math.nan
    manifest: dict[str, Any] = field(default_factory=dict)


def assess_fidelity(
    requests: pd.DataFrame, lanes: list[Lane], manifest_fidelity: Mapping[str, Any] | None
) -> ClientFidelity:
    reasons: list[str] = []
    manifest_view = dict(manifest_fidelity or {})
    if manifest_view.get("flagged"):
        reasons.append(
            f"the run flagged itself: {manifest_view.get('reason') or 'no reason given'}"
        )
    lag_values = requests["schedule_lag_ms"].to_numpy(dtype=float)
    schedule_lag = describe(lag_values) if np.isfinite(lag_values).any() else None
    if schedule_lag is not None and schedule_lag.percentiles["p99"] > SCHEDULE_LAG_P99_LIMIT_MS:
        reasons.append(
            f"schedule lag p99 {schedule_lag.percentiles['p99']:.1f} ms > "
            f"{SCHEDULE_LAG_P99_LIMIT_MS:g} ms"
        )
    cpu_max = _lane_stat(lanes, "loadgen_cpu_pct", np.max)
    if cpu_max > LOADGEN_CPU_LIMIT_PCT:
        reasons.append(f"load generator CPU peaked at {cpu_max:.0f}% > {LOADGEN_CPU_LIMIT_PCT:g}%")
    loop_p99 = _lane_stat(lanes, "loadgen_loop_lag_ms", lambda v: np.percentile(v, 99))
    if loop_p99 > LOOP_LAG_P99_LIMIT_MS:
        reasons.append(
            f"load generator loop lag p99 {loop_p99:.1f} ms > {LOOP_LAG_P99_LIMIT_MS:g} ms"
        )
    return ClientFidelity(
        ok=not reasons,
        reasons=reasons,
        schedule_lag=schedule_lag,
        cpu_max_pct=cpu_max,
        loop_lag_p99_ms=loop_p99,
        rss_max_bytes=_lane_stat(lanes, "loadgen_rss_bytes", np.max),
        manifest=manifest_view,
    )


def _lane_stat(lanes: list[Lane], metric: str, reduce: Any) -> float:
    values = [lane.values for lane in lanes if lane.metric == metric]
    if not values:
        return math.nan
    joined = np.concatenate(values)
    joined = joined[np.isfinite(joined)]
    return float(reduce(joined)) if joined.size else math.nan
