"""A sweep's table page, `sweep.html` next to its `index.json`: one row per point with
the offered and achieved load, goodput, errors, n and the TTFT, ITL and E2E p50/p99 — what
a `vllm bench serve` user reads off a rate sweep, each row linking to its point's folder.
A percentile its point has too few observations for is a dash (`core.metrics.needed_n`),
as in the report: the index already holds it as missing.
Rewritten after every point, so an interrupted sweep has a page too. Every number is
formatted here; the template only prints (and escapes)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from zerohop.core.metrics import needed_n
from zerohop.planning.layer_knee_page import layers_context
from zerohop.report import formatting as fmt
from zerohop.report.charts import Chart
from zerohop.report.render import render_page, write_atomically

SWEEP_PAGE = "sweep.html"
COLUMNS = ("load", "offered req/s", "achieved req/s", "goodput req/s", "error %",
           "n (TTFT)", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "E2E p50", "E2E p99", "")


def write_sweep_page(sweep_dir: Path, name: str, mode: str, points: Sequence[Any],
                     saturation: Mapping[str, Any], *, finished: bool,
                     layer_knee: Mapping[str, Any] | None = None) -> Path:
    """`points`: the sweep's `PointSummary`s; `saturation`: its `saturation_summary`;
    `layer_knee`: a layer sweep's knees (`analysis.layer_knee.layer_knees`), which
    adds the "Layers" section."""
    context = sweep_context(name, mode, points, saturation, finished=finished,
                            generated_at=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"))
    charts: list[Chart] = []
    context["layers"] = None
    if layer_knee is not None:
        unit = "req/s" if mode == "rate" else "users"
        context["layers"], charts = layers_context(points, layer_knee, unit)
    return write_atomically(Path(sweep_dir) / SWEEP_PAGE,
                            render_page("sweep.html.j2", context, charts))


def sweep_context(name: str, mode: str, points: Sequence[Any],
                  saturation: Mapping[str, Any], *, finished: bool,
                  generated_at: str) -> dict[str, Any]:
    # a point's load is the rate it asked for; what it offered is measured (its column)
    unit = "req/s asked" if mode == "rate" else "concurrent users"
    if saturation.get("found"):
        verdict = (f"saturated at {saturation['first_saturated_load']:g} ({unit}): "
                   f"{saturation.get('reason')}; the last healthy load was "
                   f"{_load(saturation.get('last_unsaturated_load'))}")
    else:
        verdict = "no point saturated"
    return {
        "title": f"zerohop sweep: {name}",
        "generated_at": generated_at,
        "status": "completed" if finished else "running",
        "load_unit": unit,
        "verdict": verdict,
        "columns": list(COLUMNS),
        "needs": needs_text(),
        "rows": [_row(p) for p in sorted(points, key=lambda p: p.load)],
    }


def _row(point: Any) -> dict[str, Any]:
    return {
        "saturated": point.saturated,
        "link": f"{point.run_dir}/",
        "cells": [
            f"{point.load:g}", fmt.rate(point.offered_rps), fmt.rate(point.achieved_rps),
            fmt.rate(point.goodput_rps), fmt.pct(point.error_pct, 1),
            fmt.count(point.n("ttft_ms")), fmt.ms(point.ttft_p50_ms), fmt.ms(point.ttft_p99_ms),
            fmt.ms(point.itl_p50_ms), fmt.ms(point.itl_p99_ms),
            fmt.ms(point.e2e_p50_ms), fmt.ms(point.e2e_p99_ms),
        ],
        "note": f"saturated: {point.reason}" if point.saturated else "",
    }


def needs_text() -> str:
    """What a dash in a percentile column means, as the pages print it."""
    return (f"— : fewer observations than the percentile needs (p50 needs n ≥ "
            f"{needed_n(0.5)}, p90 n ≥ {needed_n(0.9)}, p99 n ≥ {needed_n(0.99)}); ITL's n is "
            "its gaps.")


def _load(value: Any) -> str:
    return f"{value:g}" if isinstance(value, int | float) else fmt.DASH
