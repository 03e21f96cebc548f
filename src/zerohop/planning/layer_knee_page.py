"""The sweep page's "Layers" section, when the sweep priced layers (`--compare-layer`):
each layer's cost at p50 and p99 against the offered rate (a chart, and a table with
the intervals), its knee per percentile with the layer process's CPU and RSS there,
whether the engines were saturated at each point, and which replica served each arm's
requests per point. Every figure arrives computed (`analysis.layer_knee`, the points'
arms summaries); this only turns it into text and chart data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from zerohop.analysis.comparison.layer_knee import KNEE_STATS
from zerohop.report import formatting as fmt
from zerohop.report.charts import Chart, Series
from zerohop.report.present_layers import cost_cell


def layers_context(points: Sequence[Any], knee: Mapping[str, Any], unit: str
                   ) -> tuple[dict[str, Any], list[Chart]]:
    """(the section's context, its charts). `points`: the sweep's `PointSummary`s (their
    `layer` holds the arms summary and process figures); `knee`: `layer_knees`'s dict."""
    ordered = sorted((p for p in points if p.layer is not None), key=lambda p: p.load)
    metric = str(knee.get("metric", "ttft_ms"))
    layers = []
    charts = []
    for index, (arm, knees) in enumerate((knee.get("layers") or {}).items()):
        chart_id = f"chart-layer-{index}"
        charts.append(_chart(chart_id, arm, ordered, metric, unit, knees))
        layers.append({
            "arm": arm, "chart_id": chart_id,
            "knees": [_knee_row(knees[stat], unit) for stat in KNEE_STATS if stat in knees],
            "rows": [_cost_row(p, arm, metric) for p in ordered],
        })
    context = {
        "threshold": f"{float(knee.get('threshold_ms', 0.0)):g} ms",
        "metric": "TTFT" if metric == "ttft_ms" else metric,
        "layers": layers,
        "points": [_point_row(p) for p in ordered],
        "chart_titles": {c.chart_id: c.title for c in charts},
    }
    return context, charts


def _chart(chart_id: str, arm: str, points: Sequence[Any], metric: str, unit: str,
           knees: Mapping[str, Any]) -> Chart:
    """Cost at p50 and p99 against load, each with its interval (dashed), and a mark at
    each percentile's knee."""
    x = np.array([p.load for p in points], dtype=float)
    series = []
    for stat in KNEE_STATS:
        values, lows, highs = [], [], []
        for p in points:
            cost = _cost(p, arm)
            values.append(_num(cost.get("layer_cost_ms", {}).get(metric, {}).get(stat)))
            low, high = cost.get("ci95_ms", {}).get(metric, {}).get(stat) or (None, None)
            lows.append(_num(low))
            highs.append(_num(high))
        series.append(Series(f"{stat} cost", np.array(values)))
        series.append(Series(f"{stat} 95% low", np.array(lows), "dashed"))
        series.append(Series(f"{stat} 95% high", np.array(highs), "dashed"))
        knee_rate = (knees.get(stat) or {}).get("rate")
        if knee_rate is not None:
            mark = [v if p.load == knee_rate else float("nan") for p, v in
                    zip(points, values, strict=True)]
            series.append(Series(f"{stat} knee", np.array(mark), "points"))
    return Chart(chart_id=chart_id, title=f"{arm}: added latency vs load (ms)", kind="xy",
                 x=x, series=series, x_label=unit, y_label="ms", y_min_zero=False)


def _knee_row(knee: Mapping[str, Any], unit: str) -> dict[str, str]:
    process = knee.get("process") or {}
    saturated = knee.get("engines_saturated")
    found = knee.get("rate") is not None
    return {
        "stat": str(knee.get("stat")),
        "knee": (_knee_text(knee, unit) if found else "no knee within the rates tried"),
        "growth": fmt.signed_ms(knee.get("growth_ms")) + " ms" if found else fmt.DASH,
        "cpu": fmt.pct(process.get("cpu_pct_mean")) if found and process else fmt.DASH,
        "rss": _mib(process.get("rss_bytes_max")) if found and process else fmt.DASH,
        "engines": fmt.DASH if saturated is None else ("yes" if saturated else "no"),
    }


def _knee_text(knee: Mapping[str, Any], unit: str) -> str:
    """`40 req/s offered (20 req/s through the layer)`: the sweep's rate counts every arm."""
    text = f"{knee['rate']:g} {unit}"
    through = knee.get("layer_rps")
    if unit == "req/s" and isinstance(through, int | float):
        text += f" offered ({through:.4g} req/s through the layer)"
    return text


def _cost_row(point: Any, arm: str, metric: str) -> dict[str, Any]:
    cost = _cost(point, arm)
    process = ((point.layer or {}).get("processes") or {}).get(arm) or {}
    return {
        "load": f"{point.load:g}",
        "cells": [cost_cell(cost, metric, stat) for stat in KNEE_STATS],
        "cpu": fmt.pct(process.get("cpu_pct_mean")) if process else fmt.DASH,
        "rss": _mib(process.get("rss_bytes_max")) if process else fmt.DASH,
        "engines": "yes" if point.saturated else "no",
    }


def _point_row(point: Any) -> dict[str, Any]:
    """Per arm at this point: the replica each request was served by (the records'
    `replica`, as each replica named itself) and the layer's routes."""
    figures = ((point.layer or {}).get("arms") or {}).get("arms") or {}
    arms = []
    for arm, f in figures.items():
        replicas: Mapping[str, int] = f.get("replicas") or {}
        served = sum(replicas.values())
        shares = ", ".join(f"{name} {fmt.pct(100.0 * n / served)}" for name, n in
                           replicas.items()) if served else fmt.DASH
        routes = ", ".join(f"{name}: {n}" for name, n in (f.get("routes") or {}).items())
        arms.append({"arm": arm, "requests": fmt.count(f.get("requests")),
                     "replicas": shares, "routes": routes or fmt.DASH})
    return {"load": f"{point.load:g}", "engines": "yes" if point.saturated else "no",
            "reason": point.reason or "", "arms": arms}


def _cost(point: Any, arm: str) -> Mapping[str, Any]:
    costs = ((point.layer or {}).get("arms") or {}).get("costs") or {}
    found: Mapping[str, Any] = costs.get(arm) or {}
    return found


def _mib(value: Any) -> str:
    return f"{value / 2**20:.1f} MiB" if isinstance(value, int | float) else fmt.DASH


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else float("nan")
