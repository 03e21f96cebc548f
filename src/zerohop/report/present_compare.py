"""Comparisons → the compare page's context: verdict lines, delta tables with their
confidence intervals, CDF overlays, the layer budget and — for runs driven through a
client policy — the logical-request figures per run, all as printable strings."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from zerohop.analysis.comparison.compare import (
    COMPARED_METRICS,
    ERROR_RATE,
    LOGICAL_METRIC,
    OK_RATE,
    Comparison,
    LogicalComparison,
    MetricComparison,
    PercentileDelta,
    RateComparison,
    WorkloadComparison,
)
from zerohop.analysis.latency.policy import PolicySummary
from zerohop.core.metrics import METRICS
from zerohop.report import formatting as fmt
from zerohop.report.charts import Chart, Series, joined
from zerohop.report.glossary import REQUEST_GLOSSARY
from zerohop.report.present import METRIC_TITLES, Page
from zerohop.report.present_layers import layers_section

# The headline badge is the first of these that any judged figure has: the worst one.
HEADLINE_ORDER: tuple[str, ...] = ("worse", "mixed", "better")
COMPARE_GLOSSARY_TERMS: tuple[str, ...] = (
    "comparison verdict",
    "bootstrap interval",
    "layer budget",
    "percentiles",
    *(METRICS[name].glossary_term for name in COMPARED_METRICS),
    ERROR_RATE.glossary_term,
    OK_RATE.glossary_term,
    "logical request",
    "amplification",
    "logical success rate",
    METRICS[LOGICAL_METRIC].glossary_term,
    "answered by",
)


def comparison_page(comparisons: Sequence[Comparison], generated_at: str, *,
                    layers: Mapping[str, Any] | None = None) -> Page:
    charts: list[Chart] = []
    blocks = [_comparison_block(i, c, charts) for i, c in enumerate(comparisons)]
    baseline = comparisons[0].baseline if comparisons else "—"
    context: dict[str, Any] = {
        "title": f"zerohop comparison — baseline {baseline}",
        "generated_at": generated_at,
        "baseline": baseline,
        "layers": layers_section(layers) if layers is not None else None,
        "comparisons": blocks,
        "policy_runs": _policy_runs(comparisons),
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
    parts += [
        f"{r.name} {r.verdict} ({_rate_text(r.name, r.delta, signed=True)})"
        for r in focus.rates
        if r.verdict in ("worse", "better")
    ]
    # the badge is the worst figure of any workload: the line names it where it is not
    # the focus row's, so the badge and its own line never disagree
    overall, because = headline_verdict(comparison)
    elsewhere = [f for f in because if not f.startswith(f"{focus.workload} ")]
    if elsewhere:
        parts.append(f"{overall}: " + ", ".join(elsewhere))
    return f"{focus.workload}: " + " · ".join(parts)


def judged_figures(comparison: Comparison) -> list[tuple[str, str]]:
    """(figure, verdict) for every figure the comparison judges: each workload's
    latency metrics and error rate, and the logical success rate and latency."""
    figures: list[tuple[str, str]] = []
    for w in comparison.workloads:
        figures += [(f"{w.workload} {METRIC_TITLES.get(m.metric, m.metric)}", m.verdict)
                    for m in w.metrics]
        figures += [(f"{w.workload} {r.name}", r.verdict) for r in w.rates if r.verdict]
    if comparison.logical is not None:
        success = comparison.logical.success
        if success.verdict:
            figures.append(("logical success rate", success.verdict))
        figures += [(f"logical E2E {r.stat}", r.verdict) for r in comparison.logical.latency]
    return figures


def headline_verdict(comparison: Comparison) -> tuple[str, list[str]]:
    """The candidate's badge — its worst judged figure, errors and logical requests
    included — and the figures that earned it (none when within noise)."""
    figures = judged_figures(comparison)
    for verdict in HEADLINE_ORDER:
        named = [figure for figure, v in figures if v == verdict]
        if named:
            return verdict, named
    return "within noise", []


def logical_line(comparison: Comparison) -> str | None:
    """`logical: amplification 1.00× → 3.25× · success 46.3 % → 51.2 % (+4.9 pp, within
    noise) · E2E p99 4,211 → 9,582 ms (+127.5 %, worse)`; None without policy records."""
    logical = comparison.logical
    if logical is None:
        return None
    amp, success = logical.amplification, logical.success
    parts = [
        f"amplification {_times(amp.base)} → {_times(amp.candidate)}",
        f"success {fmt.pct(success.base)} → {fmt.pct(success.candidate)} "
        f"({_pp(success.delta)}, {success.verdict})",
    ]
    parts += [
        f"E2E {r.stat} {fmt.ms(r.base)} → {fmt.ms(r.candidate)} ms "
        f"({fmt.signed_pct(r.delta_pct)}, {r.verdict})"
        for r in logical.latency
    ]
    return "logical: " + " · ".join(parts)


def _policy_runs(comparisons: Sequence[Comparison]) -> list[dict[str, Any]]:
    """One row per run with logical-request records, the baseline first: the figures
    that say what each client policy did to the user and to the server."""
    with_logical = [c for c in comparisons if c.logical is not None]
    if not with_logical:
        return []
    first = with_logical[0]
    assert first.logical is not None
    rows = [_policy_run_row(first.baseline, "baseline", first.logical.base, None)]
    for comparison in with_logical:
        assert comparison.logical is not None
        rows.append(
            _policy_run_row(
                comparison.candidate, "candidate", comparison.logical.candidate, comparison.logical
            )
        )
    return rows


def _policy_run_row(
    label: str, role: str, summary: PolicySummary, versus: LogicalComparison | None
) -> dict[str, Any]:
    p99 = next((r for r in versus.latency if r.stat == "p99"), None) if versus else None
    return {
        "run": label,
        "role": role,
        "logical": fmt.count(summary.logical_requests),
        "attempts": fmt.count(summary.attempts),
        "amplification": _times(summary.amplification),
        "amplification_delta": _times(versus.amplification.delta, signed=True) if versus else "",
        "success": fmt.pct(100.0 * summary.success_rate),
        "success_delta": _pp(versus.success.delta) if versus else "",
        "p50": fmt.ms(summary.logical_e2e_p50_ms),
        "p99": fmt.ms(summary.logical_e2e_p99_ms),
        "p99_delta": fmt.signed_pct(p99.delta_pct) if p99 else "",
        "p99_verdict": p99.verdict if p99 else "",
        "answered_by": ", ".join(
            f"{model} {fmt.pct(100.0 * share)}" for model, share in summary.answered_share.items()
        )
        or fmt.DASH,
    }


def _logical_block(logical: LogicalComparison | None) -> list[dict[str, str]]:
    """The comparison's logical-request table: figure, baseline, candidate, delta,
    interval, verdict (shown-only figures say "not judged")."""
    if logical is None:
        return []
    b, c = logical.base, logical.candidate
    rows = [
        _shown("logical requests", fmt.count(b.logical_requests), fmt.count(c.logical_requests),
               _signed_count(c.logical_requests - b.logical_requests)),
        _shown("attempts", fmt.count(b.attempts), fmt.count(c.attempts),
               _signed_count(c.attempts - b.attempts)),
        _shown(
            "amplification (attempts per logical request)",
            _times(logical.amplification.base),
            _times(logical.amplification.candidate),
            _times(logical.amplification.delta, signed=True),
        ),
        _success_row(logical.success),
    ]
    rows += [_latency_row(r) for r in logical.latency]
    rows += [
        _shown(f"answered by {r.name}", fmt.pct(r.base), fmt.pct(r.candidate), _pp(r.delta))
        for r in logical.answered_share
    ]
    return rows


def _shown(figure: str, base: str, candidate: str, delta: str) -> dict[str, str]:
    return {"figure": figure, "base": base, "candidate": candidate, "delta": delta,
            "ci": fmt.DASH, "verdict": "not judged"}


def _success_row(rate: RateComparison) -> dict[str, str]:
    return {
        "figure": "logical success rate",
        "base": fmt.pct(rate.base),
        "candidate": fmt.pct(rate.candidate),
        "delta": _pp(rate.delta),
        "ci": f"[{_pp(rate.ci_low)}, {_pp(rate.ci_high)}]"
        if math.isfinite(rate.ci_low) and math.isfinite(rate.ci_high)
        else fmt.DASH,
        "verdict": rate.verdict or "not judged",
    }


def _latency_row(row: PercentileDelta) -> dict[str, str]:
    return {
        "figure": f"logical E2E {row.stat}",
        "base": _in_ms(fmt.ms(row.base)),
        "candidate": _in_ms(fmt.ms(row.candidate)),
        "delta": _in_ms(fmt.signed_ms(row.delta))
        + (f" ({fmt.signed_pct(row.delta_pct)})" if math.isfinite(row.delta_pct) else ""),
        "ci": _in_ms(fmt.interval(row.ci_low, row.ci_high)),
        "verdict": row.verdict,
    }


def _in_ms(text: str) -> str:
    return text if text == fmt.DASH else f"{text} ms"


def _times(value: float, *, signed: bool = False) -> str:
    if not math.isfinite(value):
        return fmt.DASH
    return f"{value:+.2f}×" if signed else f"{value:.2f}×"


def _pp(value: float) -> str:
    return f"{value:+.1f} pp" if math.isfinite(value) else fmt.DASH


def _signed_count(value: int) -> str:
    return f"{value:+,}"


def _comparison_block(index: int, comparison: Comparison, charts: list[Chart]) -> dict[str, Any]:
    settings = comparison.settings
    overall, because = headline_verdict(comparison)
    return {
        "baseline": comparison.baseline,
        "candidate": comparison.candidate,
        "line": verdict_line(comparison),
        "overall": overall,
        "because": f"judged {overall}: " + ", ".join(because) if because else "",
        "settings": f"threshold preset {settings.threshold} "
        f"({settings.relative_threshold * 100:g} % of baseline), {settings.n_boot} bootstrap "
        f"draws, {settings.confidence * 100:g} % intervals, seed {settings.seed}",
        "notes": comparison.notes,
        "warnings": comparison.warnings,
        "logical": _logical_block(comparison.logical),
        "logical_line": logical_line(comparison) or "",
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
    if name == ERROR_RATE.title:
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
