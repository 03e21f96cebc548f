"""The time budget for the page: one stacked bar per workload (and arm) — its TTFT
around p99, split into client, hop, queue, prefill and unexplained — and every band of
TTFT and E2E in a table beside it, each part with its interval and n. A part too
uncertain to resolve is named, not drawn: its time goes to one grey segment. Geometry
only; the template draws the SVG and escapes every text."""

from __future__ import annotations

import math
from typing import Any

from zerohop.analysis.server.time_budget import NOT_RESOLVABLE, BudgetBand, BudgetPart, TimeBudget
from zerohop.report.formatting import ms as fmt_ms

# part → (label, fill): fixed colours, in the order the parts add up
PART_STYLE: dict[str, tuple[str, str]] = {
    "client": ("client", "#9e9e9e"),
    "hop": ("hop", "#8e6ccf"),
    "queue": ("queue", "#d9534f"),
    "prefill": ("prefill", "#f0ad4e"),
    "decode": ("decode", "#5bc0de"),
    "unexplained": ("unexplained", "#d8d8d8"),
    "unresolved": ("not resolvable or unexplained", "#d8d8d8"),
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
        name = workload.workload + (f" · arm {workload.arm}" if workload.arm else "")
        rows.append({
            "workload": name,
            "caption": f"TTFT around {band.band}: {fmt_ms(band.latency_ms)} ms (n={band.n}); "
                       f"clock noise ±{fmt_ms(band.noise_ms)} ms",
            "segments": _segments(band),
            "parts": [{"text": _part_text(p), "fill": _style(p.name)[1]} for p in band.parts],
            "table": [_band_row(b) for b in workload.bands],
        })
    if not rows:
        return None
    return {"workloads": rows, "notes": budget.notes}


def _segments(band: BudgetBand) -> list[dict[str, Any]]:
    """Bar segments, x and width in percent of the band's latency: each resolvable
    part, then the rest in one grey segment (the parts not resolvable, unexplained)."""
    shown = [(p.name, p.mean_ms, _part_text(p)) for p in band.parts
             if p.name != "unexplained" and p.resolvable and math.isfinite(p.mean_ms)
             and p.mean_ms > 0]
    rest = band.latency_ms - sum(mean for _, mean, _ in shown)
    if rest > 0:
        named = [p.name for p in band.parts if not p.resolvable and p.name != "unexplained"]
        text = (f"{fmt_ms(rest)} ms: unexplained" if not named else
                f"{fmt_ms(rest)} ms: {', '.join(named)} ({NOT_RESOLVABLE}) and unexplained")
        shown.append(("unresolved", rest, text))
    total = sum(mean for _, mean, _ in shown)
    out, x = [], 0.0
    for name, mean, text in shown:
        width = 100.0 * mean / total if total > 0 else 0.0
        label, fill = _style(name)
        out.append({"x": round(x, 3), "width": round(width, 3), "fill": fill,
                    "label": label, "text": text})
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
    """'queue 1,365 ms [1,252–1,742] n=31 (histogram, aggregate)'; a part whose
    interval is wider than half its band: 'queue: not resolvable … [0–828]'."""
    bounded = not part.resolvable and math.isfinite(part.low_ms)  # n=0: placed for none
    if not bounded and (part.n == 0 or not math.isfinite(part.mean_ms)):
        return f"{part.name}: not measured"
    high = "∞" if part.high_ms == math.inf else fmt_ms(part.high_ms)
    low = "−∞" if part.low_ms == -math.inf else fmt_ms(part.low_ms)
    kind = ", aggregate" if part.aggregate else ""
    if not part.resolvable:
        return (f"{part.name}: {NOT_RESOLVABLE} (somewhere in [{low}–{high}] ms, more than "
                f"half the band) n={part.n} ({part.source}{kind})")
    return f"{part.name} {fmt_ms(part.mean_ms)} ms [{low}–{high}] n={part.n} ({part.source}{kind})"
