"""One run from start to finish: the target, Locust, the optional microbenchmarks, then
the summary, the report and the exit code (see `zerohop.core.exit_codes`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click

from zerohop.client.target_check import check_llm_target, check_reachable
from zerohop.core.exit_codes import (
    EXIT_INTERRUPTED_BASE,
    EXIT_NO_SUCCESS,
    EXIT_OK,
    EXIT_SLO,
    EXIT_UNREACHABLE,
    EXIT_WORKER_FAILED,
    RunError,
    one_line,
)
from zerohop.core.layout import LOCUST_LOG, MICROBENCH_FILE, REPORT_FILE
from zerohop.core.redaction import scrub
from zerohop.runner.locust_process import last_error_line, run_locust
from zerohop.runner.plan import RunPlan, manifest_config
from zerohop.storage import run_folder as results
from zerohop.storage.selfcheck_files import attach_certificate


@dataclass
class RunResult:
    run_dir: Path
    exit_code: int
    report: Path | None


def run_once(plan: RunPlan, *, kind: str | None = None, announce: bool = True,
             client_certificate: dict[str, Any] | None = None) -> RunResult:
    """`client_certificate`: a self-check's selfcheck.json, kept in the run's folder and
    manifest for the report."""
    sim = None
    host = plan.host
    if host is None:
        from zerohop.sim.embedded import start_embedded_target

        try:
            sim = start_embedded_target(plan.sim_args)
        except Exception as exc:
            raise RunError(f"the embedded target could not start: {one_line(exc)}",
                           EXIT_UNREACHABLE) from None
        host = sim.url
    try:
        check_reachable(host)
        if sim is None:
            check_llm_target(host, plan.api)
        run_dir = results.new_run_dir(plan.results_dir, plan.name)
        results.start_manifest(
            run_dir, name=plan.name,
            target={"url": host, "kind": kind or ("embedded" if sim else "external"),
                    "api": plan.api, **_arms_entry(plan)},
            workloads=[{"file": str(p)} for p in plan.workloads],
            load={"mode": "open" if plan.rate else "closed", "users": plan.users,
                  "rate_rps": plan.rate, "duration_s": plan.duration_s,
                  "requests": plan.requests, "max_concurrency": plan.max_concurrency},
            slo=plan.slo,
            config=manifest_config(plan),
            locust={"workers": plan.workers},
        )
        if client_certificate is not None:
            attach_certificate(run_dir, client_certificate)
        if announce:
            click.echo(f"zerohop: target {scrub(host)} · results {run_dir}")  # no user:pass@
        locust_code = run_locust(plan, host, run_dir)
        if locust_code < EXIT_INTERRUPTED_BASE:
            _maybe_microbench(plan, run_dir)
    finally:
        if sim is not None:
            sim.stop()
    return _finish(plan, run_dir, locust_code, results_block=announce)


def _arms_entry(plan: RunPlan) -> dict[str, Any]:
    """An interleaved run's arms for the manifest's target, in their order (a list: the
    manifest's keys are sorted)."""
    if not plan.arm_hosts:
        return {}
    return {"arms": [{"arm": arm, "url": url} for arm, url in plan.arm_hosts.items()]}


def _maybe_microbench(plan: RunPlan, run_dir: Path) -> None:
    if plan.microbench == "off":
        return
    from zerohop.microbench.runner import cuda_available, run_microbench

    available, reason = cuda_available()
    if not available:
        if plan.microbench == "on":
            click.echo(f"zerohop: microbenchmarks skipped: {reason}")
        return
    run_microbench(run_dir / MICROBENCH_FILE, quick=True)


def _finish(plan: RunPlan, run_dir: Path, locust_code: int, *, results_block: bool = True
            ) -> RunResult:
    from zerohop.analysis.latency.results_table import run_results_table
    from zerohop.analysis.run_analysis import analyse_run
    from zerohop.analysis.run_data import ReportInputError
    from zerohop.analysis.summary_document import parts_of_analysis
    from zerohop.report.build import write_report
    from zerohop.runner.console_summary import no_success_reason, print_summary, slo_verdict
    from zerohop.storage.run_reader import load_run
    from zerohop.storage.summary_file import write_summary

    try:
        run = load_run(run_dir)
    except ReportInputError as exc:  # Locust recorded nothing at all: say why, in one line
        return _nothing_recorded(run_dir, locust_code, exc)
    analysis = analyse_run(run)  # the only one: console, report and summary.json share it
    verdict = slo_verdict(analysis)
    table = run_results_table(run, analysis.total, analysis.slo_results)
    # a sweep's or a nightly's point prints its table, not a block per point
    print_summary(analysis, verdict, table if results_block else None)
    report_path = write_report(analysis, run_dir / REPORT_FILE) if plan.report else None
    manifest = results.read_manifest(run_dir)
    results.update_manifest(run_dir, slo_verdict=verdict)
    if manifest.get("status") == "running":
        results.finish_manifest(run_dir, status="completed", end_reason="finished")
    run.manifest = results.read_manifest(run_dir)  # as it ended
    write_summary(run_dir, run, replace(parts_of_analysis(analysis, run), results=table))
    if report_path is not None:
        click.echo(f"report: {report_path}")
    if locust_code >= EXIT_INTERRUPTED_BASE:  # 130 SIGINT, 143 SIGTERM
        click.echo(interrupted_line(locust_code, analysis, plan), err=True)
        return RunResult(run_dir, locust_code, report_path)
    failed_workers = results.read_manifest(run_dir).get("workers_failed") or []
    if failed_workers:
        from zerohop.loadgen.worker_health import summary_line

        click.echo(f"zerohop: PARTIAL RUN: {summary_line(failed_workers)}; what it would "
                   "have sent is missing from these figures", err=True)
        return RunResult(run_dir, EXIT_WORKER_FAILED, report_path)
    failed_all = no_success_reason(analysis)
    if failed_all is not None:
        if analysis.total.requests == 0:
            failed_all += last_error_line(run_dir / LOCUST_LOG)
        click.echo(f"zerohop: {failed_all}", err=True)
        return RunResult(run_dir, EXIT_NO_SUCCESS, report_path)
    return RunResult(run_dir, EXIT_SLO if verdict.get("failed") else EXIT_OK, report_path)


def _nothing_recorded(run_dir: Path, locust_code: int, exc: Exception) -> RunResult:
    """A load generator that wrote no record (it failed before its first request): the
    folder's manifest is finished, the reason is one line, the exit code 4 (or the
    signal's, when the run was stopped)."""
    if results.read_manifest(run_dir).get("status") == "running":
        results.finish_manifest(run_dir, status="completed", end_reason="no records")
    click.echo(f"zerohop: no request was recorded ({exc})"
               f"{last_error_line(run_dir / LOCUST_LOG)}", err=True)
    code = locust_code if locust_code >= EXIT_INTERRUPTED_BASE else EXIT_NO_SUCCESS
    return RunResult(run_dir, code, None)


def interrupted_line(code: int, analysis: Any, plan: RunPlan) -> str:
    """What a stopped run says: which signal, how long the load ran of what was planned,
    and that the figures are over that time (the folder and report are finished)."""
    signal_name = {130: "SIGINT", 143: "SIGTERM"}.get(code, f"signal {code - 128}")
    ran = analysis.window.duration_s if analysis.window is not None else float("nan")
    return (f"zerohop: interrupted by {signal_name} after {ran:.1f} s of the planned "
            f"{plan.duration_s:g} s: the results folder and report are finished, their "
            "rates over the time the load ran")
