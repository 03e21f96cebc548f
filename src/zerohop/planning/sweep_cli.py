"""`zerohop sweep`'s command line: the flags, checked into a `SweepPlan` (one line and
exit 2 when one is wrong), and the console lines after the sweep. The sweep itself is
`planning.sweep`."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any

import click

from zerohop.client.answer_tokens import answer_api_refusal
from zerohop.core.apis import DEFAULT_API, api_names
from zerohop.core.exit_codes import EXIT_BAD_INPUT, RunError
from zerohop.planning.layer_process import parse_layer_pids
from zerohop.planning.sweep import INDEX_FILE, AutoSearch, Mode, SweepPlan, run_sweep
from zerohop.runner.compare_layer import LayerSetup, layer_setup_from_flags
from zerohop.runner.plan import CLASS_NAMES, RunPlan, classes_for, parse_duration
from zerohop.runner.setting_options import setting_options


@click.command("sweep")
@click.option("--host", default=None, help="Target base URL (default: the embedded target).")
@click.option("--api", type=click.Choice(api_names()), default=DEFAULT_API, show_default=True)
@click.option("--workload", "workloads", multiple=True, type=click.Path(path_type=Path),
              help="Workload YAML file (repeatable).")
@click.option("--only", "classes", multiple=True, type=click.Choice(CLASS_NAMES),
              help="Workload classes to run (repeatable; default: those of --workload).")
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
@click.option("--duration", default="20s", show_default=True, help="Per point: 20s, 1m.")
@click.option("--telemetry", default="prom,loadgen", show_default=True)
@click.option("--name", default="sweep", show_default=True)
@click.option("--results-dir", type=click.Path(path_type=Path), default=Path("results"),
              show_default=True)
@click.option("--model", default="")
@click.option("--seed", type=int, default=1234, show_default=True)
@click.option("--sim-args", default="", help="Embedded target options, e.g. '--time-scale 4'.")
@click.option("--report/--no-report", default=False, show_default=True,
              help="Build each point's report.html.")
@setting_options(("compare_layer", "layer_urls", "control", "stop_when_saturated",
                  "answer_probe"))
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
        duration = parse_duration(kw["duration"])
        if duration <= 0:
            raise ValueError("--duration must be > 0")
        if kw["max_points"] <= 0:
            raise ValueError("--max-points must be > 0")
        if kw["host"] and not re.match(r"^https?://[^/\s]+", kw["host"]):
            raise ValueError(f"--host: {kw['host']!r} is not an http:// URL")
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
        refusal = answer_api_refusal(kw["api"]) if kw.get("answer_probe") else None
        if refusal is not None:
            raise ValueError(refusal)
    except ValueError as exc:
        raise RunError(str(exc), EXIT_BAD_INPUT) from None
    layers, layer_pids = _layer_flags(kw)
    base = RunPlan(
        host=kw["host"], api=kw["api"], workloads=list(kw["workloads"]),
        classes=classes, users=8, rate=None, duration_s=duration,
        telemetry=kw["telemetry"], slo={}, name=kw["name"], workers=0,
        results_dir=kw["results_dir"], seed=kw["seed"], sim_args=shlex.split(kw["sim_args"]),
        model=kw["model"], report=kw["report"], microbench="off",
        stop_when_saturated=bool(kw.get("stop_when_saturated")),
        answer_probe=bool(kw.get("answer_probe")),  # each point asks its prompts anew
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
