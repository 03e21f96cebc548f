"""Comparisons → the compare page's context: verdict lines, delta tables with their
confidence intervals, CDF overlays and the layer budget, all as printable strings."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from zerohop.report import formatting as fmt
from zerohop.report.charts import Chart, Series, joined
from zerohop.report.compare import Comparison, MetricComparison, WorkloadComparison
from zerohop.report.glossary import REQUEST_GLOSSARY
from zerohop.report.present import METRIC_TITLES, Page

COMPARE_GLOSSARY_TERMS: tuple[str, ...] = (
    "comparison verdict",
    "bootstrap interval",
    "layer budget",
    "percentiles",
    "ttft_ms",
    "tpot_ms",
    "itl_ms",
    "e2e_ms",
    "error %",
    "req/s",
)


def comparison_page(comparisons: Sequence[Comparison], generated_at: str) -> Page:
    charts: list[Chart] = []
    blocks = [_comparison_block(i, c, charts) for i, c in enumerate(comparisons)]
    baseline = comparisons[0].baseline if comparisons else "—"
    context: dict[str, Any] = {
        "title": f"zerohop comparison — baseline {baseline}",
        "generated_at": generated_at,
        "baseline": baseline,
        "comparisons": blocks,
        "glossary": [
            {"term": term, "definition": REQUEST_GLOSSARY[term]}
            for term in COMPARE_GLOSSARY_TERMS
            if term in REQUEST_GLOSSARY
        ],
    }
    context["chart_titles"] = {chart.chart_id: chart.title for chart in charts}
    return Page(context=context, charts=charts)


def verdict_line(comparison: Comparison) -> str:
    """`all: TTFT within noise · TPOT worse (p50 +20.3 %, CI [+1.9, +2.2] ms) · ...`:
    the workload-level summary a CI log can print."""
    focus = comparison.workloads[-1] if comparison.workloads else None
    if focus is None:
        return "no workload to compare"
    parts = [_metric_phrase(m) for m in focus.metrics]
    return f"{focus.workload}: " + " · ".join(parts)


def _comparison_block(index: int, comparison: Comparison, charts: list[Chart]) -> dict[str, Any]:
    settings = comparison.settings
    return {
        "baseline": comparison.baseline,
        "candidate": comparison.candidate,
        "line": verdict_line(comparison),
        "overall": _overall(comparison),
        "settings": f"threshold preset {settings.threshold} "
        f"({settings.relative_threshold * 100:g} % of baseline), {settings.n_boot} bootstrap "
        f"draws, {settings.confidence * 100:g} % intervals, seed {settings.seed}",
        "notes": comparison.notes,
        "workloads": [
            _workload_block(index, i, w, charts) for i, w in enumerate(comparison.workloads)
        ],
        "layer": [
            {
                "workload": budget.workload,
                "rows": [
                    {
                        "metric": METRIC_TITLES.get(r.metric, r.metric),
                        "stat": r.stat,
                        "direct": fmt.ms(r.direct_ms),
                        "layered": fmt.ms(r.layered_ms),
                        "layer": fmt.signed_ms(r.layer_ms),
                        "ci": fmt.interval(r.ci_low, r.ci_high),
                        "share": fmt.pct(r.share_pct),
                    }
                    for r in budget.rows
                ],
            }
            for budget in comparison.layer_budgets
        ],
    }


def _workload_block(
    comparison_index: int, index: int, workload: WorkloadComparison, charts: list[Chart]
) -> dict[str, Any]:
    metrics = []
    for metric in workload.metrics:
        chart_id = _cdf_chart(comparison_index, index, metric, charts)
        metrics.append(
            {
                "metric": METRIC_TITLES.get(metric.metric, metric.metric),
                "verdict": metric.verdict,
                "counts": f"{fmt.count(metric.base_n)} vs {fmt.count(metric.candidate_n)} values",
                "chart": chart_id,
                "rows": [
                    {
                        "stat": r.stat,
                        "base": fmt.ms(r.base),
                        "candidate": fmt.ms(r.candidate),
                        "delta": fmt.signed_ms(r.delta),
                        "delta_pct": fmt.signed_pct(r.delta_pct),
                        "ci": fmt.interval(r.ci_low, r.ci_high),
                        "verdict": r.verdict,
                    }
                    for r in metric.rows
                ],
            }
        )
    return {
        "name": workload.workload,
        "metrics": metrics,
        "rates": [
            {
                "name": r.name,
                "base": _rate_text(r.name, r.base),
                "candidate": _rate_text(r.name, r.candidate),
                "delta": _rate_text(r.name, r.delta, signed=True),
                "ci": f"[{_rate_text(r.name, r.ci_low, signed=True)}, "
                f"{_rate_text(r.name, r.ci_high, signed=True)}]"
                if r.verdict is not None
                else fmt.DASH,
                "verdict": r.verdict or "not judged",
            }
            for r in workload.rates
        ],
    }


def _rate_text(name: str, value: float, *, signed: bool = False) -> str:
    """Error rates in percent (deltas in percentage points), throughput in req/s."""
    if name == "error %":
        if signed and math.isfinite(value):
            return f"{value:+.2f} pp"
        return fmt.pct(value, 2)
    text = fmt.rate(value)
    return f"+{text}" if signed and math.isfinite(value) and value > 0 else text


def _cdf_chart(
    comparison_index: int, workload_index: int, metric: MetricComparison, charts: list[Chart]
) -> str:
    tables = [
        (label, x, q)
        for label, (x, q) in (("baseline", metric.base_cdf), ("candidate", metric.candidate_cdf))
        if x.size
    ]
    if not tables:
        return ""
    x, columns = joined(tables)
    chart_id = f"chart-cmp{comparison_index}-w{workload_index}-{metric.metric}"
    charts.append(
        Chart(
            chart_id=chart_id,
            title=f"{METRIC_TITLES.get(metric.metric, metric.metric)} CDF",
            kind="xy",
            x=x,
            series=[
                Series(label, column * 100.0, "step")
                for (label, _, _), column in zip(tables, columns, strict=True)
            ],
            x_label="ms",
            y_label="% of values ≤ x",
        )
    )
    return chart_id


def _overall(comparison: Comparison) -> str:
    verdicts = {m.verdict for w in comparison.workloads for m in w.metrics}
    for verdict in ("mixed", "worse", "better"):
        if verdict in verdicts:
            return verdict
    return "within noise"


def _metric_phrase(metric: MetricComparison) -> str:
    name = METRIC_TITLES.get(metric.metric, metric.metric)
    if metric.verdict in ("within noise", "no data"):
        return f"{name} {metric.verdict}"
    decisive = [r for r in metric.rows if r.verdict == metric.verdict] or metric.rows
    r = max(decisive, key=lambda row: abs(row.delta_pct) if math.isfinite(row.delta_pct) else 0)
    return (
        f"{name} {metric.verdict} ({r.stat} {fmt.signed_pct(r.delta_pct)}, "
        f"CI {fmt.interval(r.ci_low, r.ci_high)} ms)"
    )
