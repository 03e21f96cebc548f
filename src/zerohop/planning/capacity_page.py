"""CapacityPlan → the capacity page: latency-vs-load curves with the SLO thresholds and
the chosen operating point, throughput vs load, and the plan's figures as text. Every
number is formatted here; the template only prints. A percentile a point has too few
requests for (`core.metrics.needed_n`: p99 needs 100) is a dash in the table and a gap
in the curves, as in the report; each point's n and its run's saturation verdict are
beside it."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any

import numpy as np

from zerohop.planning.capacity import CapacityPlan, CapacityPoint
from zerohop.planning.sweep_page import needs_text
from zerohop.report import formatting as fmt
from zerohop.report.charts import Chart, Series
from zerohop.report.present import Page
from zerohop.report.render import render_page, write_atomically


def write_capacity_report(plan: CapacityPlan, out: Path) -> Path:
    page = capacity_page(plan, dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"))
    return write_atomically(Path(out), render_page("capacity.html.j2", page.context, page.charts))


def capacity_page(plan: CapacityPlan, generated_at: str) -> Page:
    unit = "req/s offered" if plan.mode == "rate" else "concurrent users"
    charts = _charts(plan, unit)
    op = plan.operating_point
    figures = [
        ("operating point", operating_point_text(plan) if op else "none meets the SLOs"),
        ("max goodput per replica", _rate(plan.max_goodput_rps) + " req/s"),
        ("output tokens/s at the operating point",
         fmt.rate(op.output_tokens_per_s) if op else fmt.DASH),
        ("SLO-limited load (interpolated estimate)",
         f"{plan.slo_limited_load_estimate:.3g} — limited by {plan.slo_limited_by}"
         if plan.slo_limited_load_estimate is not None else fmt.DASH),
        ("knee of the p50 TTFT curve", f"{plan.knee.load:g}" if plan.knee else fmt.DASH),
        ("forecast peak", _rate(plan.forecast.peak_qps) + " req/s"
         if plan.forecast.peak_qps is not None else fmt.DASH),
        ("headroom", fmt.pct(plan.forecast.headroom * 100.0, 0)),
        ("replicas needed", str(plan.replicas) if plan.replicas is not None else fmt.DASH),
        ("GPUs per replica", str(plan.forecast.gpus_per_replica)),
        *((f"layer {layer.name}", layer.describe()) for layer in plan.layers),
        ("cost per million output tokens",
         fmt.number(plan.cost_per_million_output_tokens)
         if plan.cost_per_million_output_tokens is not None else fmt.DASH),
    ]
    context: dict[str, Any] = {
        "title": "zerohop capacity plan",
        "generated_at": generated_at,
        "slo_text": ", ".join(f"{k} ≤ {v:g}" for k, v in plan.slo.items()),
        "figures": [{"key": k, "value": v} for k, v in figures],
        "notes": [*plan.notes, needs_text()],
        "columns": ["load", "offered req/s", "achieved req/s", "goodput req/s", "error %",
                    "n (TTFT)", "TTFT p50", "TTFT p99", "n (TPOT)", "TPOT p50", "TPOT p99",
                    "SLOs", "run's verdict"],
        "rows": [_row(p, p is op) for p in plan.points],
        "charts": [c.chart_id for c in charts],
        "chart_titles": {c.chart_id: c.title for c in charts},
    }
    return Page(context=context, charts=charts)


def _row(point: CapacityPoint, chosen: bool) -> dict[str, Any]:
    missed = [s.key for s in point.slos if s.met is False]
    return {
        "chosen": chosen,
        "cells": [f"{point.load:g}", _rate(point.offered_rps), _rate(point.achieved_rps),
                  _rate(point.goodput_rps), fmt.pct(point.error_pct, 1),
                  fmt.count(point.ttft_n), fmt.ms(point.ttft_p50_ms), fmt.ms(point.ttft_p99_ms),
                  fmt.count(point.tpot_n), fmt.ms(point.tpot_p50_ms), fmt.ms(point.tpot_p99_ms),
                  "met" if point.meets_slos else ("missed: " + ", ".join(missed)
                                                  if missed else "no data"),
                  f"saturated: {point.saturated_by}" if point.saturated_by else "kept up"],
    }


def operating_point_text(plan: CapacityPlan) -> str:
    """The operating point as its load: in rate mode the rate measured as offered there
    (arrivals due ÷ the window), beside the rate the sweep asked for."""
    op = plan.operating_point
    assert op is not None
    if plan.mode != "rate":
        return f"{op.load:g} concurrent users"
    return f"{op.offered_rps:.3g} req/s offered (the sweep's point {op.load:g} req/s)"


def x_axis(plan: CapacityPlan) -> np.ndarray:
    """Each point's load as drawn: the measured offered rate in rate mode (a point's
    asked rate is not what it offered where a workload keeps its own pace), users else."""
    if plan.mode == "rate":
        return np.array([p.offered_rps for p in plan.points], dtype=float)
    return np.array([p.load for p in plan.points], dtype=float)


def _charts(plan: CapacityPlan, unit: str) -> list[Chart]:
    x = x_axis(plan)
    chosen = plan.operating_point
    charts = []
    for metric, title in (("ttft", "TTFT"), ("tpot", "TPOT")):
        series = [
            Series(f"{title} p50", np.array([getattr(p, f"{metric}_p50_ms") for p in plan.points])),
            Series(f"{title} p99", np.array([getattr(p, f"{metric}_p99_ms") for p in plan.points])),
        ]
        for key, threshold in plan.slo.items():
            if key.startswith(metric + "_p"):
                series.append(Series(f"SLO {key}", np.full(x.size, threshold), "dashed"))
        if chosen is not None:  # on its p99, or its p50 where it has too few for a p99
            at = [getattr(p, f"{metric}_p99_ms") for p in plan.points]
            at = [v if math.isfinite(v) else getattr(p, f"{metric}_p50_ms")
                  for v, p in zip(at, plan.points, strict=True)]
            mark = np.array([v if p is chosen else math.nan
                             for v, p in zip(at, plan.points, strict=True)])
            series.append(Series("operating point", mark, "points"))
        charts.append(Chart(chart_id=f"chart-capacity-{metric}",
                            title=f"{title} vs load (ms)", kind="xy", x=x, series=series,
                            x_label=unit, y_label="ms"))
    throughput = [
        Series("achieved (ok)", np.array([p.achieved_rps for p in plan.points])),
        Series("goodput (within SLOs)", np.array([p.goodput_rps for p in plan.points])),
    ]
    if plan.mode == "rate":
        throughput.append(Series("offered", np.array([p.offered_rps for p in plan.points]),
                                 "dashed"))
    if chosen is not None:
        throughput.append(Series("operating point", np.array(
            [p.goodput_rps if p is chosen else math.nan for p in plan.points]), "points"))
    charts.append(Chart(chart_id="chart-capacity-throughput", title="Throughput vs load (req/s)",
                        kind="xy", x=x, series=throughput, x_label=unit, y_label="req/s"))
    return charts


def _rate(value: float | None) -> str:
    return fmt.rate(value) if value is not None else fmt.DASH
