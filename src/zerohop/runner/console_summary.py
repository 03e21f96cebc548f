"""The short summary `zerohop run` prints, and its SLO verdict (exit code 1 on a miss).

Read from the run's one analysis (`analysis/run_analysis`), the report's too, so the
terminal and the page can never disagree."""

from __future__ import annotations

import math
from typing import Any

import click

from zerohop.analysis.latency.results_table import ResultsTable
from zerohop.analysis.latency.summary import ITEMS, PER_USER_OUTPUT_RATE
from zerohop.analysis.run_analysis import RunAnalysis
from zerohop.analysis.server.energy import EnergySummary
from zerohop.core.metrics import needed_n, percentile_fraction
from zerohop.report import formatting as fmt
from zerohop.report.present_answers import console_line as answers_line
from zerohop.report.present_headline import (
    concurrency_cap,
    load_checks,
    offered_check,
    silent_text,
    slo_rows,
)
from zerohop.report.present_probe import console_line
from zerohop.runner.results_block import results_block_lines


def slo_verdict(analysis: RunAnalysis) -> dict[str, Any]:
    """Every objective's result. `failed` (exit 1) counts the run's `--slo` objectives,
    the gate a user asked for; a workload file's own `slo:` objectives are judged and
    shown, and `workloads_failed` says whether one of them was missed."""
    results = [
        {"slo": r.label, "threshold_ms": r.target.threshold_ms,
         "observed_ms": None if math.isnan(r.observed_ms) else round(r.observed_ms, 3),
         "met": r.met, "workload": r.workload}
        for r in analysis.slo_results
    ]
    return {"failed": any(r["met"] is False and r["workload"] is None for r in results),
            "workloads_failed": any(r["met"] is False and r["workload"] for r in results),
            "results": results}


def print_summary(analysis: RunAnalysis, verdict: dict[str, Any],
                  results: ResultsTable | None = None) -> None:
    """The workloads' rows, then the results block (`results`, as `vllm bench serve`
    lays it out), then what was offered, energy, warnings and the SLO lines."""
    head = (f"{'workload':<26}{'reqs':>7}{'err%':>7}{'req/s':>8}{'out tok/s':>11}"
            f"{'tok/s/user':>11}{'TTFT p50':>10}{'TTFT p99':>10}{'TPOT p50':>10}"
            f"{'E2E p99':>10}")
    streamed = [s for s in analysis.summaries if not s.pooling_only]
    if streamed:
        click.echo(head)
    for s in streamed:
        lat = s.latency
        click.echo(
            f"{s.workload[:25]:<26}{s.requests:>7}{s.error_pct:>7.1f}{s.req_per_s:>8.2f}"
            f"{s.output_tokens_per_s:>11.0f}{_ms(s.figures, PER_USER_OUTPUT_RATE, 'p50'):>11}"
            f"{_ms(lat, 'ttft_ms', 'p50'):>10}"
            f"{_ms(lat, 'ttft_ms', 'p99'):>10}{_ms(lat, 'tpot_ms', 'p50'):>10}"
            f"{_ms(lat, 'e2e_ms', 'p99'):>10}"
        )
    pooled = [s for s in analysis.summaries if s.pooling_only]
    if pooled:  # embedding, rerank: texts and input tokens per second, no TTFT
        click.echo(f"{'pooling workload':<26}{'reqs':>7}{'err%':>7}{'req/s':>8}"
                   f"{'items/s':>10}{'in tok/s':>11}{'batch p50':>10}{'E2E p50':>10}"
                   f"{'E2E p99':>10}")
    for s in pooled:
        batch = s.figures.get(ITEMS)
        click.echo(
            f"{s.workload[:25]:<26}{s.requests:>7}{s.error_pct:>7.1f}{s.req_per_s:>8.2f}"
            f"{s.items_per_s or 0.0:>10.1f}{s.input_tokens_per_s:>11.0f}"
            f"{_ms(s.figures, ITEMS, 'p50') if batch is not None else '-':>10}"
            f"{_ms(s.latency, 'e2e_ms', 'p50'):>10}{_ms(s.latency, 'e2e_ms', 'p99'):>10}")
    for s in analysis.summaries[:-1] if len(analysis.summaries) > 1 else analysis.summaries:
        if s.ok > 0 and s.req_per_s == 0:
            click.echo(f"({s.workload}: its {s.ok} ok requests all ended after the "
                       f"{s.window_s:.1f} s window, so none counts in its rates)")
    if any(s.latency.get("ttft_ms") is not None
           and 0 < s.latency["ttft_ms"].n < needed_n(0.99) for s in streamed):
        click.echo("(-: fewer requests than the percentile needs: p99 needs 100)")
    for line in results_block_lines(results) if results is not None else []:
        click.echo(line)
    silent = silent_text(analysis.manifest, analysis.silent)
    if silent is not None:
        click.echo(silent)
    offered = offered_check(analysis.total, concurrency_cap(analysis.manifest))
    if offered is not None:
        click.echo(offered["text"])
    energy = energy_line(analysis.sections.get("energy"))
    if energy is not None:
        click.echo(energy)
    for flag in analysis.token_counts.flags if analysis.token_counts else []:
        click.echo(f"prompt sizes: {flag}")
    probe = console_line(analysis.sections.get("probe"))
    if probe is not None:
        click.echo(probe)
    answers = answers_line(analysis.sections.get("answers"))
    if answers is not None:
        click.echo(answers)
    for line in warnings(analysis, offered):
        click.echo(f"zerohop: warning: {line}", err=True)
    # a percentile judged on fewer requests than it needs says so, as the report's does
    notes = [row["note"] for row in slo_rows(analysis)]
    for r, note in zip(verdict["results"], notes, strict=True):
        click.echo(slo_line(r) + (f" ({note})" if note else ""))


def energy_line(energy: EnergySummary | None) -> str | None:
    """The GPUs' energy per output token (per item for pooling requests), marked when a
    GPU model, not a measured GPU, gave it."""
    if energy is None:
        return None
    per = [f"{fmt.number(energy.j_per_output_token)} J per output token"
           if energy.output_tokens > 0 else "",
           f"{fmt.number(energy.j_per_item)} J per item" if energy.items > 0 else ""]
    figures = " · ".join(p for p in per if p) or f"{fmt.number(energy.energy_j)} J"
    mark = " (modelled by the embedded target's GPU model, not measured)" \
        if energy.modelled else ""
    return f"energy: {figures}, {fmt.number(energy.mean_power_w)} W mean{mark}"


def warnings(analysis: RunAnalysis, offered: dict[str, Any] | None) -> list[str]:
    """What the report's first screen flags about how the figures were measured: the
    client's fidelity (a run with a client), dropped arrivals, saturation (`offered`:
    the run's `offered_check`, as the console printed it)."""
    lines = []
    fidelity = analysis.fidelity
    if not fidelity.ok and "simulation" not in analysis.manifest:
        lines.append("client fidelity flagged: " + "; ".join(fidelity.reasons))
    lines += [check["text"] for check in load_checks(analysis.manifest)]
    if offered is not None and offered["status"] == "warn":
        lines.append(offered["warning"])
    return lines


def slo_line(result: dict[str, Any]) -> str:
    """One objective's verdict; a miss says whether it sets the exit code (`--slo`
    does; a workload file's own `slo:` is judged and shown, never gating)."""
    state = {True: "met", False: "MISSED", None: "no data"}[result["met"]]
    if result["met"] is False:
        state += (" (a workload file's slo: shown, not gating the exit code; --slo gates)"
                  if result["workload"] else " (--slo: exit 1)")
    return (f"SLO {result['slo']} ≤ {fmt.ms(result['threshold_ms'])} ms: observed "
            f"{fmt.ms(result['observed_ms'])} ms — {state}")


def _ms(latency: dict[str, Any], metric: str, stat: str) -> str:
    """A percentile as the report prints it: "-" where its sample is smaller than the
    percentile needs (core.metrics.needed_n: p99 needs 100) or it has no value."""
    dist = latency.get(metric)
    if dist is None or dist.n < needed_n(percentile_fraction(stat)):
        return "-"
    value = dist.get(stat)
    return "-" if value is None or math.isnan(value) else f"{value:.1f}"


def no_success_reason(analysis: RunAnalysis) -> str | None:
    """None when any request was `ok`; else one line saying why none was (the commonest
    failure and one of its messages), for a run that measured nothing usable."""
    total = analysis.total
    if total.ok > 0:
        return None
    if total.requests == 0:
        return "no request was sent (see locust.log in the results folder)"
    failures = [o for o in analysis.outcomes if o.outcome != "ok"]
    commonest = max(failures, key=lambda o: o.count)
    message = next((e.message for e in analysis.error_samples
                    if e.outcome == commonest.outcome), "")
    line = (f"no request succeeded: {total.requests} of {total.requests} failed, "
            f"{commonest.count} as {commonest.outcome}")
    if message and message != "—":
        line += ": " + " ".join(message.split())[:160]
    return line
