"""The report's first screen: is this run good? The verdict, the headline figures and
one chart, then the run's identity and its SLOs — everything a reader needs before
scrolling."""

from __future__ import annotations

import math
from typing import Any

from zerohop.analysis.latency.load_shape import WorkloadLoad
from zerohop.analysis.latency.summary import QUEUE_WAIT, WorkloadSummary
from zerohop.analysis.run_analysis import RunAnalysis
from zerohop.core.metrics import REQUEST_LATENCIES, needed_n, percentile_fraction, title
from zerohop.report import formatting as fmt
from zerohop.report.charts import Chart, add_chart
from zerohop.report.present_certificate import certificate_check
from zerohop.report.present_latency import ITL_BETWEEN_READS, percentile_text
from zerohop.report.present_timeseries import (
    latency_series,
    load_series,
    time_chart,
    window_axis,
)
from zerohop.report.present_token_counts import prompt_size_check


def run_header(analysis: RunAnalysis, manifest: dict[str, Any]) -> dict[str, str]:
    target = manifest.get("target") or {}
    load = manifest.get("load") or {}
    load_text = str(load.get("mode", "—"))
    if load.get("users"):
        load_text += f", {load['users']} users"
    if load.get("rate_rps"):
        load_text += f", {load['rate_rps']} req/s {load.get('arrival') or ''}".rstrip()
    if analysis.loads:  # what each workload really had, from its records
        load_text = " · ".join(_load_of(w) for w in analysis.loads)
    return {
        "label": analysis.label,
        "status": str(manifest.get("status", "unknown")),
        "end_reason": str(manifest.get("end_reason") or "—"),
        "started_at": str(manifest.get("started_at") or "—"),
        "duration": fmt.seconds(analysis.timeline.duration_s),
        "target": f"{target.get('url', '—')} ({target.get('kind', '?')}, {target.get('api', '?')})",
        "load": load_text,
        "window": fmt.seconds(analysis.settings.window_s),
    }


def _load_of(load: WorkloadLoad) -> str:
    if load.mode == "open":
        return f"{load.workload}: open, {fmt.rate(load.arrivals_per_s)} req/s"
    return f"{load.workload}: closed, at most {load.peak_in_flight} in flight"


def concurrency_cap(manifest: dict[str, Any]) -> int | None:
    """The run's `--max-concurrency`, from its manifest (None without one)."""
    load = manifest.get("load")
    cap = load.get("max_concurrency") if isinstance(load, dict) else None
    return cap if isinstance(cap, int) and not isinstance(cap, bool) else None


KEPT_UP = 0.9  # completed ÷ offered below this, with arrivals due: the target fell behind


def offered_check(total: WorkloadSummary, cap: int | None = None) -> dict[str, Any] | None:
    """What was offered against what was completed over the measured window, so a
    target that fell behind is plain on the first screen and at the end of the console,
    whatever else the run says (requests still running when the window closed count as
    offered, not completed). A run with arrivals due (open loop, traces) that completed
    less than KEPT_UP of them warns, with the `warning` the console prints; under a
    `--max-concurrency` `cap` the arrivals waited for a slot, and the warning says the
    cap (or the target behind it) held them back."""
    if not (total.offered_rps > 0 and math.isfinite(total.req_per_s)):
        return None
    share = total.req_per_s / total.offered_rps
    text = (f"load: offered {total.offered_rps:.2f} req/s, completed {total.req_per_s:.2f} "
            f"req/s ({share:.0%} of offered) over the {total.window_s:.1f} s window")
    if not (total.open_loop and share < KEPT_UP):
        return {"status": "ok", "text": text}
    held = total.offered_rps - total.req_per_s
    if cap is not None:
        why = (f"the --max-concurrency {cap} cap held back {held:.2f} req/s of the "
               f"{total.offered_rps:.2f} offered: arrivals waited for a slot"
               + "".join(f"; {row['label']} {row['value']}" for row in waits(total)))
    else:
        why = (f"the target did not keep up: it completed {total.req_per_s:.2f} of the "
               f"{total.offered_rps:.2f} req/s offered ({share:.0%}); latencies past this "
               "point grow with the run's length")
    return {"status": "warn", "text": f"{text}: {why.split(':')[0]}", "warning": why}


def waits(total: WorkloadSummary) -> list[dict[str, str]]:
    """When arrivals waited for a `--max-concurrency` slot: what a user of the service
    waited (TTFT and E2E from the schedule) and the queue wait itself, as headline rows;
    TTFT from the send leaves the wait out. Empty when nothing waited."""
    wait = total.figures.get(QUEUE_WAIT)
    if wait is None or wait.n == 0 or not wait.max > 0:
        return []
    rows = []
    for label, dist in (("TTFT from the schedule", total.latency.get("ttft_from_schedule_ms")),
                        ("queue wait for a slot", wait),
                        ("E2E from the schedule", total.latency.get("e2e_from_schedule_ms"))):
        if dist is not None and dist.n > 0:
            rows.append({"label": f"{label} p50 / p99",
                         "value": f"{percentile_text(dist, 'p50')} / "
                         f"{percentile_text(dist, 'p99')} ms (n = {fmt.count(dist.n)})"})
    return rows


def verdict(analysis: RunAnalysis) -> dict[str, Any]:
    items = []
    if analysis.slo_results:
        met = sum(1 for r in analysis.slo_results if r.met)
        failed = [r.label for r in analysis.slo_results if r.met is False]
        unknown = sum(1 for r in analysis.slo_results if r.met is None)
        status = "fail" if failed else ("warn" if unknown else "ok")
        text = f"SLOs: {met} of {len(analysis.slo_results)} met"
        if failed:
            text += " (missed: " + ", ".join(failed) + ")"
        items.append({"status": status, "text": text})
    else:
        items.append({"status": "none", "text": "SLOs: none set"})
    fidelity = analysis.fidelity
    if "simulation" not in analysis.manifest:  # the virtual clock has no client to judge
        items.append(
            {
                "status": "ok" if fidelity.ok else "warn",
                "text": "client fidelity OK"
                if fidelity.ok
                else "client fidelity flagged: " + "; ".join(fidelity.reasons),
            }
        )
    items += load_checks(analysis.manifest)
    silent = silent_text(analysis.manifest, analysis.silent)
    if silent is not None:
        items.append({"status": "warn", "text": silent})
    cap = concurrency_cap(analysis.manifest)
    offered = offered_check(analysis.total, cap)
    if offered is not None and offered["status"] == "warn" and cap is not None:
        # the wait for a slot is what a user of the service saw: it leads the verdict
        items.insert(0, {"status": "warn", "text": offered["text"].split(":")[0] + ": "
                         + offered["warning"]})
    elif offered is not None:
        items.append({"status": offered["status"], "text": offered["text"]})
    certificate = certificate_check(analysis.manifest)
    if certificate is not None:
        items.append(certificate)
    sizes = prompt_size_check(analysis.token_counts)
    if sizes is not None:
        items.append(sizes)
    total = analysis.total
    error_status = "ok" if total.errors == 0 else ("warn" if total.error_pct < 1.0 else "fail")
    items.append(
        {
            "status": error_status,
            "text": f"errors: {fmt.count(total.errors)} of {fmt.count(total.requests)} "
            f"({fmt.pct(total.error_pct, 2)})",
        }
    )
    fired = [a for a in analysis.alerts if a.fired]
    items.append(
        {
            "status": "warn" if fired else "ok",
            "text": f"alerts: {len(fired)} of {len(analysis.alerts)} fired"
            if analysis.alerts
            else "alerts: no rules",
        }
    )
    weight = analysis.window.weight if analysis.window is not None else 1.0
    if weight != 1.0:
        items.append({"status": "none", "text": (
            f"simulated: each record stands for {weight:,.4g} requests (replicas run or "
            "records kept on the virtual clock); rates are the whole fleet's, counts "
            "are of records")})
    status_manifest = str(analysis.manifest.get("status", "unknown"))
    if status_manifest != "completed":
        items.append({"status": "warn", "text": f"run status: {status_manifest}"})
    rank = {"fail": 3, "warn": 2, "ok": 1, "none": 0}
    worst = max((i["status"] for i in items), key=lambda s: rank[s])
    return {"overall": "ok" if worst == "none" else worst, "checks": items}


def silent_text(manifest: dict[str, Any], silent: list[str]) -> str | None:
    """The workloads that sent nothing, said as such (their SLOs are not judged), with
    why where the command line's users were spread by weight (`--users N`, a layer
    comparison's one user): Locust gives a workload none when N is short of the weights."""
    if not silent:
        return None
    load = manifest.get("load") or {}
    by_weight = str((manifest.get("config") or {}).get("users_from_files")) == "False"
    count = len((manifest.get("workload_selection") or {}).get("names") or [])
    users = load.get("users")
    why = (f": Locust spread {users} user{'s' if users != 1 else ''} over {count} workloads "
           "by weight and left these none (more --users, or --only NAME, runs them)"
           if load.get("mode") == "closed" and by_weight and isinstance(users, int) else "")
    return f"sent nothing, not judged: {', '.join(silent)}{why}"


def load_checks(manifest: dict[str, Any]) -> list[dict[str, str]]:
    """What the load itself says about the figures: arrivals the client dropped at a
    workload's max_in_flight (never sent, in no latency) and a simulation whose
    replicas saturated."""
    items = []
    dropped = int((manifest.get("counters") or {}).get("dropped_arrivals") or 0)
    if dropped:
        items.append({"status": "warn", "text": f"dropped arrivals: {fmt.count(dropped)} "
                      "(over a workload's max_in_flight: never sent, in no figure)"})
    saturation = (manifest.get("simulation") or {}).get("saturation")
    if saturation:
        items.append({"status": "warn", "text": str(saturation)})
    return items


def slo_rows(analysis: RunAnalysis) -> list[dict[str, str]]:
    """Each objective with the sample it was judged on; a percentile judged on fewer
    requests than it needs says so (a p99 of 40 requests is their maximum)."""
    rows = []
    for r in analysis.slo_results:
        n = _judged_n(analysis, r.workload, r.target.column)
        note = ""
        if r.target.statistic.startswith("p") and n is not None:
            needed = needed_n(percentile_fraction(r.target.statistic))
            if n < needed:
                note = f"{r.target.statistic} of fewer than {needed:,} requests: read it as the max"
        rows.append(
            {
                "key": r.label,
                "observed": fmt.ms(r.observed_ms),
                "threshold": fmt.ms(r.target.threshold_ms),
                "n": fmt.count(n),
                "status": "met" if r.met else ("missed" if r.met is False else "no data"),
                "note": note,
            }
        )
    return rows


def _judged_n(analysis: RunAnalysis, workload: str | None, column: str) -> int | None:
    """The ok requests the objective was computed over: the workload's, or the run's."""
    summary = next(
        (s for s in analysis.summaries if workload is not None and s.workload == workload),
        analysis.total,
    )
    dist = summary.latency.get(column)
    return dist.n if dist is not None else None


def slo_source(analysis: RunAnalysis) -> str:
    """Whose objectives these are and whether they gate the exit code: `--slo` does,
    a workload file's own `slo:` block judges its workload and its goodput only."""
    if not analysis.slo_results:
        return ""
    own = any(r.workload for r in analysis.slo_results)
    gate = any(r.workload is None for r in analysis.slo_results)
    if own and gate:
        return ("Objectives named by a workload are its file's own `slo:` (they judge it and "
                "its goodput); the others came from --slo and set the exit code.")
    if own:
        return ("These are the workload files' own objectives (their `slo:` blocks): they "
                "judge each workload and its goodput, and do not set the exit code "
                "(--slo does).")
    return "These objectives came from --slo: a miss makes the exit code 1."


def headline_figures(analysis: RunAnalysis) -> list[dict[str, str]]:
    """The run-wide figures a reader checks first, as (label, value) rows: volume,
    errors, throughput, goodput, the wait for a `--max-concurrency` slot where arrivals
    waited, and p50 / p99 of each latency (ITL between reads when some tokens came in
    one read)."""
    total = analysis.total
    rows = [
        {"label": "requests", "value": f"{fmt.count(total.ok)} ok of {fmt.count(total.requests)}"},
        {"label": "errors", "value": fmt.pct(total.error_pct, 2)},
        {
            "label": "throughput",
            "value": f"{fmt.rate(total.req_per_s)} req/s · " + (
                f"{fmt.rate(total.items_per_s or 0.0)} items/s · "
                f"{fmt.rate(total.input_tokens_per_s)} input tok/s" if total.pooling_only
                else f"{fmt.rate(total.output_tokens_per_s)} output tok/s"),
        },
        {
            "label": "goodput",
            "value": f"{fmt.rate(total.goodput_rps)} req/s "
            f"({fmt.pct(total.good_fraction * 100.0)} good)",
        },
    ]
    for share in analysis.structured:  # workloads that asked for a JSON schema
        rows.append({
            "label": f"structured output · {share.workload}",
            "value": f"{fmt.pct(share.valid_share * 100.0)} valid, "
            f"{fmt.pct(share.parsed_share * 100.0)} parse, of {fmt.count(share.answers)} answers",
        })
    rows += waits(total)  # arrivals that waited for a slot: the wait leads
    delivery = next((r for r in analysis.reads if r.workload == total.workload), None)
    for metric in REQUEST_LATENCIES:
        dist, label = total.latency.get(metric), title(metric)
        if metric == "itl_ms" and delivery is not None and delivery.same_read_gaps:
            dist, label = delivery.between_reads, ITL_BETWEEN_READS
        if dist is None or dist.n == 0:
            continue
        rows.append(
            {
                "label": f"{label} p50 / p99",
                "value": f"{percentile_text(dist, 'p50')} / "
                f"{percentile_text(dist, 'p99')} ms (n = {fmt.count(dist.n)})",
            }
        )
    return rows


def headline_chart(analysis: RunAnalysis, charts: list[Chart]) -> str:
    """The first screen's chart: TTFT p50 and p99 per window (does latency hold over
    the run?), or offered vs achieved load when no window has a TTFT."""
    data = analysis.charts_series
    x, x_range = window_axis(data)
    series = latency_series(data, (("p50", "ttft_p50_ms"), ("p99", "ttft_p99_ms")))
    if series:
        chart = time_chart("headline-ttft", "TTFT per window (ms)", x, x_range, "ms", series)
    else:
        chart = time_chart(
            "headline-load",
            "Offered vs achieved load (req/s)",
            x,
            x_range,
            "req/s",
            load_series(data),
        )
    return add_chart(charts, chart)
