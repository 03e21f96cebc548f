"""What the main load did to an unrelated short request: the interference probe's
latency idle against under load (`zerohop run --probe-rate`, `loadgen/probe.py`).

The probe ran alone for its idle phase, then beside the load, on the same target in the
same run. A probe request is *idle* when it was sent and answered before the load began
(one still in flight when the load starts belongs to neither phase), *under load* when
it was sent between the load's start and its end. For each arm (direct, each layer; one
group outside a layer comparison), TTFT and E2E at p50 and p99 in each phase, the
difference and its 95 % bootstrap interval — the same exact bootstrap of order
statistics the layer pricing uses (`analysis/bootstrap.py`), the point figures the
inverted-CDF quantiles those draws are of. A percentile needs enough samples in both
phases to be a figure at all (`MIN_SAMPLES`); below that the figure is absent and the
section says how many there were, rather than print a number.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

from zerohop.analysis.bootstrap import percentile_interval, quantile_draws
from zerohop.analysis.run_data import RunData
from zerohop.analysis.timeseries import Timeline
from zerohop.core import records as rec

METRICS: tuple[str, ...] = ("ttft_ms", "e2e_ms")
PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p99", 0.99))
# samples each phase needs for a percentile: p50 from 10; p99 from 100, the fewest
# that put one sample above it (fewer, and "p99" is only the largest value seen)
MIN_SAMPLES: dict[str, int] = {"p50": 10, "p99": 100}
CONFIDENCE = 0.95
N_DRAWS = 2000
ALL_ARMS = "all"


@dataclass(frozen=True)
class ProbeShift:
    """One percentile of one metric: idle, under load, the difference and its interval
    (all NaN, with `too_few` saying why, when a phase has too few samples)."""

    metric: str
    stat: str
    idle_ms: float
    load_ms: float
    delta_ms: float
    ci_low_ms: float
    ci_high_ms: float
    too_few: str | None = None

    @property
    def holds_zero(self) -> bool:
        return self.ci_low_ms <= 0.0 <= self.ci_high_ms


@dataclass(frozen=True)
class ProbeArm:
    arm: str
    idle_n: int
    load_n: int
    failed: int  # probe requests of either phase that did not end ok
    shifts: list[ProbeShift]

    def shift(self, metric: str, stat: str) -> ProbeShift:
        return next(s for s in self.shifts if s.metric == metric and s.stat == stat)


@dataclass(frozen=True)
class ProbeFigures:
    rate_rps: float
    prompt_tokens: int
    output_tokens: int
    idle_s: float
    arms: list[ProbeArm]
    # TTFT p50 of the probe per window of the run's timeline (NaN: no probe answered)
    series_x_s: np.ndarray
    ttft_p50_series: np.ndarray
    load_start_s: float  # the phases on the same axis (seconds since the timeline's t0)
    load_end_s: float


def summarise_probe(run: RunData, timeline: Timeline | None = None,
                    seed: int = 0) -> ProbeFigures | None:
    """The probe's figures (None when no probe ran)."""
    probe = run.probe
    if probe is None:
        return None
    phases = probe.phases
    frame = probe.requests
    load_start = float(phases.get("load_start_ts", math.nan))
    load_end = float(phases.get("load_end_ts", math.inf))
    arm_column = frame["arm"].astype(object) if "arm" in frame else pd.Series(
        [None] * len(frame), dtype=object)
    named = sorted({str(a) for a in arm_column if isinstance(a, str) and a})
    groups = [(arm, (arm_column == arm).to_numpy()) for arm in named] or [
        (ALL_ARMS, np.ones(len(frame), dtype=bool))]
    arms = [_arm(frame, mask, arm, load_start, load_end, seed) for arm, mask in groups]
    x, series = _ttft_series(frame, timeline)
    t0 = timeline.t0 if timeline is not None else load_start
    return ProbeFigures(
        rate_rps=float(phases.get("rate_rps", math.nan)),
        prompt_tokens=int(phases.get("prompt_tokens", 0)),
        output_tokens=int(phases.get("output_tokens", 0)), idle_s=float(phases.get("idle_s", 0)),
        arms=arms, series_x_s=x, ttft_p50_series=series,
        load_start_s=load_start - t0, load_end_s=load_end - t0)


def phase_masks(frame: pd.DataFrame, load_start_ts: float, load_end_ts: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """(idle, under load) rows: idle = answered before the load began; under load = sent
    while it ran."""
    sent = frame["sent_ts"].to_numpy(dtype=float)
    end = frame["end_ts"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        idle = end <= load_start_ts
        load = (sent >= load_start_ts) & (sent < load_end_ts)
    return idle, load


def _arm(frame: pd.DataFrame, mask: np.ndarray, arm: str, load_start: float,
         load_end: float, seed: int) -> ProbeArm:
    idle, load = phase_masks(frame, load_start, load_end)
    ok = (frame["outcome"].astype(object) == rec.OK).to_numpy()
    idle_ok, load_ok = mask & idle & ok, mask & load & ok
    failed = int((mask & (idle | load) & ~ok).sum())
    shifts = []
    for metric in METRICS:
        values = frame[metric].to_numpy(dtype=float)
        a, b = values[idle_ok], values[load_ok]
        a, b = a[np.isfinite(a)], b[np.isfinite(b)]
        shifts.extend(_shifts(metric, a, b, np.random.default_rng(
            [seed, zlib.crc32(f"{arm}:{metric}".encode())])))
    return ProbeArm(arm=arm, idle_n=int(idle_ok.sum()), load_n=int(load_ok.sum()),
                    failed=failed, shifts=shifts)


def _shifts(metric: str, idle: np.ndarray, load: np.ndarray, rng: np.random.Generator
            ) -> list[ProbeShift]:
    qs = [q for _, q in PERCENTILES]
    idle_draws = quantile_draws(idle, qs, N_DRAWS, rng)
    load_draws = quantile_draws(load, qs, N_DRAWS, rng)
    out = []
    for row, (stat, q) in enumerate(PERCENTILES):
        need = MIN_SAMPLES[stat]
        if idle.size < need or load.size < need:
            out.append(ProbeShift(metric, stat, math.nan, math.nan, math.nan, math.nan,
                                  math.nan, too_few=(
                                      f"too few samples for {stat}: {idle.size} idle, "
                                      f"{load.size} under load (needs {need} in each)")))
            continue
        idle_q = float(np.quantile(idle, q, method="inverted_cdf"))
        load_q = float(np.quantile(load, q, method="inverted_cdf"))
        low, high = percentile_interval(load_draws[row] - idle_draws[row], CONFIDENCE)
        out.append(ProbeShift(metric, stat, idle_q, load_q, load_q - idle_q, low, high))
    return out


def _ttft_series(frame: pd.DataFrame, timeline: Timeline | None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The probe's TTFT p50 per window of the run's timeline, by send time."""
    if timeline is None or frame.empty:
        return np.array([]), np.array([])
    ok = (frame["outcome"].astype(object) == rec.OK).to_numpy()
    ttft = frame["ttft_ms"].to_numpy(dtype=float)
    index = timeline.index_of(frame["sent_ts"].to_numpy(dtype=float))
    keep = ok & np.isfinite(ttft) & (index >= 0)
    series = pd.Series(ttft[keep]).groupby(index[keep]).median()
    values = np.full(timeline.n, np.nan)
    values[series.index.to_numpy(dtype=np.int64)] = series.to_numpy()
    return timeline.starts_s, values
