"""The report's summary tables and latency distributions, as printable strings and
CDF charts — with the ITL gaps of tokens that came in one read explained, not shown as
tokens that took no time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zerohop.analysis.latency.reads import ReadDelivery
from zerohop.analysis.latency.summary import ALL_WORKLOADS, ITEMS
from zerohop.analysis.quantiles import PERCENTILE_NAMES, Distribution
from zerohop.analysis.run_analysis import RunAnalysis
from zerohop.core.metrics import CATALOGUE, NIGHTLY_GATES, needed_n, percentile_fraction
from zerohop.report import formatting as fmt
from zerohop.report.charts import Chart, Series, add_chart, joined

METRIC_TITLES: dict[str, str] = {m.name: m.title for m in CATALOGUE}
ITL_EVERY_GAP = "ITL (every gap)"
# Shown unfolded: the latencies a nightly gates on (TTFT, TPOT, E2E); the rest fold.
MAIN_METRICS: frozenset[str] = frozenset(NIGHTLY_GATES)
ITL_BETWEEN_READS = "ITL between reads"


def throughput_table(analysis: RunAnalysis) -> list[dict[str, str]]:
    return [
        {
            "workload": s.workload,
            "requests": fmt.count(s.requests),
            "ok": fmt.count(s.ok),
            "error_pct": fmt.pct(s.error_pct, 2),
            "window": fmt.seconds(s.window_s),
            "req_per_s": fmt.rate(s.req_per_s),
            "input_tps": fmt.rate(s.input_tokens_per_s),
            # a pooling workload generates nothing: no output rate to show
            "output_tps": fmt.DASH if s.pooling_only else fmt.rate(s.output_tokens_per_s),
            "goodput": fmt.rate(s.goodput_rps),
            "good_fraction": fmt.pct(s.good_fraction * 100.0),
        }
        for s in analysis.summaries
    ]


def pooling_table(analysis: RunAnalysis) -> list[dict[str, str]]:
    """The pooling workloads (embedding, rerank): texts per second, input tokens per
    second and the batch size (`items` per request) — their throughput, which the
    token-streaming columns cannot say. Empty when no request carried items."""
    rows = []
    for s in analysis.summaries:
        batch = s.figures.get(ITEMS)
        if s.items_per_s is None or batch is None or batch.n == 0:
            continue
        rows.append({
            "workload": s.workload,
            "items_per_s": fmt.rate(s.items_per_s),
            "input_tps": fmt.rate(s.input_tokens_per_s),
            "batch": " / ".join(f"{batch.percentiles[p]:,.0f}" for p in ("p50", "p99")),
            "batch_mean": f"{batch.mean:,.1f}",
            "n": fmt.count(batch.n),
        })
    return rows


def latency_table(analysis: RunAnalysis) -> dict[str, Any]:
    """Rows per workload and metric; where some ITL gaps are same-read 0 ms gaps, the
    pooled ITL row is named for what it is and an `ITL between reads` row follows."""
    reads = {r.workload: r for r in analysis.reads}
    rows = []
    for s in analysis.summaries:
        for metric, dist in s.latency.items():
            if dist.n == 0 and s.pooling_only:  # no TTFT, ITL or TPOT: nothing streamed
                continue
            delivery = reads.get(s.workload)
            batched = metric == "itl_ms" and delivery is not None and delivery.same_read_gaps
            title = ITL_EVERY_GAP if batched else METRIC_TITLES.get(metric, metric)
            rows.append(_latency_row(s.workload, title, dist) | {"main": metric in MAIN_METRICS})
            if batched and delivery is not None:
                between = _latency_row(s.workload, ITL_BETWEEN_READS, delivery.between_reads)
                rows.append(between | {"main": False})
    needs = ", ".join(
        f"{p} needs n ≥ {needed_n(percentile_fraction(p)):,}" for p in PERCENTILE_NAMES[1:]
    )
    return {
        "columns": [*PERCENTILE_NAMES, "mean", "min", "max"],
        "rows": rows,
        "notes": same_read_notes(analysis.reads),
        "needs": f"— : too few samples for that percentile ({needs}).",
    }


def _latency_row(workload: str, metric: str, dist: Distribution) -> dict[str, Any]:
    return {
        "workload": workload,
        "metric": metric,
        "n": fmt.count(dist.n),
        "cells": [percentile_text(dist, p) for p in PERCENTILE_NAMES]
        + [fmt.ms(dist.mean), fmt.ms(dist.min), fmt.ms(dist.max)],
    }


def percentile_text(dist: Distribution, stat: str) -> str:
    """A percentile as printed: a dash (titled with why) when the distribution holds
    fewer samples than the percentile needs — a p99.9 of 6 requests is their max."""
    if dist.n < needed_n(percentile_fraction(stat)):
        return fmt.DASH
    return fmt.ms(dist.percentiles[stat])


def same_read_notes(reads: Sequence[ReadDelivery]) -> list[str]:
    """One `tokens_per_read` note per workload with same-read gaps (the run-wide row
    only when it is the one row)."""
    with_batches = [r for r in reads if r.same_read_gaps]
    per_workload = [r for r in with_batches if r.workload != ALL_WORKLOADS]
    notes = []
    for r in per_workload or with_batches:
        notes.append(
            f"{r.workload}: {fmt.count(r.same_read_gaps)} of {fmt.count(r.gaps)} ITL gaps "
            f"({fmt.pct(r.same_read_pct, 1)}) are 0 ms because their tokens arrived in the "
            f"same read as the token before — tokens_per_read {r.tokens_per_read:.2f}, up to "
            f"{r.max_events_per_read} in one read. Tokens read together share the read's "
            f"timestamp: a 0 ms gap is batched delivery, not a token that took no time. "
            f"{ITL_BETWEEN_READS} leaves these gaps out."
        )
    return notes


def distribution_section(analysis: RunAnalysis, charts: list[Chart]) -> list[str]:
    ids = []
    between = {r.workload: r.between_reads for r in analysis.reads}
    batched = any(r.same_read_gaps for r in analysis.reads)
    for metric, per_workload in analysis.cdfs.items():
        title = f"{METRIC_TITLES.get(metric, metric)} CDF (ok requests)"
        if metric == "itl_ms" and batched:
            # same-read gaps would draw a step at 0 ms: the tokens_per_read note explains them
            per_workload = {
                name: cdf
                for name in per_workload
                if name in between and (cdf := between[name].cdf) is not None
            }
            title = f"{ITL_BETWEEN_READS} CDF (0 ms same-read gaps left out)"
        if not per_workload:
            continue
        x, columns = joined([(name, x, q) for name, (x, q) in per_workload.items()])
        chart = Chart(
            chart_id=f"cdf-{metric}",
            title=title,
            kind="xy",
            x=x,
            series=[
                Series(name, column * 100.0, "step")
                for name, column in zip(per_workload, columns, strict=True)
            ],
            x_label="ms",
            y_label="% of requests ≤ x",
        )
        ids.append(add_chart(charts, chart))
    return ids
