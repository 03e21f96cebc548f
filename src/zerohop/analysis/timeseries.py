"""Everything on the run's time axis: windows, offered vs achieved load, windowed
latency percentiles, telemetry lanes and their per-window means.

One `Timeline` (origin + window width) is shared by all of them, so a latency spike
and a telemetry lane line up window for window — that is what the charts show and
what the correlation analysis consumes. A request belongs to the window of its send
time (`sent_ts`, else `scheduled_ts`): the moment its experience began.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from zerohop.analysis.quantiles import grouped_quantiles
from zerohop.analysis.run_data import category_codes
from zerohop.core.metrics import WINDOW_PERCENTILES, percentile_fraction, window_column

# Telemetry rows that are annotations, not samples.
ANNOTATION_METRICS: frozenset[str] = frozenset({"gap", "unsupported"})
# Latency figures computed per window: (column in requests, percentile name, fraction).
WINDOW_LATENCY: tuple[tuple[str, str, float], ...] = tuple(
    (column, stat, percentile_fraction(stat)) for column, stat in WINDOW_PERCENTILES
)


@dataclass(frozen=True)
class Timeline:
    """Windows `[t0 + i*window_s, t0 + (i+1)*window_s)` for i in `range(n)`."""

    t0: float
    window_s: float
    n: int

    @property
    def starts_s(self) -> np.ndarray:
        """Window starts in seconds since t0 (the charts' x axis)."""
        return np.arange(self.n) * self.window_s

    @property
    def duration_s(self) -> float:
        return self.n * self.window_s

    def index_of(self, ts: np.ndarray) -> np.ndarray:
        """Window index of each wall-clock timestamp; -1 outside the timeline/NaN."""
        ts = np.asarray(ts, dtype=float)
        with np.errstate(invalid="ignore"):
            idx = np.floor((ts - self.t0) / self.window_s)
        out = np.where(np.isfinite(idx), idx, -1).astype(np.int64)
        out[(out < 0) | (out >= self.n)] = -1
        return out

    def coarsened(self, max_points: int) -> Timeline:
        """The same span in at most `max_points` windows (whole multiples of this
        window), for charts: a week-long run still plots a few thousand points."""
        if self.n <= max_points:
            return self
        factor = math.ceil(self.n / max_points)
        return Timeline(self.t0, self.window_s * factor, math.ceil(self.n / factor))


@dataclass(frozen=True)
class Lane:
    """One telemetry time series: a metric with one label set from one source."""

    key: str
    metric: str
    labels: dict[str, str]
    source: str
    ts: np.ndarray
    values: np.ndarray


@dataclass(frozen=True)
class TelemetryGap:
    ts: float
    source: str
    reason: str
    seconds: float


def request_start_ts(requests: pd.DataFrame) -> np.ndarray:
    """When each request's experience began: sent_ts, else its scheduled time."""
    sent = requests["sent_ts"].to_numpy(dtype=float)
    return np.where(np.isfinite(sent), sent, requests["scheduled_ts"].to_numpy(dtype=float))


def run_timeline(
    requests: pd.DataFrame,
    telemetry: pd.DataFrame,
    window_s: float,
    *,
    fallback_start: float | None = None,
    fallback_duration_s: float | None = None,
) -> Timeline:
    """The span covered by requests and telemetry, cut into `window_s` windows."""
    if not window_s > 0:
        raise ValueError(f"window_s must be > 0, got {window_s}")
    points = [
        request_start_ts(requests),
        requests["end_ts"].to_numpy(dtype=float),
        telemetry["ts"].to_numpy(dtype=float),
    ]
    finite = [p[np.isfinite(p)] for p in points]
    finite = [p for p in finite if p.size]
    if finite:
        lo = min(float(p.min()) for p in finite)
        hi = max(float(p.max()) for p in finite)
    else:
        lo = fallback_start if fallback_start is not None else 0.0
        hi = lo + (fallback_duration_s or window_s)
    n = max(1, math.floor((hi - lo) / window_s) + 1)
    return Timeline(t0=lo, window_s=window_s, n=n)


def load_series(requests: pd.DataFrame, timeline: Timeline, weight: float = 1.0
                ) -> pd.DataFrame:
    """Offered vs achieved load per window, in requests per second (`weight`: requests
    each record stands for, `measured_window.record_weight`).

    offered: requests due to start (scheduled_ts in open loop, else sent_ts);
    achieved: `ok` completions (end_ts); errors: failed attempts (end_ts, else start).
    """
    scheduled = requests["scheduled_ts"].to_numpy(dtype=float)
    offered_ts = np.where(np.isfinite(scheduled), scheduled, request_start_ts(requests))
    ok = (requests["outcome"] == "ok").to_numpy()
    end = requests["end_ts"].to_numpy(dtype=float)
    finished_ts = np.where(np.isfinite(end), end, request_start_ts(requests))
    per_s = weight / timeline.window_s
    return pd.DataFrame(
        {
            "offered_rps": _count(timeline.index_of(offered_ts), timeline.n) * per_s,
            "achieved_rps": _count(timeline.index_of(end[ok]), timeline.n) * per_s,
            "error_rps": _count(timeline.index_of(finished_ts[~ok]), timeline.n) * per_s,
        }
    )


def latency_series(
    requests: pd.DataFrame, timeline: Timeline, *, min_count: int = 3
) -> pd.DataFrame:
    """Windowed latency percentiles of `ok` requests, columns like `ttft_p99_ms`.
    A window with fewer than `min_count` values is NaN rather than a noisy guess."""
    ok = (requests["outcome"] == "ok").to_numpy()
    codes = np.where(ok, timeline.index_of(request_start_ts(requests)), -1)
    out: dict[str, np.ndarray] = {}
    by_column: dict[str, list[tuple[str, float]]] = {}
    for column, name, q in WINDOW_LATENCY:
        by_column.setdefault(column, []).append((name, q))
    for column, stats in by_column.items():
        qs = np.array([q for _, q in stats])
        table, _ = grouped_quantiles(
            codes, requests[column].to_numpy(dtype=float), timeline.n, qs, min_count=min_count
        )
        for i, (name, _) in enumerate(stats):
            out[window_column(column, name)] = table[:, i]
    return pd.DataFrame(out)


def schedule_lag_series(requests: pd.DataFrame, timeline: Timeline) -> pd.DataFrame:
    """Per-window p50/p99 of the client's schedule lag (open-loop runs only)."""
    lag = requests["schedule_lag_ms"].to_numpy(dtype=float)
    codes = timeline.index_of(request_start_ts(requests))
    table, _ = grouped_quantiles(codes, lag, timeline.n, np.array([0.5, 0.99]))
    return pd.DataFrame({"schedule_lag_p50_ms": table[:, 0], "schedule_lag_p99_ms": table[:, 1]})


def outcome_series(requests: pd.DataFrame, timeline: Timeline) -> pd.DataFrame:
    """Failed attempts per window, one column per non-ok outcome."""
    end = requests["end_ts"].to_numpy(dtype=float)
    ts = np.where(np.isfinite(end), end, request_start_ts(requests))
    codes, names = category_codes(requests["outcome"])
    idx = timeline.index_of(ts)
    columns: dict[str, np.ndarray] = {}
    for code in sorted(set(codes[codes >= 0].tolist()), key=lambda c: names[c]):
        if names[code] != "ok":
            columns[names[code]] = _count(idx[codes == code], timeline.n)
    return pd.DataFrame(columns, index=pd.RangeIndex(timeline.n))


def telemetry_lanes(telemetry: pd.DataFrame) -> list[Lane]:
    """Split the long-form telemetry into lanes, one per (source, metric, labels).

    Works on the category codes (one stable argsort for millions of rows) and parses
    each distinct labels string once. The source is part of a lane's key only when
    two sources report the same metric and labels.
    """
    if telemetry.empty:  # a run without telemetry may have no columns at all
        return []
    source_codes, sources = category_codes(telemetry["source"])
    metric_codes, metrics = category_codes(telemetry["metric"])
    label_codes, label_texts = category_codes(telemetry["labels"])
    ts_all = telemetry["ts"].to_numpy(dtype=float)
    annotation = [i for i, name in enumerate(metrics) if name in ANNOTATION_METRICS]
    keep = (metric_codes >= 0) & np.isfinite(ts_all) & ~np.isin(metric_codes, annotation)
    rows = np.flatnonzero(keep)
    if rows.size == 0:
        return []
    n_labels = len(label_texts) + 1  # +1: missing labels (code -1) get their own slot
    key = (source_codes[rows].astype(np.int64) * len(metrics) + metric_codes[rows]) * n_labels + (
        label_codes[rows] + 1
    )
    order = rows[np.argsort(key, kind="stable")]
    sorted_key = np.sort(key, kind="stable")
    bounds = np.flatnonzero(np.diff(sorted_key)) + 1
    values_all = telemetry["value"].to_numpy(dtype=float)
    parsed = [_parse_labels(text) for text in label_texts]
    raw: list[tuple[str, str, dict[str, str], np.ndarray, np.ndarray]] = []
    for part in np.split(order, bounds):
        first = part[0]
        ts = ts_all[part]
        values = values_all[part]
        if ts.size > 1 and (np.diff(ts) < 0).any():
            by_time = np.argsort(ts, kind="stable")
            ts, values = ts[by_time], values[by_time]
        label_code = label_codes[first]
        labels = parsed[label_code] if label_code >= 0 else {}
        source = sources[source_codes[first]] if source_codes[first] >= 0 else "unknown"
        raw.append((source, metrics[metric_codes[first]], labels, ts, values))
    sources_per_key: dict[str, set[str]] = {}
    for source, metric, labels, _, _ in raw:
        sources_per_key.setdefault(lane_key(metric, labels), set()).add(source)
    lanes = []
    for source, metric, labels, ts, values in raw:
        key_text = lane_key(metric, labels)
        if len(sources_per_key[key_text]) > 1:
            key_text = f"{key_text}@{source}"
        lanes.append(Lane(key_text, metric, labels, source, ts, values))
    return lanes


def lane_key(metric: str, labels: dict[str, str]) -> str:
    """Prometheus-style name of a lane: `gpu_power_w{gpu=0}`."""
    if not labels:
        return metric
    inner = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    return f"{metric}{{{inner}}}"


def lane_windows(lanes: list[Lane], timeline: Timeline, *, statistic: str = "mean") -> pd.DataFrame:
    """Each lane's mean (or max) per window; NaN where a window has no sample."""
    columns: dict[str, np.ndarray] = {}
    for lane in lanes:
        idx = timeline.index_of(lane.ts)
        keep = (idx >= 0) & np.isfinite(lane.values)
        idx, values = idx[keep], lane.values[keep]
        counts = np.bincount(idx, minlength=timeline.n)
        if statistic == "max":
            agg = np.full(timeline.n, -np.inf)
            np.maximum.at(agg, idx, values)
            agg[counts == 0] = np.nan
        else:
            sums = np.bincount(idx, weights=values, minlength=timeline.n)
            with np.errstate(invalid="ignore", divide="ignore"):
                agg = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        columns[lane.key] = agg
    return pd.DataFrame(columns, index=pd.RangeIndex(timeline.n))


def telemetry_gaps(telemetry: pd.DataFrame) -> list[TelemetryGap]:
    """The recorded gaps (a sampler lost its source) with their reasons."""
    metric_codes, metrics = category_codes(telemetry["metric"])
    if "gap" not in metrics:
        return []
    rows = telemetry.iloc[np.flatnonzero(metric_codes == metrics.index("gap"))]
    gaps = []
    for ts, source, labels, value in zip(
        rows["ts"], rows["source"], rows["labels"], rows["value"], strict=True
    ):
        parsed = _parse_labels(str(labels))
        gaps.append(
            TelemetryGap(
                ts=float(ts),
                source=str(source),
                reason=parsed.get("reason", "unknown"),
                seconds=float(value),
            )
        )
    return sorted(gaps, key=lambda g: g.ts)


def _count(idx: np.ndarray, n: int) -> np.ndarray:
    idx = idx[idx >= 0]
    return np.bincount(idx, minlength=n)[:n].astype(float)


def _parse_labels(text: str) -> dict[str, str]:
    if not text or text in ("{}", "nan", "None"):
        return {}
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return {"labels": text}
    if not isinstance(parsed, dict):
        return {"labels": text}
    return {str(k): str(v) for k, v in parsed.items()}
