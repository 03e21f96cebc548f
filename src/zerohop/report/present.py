"""RunAnalysis → the report page's context: sections of ready-to-print strings and
chart specs. The template only loops and prints; every number is formatted here."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zerohop.analysis.run_analysis import RunAnalysis
from zerohop.analysis.server.correlation import PairResult
from zerohop.report import formatting as fmt
from zerohop.report.charts import Chart, Series, add_chart
from zerohop.report.environment import environment_rows, redact
from zerohop.report.glossary import glossary_entries
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
    pooling_table,
    throughput_table,
)
from zerohop.report.present_timeseries import (
    FIDELITY_GROUP,
    lane_chart,
    time_chart,
    timeseries_section,
    window_axis,
)
from zerohop.report.sections import PLACES, registered_sections, template_name

__all__ = ["METRIC_TITLES", "Page", "report_page"]


@dataclass
class Page:
    """Everything the report template prints."""

    context: dict[str, Any]
    charts: list[Chart] = field(default_factory=list)


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
        "notes": analysis.notes,
        "slos": slo_rows(analysis),
        "slo_source": slo_source(analysis),
        "throughput": throughput_table(analysis),
        "pooling": pooling_table(analysis),
        "latency": latency_table(analysis),
        "timeseries": timeseries_section(analysis, charts),
        "correlation": _correlation_section(analysis),
        "alerts": _alert_rows(analysis),
        "distributions": distribution_section(analysis, charts),
        "prefill": _prefill_section(analysis, charts),
        "errors": _error_section(analysis, charts),
        "fidelity": _fidelity_section(analysis, charts),
        "environment": [
            {"title": title, "rows": rows} for title, rows in environment_rows(manifest).items()
        ],
        "glossary": [{"term": t, "definition": d} for t, d in glossary_entries()],
    }
    sections = _registered_sections(analysis, charts)
    if clash := sections.keys() & context.keys():
        raise ValueError(f"report sections named like the page's own parts: {sorted(clash)}")
    context.update(sections)
    context["chart_titles"] = {chart.chart_id: chart.title for chart in charts}
    return Page(context=context, charts=charts)


def _registered_sections(analysis: RunAnalysis, charts: list[Chart]) -> dict[str, Any]:
    """Each registry section's context under its name, and `sections`: place → the
    sections shown there, in order (a section whose presenter gives nothing is left
    out, its link too)."""
    context: dict[str, Any] = {}
    places: dict[str, list[dict[str, str]]] = {place: [] for place in PLACES}
    for entry in registered_sections():
        shown = entry.present(analysis.sections.get(entry.name), analysis, charts)
        context[entry.name] = shown
        if shown:
            places[entry.place].append({"name": entry.name, "template": template_name(entry),
                                        "anchor": entry.anchor, "nav": entry.nav})
    context["sections"] = places
    return context


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
