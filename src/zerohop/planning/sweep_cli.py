"""`zerohop sweep`'s command line: the flags, checked into a `SweepPlan` (one line and
exit 2 when one is wrong), and the console lines after the sweep. The sweep itself is
`planning.sweep`."""

from __future__ import annotations

import sys
from typing import Any

import click

from zerohop.core.exit_codes import EXIT_BAD_INPUT, RunError
from zerohop.loadgen.run_settings import RunSettings
from zerohop.planning.layer_process import parse_layer_pids
from zerohop.planning.sweep import INDEX_FILE, AutoSearch, Mode, SweepPlan, run_sweep
from zerohop.runner.compare_layer import LayerSetup, layer_setup_from_flags
from zerohop.runner.plan import RunPlan, classes_for
from zerohop.runner.setting_options import setting_options

# `zerohop run`'s settings a sweep takes, by their names there (each point is such a run)
_SHARED = ("host", "api", "workloads", "classes", "duration", "telemetry", "name",
           "results_dir", "model", "seed", "sim_args", "compare_layer", "layer_urls", "control",
           "stop_when_saturated", "answer_probe")


@click.command("sweep")
@setting_options(_SHARED, defaults={"duration": "20s", "name": "sweep"}, helps={
    "workloads": "Workload YAML file (repeatable).",
    "classes": "Workload classes to run (repeatable; default: those of --workload).",
    "duration": "Per point: 20s, 1m.",
    "sim_args": "Embedded target options, e.g. '--time-scale 4'."})
@click.option("--rates", default=None, help="Explicit open-loop rates, req/s: 1,2,4.")
@click.option("--users", "users_list", default=None, help="Explicit concurrencies: 1,2,4,8.")
@click.option("--auto", "auto", type=click.Choice(["rate", "users"]), default=None,
              help="Find saturation automatically over rates or users.")
@click.option("--start", type=float, default=1.0, show_default=True, help="Auto: first load.")
@click.option("--factor", type=float, default=2.0, show_default=True,
              help="Auto: coarse step multiplier.")
@click.option("--max-load", type=float, default=256.0, show_default=True,
              help="Auto: never offer more than this.")
@click.option("--dense", type=int, default=4, show_default=True,
              help="Auto: points between the last healthy and first saturated load.")
@click.option("--max-points", type=int, default=12, show_default=True)
@click.option("--report/--no-report", default=False, show_default=True,
              help="Build each point's report.html.")
@click.option("--layer-pid", "layer_pids", multiple=True, metavar="NAME=PID",
              help="With --compare-layer: the process behind the --layer-url arm NAME; its "
                   "CPU and RSS are sampled over each point's load window (repeatable).")
def sweep_command(**kw: Any) -> None:
    """Run a series of loads against one target; one results folder per point."""
    try:
        plan = plan_from_flags(kw)
        result = run_sweep(plan)
    except RunError as exc:
        click.echo(f"zerohop: error: {exc}", err=True)
        sys.exit(exc.code)
    sat = result.saturation
    if sat["found"]:
        click.echo(f"saturation: between {sat['last_unsaturated_load']} and "
                   f"{sat['first_saturated_load']} ({sat['reason']})")
    else:
        click.echo("saturation: not reached in the swept range")
    for arm, knees in ((result.layer_knee or {}).get("layers") or {}).items():
        click.echo(f"layer {arm}: " + "; ".join(k["text"] for k in knees.values()))
    click.echo(f"sweep index: {result.sweep_dir / INDEX_FILE}")


def plan_from_flags(kw: dict[str, Any]) -> SweepPlan:
    """Validate the flags into a plan; RunError (exit 2) names the bad flag."""
    from zerohop.workloads.inputs import load_workloads

    try:
        chosen = [k for k in ("rates", "users_list", "auto") if kw.get(k)]
        if len(chosen) != 1:
            raise ValueError("give exactly one of --rates, --users or --auto")
        settings = RunSettings(**{name: kw[name] for name in _SHARED if name in kw})
        settings.check()
        if kw["max_points"] <= 0:
            raise ValueError("--max-points must be > 0")
        specs = load_workloads([str(p) for p in kw["workloads"]])
        classes = list(kw["classes"]) or classes_for(specs)
        loads: list[float] | None = None
        search: AutoSearch | None = None
        if kw.get("rates"):
            mode: Mode = "rate"
            loads = parse_loads(kw["rates"], "--rates", integer=False)
        elif kw.get("users_list"):
            mode = "users"
            loads = parse_loads(kw["users_list"], "--users", integer=True)
        else:
            mode = kw["auto"]
            for flag, ok, need in (("--start", kw["start"] > 0, "> 0"),
                                   ("--factor", kw["factor"] > 1, "> 1"),
                                   ("--max-load", kw["max_load"] >= kw["start"], "≥ --start"),
                                   ("--dense", kw["dense"] >= 0, "≥ 0")):
                if not ok:
                    raise ValueError(f"{flag} must be {need}")
            search = AutoSearch(mode, kw["start"], kw["factor"], kw["max_load"], kw["dense"])
    except ValueError as exc:
        raise RunError(str(exc), EXIT_BAD_INPUT) from None
    layers, layer_pids = _layer_flags(kw)
    base = RunPlan(
        host=settings.host, api=settings.api, workloads=list(settings.workloads),
        classes=classes, users=8, rate=None, duration_s=settings.duration_s,
        telemetry=settings.telemetry, slo={}, name=settings.name, workers=0,
        results_dir=settings.results_dir, seed=settings.seed, sim_args=settings.sim_argv,
        model=settings.model, report=kw["report"], microbench="off",
        stop_when_saturated=settings.stop_when_saturated,
        answer_probe=settings.answer_probe,  # each point asks its prompts anew
    )
    return SweepPlan(base=base, mode=mode, loads=loads, search=search,
                     max_points=kw["max_points"], layers=layers, layer_pids=layer_pids)


def _layer_flags(kw: dict[str, Any]) -> tuple[LayerSetup | None, dict[str, int]]:
    """--compare-layer, --layer-url, --control (checked as `zerohop run` checks them)
    and --layer-pid. A layer sweep prices gateways the user runs: --layer-url is needed."""
    kw = {"compare_layer": False, "layer_urls": (), "control": False, "layer_pids": (), **kw}
    setup = layer_setup_from_flags(kw)
    try:
        if kw["compare_layer"] and not setup.layer_urls:
            raise ValueError("--compare-layer in a sweep prices a layer you run: give "
                             "--layer-url NAME=URL (and --host, the engine behind it)")
        if kw["layer_urls"] and not kw["compare_layer"]:
            raise ValueError("--layer-url is --compare-layer's: add --compare-layer")
        if kw["layer_pids"] and not kw["compare_layer"]:
            raise ValueError("--layer-pid is --compare-layer's: add --compare-layer")
        pids = parse_layer_pids(kw["layer_pids"], setup.layer_urls)
    except ValueError as exc:
        raise RunError(str(exc), EXIT_BAD_INPUT) from None
    return (setup if kw["compare_layer"] else None), pids


# workload kind → the Locust user class that runs it (loadtests/*.py)
def parse_loads(text: str, flag: str, *, integer: bool) -> list[float]:
    """`1,2,4` → [1.0, 2.0, 4.0]; ValueError names the flag and the bad part."""
    loads = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            value = float(part)
        except ValueError:
            raise ValueError(f"{flag}: {part!r} is not a number") from None
        if not value > 0 or (integer and value != int(value)):
            kind = "a positive integer" if integer else "> 0"
            raise ValueError(f"{flag}: {part!r} must be {kind}")
        loads.append(value)
    if not loads:
        raise ValueError(f"{flag}: no load given")
    return sorted(set(loads))
