"""The report's time-series section: load and latency per window, and the telemetry
lanes grouped into charts on the run's one time axis."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from zerohop.analysis.run_analysis import RunAnalysis, TimeSeriesData
from zerohop.analysis.server.modelled import is_modelled_series
from zerohop.core.metrics import CATALOGUE, window_column
from zerohop.report import formatting as fmt
from zerohop.report.charts import Chart, Series, add_chart
from zerohop.report.legend import brief_names
from zerohop.report.present_appendix import MODELLED_NOTE, appendix_section
from zerohop.report.telemetry_transforms import natural_key


@dataclass(frozen=True)
class LaneGroup:
    """Telemetry metrics drawn in one chart, with a display scale and unit."""

    title: str
    metrics: tuple[str, ...]
    unit: str
    scale: float = 1.0


# The telemetry lanes of the time-series section, in order. Metrics not listed get a
# chart of their own after these; loadgen_* lanes belong to the fidelity section.
LANE_GROUPS: tuple[LaneGroup, ...] = (
    LaneGroup("SM utilisation", ("gpu_sm_util_pct",), "%"),
    LaneGroup("GPU memory used", ("gpu_mem_used_bytes",), "GB", 1e-9),
    LaneGroup("Memory controller utilisation", ("gpu_mem_util_pct",), "%"),
    LaneGroup("PCIe RX / TX", ("pcie_rx_bytes_per_s", "pcie_tx_bytes_per_s"), "GB/s", 1e-9),
    LaneGroup("Power", ("gpu_power_w", "gpu_power_avg_w"), "W"),
    LaneGroup("Temperature", ("gpu_temp_c",), "°C"),
    LaneGroup("Server queue", ("queue_depth", "running_requests"), "requests"),
    LaneGroup("KV cache usage", ("kv_cache_usage_frac",), "%", 100.0),
    LaneGroup("Server TTFT (scraped)", ("server_ttft_p50_s", "server_ttft_p99_s"), "ms", 1e3),
    LaneGroup(
        "Server token throughput",
        ("prompt_tokens_per_s", "generation_tokens_per_s"),
        "tokens/s",
    ),
    LaneGroup("Preemptions", ("preemptions_per_s",), "per s"),
    LaneGroup("SM clock", ("gpu_sm_clock_mhz",), "MHz"),
)
# The lanes the time-series section draws on the page itself: the engine's own state.
# The GPU's lanes join them when they are measured; the embedded target's modelled GPU,
# and every series not grouped above, go to the telemetry appendix.
SERVER_METRICS: frozenset[str] = frozenset(
    {"queue_depth", "running_requests", "kv_cache_usage_frac", "server_ttft_p50_s",
     "server_ttft_p99_s", "prompt_tokens_per_s", "generation_tokens_per_s",
     "preemptions_per_s"}
)
FIDELITY_GROUP = LaneGroup("Load generator CPU", ("loadgen_cpu_pct",), "%")
HIDDEN_METRICS: frozenset[str] = frozenset(
    {
        "gpu_mem_total_bytes",
        "gpu_throttle_reasons",
        "pcie_link_gen",
        "pcie_link_width",
        "loadgen_rss_bytes",
        "loadgen_loop_lag_ms",
        "loadgen_cpu_pct",
    }
)
SHORT_METRIC: dict[str, str] = {
    "pcie_rx_bytes_per_s": "RX",
    "pcie_tx_bytes_per_s": "TX",
    "queue_depth": "waiting",
    "running_requests": "running",
    "server_ttft_p50_s": "p50",
    "server_ttft_p99_s": "p99",
    "prompt_tokens_per_s": "prompt",
    "generation_tokens_per_s": "generation",
    "gpu_power_w": "power",
    "gpu_power_avg_w": "avg power",
}




def timeseries_section(analysis: RunAnalysis, charts: list[Chart]) -> dict[str, Any]:
    data = analysis.charts_series
    x, x_range = window_axis(data)
    section_charts = []
    load = time_chart(
        "load",
        "Offered vs achieved load",
        x,
        x_range,
        "req/s",
        [*load_series(data), Series("errors", data.load["error_rps"].to_numpy(), "dashed")],
    )
    section_charts.append(add_chart(charts, load))
    for metric in (m for m in CATALOGUE if m.window_stats):
        columns = [(stat, window_column(metric.name, stat)) for stat in metric.window_stats]
        series = latency_series(data, columns)
        if series:
            chart = time_chart(
                f"latency-{metric.stem}", f"{metric.title} percentiles per window", x, x_range,
                "ms", series,
            )
            section_charts.append(add_chart(charts, chart))
    manifest = analysis.manifest
    lanes_charts: list[str] = []
    modelled_charts: list[str] = []
    drawn: set[str] = set()
    for group in LANE_GROUPS:
        lane = lane_chart(group, data, x, x_range, manifest)
        if lane is None:
            continue
        on_page = set(group.metrics) <= SERVER_METRICS or MODELLED_NOTE not in lane.title
        (lanes_charts if on_page else modelled_charts).append(add_chart(charts, lane))
        drawn |= {k for k, m in data.lane_metrics.items() if m in group.metrics}
    rest = [k for k, m in data.lane_metrics.items() if k not in drawn and m not in HIDDEN_METRICS]
    appendix = appendix_section(data, rest, x, x_range, manifest, charts)
    appendix["charts"] = modelled_charts + appendix["charts"]
    return {
        "charts": section_charts,
        "lanes": lanes_charts,
        "appendix": appendix,
        "window": fmt.seconds(data.timeline.window_s),
        "gaps": [
            {
                "at": fmt.seconds(g.ts - analysis.timeline.t0),
                "source": g.source,
                "reason": g.reason,
                "length": fmt.seconds(g.seconds),
            }
            for g in analysis.gaps
        ],
    }


def lane_chart(
    group: LaneGroup,
    data: TimeSeriesData,
    x: np.ndarray,
    x_range: tuple[float, float],
    manifest: dict[str, Any] | None = None,
) -> Chart | None:
    """One chart of a lane group: brief legend names (`GPU 0`, `RX GPU 3`), each lane's
    full key on hover; its title says when a model made the series (`analysis.modelled`)."""
    picked: list[tuple[str, str, np.ndarray]] = []
    for key, metric in sorted(data.lane_metrics.items(), key=lambda kv: _lane_sort(data, kv[0])):
        if metric not in group.metrics or key not in data.lanes.columns:
            continue
        values = data.lanes[key].to_numpy() * group.scale
        if np.isfinite(values).any():
            picked.append((key, metric, values))
    if not picked:
        return None
    several = len(group.metrics) > 1
    names = brief_names(
        [(key, data.lane_labels.get(key, {})) for key, _, _ in picked],
        [SHORT_METRIC.get(metric, metric) if several else "" for _, metric, _ in picked],
    )
    series = [
        Series(name.brief, values, full_label=name.full)
        for name, (_, _, values) in zip(names, picked, strict=True)
    ]
    title = f"{group.title} ({group.unit})" if group.unit else group.title
    if any(is_modelled_series(manifest or {}, m, data.lane_sources.get(k, ""))
           for k, m, _ in picked):
        title += f" — {MODELLED_NOTE}"
    chart_id = "lane-" + "-".join(group.metrics[:1])
    return time_chart(chart_id, title, x, x_range, group.unit, series)


def _lane_sort(data: TimeSeriesData, key: str) -> tuple[tuple, ...]:
    """Metric, then GPU index as a number (`GPU 2` before `GPU 10`), then the key in
    natural order."""
    labels = data.lane_labels.get(key, {})
    return (natural_key(data.lane_metrics.get(key, "")), natural_key(labels.get("gpu", "")),
            natural_key(key))


def window_axis(data: TimeSeriesData) -> tuple[np.ndarray, tuple[float, float]]:
    """Window centres and the run's span: the x axis every time chart of a run shares."""
    return data.timeline.starts_s + data.timeline.window_s / 2.0, (0.0, data.timeline.duration_s)


def load_series(data: TimeSeriesData) -> list[Series]:
    """Offered and achieved (ok) requests per second, per window."""
    return [
        Series("offered", data.load["offered_rps"].to_numpy()),
        Series("achieved (ok)", data.load["achieved_rps"].to_numpy()),
    ]


def latency_series(data: TimeSeriesData, columns: Iterable[tuple[str, str]]) -> list[Series]:
    """One series per (stat, latency column) that has at least one finite window; a
    column absent or empty in this run draws nothing."""
    return [
        Series(stat, data.latency[c].to_numpy())
        for stat, c in columns
        if c in data.latency.columns and np.isfinite(data.latency[c].to_numpy()).any()
    ]


def time_chart(
    chart_id: str,
    title: str,
    x: np.ndarray,
    x_range: tuple[float, float],
    unit: str,
    series: list[Series],
) -> Chart:
    return Chart(
        chart_id=chart_id,
        title=title,
        kind="time",
        x=x,
        series=series,
        x_label="seconds since start",
        y_label=unit,
        x_range=x_range,
    )


