"""The report's telemetry appendix: every series the run scraped that the curated
sections do not draw, made readable — counters as rates per second, histograms as
p50 / p99 per window from their bucket deltas, labelled series in numeric order, info
series summarised in a table, a unit on every chart, and the embedded target's
modelled GPU marked as modelled. The page folds it away (`<details>`), so it costs the
reader nothing until asked for."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from zerohop.analysis.counters import window_quantiles, window_rates
from zerohop.analysis.run_analysis import TimeSeriesData
from zerohop.analysis.server.modelled import is_gpu_metric, is_modelled_series
from zerohop.core.metrics import needed_n
from zerohop.report import formatting as fmt
from zerohop.report.charts import Chart, Series, add_chart
from zerohop.report.legend import brief_names
from zerohop.report.telemetry_transforms import family_of, label_sort_key, natural_key

MODELLED_NOTE = "modelled by the embedded target, not measured"
QUANTILES = (0.5, 0.99)
# DCGM exporter fields: (unit, scale to that unit). FB_* are MiB; PROF_PCIE_* are B/s;
# PROF_*_ACTIVE are 0–1 ratios.
DCGM_UNITS: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_FB_FREE": ("GB", 1.048576e-3),
    "DCGM_FI_DEV_FB_USED": ("GB", 1.048576e-3),
    "DCGM_FI_DEV_GPU_TEMP": ("°C", 1.0),
    "DCGM_FI_DEV_MEMORY_TEMP": ("°C", 1.0),
    "DCGM_FI_DEV_GPU_UTIL": ("%", 1.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("%", 1.0),
    "DCGM_FI_DEV_POWER_USAGE": ("W", 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("MHz", 1.0),
    "DCGM_FI_DEV_MEM_CLOCK": ("MHz", 1.0),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("GB/s", 1e-9),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("GB/s", 1e-9),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("%", 100.0),
    "DCGM_FI_PROF_SM_ACTIVE": ("%", 100.0),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("%", 100.0),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("%", 100.0),
}
def gauge_unit(metric: str) -> tuple[str, float]:
    """The unit a gauge is drawn in, and the scale from its raw value."""
    if metric in DCGM_UNITS:
        return DCGM_UNITS[metric]
    for suffix, unit in (("_w", "W"), ("_c", "°C"), ("_mhz", "MHz")):
        if metric.endswith(suffix):
            return unit, 1.0
    if metric.endswith("_bytes_per_s"):
        return "GB/s", 1e-9
    if metric.endswith("_seconds"):
        return "ms", 1e3
    if metric.endswith("_bytes"):
        return "GB", 1e-9
    if metric.endswith(("_perc", "_frac", "_ratio", "_fraction")):
        return "%", 100.0  # vLLM's *_perc gauges are 0–1 fractions
    if metric.endswith("_pct"):
        return "%", 1.0
    if metric.endswith("_per_s"):
        return "per s", 1.0
    if "requests" in metric:
        return "requests", 1.0
    return "value", 1.0


def rate_unit(counter: str) -> str:
    """Per-second unit of a counter's rate, from what it counts."""
    stem = counter.removesuffix("_total").removesuffix("_count")
    if "token" in stem:
        return "tokens/s"
    if stem.endswith("_seconds"):
        return "s per s"
    if "request" in stem:
        return "requests/s"
    return "per s"


@dataclass(frozen=True)
class RawLane:
    key: str
    metric: str
    labels: dict[str, str]
    source: str


def appendix_section(
    data: TimeSeriesData,
    keys: list[str],
    x: np.ndarray,
    x_range: tuple[float, float],
    manifest: dict[str, Any],
    charts: list[Chart],
) -> dict[str, Any]:
    """`keys`: the lanes the curated sections left out. Returns the appendix's context:
    chart ids, the info-series table, and how many raw series it stands for."""
    lanes = [
        RawLane(k, data.lane_metrics[k], data.lane_labels.get(k, {}), data.lane_sources.get(k, ""))
        for k in keys
    ]
    families: dict[str, list[RawLane]] = defaultdict(list)
    for lane in lanes:
        families[family_of(lane.metric).name].append(lane)
    chart_ids: list[str] = []
    infos: list[dict[str, str]] = []
    window_s = data.timeline.window_s
    for name in sorted(families, key=lambda n: (not is_gpu_metric(n), natural_key(n))):
        members = families[name]
        roles = {family_of(lane.metric).role for lane in members}
        if "info" in roles:
            infos.append(_info_row(name, members))
            continue
        modelled = any(is_modelled_series(manifest, m.metric, m.source) for m in members)
        if "bucket" in roles:
            chart = _histogram_chart(name, members, data, x, x_range, modelled)
        elif roles & {"counter", "count", "sum"}:
            chart = _counter_chart(name, members, data, window_s, x, x_range, modelled)
        else:
            chart = _gauge_chart(name, members, data, x, x_range, modelled)
        if chart is not None:
            chart_ids.append(add_chart(charts, chart))
    return {"charts": chart_ids, "infos": infos, "series": fmt.count(len(lanes))}


def _sorted(members: list[RawLane]) -> list[RawLane]:
    return sorted(members, key=lambda m: (natural_key(m.metric), label_sort_key(m.labels)))


def _title(name: str, unit: str, modelled: bool, extra: str = "") -> str:
    text = f"{name}{extra} ({unit})"
    return f"{text} — {MODELLED_NOTE}" if modelled else text


def _named_series(members: list[RawLane], columns: list[np.ndarray]) -> list[Series]:
    names = brief_names([(m.key, m.labels) for m in members])
    return [
        Series(n.brief, values, full_label=n.full)
        for n, values in zip(names, columns, strict=True)
    ]


def _gauge_chart(name: str, members: list[RawLane], data: TimeSeriesData, x: np.ndarray,
                 x_range: tuple[float, float], modelled: bool) -> Chart | None:
    members = [m for m in _sorted(members) if m.key in data.lanes.columns]
    unit, scale = gauge_unit(name)
    columns = [data.lanes[m.key].to_numpy(dtype=float) * scale for m in members]
    keep = [(m, c) for m, c in zip(members, columns, strict=True) if np.isfinite(c).any()]
    if not keep:
        return None
    series = _named_series([m for m, _ in keep], [c for _, c in keep])
    return _time_chart(name, _title(name, unit, modelled), x, x_range, unit, series)


def _counter_chart(name: str, members: list[RawLane], data: TimeSeriesData, window_s: float,
                   x: np.ndarray, x_range: tuple[float, float], modelled: bool) -> Chart | None:
    counted = [m for m in _sorted(members) if family_of(m.metric).role != "sum"]
    counted = [m for m in counted if m.key in data.lanes.columns]
    rates = [window_rates(data.lanes[m.key].to_numpy(dtype=float), window_s) for m in counted]
    keep = [(m, r) for m, r in zip(counted, rates, strict=True) if np.isfinite(r).any()]
    if not keep:
        return None
    unit = rate_unit(name if name.endswith("_total") else name + "_count")
    series = _named_series([m for m, _ in keep], [r for _, r in keep])
    title = _title(name, unit, modelled, " — rate")
    return _time_chart(name, title, x, x_range, unit, series)


def _histogram_chart(name: str, members: list[RawLane], data: TimeSeriesData, x: np.ndarray,
                     x_range: tuple[float, float], modelled: bool) -> Chart | None:
    """p50 and p99 per window of each label set (the `le` label aside) from the bucket
    deltas; each quantile drawn only in windows holding the observations it needs."""
    unit, scale = gauge_unit(name)
    groups: dict[tuple[tuple[str, str], ...], list[tuple[float, str]]] = defaultdict(list)
    for m in members:
        if family_of(m.metric).role != "bucket" or m.key not in data.lanes.columns:
            continue
        le = m.labels.get("le", "+Inf")
        rest = tuple(sorted((k, v) for k, v in m.labels.items() if k != "le"))
        groups[rest].append((float(le.replace("Inf", "inf")), m.key))
    series: list[Series] = []
    observations = 0.0
    finest = math.inf
    several = len(groups) > 1
    for rest, buckets in sorted(groups.items(), key=lambda kv: label_sort_key(dict(kv[0]))):
        buckets.sort()
        finest = min(finest, buckets[0][0])
        cumulative = np.vstack([data.lanes[key].to_numpy(dtype=float) for _, key in buckets])
        result = window_quantiles([b for b, _ in buckets], cumulative, QUANTILES)
        observations += float(np.nansum(result.n))
        prefix = " ".join(v for _, v in rest) + " " if several else ""
        for q in QUANTILES:
            values = result.quantiles[q] * scale
            if np.isfinite(values).any():
                label = f"{prefix}p{q * 100:g}"
                series.append(Series(label, values, full_label=f"{label} (windows with ≥ "
                                     f"{needed_n(q)} observations)"))
    if not series:
        return None
    extra = (f" — p50 / p99 per window from bucket deltas, n = {fmt.count(observations)}; "
             f"first bucket ≤ {fmt.number(finest * scale)} {unit}")
    return _time_chart(name, _title(name, unit, modelled, extra), x, x_range, unit, series)


def _info_row(name: str, members: list[RawLane]) -> dict[str, str]:
    """An info series (its value is a timestamp or 1; its labels are the content):
    how many label sets it had, and each label's distinct values, a few named."""
    values: dict[str, set[str]] = defaultdict(set)
    for m in members:
        for key, value in m.labels.items():
            if key != "source":
                values[key].add(value)
    parts = []
    for key in sorted(values):
        seen = sorted(values[key], key=natural_key)
        shown = ", ".join(v or "(empty)" for v in seen[:3])
        more = f" … {len(seen) - 3} more" if len(seen) > 3 else ""
        parts.append(f"{key}: {shown}{more}")
    return {"metric": name, "sets": fmt.count(len(members)), "labels": "; ".join(parts)}


def _time_chart(stem: str, title: str, x: np.ndarray, x_range: tuple[float, float], unit: str,
                series: list[Series]) -> Chart:
    return Chart(chart_id="raw-" + stem.replace(":", "-"), title=title, kind="time", x=x,
                 series=series, x_label="seconds since start", y_label=unit, x_range=x_range)
