"""Each request's engine phases (queue, prefill, decode) with bounds that hold whatever
order the requests of a scrape interval finished in.

`engine_phases` places a scrape interval's observations on its requests by rank, which
is right only when every request's phases rank like its latency. With several workloads
in one interval they do not (a long prompt's TTFT is long for its prefill, not its
queue), so a bucket edge is no bound. These bounds use only what must hold:

- the client's latency holds the engine's phases: queue + prefill ≤ TTFT, and the
  interval's TTFT overhead (ΣTTFT − Σqueue − Σprefill, exact from the histograms' sums)
  is shared by its requests, none below zero, so queue + prefill ≥ TTFT − that overhead;
  decode lies within the client's first-to-last time ± the intervals' overheads;
- every value lies in a bucket that gained observations, and where as many requests can
  reach a bucket range as the range gained, each of them is in it (counting);
- the interval's values sum to its histogram's exact `_sum` increase.

An interval holds the requests whose end the client saw in it; where the client's count
and the server's differ, the intervals after it join it until they agree (a request
counted before a scrape whose end the client saw after it). An interval whose counts
never agree keeps only the bounds 0 and the latency. The estimates are the rank
placement kept inside the bounds, split so that each request's phases add up to its
latency less its interval's mean overhead.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from zerohop.analysis.server.engine_phases import (
    PHASE_FAMILIES,
    BucketWindow,
    buckets_at,
    histogram_windows,
    matched_to_mean,
)

MAX_JOINED = 8  # scrape intervals joined at most while the counts disagree
TTFT_PHASES = ("queue", "prefill")
ROUNDS = 3  # passes of the coupled bounds (each narrows what the others allow)


@dataclass(frozen=True)
class PhaseBound:
    """One phase per request, ms, aligned with the requests frame (NaN: not placed)."""

    family: str
    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclass(frozen=True)
class RequestPhases:
    phases: dict[str, PhaseBound]  # only the phases the server keeps a histogram of
    # latency column → per request, the bounds on its measured phases together
    engine_low: dict[str, np.ndarray]
    engine_high: dict[str, np.ndarray]


@dataclass
class _Window:
    """One or more joined scrape intervals: every family's bucket increase and its
    requests (row positions in the frame)."""

    families: dict[str, BucketWindow]
    members: np.ndarray
    agrees: bool  # the client's count of finished requests is the server's


def request_phases(requests: pd.DataFrame, telemetry: pd.DataFrame,
                   known_ms: dict[str, np.ndarray]) -> RequestPhases | None:
    """Bounded phases of every ok request; None when the server keeps no phase histogram.
    `known_ms` (per latency column): each request's overhead another witness measured
    (its hop, its client's lag), charged to it before the interval's rest is shared."""
    families = {}
    for phase, names in PHASE_FAMILIES.items():
        for name in names:
            windows = sorted(histogram_windows(telemetry, name), key=lambda w: w.start_ts)
            if windows:
                families[phase] = (name, windows)
                break
    if not families:
        return None
    n = len(requests)
    ttft = requests["ttft_ms"].to_numpy(dtype=float)
    e2e = requests["e2e_ms"].to_numpy(dtype=float)
    out = {phase: PhaseBound(name, *(np.full(n, np.nan) for _ in range(3)))
           for phase, (name, _) in families.items()}
    engine = RequestPhases(out, {k: np.full(n, np.nan) for k in ("ttft_ms", "e2e_ms")},
                           {k: np.full(n, np.nan) for k in ("ttft_ms", "e2e_ms")})
    known = {k: np.nan_to_num(np.asarray(v, dtype=float)) for k, v in known_ms.items()}
    for window in _joined_windows(requests, {p: w for p, (_, w) in families.items()}):
        _bound_window(window, ttft, e2e, known, engine)
    return engine


def _joined_windows(requests: pd.DataFrame, families: dict[str, list[BucketWindow]]
                    ) -> list[_Window]:
    end = requests["end_ts"].to_numpy(dtype=float)
    ok = ((requests["outcome"] == "ok").to_numpy() & np.isfinite(end)
          & np.isfinite(requests["ttft_ms"].to_numpy(dtype=float)))
    rows = np.flatnonzero(ok)
    rows = rows[np.argsort(end[rows], kind="stable")]
    ends = end[rows]
    master = next(iter(families.values()))
    at = dict.fromkeys(families, 0)  # each family's next window (they share the scrapes)
    out: list[_Window] = []
    group: list[BucketWindow] = []
    for window in master:
        group.append(window)
        first, last = np.searchsorted(ends, [group[0].start_ts, window.end_ts], side="right")
        observed = sum(float(w.cumulative[-1]) for w in group)
        agrees = abs(observed - (last - first)) < 0.5
        if agrees or len(group) >= MAX_JOINED or window is master[-1]:
            joined = {phase: _join(_taken(ws, at, phase, group[0].start_ts, window.end_ts))
                      for phase, ws in families.items()}
            if all(w is not None for w in joined.values()) and last > first:
                out.append(_Window({p: w for p, w in joined.items() if w is not None},
                                   rows[first:last], agrees))
            group = []
    return out


def _taken(windows: list[BucketWindow], at: dict[str, int], phase: str, start_ts: float,
           end_ts: float) -> list[BucketWindow]:
    """The family's windows that start in [start_ts, end_ts), moving its pointer on."""
    i = at[phase]
    while i < len(windows) and windows[i].start_ts < start_ts:
        i += 1
    j = i
    while j < len(windows) and windows[j].start_ts < end_ts:
        j += 1
    at[phase] = j
    return windows[i:j]


def _join(windows: list[BucketWindow]) -> BucketWindow | None:
    if not windows:
        return None
    counts = sum(w.cumulative[-1] for w in windows)
    total = sum(w.mean_s * w.cumulative[-1] for w in windows)
    return replace(windows[0], end_ts=windows[-1].end_ts,
                   cumulative=np.sum([w.cumulative for w in windows], axis=0),
                   mean_s=total / counts if counts > 0 else float("nan"))


def _bound_window(window: _Window, ttft: np.ndarray, e2e: np.ndarray,
                  known: dict[str, np.ndarray], out: RequestPhases) -> None:
    rows = window.members
    t, e = ttft[rows], e2e[rows]
    sums = {p: w.mean_s * 1e3 * float(w.cumulative[-1]) for p, w in window.families.items()}
    ttft_phases = [p for p in TTFT_PHASES if p in window.families]
    o_ttft = float(t.sum()) - sum(sums[p] for p in ttft_phases)
    o_e2e = float(e.sum()) - sum(sums.values())
    exact = window.agrees and o_ttft >= 0 and o_e2e >= 0
    low = {p: np.zeros(rows.size) for p in window.families}
    high = {p: e.copy() if p == "decode" else t.copy() for p in window.families}
    if exact:
        _tighten(window, t, e, o_ttft, o_e2e, sums, low, high, ttft_phases)
    estimate = _rank_estimates(window, t, e, low, high)
    if exact:
        shared = {k: v[rows] for k, v in known.items()}
        _coherent(window, t, e, (o_ttft, o_e2e), shared, estimate, low, high, ttft_phases)
    for phase, bound in out.phases.items():
        bound.estimate[rows] = estimate[phase]
        bound.low[rows], bound.high[rows] = low[phase], high[phase]
    for metric, latency, overhead, phases in (("ttft_ms", t, o_ttft, ttft_phases),
                                              ("e2e_ms", e, o_e2e, list(window.families))):
        if exact:
            out.engine_low[metric][rows] = np.maximum(latency - overhead, 0.0)
            out.engine_high[metric][rows] = latency
        else:
            out.engine_low[metric][rows] = sum((low[p] for p in phases), np.zeros(rows.size))
            out.engine_high[metric][rows] = np.minimum(
                sum((high[p] for p in phases), np.zeros(rows.size)), latency)


def _tighten(window: _Window, t: np.ndarray, e: np.ndarray, o_ttft: float,
             o_e2e: float, sums: dict[str, float], low: dict[str, np.ndarray],
             high: dict[str, np.ndarray], ttft_phases: list[str]) -> None:
    """Narrow every phase's bounds by the rules in the module's docstring, in place."""
    m = t.size
    engine_low = np.maximum(t - o_ttft, 0.0)  # queue + prefill (those measured)
    if "decode" in low:
        client_decode = e - t
        low["decode"] = np.maximum(low["decode"], client_decode - o_e2e)
        high["decode"] = np.minimum(high["decode"], client_decode + o_ttft)
    for _ in range(ROUNDS):
        for phase in window.families:
            if phase in ttft_phases:
                others = [p for p in ttft_phases if p != phase]
                high[phase] = np.minimum(high[phase], t - sum((low[p] for p in others),
                                                              np.zeros(m)))
                low[phase] = np.maximum(low[phase], engine_low - sum(
                    (high[p] for p in others), np.zeros(m)))
            low[phase], high[phase] = _by_buckets(window.families[phase], low[phase],
                                                  high[phase])
            low[phase], high[phase] = _by_sum(sums[phase], low[phase], high[phase])


def _by_buckets(window: BucketWindow, low: np.ndarray, high: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Bounds from the buckets that gained observations: each value in one it can
    reach; a bucket range as many requests can reach as it gained holds all of them."""
    edges = np.concatenate(([0.0], window.bounds)) * 1e3  # bucket k: (edges[k], edges[k+1]]
    gained = np.diff(np.concatenate(([0.0], window.cumulative)))
    filled = np.flatnonzero(gained > 0)
    if filled.size == 0:
        return low, high
    reach_low = edges[filled][None, :] <= high[:, None]  # bucket k can hold request i
    reach = reach_low & (edges[filled + 1][None, :] >= low[:, None])
    if not reach.any(axis=1).all():
        return low, high  # some request fits no bucket: the counts say nothing sure
    first = filled[np.argmax(reach, axis=1)]
    last = filled[reach.shape[1] - 1 - np.argmax(reach[:, ::-1], axis=1)]
    new_low, new_high = np.maximum(low, edges[first]), np.minimum(high, edges[last + 1])
    total = window.cumulative[-1]
    above = total - np.where(filled > 0, window.cumulative[np.maximum(filled - 1, 0)], 0.0)
    below = window.cumulative[filled]  # observations in bucket k or lower
    can_above = last[:, None] >= filled[None, :]  # request i can be in bucket k or higher
    can_below = first[:, None] <= filled[None, :]
    # every request that can be this high is, where no more can than the range gained
    forced_low = can_above & (can_above.sum(axis=0) <= above)[None, :]
    forced_high = can_below & (can_below.sum(axis=0) <= below)[None, :]
    new_low = np.maximum(new_low, np.where(forced_low, edges[filled][None, :], 0.0).max(axis=1))
    new_high = np.minimum(new_high, np.where(forced_high, edges[filled + 1][None, :],
                                             np.inf).min(axis=1))
    return new_low, np.maximum(new_high, new_low)


def _by_sum(total: float, low: np.ndarray, high: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """Each value is the exact sum less what the others can be at most (or least)."""
    if not np.isfinite(total):
        return low, high
    rest_high, rest_low = float(high.sum()) - high, float(low.sum()) - low
    new_low = np.maximum(low, total - rest_high) if np.isfinite(high).all() else low
    new_high = np.minimum(high, total - rest_low)
    return new_low, np.maximum(new_high, new_low)


def _rank_estimates(window: _Window, t: np.ndarray, e: np.ndarray,
                    low: dict[str, np.ndarray], high: dict[str, np.ndarray]
                    ) -> dict[str, np.ndarray]:
    """`engine_phases`' placement by TTFT rank, kept inside the bounds."""
    fractions = (np.argsort(np.argsort(t, kind="stable"), kind="stable") + 0.5) / t.size
    estimate = {}
    for phase, bucket_window in window.families.items():
        placed = np.clip(buckets_at(bucket_window, fractions)[0] * 1e3, low[phase],
                         high[phase])
        estimate[phase] = matched_to_mean(placed, low[phase], high[phase],
                                          bucket_window.mean_s * 1e3)
    return estimate


def _coherent(window: _Window, t: np.ndarray, e: np.ndarray,
              overhead: tuple[float, float], known: dict[str, np.ndarray],
              estimate: dict[str, np.ndarray], low: dict[str, np.ndarray],
              high: dict[str, np.ndarray], ttft_phases: list[str]) -> None:
    """Estimates that add up: queue + prefill is TTFT less the request's known overhead
    and its share of the interval's rest; decode is the client's first-to-last time
    moved by the two overheads. In place."""
    m = t.size
    o_ttft, o_e2e = overhead
    k_ttft, k_e2e = known.get("ttft_ms", np.zeros(m)), known.get("e2e_ms", np.zeros(m))
    share_ttft = k_ttft + (o_ttft - float(k_ttft.sum())) / m
    share_e2e = k_e2e + (o_e2e - float(k_e2e.sum())) / m
    engine = np.clip(t - share_ttft, np.maximum(t - o_ttft, 0.0), t)
    if len(ttft_phases) == 2:
        first, second = ttft_phases
        lo = np.maximum(low[first], engine - high[second])
        hi = np.maximum(np.minimum(high[first], engine - low[second]), lo)
        estimate[first] = matched_to_mean(np.clip(estimate[first], lo, hi), lo, hi,
                                          window.families[first].mean_s * 1e3)
        estimate[second] = np.clip(engine - estimate[first], low[second], high[second])
    elif ttft_phases:
        only = ttft_phases[0]
        estimate[only] = np.clip(engine, low[only], high[only])
    if "decode" in estimate:
        moved = e - t + share_ttft - share_e2e
        estimate["decode"] = np.clip(moved, low["decode"], high["decode"])
