"""RunAnalysis → the report page's context: sections of ready-to-print strings and
chart specs. The template only loops and prints; every number is formatted here."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zerohop.analysis.correlation import PairResult
from zerohop.analysis.run_analysis import RunAnalysis
from zerohop.analysis.token_counts import TokenCounts
from zerohop.report import formatting as fmt
from zerohop.report.charts import Chart, Series, add_chart, joined
from zerohop.report.environment import environment_rows, redact
from zerohop.report.glossary import glossary_entries
from zerohop.report.present_budget import budget_section
from zerohop.report.present_headline import (
    headline_chart,
    headline_figures,
    run_header,
    slo_rows,
    slo_source,
    verdict,
)
from zerohop.report.present_latency import (
    METRIC_TITLES,
    distribution_section,
    latency_table,
    throughput_table,
)
from zerohop.report.present_policy import policy_section
from zerohop.report.present_sessions import session_section
from zerohop.report.present_timeseries import (
    FIDELITY_GROUP,
    lane_chart,
    time_chart,
    timeseries_section,
    window_axis,
)
from zerohop.report.present_token_counts import token_count_section

__all__ = ["METRIC_TITLES", "Page", "report_page"]


@dataclass
class Page:
    """Everything the report template prints."""

    context: dict[str, Any]
    charts: list[Chart] = field(default_factory=list)


def _policy_section(analysis: RunAnalysis, charts: list[Chart]) -> dict[str, Any] | None:
    """The retry / fallback section, left out when every logical request was one
    attempt (no retry, no fallback: it would only say so at length)."""
    summary = analysis.policy
    if summary is not None and summary.attempts == summary.logical_requests:
        return None
    context, policy_charts = policy_section(summary)
    charts.extend(policy_charts)
    return context


def report_page(analysis: RunAnalysis, generated_at: str) -> Page:
    charts: list[Chart] = []
    manifest = redact(analysis.manifest)
    context: dict[str, Any] = {
        "title": f"zerohop report — {analysis.label}",
        "generated_at": generated_at,
        "run": run_header(analysis, manifest),
        "verdict": verdict(analysis),
        "headline": {
            "figures": headline_figures(analysis),
            "chart": headline_chart(analysis, charts),
        },
        "budget": budget_section(analysis.budget),
        "notes": analysis.notes,
        "slos": slo_rows(analysis),
        "slo_source": slo_source(analysis),
        "throughput": throughput_table(analysis),
        "latency": latency_table(analysis),
        "timeseries": timeseries_section(analysis, charts),
        "correlation": _correlation_section(analysis),
        "alerts": _alert_rows(analysis),
        "distributions": distribution_section(analysis, charts),
        "prefill": _prefill_section(analysis, charts),
        "adapters": _adapter_rows(analysis),
        "errors": _error_section(analysis, charts),
        "fidelity": _fidelity_section(analysis, charts),
        "microbench": _microbench_section(analysis, charts),
        "policy": _policy_section(analysis, charts),
        "token_counts": token_count_section(analysis.token_counts or TokenCounts([], [])),
        "sessions": session_section(analysis, charts),
        "environment": [
            {"title": title, "rows": rows} for title, rows in environment_rows(manifest).items()
        ],
        "glossary": [{"term": t, "definition": d} for t, d in glossary_entries()],
    }
    context["chart_titles"] = {chart.chart_id: chart.title for chart in charts}
    return Page(context=context, charts=charts)


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
            chart_id = add_chart(
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
                "wide": _wide_interval(fit.slope_ms_per_1k, fit.slope_ci_ms_per_1k)
                if fit.note is None
                else "",
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


def _wide_interval(slope: float, ci: tuple[float, float]) -> str:
    """A caveat when the slope's interval is wider than the slope itself or holds 0:
    prompt length then explains little of this workload's TTFT."""
    low, high = ci
    if not (math.isfinite(low) and math.isfinite(high)):
        return ""
    if low <= 0.0 <= high or (high - low) > abs(slope):
        return ("interval wider than the slope: prompt length explains little of this "
                "workload's TTFT (queueing behind other requests varies more)")
    return ""


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
        x, x_range = window_axis(data)
        chart_id = add_chart(
            charts,
            time_chart(
                "errors",
                "Failed attempts per window, by outcome",
                x,
                x_range,
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
    x, x_range = window_axis(data)
    chart_ids = []
    lag = data.schedule_lag
    if np.isfinite(lag["schedule_lag_p99_ms"].to_numpy()).any():
        chart_ids.append(
            add_chart(
                charts,
                time_chart(
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
    cpu_chart = lane_chart(FIDELITY_GROUP, data, x, x_range)
    if cpu_chart is not None:
        chart_ids.append(add_chart(charts, cpu_chart))
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
        chart_id = add_chart(
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


