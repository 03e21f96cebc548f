"""The interference probe's section: what the main load did to an unrelated short
request (`analysis/comparison/probe.py`), as the page and the console print it — one reading, so
the two cannot disagree."""

from __future__ import annotations

from typing import Any

import numpy as np

from zerohop.analysis.comparison.probe import ProbeArm, ProbeFigures, ProbeShift
from zerohop.report import formatting as fmt
from zerohop.report.charts import Chart, Series

METRIC_LABELS = {"ttft_ms": "TTFT", "e2e_ms": "E2E"}


def shift_text(shift: ProbeShift) -> str:
    """`+12.3 ms [+8.1, +17.0]`, or why there is no figure."""
    if shift.too_few is not None:
        return shift.too_few
    return f"{fmt.signed_ms(shift.delta_ms)} ms {fmt.interval(shift.ci_low_ms, shift.ci_high_ms)}"


def console_line(figures: ProbeFigures | None) -> str | None:
    """One line: the load's effect on the probe's TTFT p50 (and p99 where it has enough
    samples), per arm."""
    if figures is None:
        return None
    parts = []
    for arm in figures.arms:
        p50, p99 = arm.shift("ttft_ms", "p50"), arm.shift("ttft_ms", "p99")
        text = f"TTFT p50 {shift_text(p50)}"
        if p99.too_few is None:
            text += f", p99 {shift_text(p99)}"
        where = "" if len(figures.arms) == 1 else f"{arm.arm}: "
        parts.append(f"{where}{text} ({arm.idle_n} idle, {arm.load_n} under load)")
    return "probe: the load added to a short request's " + "; ".join(parts)


def probe_section(figures: ProbeFigures | None, charts: list[Chart]) -> dict[str, Any] | None:
    """The page's context (None: no probe ran)."""
    if figures is None:
        return None
    chart_id = None
    if np.isfinite(figures.ttft_p50_series).any():
        chart = Chart(chart_id="probe-ttft", title="Probe TTFT (p50 per window)", kind="time",
                      x=figures.series_x_s,
                      series=[Series("probe TTFT p50", figures.ttft_p50_series,
                                     style="points")],
                      x_label="s since start", y_label="ms",
                      notes=[f"load from {figures.load_start_s:.1f} s to "
                             f"{figures.load_end_s:.1f} s; before it the probe ran alone"])
        charts.append(chart)
        chart_id = chart.chart_id
    return {
        "rate": fmt.rate(figures.rate_rps), "prompt_tokens": figures.prompt_tokens,
        "output_tokens": figures.output_tokens, "idle_s": fmt.seconds(figures.idle_s),
        "arms": [_arm_rows(arm) for arm in figures.arms], "several": len(figures.arms) > 1,
        "line": console_line(figures), "chart": chart_id,
    }


def _arm_rows(arm: ProbeArm) -> dict[str, Any]:
    return {
        "arm": arm.arm, "idle_n": fmt.count(arm.idle_n), "load_n": fmt.count(arm.load_n),
        "failed": fmt.count(arm.failed),
        "rows": [{"metric": f"{METRIC_LABELS[s.metric]} {s.stat}", "idle": fmt.ms(s.idle_ms),
                  "load": fmt.ms(s.load_ms), "delta": fmt.signed_ms(s.delta_ms),
                  "interval": fmt.interval(s.ci_low_ms, s.ci_high_ms),
                  "note": s.too_few or ("interval holds 0" if s.holds_zero else "")}
                 for s in arm.shifts],
    }
