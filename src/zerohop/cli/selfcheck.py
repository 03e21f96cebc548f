"""`zerohop selfcheck`: before trusting a run's latencies, certify the client's own error
at the intended load on this machine, or learn how many processes the load needs.

Exit codes: 0 PASS · 1 FAIL (the certificate says why, and what to change) · 2 bad
input · 3 the embedded target could not start · 128 + N stopped by signal N.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from zerohop.analysis.client.client_certificate import DEFAULT_MAX_ERROR_MS, Bounds
from zerohop.cli.main_job import plan_from_settings
from zerohop.core.exit_codes import EXIT_BAD_INPUT, EXIT_OK, EXIT_SLO, RunError
from zerohop.core.layout import SELFCHECK_FILE
from zerohop.loadgen.run_settings import RunSettings
from zerohop.runner.plan import RunPlan
from zerohop.runner.selfcheck import MIN_DURATION_S, run_selfcheck, selfcheck_plan
from zerohop.runner.selfcheck_console import certificate_lines
from zerohop.runner.setting_options import setting_options

EXIT_FAIL = EXIT_SLO  # a bound was missed, as a missed SLO exits
# `zerohop run`'s settings a self-check takes, by their names there
_SHARED = ("users", "rate", "duration", "workers", "workloads", "api", "results_dir", "seed",
           "sim_args")


@click.command("selfcheck")
@setting_options(_SHARED, defaults={"duration": "20s"}, helps={
    "users": "Intended concurrent users (closed loop). Default: the --workload files' own "
             "load, else the default run's short-query rate.",
    "rate": "Intended arrival rate, req/s (open loop).",
    "duration": "How long to drive the load.",
    "workers": "Locust worker processes, as the run will use; 0 = one process.",
    "workloads": "Your workload file (repeatable). Default: short queries."})
@click.option("--max-error-ms", type=float, default=DEFAULT_MAX_ERROR_MS, show_default=True,
              help="Bound on the client's TTFT error p99.")
def selfcheck_command(**kw: Any) -> None:
    """Certify the client's TTFT error, schedule lag and CPU headroom at a load.

    Drives the embedded target at the intended load with ground truth on, prints the
    certificate and writes selfcheck.json. Exit 0 PASS, 1 FAIL, 2 bad input.
    """
    try:
        plan, bounds = _plan_and_bounds(kw)
        result = run_selfcheck(plan, bounds, default_workload=not kw["workloads"])
    except RunError as exc:
        click.echo(f"zerohop: error: {exc}", err=True)
        sys.exit(exc.code)
    for line in certificate_lines(result.certificate, str(result.run_dir / SELFCHECK_FILE)):
        click.echo(line)
    sys.exit(EXIT_OK if result.passed else EXIT_FAIL)


def _plan_and_bounds(kw: dict[str, Any]) -> tuple[RunPlan, Bounds]:
    if kw["users"] is not None and kw["rate"] is not None:
        raise RunError("--users and --rate are exclusive: the intended load is closed "
                       "loop (--users N) or open loop (--rate R)", EXIT_BAD_INPUT)
    if kw["users"] is None and kw["rate"] is None:
        kw = {**kw, "rate": None if kw["workloads"] else default_rate()}
        click.echo("zerohop: selfcheck at " + (
            "the load your workload files set" if kw["workloads"] else
            f"{kw['rate']:g} req/s, the default run's short-query rate")
            + " (--users N or --rate R to certify another)")
    if not kw["max_error_ms"] > 0:
        raise RunError("--max-error-ms must be > 0", EXIT_BAD_INPUT)
    plan = plan_from_settings(RunSettings(
        **{name: kw[name] for name in _SHARED}, telemetry="loadgen", name="selfcheck",
        no_report=True, microbench="off"))
    if plan.duration_s < MIN_DURATION_S:
        raise RunError(f"--duration: a self-check needs at least {MIN_DURATION_S:g}s",
                       EXIT_BAD_INPUT)
    return selfcheck_plan(plan, duration_s=plan.duration_s), Bounds(
        max_ttft_error_ms=kw["max_error_ms"])


def default_rate() -> float:
    """The open-loop rate of the shipped short-query workload, the one `zerohop run`
    offers by default: what a self-check with no load named certifies."""
    from zerohop.shipped import workloads_dir
    from zerohop.workloads.yaml_io import load_workload_file

    for spec in load_workload_file(workloads_dir() / "short_query_flood.yaml").workloads:
        rate = getattr(spec.load, "rate_rps", None)
        if isinstance(rate, int | float):
            return float(rate)
    raise RunError("the shipped short_query_flood.yaml has no open-loop rate: pass --rate",
                   EXIT_BAD_INPUT)
