"""RunAnalysis → the report page's context: sections of ready-to-print strings and
chart specs. The template only loops and prints; every number is formatted here."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zerohop.report import formatting as fmt
from zerohop.report.analysis import RunAnalysis, TimeSeriesData
from zerohop.report.charts import Chart, Series, joined
from zerohop.report.correlation import PairResult
from zerohop.report.environment import environment_rows, redact
from zerohop.report.glossary import glossary_entries
from zerohop.report.policy import policy_section
from zerohop.report.quantiles import PERCENTILE_NAMES

METRIC_TITLES: dict[str, str] = {
    "ttft_ms": "TTFT",
    "tpot_ms": "TPOT",
    "itl_ms": "ITL",
    "e2e_ms": "E2E",
    "ttft_from_schedule_ms": "TTFT from schedule",
    "e2e_from_schedule_ms": "E2E from schedule",
}


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


@dataclass
class Page:
    """Everything the report template prints."""

    context: dict[str, Any]
    charts: list[Chart] = field(default_factory=list)


def _policy_section(analysis: RunAnalysis, charts: list[Chart]) -> dict[str, Any] | None:
    context, policy_charts = policy_section(analysis.policy)
    charts.extend(policy_charts)
    return context


def report_page(analysis: RunAnalysis, generated_at: str) -> Page:
    charts: list[Chart] = []
    manifest = redact(analysis.manifest)
    context: dict[str, Any] = {
        "title": f"zerohop report — {analysis.label}",
        "generated_at": generated_at,
        "run": _run_header(analysis, manifest),
        "verdict": _verdict(analysis),
        "notes": analysis.notes,
        "slos": _slo_rows(analysis),
        "throughput": _throughput_table(analysis),
        "latency": _latency_table(analysis),
        "timeseries": _timeseries_section(analysis, charts),
        "correlation": _correlation_section(analysis),
        "alerts": _alert_rows(analysis),
        "distributions": _distribution_section(analysis, charts),
        "prefill": _prefill_section(analysis, charts),
        "adapters": _adapter_rows(analysis),
        "errors": _error_section(analysis, charts),
        "fidelity": _fidelity_section(analysis, charts),
        "microbench": _microbench_section(analysis, charts),
        "policy": _policy_section(analysis, charts),
        "environment": [
            {"title": title, "rows": rows} for title, rows in environment_rows(manifest).items()
        ],
        "glossary": [{"term": t, "definition": d} for t, d in glossary_entries()],
    }
    context["chart_titles"] = {chart.chart_id: chart.title for chart in charts}
    return Page(context=context, charts=charts)


# --- header and verdict ---------------------------------------------------------------
def _run_header(analysis: RunAnalysis, manifest: dict[str, Any]) -> dict[str, str]:
    target = manifest.get("target") or {}
    load = manifest.get("load") or {}
    load_text = str(load.get("mode", "—"))
    if load.get("users"):
        load_text += f", {load['users']} users"
    if load.get("rate_rps"):
        load_text += f", {load['rate_rps']} req/s {load.get('arrival') or ''}".rstrip()
    return {
        "label": analysis.label,
        "status": str(manifest.get("status", "unknown")),
        "end_reason": str(manifest.get("end_reason") or "—"),
        "started_at": str(manifest.get("started_at") or "—"),
        "duration": fmt.seconds(analysis.timeline.duration_s),
        "target": f"{target.get('url', '—')} ({target.get('kind', '?')}, {target.get('api', '?')})",
        "load": load_text,
        "window": fmt.seconds(analysis.settings.window_s),
    }


def _verdict(analysis: RunAnalysis) -> dict[str, Any]:
    items = []
    if analysis.slo_results:
        met = sum(1 for r in analysis.slo_results if r.met)
        failed = [r.target.key for r in analysis.slo_results if r.met is False]
        unknown = sum(1 for r in analysis.slo_results if r.met is None)
        status = "fail" if failed else ("warn" if unknown else "ok")
        text = f"SLOs: {met} of {len(analysis.slo_results)} met"
        if failed:
            text += " (missed: " + ", ".join(failed) + ")"
        items.append({"status": status, "text": text})
    else:
        items.append({"status": "none", "text": "SLOs: none set"})
    fidelity = analysis.fidelity
    items.append(
        {
            "status": "ok" if fidelity.ok else "warn",
            "text": "client fidelity OK"
            if fidelity.ok
            else "client fidelity flagged: " + "; ".join(fidelity.reasons),
        }
    )
    total = analysis.total
    error_status = "ok" if total.errors == 0 else ("warn" if total.error_pct < 1.0 else "fail")
    items.append(
        {
            "status": error_status,
            "text": f"errors: {fmt.count(total.errors)} of {fmt.count(total.requests)} "
            f"({fmt.pct(total.error_pct, 2)})",
        }
    )
    fired = [a for a in analysis.alerts if a.fired]
    items.append(
        {
            "status": "warn" if fired else "ok",
            "text": f"alerts: {len(fired)} of {len(analysis.alerts)} fired"
            if analysis.alerts
            else "alerts: no rules",
        }
    )
    status_manifest = str(analysis.manifest.get("status", "unknown"))
    if status_manifest != "completed":
        items.append({"status": "warn", "text": f"run status: {status_manifest}"})
    rank = {"fail": 3, "warn": 2, "ok": 1, "none": 0}
    worst = max((i["status"] for i in items), key=lambda s: rank[s])
    return {"overall": "ok" if worst == "none" else worst, "checks": items}


def _slo_rows(analysis: RunAnalysis) -> list[dict[str, str]]:
    return [
        {
            "key": r.target.key,
            "observed": fmt.ms(r.observed_ms),
            "threshold": fmt.ms(r.target.threshold_ms),
            "status": "met" if r.met else ("missed" if r.met is False else "no data"),
        }
        for r in analysis.slo_results
    ]


# --- summary tables -----------------------------------------------------------------
def _throughput_table(analysis: RunAnalysis) -> list[dict[str, str]]:
    return [
        {
            "workload": s.workload,
            "requests": fmt.count(s.requests),
            "ok": fmt.count(s.ok),
            "error_pct": fmt.pct(s.error_pct, 2),
            "window": fmt.seconds(s.window_s),
            "req_per_s": fmt.rate(s.req_per_s),
            "input_tps": fmt.rate(s.input_tokens_per_s),
            "output_tps": fmt.rate(s.output_tokens_per_s),
            "goodput": fmt.rate(s.goodput_rps),
            "good_fraction": fmt.pct(s.good_fraction * 100.0),
        }
        for s in analysis.summaries
    ]


def _latency_table(analysis: RunAnalysis) -> dict[str, Any]:
    rows = []
    for s in analysis.summaries:
        for metric, dist in s.latency.items():
            rows.append(
                {
                    "workload": s.workload,
                    "metric": METRIC_TITLES.get(metric, metric),
                    "n": fmt.count(dist.n),
                    "cells": [fmt.ms(dist.percentiles[p]) for p in PERCENTILE_NAMES]
                    + [fmt.ms(dist.mean), fmt.ms(dist.min), fmt.ms(dist.max)],
                }
            )
    return {"columns": [*PERCENTILE_NAMES, "mean", "min", "max"], "rows": rows}


# --- time series --------------------------------------------------------------------
def _timeseries_section(analysis: RunAnalysis, charts: list[Chart]) -> dict[str, Any]:
    data = analysis.charts_series
    x = data.timeline.starts_s + data.timeline.window_s / 2.0
    x_range = (0.0, data.timeline.duration_s)
    section_charts = []
    load = _time_chart(
        "load",
        "Offered vs achieved load",
        x,
        x_range,
        "req/s",
        [
            Series("offered", data.load["offered_rps"].to_numpy()),
            Series("achieved (ok)", data.load["achieved_rps"].to_numpy()),
            Series("errors", data.load["error_rps"].to_numpy(), "dashed"),
        ],
    )
    section_charts.append(_add(charts, load))
    for metric, title in (("ttft", "TTFT"), ("tpot", "TPOT"), ("e2e", "E2E")):
        columns = [c for c in data.latency.columns if c.startswith(f"{metric}_p")]
        series = [
            Series(c.removeprefix(f"{metric}_").removesuffix("_ms"), data.latency[c].to_numpy())
            for c in columns
            if np.isfinite(data.latency[c].to_numpy()).any()
        ]
        if series:
            chart = _time_chart(
                f"latency-{metric}", f"{title} percentiles per window", x, x_range, "ms", series
            )
            section_charts.append(_add(charts, chart))
    lanes_charts = []
    for group in _lane_groups(data):
        lane_chart = _lane_chart(group, data, x, x_range)
        if lane_chart is not None:
            lanes_charts.append(_add(charts, lane_chart))
    return {
        "charts": section_charts,
        "lanes": lanes_charts,
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


def _lane_groups(data: TimeSeriesData) -> list[LaneGroup]:
    present = set(data.lane_metrics.values())
    groups = [g for g in LANE_GROUPS if present & set(g.metrics)]
    listed = {m for g in LANE_GROUPS for m in g.metrics}
    for metric in sorted(present - listed - HIDDEN_METRICS):
        groups.append(LaneGroup(metric, (metric,), ""))
    return groups


def _lane_chart(
    group: LaneGroup, data: TimeSeriesData, x: np.ndarray, x_range: tuple[float, float]
) -> Chart | None:
    series = []
    for key, metric in sorted(data.lane_metrics.items(), key=lambda kv: _lane_sort(kv[0])):
        if metric not in group.metrics or key not in data.lanes.columns:
            continue
        values = data.lanes[key].to_numpy() * group.scale
        if not np.isfinite(values).any():
            continue
        series.append(Series(_lane_label(key, metric, group), values))
    if not series:
        return None
    title = f"{group.title} ({group.unit})" if group.unit else group.title
    chart_id = "lane-" + "-".join(group.metrics[:1])
    return _time_chart(chart_id, title, x, x_range, group.unit, series)


def _lane_label(key: str, metric: str, group: LaneGroup) -> str:
    """`GPU 0`, `RX GPU 3`, `waiting` — short labels; the key when nothing better."""
    rest = key[len(metric) :]
    prefix = SHORT_METRIC.get(metric, "") if len(group.metrics) > 1 else ""
    if rest.startswith("{gpu=") and rest.endswith("}") and "," not in rest:
        gpu = f"GPU {rest[5:-1]}"
        return f"{prefix} {gpu}".strip()
    if not rest:
        return prefix or metric
    return f"{prefix} {rest}".strip() if prefix else key


def _lane_sort(key: str) -> tuple[str, int, str]:
    metric, _, rest = key.partition("{gpu=")
    number = rest.split("}", 1)[0]
    return (metric, int(number) if number.isdigit() else -1, key)


def _time_chart(
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


# --- correlation and alerts ---------------------------------------------------------
def _correlation_section(analysis: RunAnalysis) -> dict[str, Any]:
    report = analysis.correlation
    settings = report.settings
    top_pairs = []
    for latency in dict.fromkeys(p.latency for p in report.pairs):
        top_pairs.extend([p for p in report.pairs if p.latency == latency][:5])
    return {
        "readings": report.readings,
        "drivers": [_pair_row(p) for p in report.drivers[:20]],
        "pairs": [_pair_row(p) for p in top_pairs],
        "settings": f"window {fmt.seconds(settings.window_s)}, lags ±{settings.max_lag_windows} "
        f"windows, FDR {settings.fdr:g}, |ρ| ≥ {settings.min_abs_rho:g}",
        "skipped": report.skipped,
        "skipped_count": str(len(report.skipped)),
    }


def _pair_row(p: PairResult) -> dict[str, str]:
    return {
        "latency": p.latency,
        "series": p.series,
        "rho": f"{p.rho:+.2f}",
        "lag": f"{p.lag_s:+g} s" if p.lag_windows else "0 s",
        "n": f"{p.n} (eff. {p.n_eff:.0f})",
        "p": _p_text(p.p_value),
        "q": _p_text(p.q_value),
        "driver": "likely driver" if p.driver else "—",
    }


def _p_text(value: float) -> str:
    if value < 1e-4:
        return "< 0.0001"
    return f"{value:.4f}"


def _alert_rows(analysis: RunAnalysis) -> list[dict[str, Any]]:
    rows = []
    for result in analysis.alerts:
        firings = [
            {
                "lane": f.lane,
                "start": fmt.seconds(f.start_s),
                "duration": fmt.seconds(f.duration_s),
                "peak": fmt.number(f.peak),
            }
            for f in result.firings[:20]
        ]
        status = "fired" if result.fired else ("no data" if not result.lanes_checked else "quiet")
        rows.append(
            {
                "rule": result.rule.name or result.rule.text,
                "status": status,
                "lanes": str(result.lanes_checked),
                "firings": firings,
                "more": max(0, len(result.firings) - 20),
            }
        )
    return rows


# --- distributions and prefill -------------------------------------------------------
def _distribution_section(analysis: RunAnalysis, charts: list[Chart]) -> list[str]:
    ids = []
    for metric, per_workload in analysis.cdfs.items():
        if not per_workload:
            continue
        x, columns = joined([(name, x, q) for name, (x, q) in per_workload.items()])
        chart = Chart(
            chart_id=f"cdf-{metric}",
            title=f"{METRIC_TITLES.get(metric, metric)} CDF (ok requests)",
            kind="xy",
            x=x,
            series=[
                Series(name, column * 100.0, "step")
                for name, column in zip(per_workload, columns, strict=True)
            ],
            x_label="ms",
            y_label="% of requests ≤ x",
        )
        ids.append(_add(charts, chart))
    return ids


def _prefill_section(analysis: RunAnalysis, charts: list[Chart]) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for fit in analysis.prefill:
        chart_id = ""
        if fit.points_tokens.size:
            order = np.argsort(fit.points_tokens, kind="stable")
            tokens = fit.points_tokens[order]
            series = [Series("ok requests", fit.points_ttft_ms[order], "points")]
            if fit.note is None:
                line = fit.intercept_ms + fit.slope_ms_per_1k * tokens / 1000.0
                series.append(Series("Theil–Sen fit", line))
            chart_id = _add(
                charts,
                Chart(
                    chart_id=f"prefill-{len(rows)}",
                    title=f"TTFT vs prompt length — {fit.workload}",
                    kind="scatter",
                    x=tokens,
                    series=series,
                    x_label="input tokens",
                    y_label="TTFT ms",
                ),
            )
        rows.append(
            {
                "workload": fit.workload,
                "n": fmt.count(fit.n),
                "slope": fmt.ms(fit.slope_ms_per_1k),
                "ci": f"[{fmt.ms(fit.slope_ci_ms_per_1k[0])}, {fmt.ms(fit.slope_ci_ms_per_1k[1])}]"
                if fit.note is None
                else fmt.DASH,
                "intercept": fmt.ms(fit.intercept_ms),
                "note": fit.note or "",
                "chart": chart_id,
            }
        )
    return rows


def _adapter_rows(analysis: RunAnalysis) -> list[dict[str, str]]:
    return [
        {
            "adapter": a.adapter,
            "workloads": ", ".join(a.workloads),
            "requests": fmt.count(a.requests),
            "errors": fmt.count(a.errors),
            "cold": fmt.ms(a.cold_ttft_ms)
            if a.cold_outcome == "ok"
            else f"failed ({a.cold_outcome})",
            "warm_p50": fmt.ms(a.warm_ttft.percentiles["p50"]),
            "warm_p99": fmt.ms(a.warm_ttft.percentiles["p99"]),
            "ratio": f"{a.cold_over_warm_p50:.2f}×" if math.isfinite(a.cold_over_warm_p50) else "—",
            "warm_e2e_p50": fmt.ms(a.warm_e2e.percentiles["p50"]),
            "warm_n": fmt.count(a.warm_ttft.n),
        }
        for a in analysis.adapters
    ]


# --- errors and fidelity -------------------------------------------------------------
def _error_section(analysis: RunAnalysis, charts: list[Chart]) -> dict[str, Any]:
    data = analysis.charts_series
    chart_id = ""
    if not data.outcomes.empty and len(data.outcomes.columns):
        x = data.timeline.starts_s + data.timeline.window_s / 2.0
        chart_id = _add(
            charts,
            _time_chart(
                "errors",
                "Failed attempts per window, by outcome",
                x,
                (0.0, data.timeline.duration_s),
                "attempts",
                [Series(str(c), data.outcomes[c].to_numpy()) for c in data.outcomes.columns],
            ),
        )
    return {
        "outcomes": [
            {"outcome": o.outcome, "count": fmt.count(o.count), "pct": fmt.pct(o.pct, 2)}
            for o in analysis.outcomes
        ],
        "samples": [
            {
                "outcome": s.outcome,
                "status": str(s.http_status) if s.http_status is not None else "—",
                "count": fmt.count(s.count),
                "first": fmt.seconds(s.first_seen_s),
                "message": s.message,
            }
            for s in analysis.error_samples
        ],
        "chart": chart_id,
    }


def _fidelity_section(analysis: RunAnalysis, charts: list[Chart]) -> dict[str, Any]:
    fidelity = analysis.fidelity
    data = analysis.charts_series
    x = data.timeline.starts_s + data.timeline.window_s / 2.0
    x_range = (0.0, data.timeline.duration_s)
    chart_ids = []
    lag = data.schedule_lag
    if np.isfinite(lag["schedule_lag_p99_ms"].to_numpy()).any():
        chart_ids.append(
            _add(
                charts,
                _time_chart(
                    "schedule-lag",
                    "Schedule lag per window (ms)",
                    x,
                    x_range,
                    "ms",
                    [
                        Series("p50", lag["schedule_lag_p50_ms"].to_numpy()),
                        Series("p99", lag["schedule_lag_p99_ms"].to_numpy()),
                    ],
                ),
            )
        )
    cpu_chart = _lane_chart(FIDELITY_GROUP, data, x, x_range)
    if cpu_chart is not None:
        chart_ids.append(_add(charts, cpu_chart))
    rows = [
        ("verdict", "OK" if fidelity.ok else "flagged"),
        ("load generator CPU max", fmt.pct(fidelity.cpu_max_pct, 0)),
        ("event-loop lag p99", fmt.ms(fidelity.loop_lag_p99_ms) + " ms"),
        ("resident memory max", fmt.number(fidelity.rss_max_bytes / 1e9) + " GB"),
    ]
    if fidelity.schedule_lag is not None:
        lag_dist = fidelity.schedule_lag
        rows += [
            ("schedule lag p50", fmt.ms(lag_dist.percentiles["p50"]) + " ms"),
            ("schedule lag p99", fmt.ms(lag_dist.percentiles["p99"]) + " ms"),
            ("schedule lag max", fmt.ms(lag_dist.max) + " ms"),
        ]
    rows += [(f"manifest: {k}", str(v)) for k, v in fidelity.manifest.items()]
    return {
        "status": "ok" if fidelity.ok else "warn",
        "headline": "client kept up" if fidelity.ok else "client may have distorted the figures",
        "reasons": fidelity.reasons,
        "rows": [{"key": k, "value": v} for k, v in rows],
        "charts": chart_ids,
    }


# --- microbenchmarks -----------------------------------------------------------------
def _microbench_section(analysis: RunAnalysis, charts: list[Chart]) -> dict[str, Any] | None:
    mb = analysis.microbench
    if mb is None:
        return None
    benchmarks = []
    for bench in mb.benchmarks:
        benchmarks.append(
            {
                "name": bench.name,
                "status": bench.status,
                "reason": bench.reason or "",
                "rows": [
                    {
                        "metric": s.metric,
                        "unit": s.unit,
                        "median": fmt.number(s.figures.get("median", s.figures.get("p50"))),
                        "p99": fmt.number(s.figures.get("p99")),
                        "min": fmt.number(s.figures.get("min")),
                        "max": fmt.number(s.figures.get("max")),
                        "n": fmt.count(s.n) if s.n is not None else fmt.DASH,
                        "description": s.description,
                    }
                    for s in bench.stats
                ],
            }
        )
    chart_id = ""
    if mb.curve:
        tables = []
        for direction, memory in dict.fromkeys((p.direction, p.memory) for p in mb.curve):
            points = [p for p in mb.curve if (p.direction, p.memory) == (direction, memory)]
            tables.append(
                (
                    f"{direction} {memory}",
                    np.array([p.size_bytes for p in points]),
                    np.array([p.gbps for p in points]),
                )
            )
        x, columns = joined(tables)
        series = [
            Series(name, column, "line")
            for (name, _, _), column in zip(tables, columns, strict=True)
        ]
        if math.isfinite(mb.link_gbps_per_direction):
            series.append(
                Series(
                    "link limit (per direction)",
                    np.full(x.size, mb.link_gbps_per_direction),
                    "dashed",
                )
            )
        chart_id = _add(
            charts,
            Chart(
                chart_id="pcie-curve",
                title="PCIe bandwidth vs transfer size",
                kind="xy",
                x=x,
                series=series,
                x_label="bytes per copy",
                y_label="GB/s",
                x_log=True,
                x_format="bytes",
            ),
        )
    return {
        "status": mb.status,
        "reason": mb.reason or "",
        "created_at": mb.created_at or "—",
        "environment": [{"key": k, "value": v} for k, v in mb.environment],
        "benchmarks": benchmarks,
        "curve_chart": chart_id,
        "link": fmt.gbps(mb.link_gbps_per_direction),
        "curve_rows": [
            {
                "direction": p.direction,
                "memory": p.memory,
                "size": fmt.count(p.size_bytes),
                "gbps": fmt.gbps(p.gbps),
                "pct": fmt.pct(p.pct_of_link),
                "verified": "yes" if p.verified else ("no" if p.verified is False else "—"),
            }
            for p in mb.curve
        ],
        "notes": mb.notes,
    }


def _add(charts: list[Chart], chart: Chart) -> str:
    """Register a chart under a unique `chart-` id (never a section's id); returns
    the id the template uses."""
    taken = {c.chart_id for c in charts}
    base = f"chart-{chart.chart_id}"
    chart_id, i = base, 2
    while chart_id in taken:
        chart_id, i = f"{base}-{i}", i + 1
    charts.append(dataclasses.replace(chart, chart_id=chart_id))
    return chart_id
