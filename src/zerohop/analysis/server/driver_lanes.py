"""Telemetry as the driver analysis should see it: counters as rates, histograms as
their mean per scrape interval.

A cumulative series (`_total`, `_count`, `_sum`, `_bucket`) only climbs, so it ranks
with anything that trends over the run and says nothing about any moment. What moves
with latency is its increase per second, and for a histogram the mean of what it
observed between two scrapes (Δ_sum / Δ_count): the engine's mean queue time over the
last second, not the sum of every wait since it started.
"""

from __future__ import annotations

import numpy as np

from zerohop.analysis.counters import counter_increases, counter_rates, went_down
from zerohop.analysis.timeseries import Lane, lane_key

CUMULATIVE_SUFFIXES: tuple[str, ...] = ("_total", "_count", "_sum", "_bucket", "_created")
# Histograms that are the latencies themselves as the server timed them: their mean
# moves with the client's latency because it is that latency, never its cause.
ECHO_FAMILIES: frozenset[str] = frozenset({
    "vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
    "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds",
    "vllm:request_time_per_output_token_seconds", "vllm:request_inference_time_seconds",
    "sglang:time_to_first_token_seconds", "sglang:e2e_request_latency_seconds",
    "sglang:inter_token_latency_seconds",
})


def driver_lanes(lanes: list[Lane]) -> list[Lane]:
    """Gauges as they are; each counter as its per-second rate (`rate(name)`); each
    histogram's `_sum`/`_count` pair as its interval mean (`mean(family)`), except
    the latencies' own (`ECHO_FAMILIES`, whose `_count` rate, the load, stays); bucket
    and creation-time series left out."""
    out: list[Lane] = []
    counts: dict[tuple[str, str, str], Lane] = {}
    for lane in lanes:
        suffix = next((s for s in CUMULATIVE_SUFFIXES if lane.metric.endswith(s)), None)
        if suffix is None:
            out.append(lane)
        elif suffix in ("_total", "_count"):
            out.append(_derived(lane, f"rate({lane.metric})", counter_rates(lane.ts, lane.values)))
        if suffix == "_count":
            counts[_pair_key(lane, "_count")] = lane
    for lane in lanes:
        if not lane.metric.endswith("_sum"):
            continue
        count = counts.get(_pair_key(lane, "_sum"))
        if count is None:
            out.append(_derived(lane, f"rate({lane.metric})", counter_rates(lane.ts, lane.values)))
            continue
        family = lane.metric[: -len("_sum")]
        if family in ECHO_FAMILIES:
            continue
        out.append(_derived(lane, f"mean({family})", interval_means(lane, count)))
    return out


def interval_means(sums: Lane, counts: Lane) -> np.ndarray:
    """Δsum / Δcount at each of `sums`' samples (NaN where nothing was observed); the
    pair restarts together when either went down."""
    count_at = np.interp(sums.ts, counts.ts, counts.values) if counts.ts.size else sums.values
    restarted = went_down(sums.values) | went_down(count_at)
    added_sum = counter_increases(sums.values, restarted)
    added_count = counter_increases(count_at, restarted)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(added_count > 0, added_sum / added_count, np.nan)


def _pair_key(lane: Lane, suffix: str) -> tuple[str, str, str]:
    return (lane.source, lane.metric[: -len(suffix)], lane_key("", lane.labels))


def _derived(lane: Lane, metric: str, values: np.ndarray) -> Lane:
    key = lane_key(metric, lane.labels)
    if lane.key.endswith(f"@{lane.source}"):
        key = f"{key}@{lane.source}"
    return Lane(key, metric, lane.labels, lane.source, lane.ts, values)
