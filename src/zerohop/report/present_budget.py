"""The time budget for the page: one stacked bar per workload (its TTFT around p99,
split into client, hop, queue, prefill and unexplained) and every band of TTFT and
E2E in a table beside it, each part with its interval and n. Geometry only; the
template draws the SVG and escapes every text."""

from __future__ import annotations

import math
from typing import Any

from zerohop.analysis.time_budget import BudgetBand, BudgetPart, TimeBudget
from zerohop.report.formatting import ms as fmt_ms

# part → (label, fill): fixed colours, in the order the parts add up
PART_STYLE: dict[str, tuple[str, str]] = {
    "client": ("client", "#9e9e9e"),
    "hop": ("hop", "#8e6ccf"),
    "queue": ("queue", "#d9534f"),
    "prefill": ("prefill", "#f0ad4e"),
    "decode": ("decode", "#5bc0de"),
    "unexplained": ("unexplained", "#d8d8d8"),
}
BAR_BAND_ORDER = ("p99", "p90", "p50")  # the bar shows the slowest band the run has
METRIC_NAMES = {"ttft_ms": "TTFT", "e2e_ms": "E2E"}


def budget_section(budget: TimeBudget | None) -> dict[str, Any] | None:
    """The page's time-budget block; None when no workload has a band."""
    if budget is None:
        return None
    rows = []
    for workload in budget.workloads:
        ttft = {b.band: b for b in workload.bands if b.metric == "ttft_ms"}
        band = next((ttft[name] for name in BAR_BAND_ORDER if name in ttft), None)
        if band is None:
            continue
        rows.append({
            "workload": workload.workload,
            "caption": f"TTFT around {band.band}: {fmt_ms(band.latency_ms)} ms (n={band.n})",
            "segments": _segments(band),
            "parts": [{"text": _part_text(p), "fill": _style(p.name)[1]} for p in band.parts],
            "table": [_band_row(b) for b in workload.bands],
        })
    if not rows:
        return None
    return {"workloads": rows, "notes": budget.notes}


def _segments(band: BudgetBand) -> list[dict[str, Any]]:
    """Bar segments, x and width in percent of the band's positive parts."""
    shown = [p for p in band.parts if math.isfinite(p.mean_ms) and p.mean_ms > 0]
    total = sum(p.mean_ms for p in shown)
    out, x = [], 0.0
    for part in shown:
        width = 100.0 * part.mean_ms / total if total > 0 else 0.0
        label, fill = _style(part.name)
        out.append({"x": round(x, 3), "width": round(width, 3), "fill": fill,
                    "label": label, "text": _part_text(part)})
        x += width
    return out


def _style(name: str) -> tuple[str, str]:
    return PART_STYLE.get(name, (name, "#cccccc"))


def _band_row(band: BudgetBand) -> dict[str, Any]:
    return {
        "metric": METRIC_NAMES.get(band.metric, band.metric),
        "band": band.band,
        "n": band.n,
        "latency": fmt_ms(band.latency_ms),
        "parts": [_part_text(p) for p in band.parts],
    }


def _part_text(part: BudgetPart) -> str:
    """'queue 1,365 ms [1,252–1,742] n=31 (histogram, aggregate)'."""
    if part.n == 0 or not math.isfinite(part.mean_ms):
        return f"{part.name}: not measured"
    high = "∞" if part.high_ms == math.inf else fmt_ms(part.high_ms)
    low = "−∞" if part.low_ms == -math.inf else fmt_ms(part.low_ms)
    kind = ", aggregate" if part.aggregate else ""
    return f"{part.name} {fmt_ms(part.mean_ms)} ms [{low}–{high}] n={part.n} ({part.source}{kind})"
