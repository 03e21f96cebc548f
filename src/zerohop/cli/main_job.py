"""`zerohop run`: the one command a new user runs first.

Start the embedded target unless a host is given, run the workloads through real Locust
(headless; `--workers N` for master + N worker processes), sample telemetry, run the GPU
microbenchmarks when a CUDA device is present, write the results folder and the report,
print a summary and the report's path.

Exit codes: `zerohop.core.exit_codes`.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

import click

from zerohop.cli.benchmark_workload import benchmark_workloads
from zerohop.cli.run_options import run_options
from zerohop.core.exit_codes import EXIT_BAD_INPUT, RunError
from zerohop.loadgen.run_settings import RunSettings
from zerohop.runner.compare_layer import layer_setup_from_flags, run_compare_layer
from zerohop.runner.plan import RunPlan, classes_for, parse_duration, users_for
from zerohop.runner.run_once import run_once


@click.command("run")
@run_options
def run_command(**kw: Any) -> None:
    """Run the workloads against a target, sample telemetry, write results and report."""
    settings = RunSettings(**kw)
    try:
        plan = plan_from_settings(settings)
        setup = layer_setup_from_flags(kw)
        certificate = _preflight(plan, settings) if settings.selfcheck else None
        if settings.compare_layer:
            code = run_compare_layer(plan, setup)
        else:
            code = run_once(plan, client_certificate=certificate).exit_code
    except RunError as exc:
        click.echo(f"zerohop: error: {exc}", err=True)
        sys.exit(exc.code)
    sys.exit(code)


def plan_from_flags(kw: dict[str, Any]) -> RunPlan:
    """`plan_from_settings` for click's values by setting name (those left out keep
    their defaults)."""
    return plan_from_settings(RunSettings(**kw))


# the plan's fields that are a setting as given; the rest `plan_from_settings` works out
_AS_GIVEN = ({f.name for f in dataclasses.fields(RunPlan)}
             & {f.name for f in dataclasses.fields(RunSettings)}) - {
    "workloads", "classes", "users", "slo", "sim_args", "settings"}


def plan_from_settings(settings: RunSettings) -> RunPlan:
    """The run's plan: the settings checked (a bad one is a `RunError`, exit 2), the
    workload files read, and the load, time and SLOs worked out."""
    from zerohop.shipped import ShippedFilesError, loadtests_dir, workloads_dir
    from zerohop.workloads.inputs import load_workloads

    try:  # an incomplete install says so in one line, before anything starts
        loadtests_dir(), workloads_dir()
    except ShippedFilesError as exc:
        raise RunError(str(exc), EXIT_BAD_INPUT) from None
    try:
        workloads = list(settings.workloads) + benchmark_workloads(
            dataclasses.asdict(settings))
        specs = load_workloads([str(p) for p in workloads])
        _check_specs(specs, settings.api)
        settings.check()
    except ValueError as exc:  # WorkloadError is a ValueError
        raise RunError(str(exc), EXIT_BAD_INPUT) from None
    classes = list(settings.classes) or classes_for(specs)
    # no --users: the files set the load (a layer comparison prices one user's hop)
    from_files = settings.users is None and not settings.compare_layer
    return RunPlan(
        **{name: getattr(settings, name) for name in _AS_GIVEN},
        workloads=workloads, classes=classes,
        users=settings.users or (users_for(specs, classes) if from_files else 1),
        users_from_files=from_files, duration_s=settings.duration_s,
        slo=settings.slo_targets, sim_args=settings.sim_argv, report=not settings.no_report,
        probe_idle_s=settings.probe_idle_s, settings=settings,
    )


def _check_specs(specs: list[Any], api: str) -> None:
    """Each workload's inputs, and whether `api` can send what it asks."""
    from zerohop.workloads.inputs import check_inputs
    from zerohop.workloads.schema.agent_spec import tools_refusal
    from zerohop.workloads.schema.image_spec import image_refusal
    from zerohop.workloads.schema.pooling_specs import pooling_refusal
    from zerohop.workloads.schema.workload_base import structured_refusal

    for spec in specs:
        check_inputs(spec)
        refusal = (tools_refusal(spec, api) or structured_refusal(spec, api)
                   or image_refusal(spec, api) or pooling_refusal(spec, api))
        if refusal is not None:
            raise ValueError(refusal)


def _preflight(plan: RunPlan, settings: RunSettings) -> dict[str, Any]:
    """The self-check before the run, at the run's own load; a FAIL is reported and
    recorded, and the run goes on."""
    from zerohop.core.layout import SELFCHECK_FILE
    from zerohop.runner.selfcheck import MIN_DURATION_S, run_selfcheck, selfcheck_plan
    from zerohop.runner.selfcheck_console import certificate_lines

    if settings.compare_layer:
        raise RunError("--selfcheck does not combine with --compare-layer; run `zerohop "
                       "selfcheck` first", EXIT_BAD_INPUT)
    duration = parse_duration(settings.selfcheck_duration, "--selfcheck-duration")
    if duration < MIN_DURATION_S:
        raise RunError(f"--selfcheck-duration: a self-check needs at least {MIN_DURATION_S:g}s",
                       EXIT_BAD_INPUT)
    check = run_selfcheck(selfcheck_plan(plan, duration_s=duration, name=f"{plan.name}-selfcheck"))
    for line in certificate_lines(check.certificate, str(check.run_dir / SELFCHECK_FILE)):
        click.echo(line)
    if not check.passed:
        click.echo("zerohop: warning: the client certificate FAILED; the run goes on and its "
                   "report says so", err=True)
    return check.certificate
