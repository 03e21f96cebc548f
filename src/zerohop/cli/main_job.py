"""`zerohop run`: the one command a new user runs first.

Start the embedded target unless a host is given, run the workloads through real Locust
(headless; `--workers N` for master + N worker processes), sample telemetry, run the GPU
microbenchmarks when a CUDA device is present, write the results folder and the report,
print a summary and the report's path.

Exit codes: `zerohop.core.exit_codes`.
"""

from __future__ import annotations

import re
import shlex
import sys
from typing import Any

import click

from zerohop.cli.benchmark_workload import benchmark_workloads
from zerohop.cli.run_options import run_options
from zerohop.core.exit_codes import EXIT_BAD_INPUT, RunError
from zerohop.core.percentile_choice import DEFAULT_PERCENTILES_TEXT, parse_percentiles
from zerohop.loadgen.run_settings import DEFAULT_DURATION, REQUESTS_TIME_CAP
from zerohop.runner.compare_layer import layer_setup_from_flags, run_compare_layer
from zerohop.runner.plan import RunPlan, classes_for, parse_duration, users_for
from zerohop.runner.run_once import run_once


@click.command("run")
@run_options
def run_command(**kw: Any) -> None:
    """Run the workloads against a target, sample telemetry, write results and report."""
    try:
        plan = plan_from_flags(kw)
        setup = layer_setup_from_flags(kw)
        certificate = _preflight(plan, kw) if kw["selfcheck"] else None
        if kw["compare_layer"]:
            code = run_compare_layer(plan, setup)
        else:
            code = run_once(plan, client_certificate=certificate).exit_code
    except RunError as exc:
        click.echo(f"zerohop: error: {exc}", err=True)
        sys.exit(exc.code)
    sys.exit(code)


def plan_from_flags(kw: dict[str, Any]) -> RunPlan:
    from zerohop.loadgen.options import parse_slo
    from zerohop.shipped import ShippedFilesError, loadtests_dir, workloads_dir
    from zerohop.workloads.agent_spec import tools_refusal
    from zerohop.workloads.image_spec import image_refusal
    from zerohop.workloads.inputs import check_inputs, load_workloads
    from zerohop.workloads.local_tokenizer import load_local_tokenizer
    from zerohop.workloads.pooling_specs import pooling_refusal
    from zerohop.workloads.workload_base import structured_refusal

    try:  # an incomplete install says so in one line, before anything starts
        loadtests_dir(), workloads_dir()
    except ShippedFilesError as exc:
        raise RunError(str(exc), EXIT_BAD_INPUT) from None
    try:
        duration = parse_duration(kw["duration"] or (
            REQUESTS_TIME_CAP if kw.get("requests") is not None else DEFAULT_DURATION))
        slo = parse_slo(kw["slo"])
        workloads = list(kw["workloads"]) + benchmark_workloads(kw)
        specs = load_workloads([str(p) for p in workloads])
        for spec in specs:
            check_inputs(spec)
            refusal = (tools_refusal(spec, kw["api"]) or structured_refusal(spec, kw["api"])
                       or image_refusal(spec, kw["api"])
                       or pooling_refusal(spec, kw["api"]))
            if refusal is not None:
                raise ValueError(refusal)
        if kw["users"] is not None and kw["users"] <= 0:
            raise ValueError("--users must be > 0")
        if kw["rate"] is not None and kw["rate"] <= 0:
            raise ValueError("--rate must be > 0")
        if kw["users"] is not None and kw["rate"] is not None:
            raise ValueError("--users and --rate are exclusive (closed or open loop)")
        if kw["workers"] < 0:
            raise ValueError("--workers must be >= 0")
        _check_limits(kw)
        if duration <= 0:
            raise ValueError("--duration must be > 0")
        if kw["host"] and not re.match(r"^https?://[^/\s]+", kw["host"]):
            raise ValueError(f"--host: {kw['host']!r} is not an http:// URL")
        _check_telemetry(kw["telemetry"])
        parse_percentiles(kw.get("percentiles") or DEFAULT_PERCENTILES_TEXT)
        probe_idle_s = _check_probe(kw)
        _check_answer_probe(kw)
        if kw["tokenizer"] is not None:
            load_local_tokenizer(kw["tokenizer"])
    except ValueError as exc:  # WorkloadError is a ValueError
        raise RunError(str(exc), EXIT_BAD_INPUT) from None
    classes = list(kw["classes"]) or classes_for(specs)
    # no --users: the files set the load (a layer comparison prices one user's hop)
    from_files = kw["users"] is None and not kw["compare_layer"]
    return RunPlan(
        host=kw["host"], api=kw["api"], workloads=workloads, classes=classes,
        users=kw["users"] or (users_for(specs, classes) if from_files else 1),
        users_from_files=from_files, rate=kw["rate"],
        duration_s=duration, telemetry=kw["telemetry"],
        slo=slo, name=kw["name"], workers=kw["workers"], results_dir=kw["results_dir"],
        seed=kw["seed"], sim_args=shlex.split(kw["sim_args"]), model=kw["model"],
        report=not kw["no_report"], microbench=kw["microbench"], tokenizer=kw["tokenizer"],
        requests=kw.get("requests"), max_concurrency=kw.get("max_concurrency"),
        probe_rate=kw.get("probe_rate") or 0.0,
        probe_prompt_tokens=kw.get("probe_prompt_tokens") or 16,
        probe_output_tokens=kw.get("probe_output_tokens") or 4, probe_idle_s=probe_idle_s,
        answer_probe=bool(kw.get("answer_probe")),
        percentiles=kw.get("percentiles") or DEFAULT_PERCENTILES_TEXT,
        stop_when_saturated=bool(kw.get("stop_when_saturated")),
    )


def _check_probe(kw: dict[str, Any]) -> float:
    """The probe's flags (`loadgen/probe.py`); its idle phase in seconds."""
    if (kw.get("probe_rate") or 0.0) < 0:
        raise ValueError("--probe-rate must be >= 0")
    for name in ("probe_prompt_tokens", "probe_output_tokens"):
        if kw.get(name) is not None and kw[name] < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1")
    try:
        return parse_duration(kw.get("probe_idle") or "0")
    except ValueError as exc:
        raise ValueError(str(exc).replace("--duration", "--probe-idle")) from None


def _check_answer_probe(kw: dict[str, Any]) -> None:
    """The answer probe asks for logprobs: only the APIs whose answers carry them."""
    from zerohop.client.answer_tokens import answer_api_refusal

    refusal = answer_api_refusal(kw["api"]) if kw.get("answer_probe") else None
    if refusal is not None:
        raise ValueError(refusal)


def _check_limits(kw: dict[str, Any]) -> None:
    """--requests and --max-concurrency: positive, and a cap only where arrivals are on
    the clock (with --users the users are the concurrency)."""
    requests = kw.get("requests")
    if requests is not None and requests <= 0:
        raise ValueError("--requests must be > 0")
    cap = kw.get("max_concurrency")
    if cap is None:
        return
    if cap <= 0:
        raise ValueError("--max-concurrency must be > 0")
    if kw["users"] is not None:
        raise ValueError("--max-concurrency caps open-loop arrivals; with --users the users "
                         "are the concurrency")
    if cap < kw["workers"]:
        raise ValueError("--max-concurrency must be >= --workers (each worker needs a slot)")


def _preflight(plan: RunPlan, kw: dict[str, Any]) -> dict[str, Any]:
    """The self-check before the run, at the run's own load; a FAIL is reported and
    recorded, and the run goes on."""
    from zerohop.core.layout import SELFCHECK_FILE
    from zerohop.runner.selfcheck import MIN_DURATION_S, run_selfcheck, selfcheck_plan
    from zerohop.runner.selfcheck_console import certificate_lines

    if kw["compare_layer"]:
        raise RunError("--selfcheck does not combine with --compare-layer; run `zerohop "
                       "selfcheck` first", EXIT_BAD_INPUT)
    try:
        duration = parse_duration(kw["selfcheck_duration"])
    except ValueError as exc:
        raise RunError(str(exc).replace("--duration", "--selfcheck-duration"),
                       EXIT_BAD_INPUT) from None
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


def _check_telemetry(spec: str) -> None:
    from zerohop.telemetry.spec import parse_telemetry_spec

    parts = [p for p in spec.split(",") if p.strip() and p.strip() != "prom"]
    parse_telemetry_spec(",".join(parts))
