"""The same workload direct and through one extra hop, and what the hop costs.

Interleaved (the default): one run whose requests are each sent, at random with the
run's seed, to the engine directly or through the layer (or through one layer per
routing policy, in front of several engine replicas), so a server drifting during the
run falls on every arm alike; the records carry their arm and the comparison splits
them (`analysis.arms`). Sequential: a run direct, then a run through the layer, as
before — with each run's first half against its second as the noise floor, said
when it is larger than the cost reported.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from zerohop.core.exit_codes import EXIT_BAD_INPUT, EXIT_UNREACHABLE, RunError, one_line
from zerohop.loadgen.run_settings import COMPARE_LAYER_MODES, setting_fields
from zerohop.runner.plan import RunPlan
from zerohop.runner.run_once import run_once

if TYPE_CHECKING:
    from zerohop.analysis.comparison.compare import Comparison
    from zerohop.analysis.run_data import RunData

MODES = COMPARE_LAYER_MODES
SHOWN_STATS = ("p50", "p90", "p99")


@dataclasses.dataclass(frozen=True)
class LayerSetup:
    """How the comparison's targets are made: `layer_urls` are gateways the user runs
    (with --host; arm name → URL); otherwise the embedded layer runs with `layer_args`,
    in front of `replicas` embedded engines, once per routing policy in `routes`.
    `control` adds the arm `control`: zerohop's own proxy with no work (0 ms, no
    parsing) in front of the direct target, a pass-through of known cost beside the
    layers under test, in the same run."""

    layer_urls: dict[str, str]
    layer_args: list[str]
    mode: str = "interleaved"
    replicas: int = 1
    routes: tuple[str, ...] = ()
    control: bool = False


CONTROL_ARM = "control"
CONTROL_ARGS = ("--no-parse",)  # nothing done per request: the hop alone


def parse_layer_urls(values: tuple[str, ...] | list[str]) -> dict[str, str]:
    """--layer-url values (`URL` or `NAME=URL`, repeated) → {arm: URL}; a bare URL is the
    arm `layer` (once). A ValueError says which value is wrong."""
    from zerohop.client.arms import ARM_NAME

    urls: dict[str, str] = {}
    for value in values:
        name, sep, url = value.partition("=")
        if not sep or name.startswith(("http://", "https://")):
            name, url = "layer", value
        name, url = name.strip(), url.strip().rstrip("/")
        if not ARM_NAME.match(name) or name in ("direct", CONTROL_ARM):
            raise ValueError(f"--layer-url: arm name {name!r} is not usable (letters, digits, "
                             "-, _; not direct or control)")
        if not url.startswith(("http://", "https://")) or len(url.split("://", 1)[1]) == 0:
            raise ValueError(f"--layer-url: {value!r} is not an http:// URL")
        if name in urls:
            raise ValueError(f"--layer-url: arm {name!r} given twice (name each: NAME=URL)")
        urls[name] = url
    return urls


def layer_setup_from_flags(kw: dict[str, Any]) -> LayerSetup:
    """The --compare-layer flags, checked together: one line and exit 2 when they clash.
    `zerohop run` gives them all; `zerohop sweep` only --compare-layer, --layer-url and
    --control (the others take the settings model's defaults)."""
    kw = {**{name: default for name, _flag, default in setting_fields()}, **kw}
    routes, replicas = tuple(kw["routes"] or ()), kw["replicas"]
    mode = kw["compare_layer_mode"]
    problem = None
    if not kw["compare_layer"] and (routes or replicas != 1):
        problem = "--replicas and --route are --compare-layer's: add --compare-layer"
    elif replicas < 1:
        problem = "--replicas must be >= 1"
    elif replicas > 1 and kw["host"]:
        problem = "--replicas starts embedded engines: not with --host"
    elif kw["layer_urls"] and not kw["host"]:
        problem = "--layer-url is a gateway in front of --host: give both"
    elif kw["control"] and not kw["compare_layer"]:
        problem = "--control is --compare-layer's: add --compare-layer"
    elif routes and kw["layer_urls"]:
        problem = "--route configures the embedded layer: not with --layer-url"
    elif mode == "sequential" and len(routes) > 1:
        problem = "--compare-layer-mode sequential compares one layer: give one --route"
    elif len(set(routes)) != len(routes):
        problem = "--route: each policy once"
    if problem:
        raise RunError(problem, EXIT_BAD_INPUT)
    try:
        layer_args = shlex.split(kw["layer_args"])
    except ValueError as exc:
        raise RunError(f"--layer-args: {exc}", EXIT_BAD_INPUT) from None
    try:
        layer_urls = parse_layer_urls(kw["layer_urls"])
    except ValueError as exc:
        raise RunError(str(exc), EXIT_BAD_INPUT) from None
    if mode == "sequential" and (len(layer_urls) > 1 or kw["control"]):
        raise RunError("--compare-layer-mode sequential compares one layer: one --layer-url, "
                       "no --control", EXIT_BAD_INPUT)
    return LayerSetup(layer_urls=layer_urls, layer_args=layer_args, mode=mode,
                      replicas=replicas, routes=routes, control=kw["control"])


def run_compare_layer(plan: RunPlan, setup: LayerSetup) -> int:
    """Run the comparison; print and write (`compare-*.json`, `.html`) the layer's cost."""
    processes: list[Any] = []
    try:
        direct, arms = start_targets(plan, setup, processes)
        kind = "embedded" if plan.host is None else None
        if setup.mode == "sequential":
            layer_url = next(a for name, a in arms.items() if name != CONTROL_ARM)
            direct_run = run_once(dataclasses.replace(plan, host=direct,
                                                      name=plan.name + "-direct"), kind=kind)
            layered = run_once(dataclasses.replace(plan, host=layer_url,
                                                   name=plan.name + "-layer"), kind="layer")
            runs = [direct_run, layered]
        else:
            runs = [run_once(dataclasses.replace(
                plan, host=direct, arm_hosts={"direct": direct, **arms},
                name=plan.name + "-interleaved"), kind=kind)]
    finally:
        for process in reversed(processes):
            process.stop()
    code = max(r.exit_code for r in runs)
    if setup.mode == "sequential":
        _report_sequential(runs[0].run_dir, runs[1].run_dir)
    else:
        _report_interleaved(runs[0].run_dir)
    return code


def start_targets(plan: RunPlan, setup: LayerSetup, processes: list[Any]
                  ) -> tuple[str, dict[str, str]]:
    """(the direct URL, {arm: layer URL}); what it starts is appended to `processes`
    (the caller stops them)."""
    from zerohop.sim.embedded import start_embedded_replicas
    from zerohop.sim.launcher import start_proxy

    try:
        if plan.host is None:
            replicas = start_embedded_replicas(setup.replicas, plan.sim_args)
            processes.extend(replicas)
            upstreams = [r.url for r in replicas]
        else:
            upstreams = [plan.host]
        arms = {}
        if setup.control:
            control = start_proxy(upstreams[0], CONTROL_ARGS)
            processes.append(control)
            arms[CONTROL_ARM] = control.url
        if setup.layer_urls:
            return upstreams[0], {**arms, **setup.layer_urls}
        for route in setup.routes or (None,):
            extra = ["--route", route] if route else []
            proxy = start_proxy(upstreams, [*setup.layer_args, *extra])
            processes.append(proxy)
            arms[route or "layer"] = proxy.url
        return upstreams[0], arms
    except Exception as exc:
        if isinstance(exc, RunError):
            raise
        raise RunError(f"the comparison's targets could not start: {one_line(exc)}",
                       EXIT_UNREACHABLE) from None


def _report_interleaved(run_dir: Path) -> None:
    """One summary of the arms (`arms_summary`) read three ways: printed, written as
    `compare-<run>-arms.json`, and shown as the arms page's "Layers" section."""
    from zerohop.report.build import write_comparison
    from zerohop.storage.run_reader import load_run

    made = arms_summary(load_run(run_dir))
    if made is None:
        click.echo("zerohop: no layer cost: the run's records do not cover both arms", err=True)
        return
    comparisons, summary = made
    stem = run_dir.parent / f"compare-{run_dir.name}-arms"
    stem.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
    write_comparison(comparisons, stem.with_suffix(".html"), layers=summary)
    figures, net = summary["arms"], summary["net_of_control"]
    counts = " + ".join(f"{f['requests']} {arm}" for arm, f in figures.items())
    click.echo(f"layer cost (arm − direct, ms; 95% CI), one interleaved run ({counts}):")
    for arm, cost in summary["costs"].items():
        _echo_cost(arm, cost)
    if net:
        click.echo(f"net of the control (arm − {CONTROL_ARM}, zerohop's 0 ms pass-through; "
                   "ms; 95% CI):")
        for arm, cost in net.items():
            _echo_cost(arm, cost)
    _echo_figures(figures)
    _echo_stream(summary["stream"])
    click.echo(f"comparison: {stem.with_suffix('.html')}")


def arms_summary(run: RunData) -> tuple[list[Comparison], dict[str, Any]] | None:
    """(the arms' comparisons against direct, the summary: each arm's cost, net of the
    control, figures and stream shape), or None when the records lack an arm."""
    from zerohop.analysis.comparison.arms import (
        arm_comparisons,
        arm_figures,
        arm_views,
        budget_dict,
    )
    from zerohop.analysis.latency.stream_shape import stream_shapes

    views = arm_views(run)
    if "direct" not in views or len(views) < 2:
        return None
    comparisons = arm_comparisons(run)
    costs = {arm: budget_dict(c) for arm, c in comparisons.items()}
    net = {}
    if CONTROL_ARM in views and len(views) > 2:
        net = {arm: budget_dict(c)
               for arm, c in arm_comparisons(run, base_arm=CONTROL_ARM).items()}
    first = next((arm for arm in costs if arm != CONTROL_ARM), next(iter(costs)))
    figures = {arm: dataclasses.asdict(arm_figures(view, arm)) for arm, view in views.items()}
    shapes = {s.arm: dataclasses.asdict(s) for s in stream_shapes(views)}
    summary = {"mode": "interleaved", "run": run.run_dir.name, "arm": first, **costs[first],
               "costs": costs, "control": CONTROL_ARM if CONTROL_ARM in views else None,
               "net_of_control": net, "stream": shapes, "arms": figures}
    return list(comparisons.values()), summary


def _report_sequential(direct_dir: Path, layer_dir: Path) -> None:
    from zerohop.analysis.comparison.arms import (
        arm_figures,
        budget_dict,
        noise_floor,
        noise_verdict,
    )
    from zerohop.report.build import compare_dirs, write_comparison
    from zerohop.storage.run_reader import load_run

    stem = layer_dir.parent / f"compare-{direct_dir.name}-vs-layer"
    comparisons = compare_dirs([direct_dir, layer_dir], layer_of=direct_dir)
    write_comparison(comparisons, stem.with_suffix(".html"))
    cost = budget_dict(comparisons[0])
    runs = [load_run(direct_dir), load_run(layer_dir)]
    noise = noise_verdict(cost, [budget_dict(noise_floor(run)) for run in runs])
    figures = {arm: dataclasses.asdict(arm_figures(run, arm))
               for arm, run in zip(("direct", "layer"), runs, strict=True)}
    budget = {"mode": "sequential", "runs": [direct_dir.name, layer_dir.name], **cost,
              **noise, "arms": figures}
    stem.with_suffix(".json").write_text(json.dumps(budget, indent=2) + "\n")
    click.echo("layer cost (through the layer − direct, ms; 95% CI), two runs in turn:")
    _echo_cost("layer", cost)
    drowned = [f"{metric} {stat} (cost {cost['layer_cost_ms'][metric][stat]:+.2f}, "
               f"noise {noise['noise_ms'][metric][stat]:.2f})"
               for metric, stats in noise["noise_exceeds_cost"].items()
               for stat, exceeds in stats.items() if exceeds and stat in SHOWN_STATS]
    if drowned:
        click.echo("zerohop: warning: each run differs from itself (first half vs second) by "
                   "at least the cost reported at " + "; ".join(drowned) + ": there the cost "
                   "is the server's drift as much as the layer's; the interleaved mode "
                   "(the default) prices it in one run", err=True)
    _echo_figures(figures)
    click.echo(f"comparison: {stem.with_suffix('.html')}")


def _echo_cost(arm: str, cost: dict[str, Any]) -> None:
    click.echo(f"  {arm}:")
    for metric, stats in cost["layer_cost_ms"].items():
        cells = []
        for stat in SHOWN_STATS:
            if stat not in stats:
                continue
            if stats[stat] is None or math.isnan(stats[stat]):  # fewer than it needs
                cells.append(f"{stat} -")
                continue
            low, high = cost["ci95_ms"][metric][stat]
            cells.append(f"{stat} {stats[stat]:+.2f} [{low:+.2f}, {high:+.2f}]")
        click.echo(f"    {metric:<8} " + "   ".join(cells))


def _echo_figures(figures: dict[str, dict[str, Any]]) -> None:
    click.echo(f"  {'arm':<16} {'requests':>8} {'ok':>6} {'cache hit':>9} {'good':>7} "
               f"{'goodput/s':>9}  routes")
    for arm, f in figures.items():
        hit = "unknown" if f["cache_hit_pct"] is None else f"{f['cache_hit_pct']:.1f}%"
        good = "-" if math.isnan(f["good_pct"]) else f"{f['good_pct']:.1f}%"
        routes = " ".join(f"{k}:{v}" for k, v in f["routes"].items()) or "-"
        click.echo(f"  {arm:<16} {f['requests']:>8} {f['ok']:>6} {hit:>9} {good:>7} "
                   f"{f['goodput_rps']:>9.2f}  {routes}")
    served = {arm: f["replicas"] for arm, f in figures.items() if f.get("replicas")}
    if served:
        click.echo("  served by (each replica as it named itself, x-zerohop-replica):")
        for arm, replicas in served.items():
            click.echo(f"    {arm:<14} " + "  ".join(f"{k}:{v}" for k, v in replicas.items()))


def _echo_stream(shapes: dict[str, dict[str, Any]]) -> None:
    """Per arm: whether the hop changed the stream against the same run's direct
    requests (analysis/latency/stream_shape.py), and how."""
    from zerohop.report.present_layers import stream_verdict

    if not shapes:
        return
    click.echo("  stream through each arm, against direct:")
    for arm, shape in shapes.items():
        click.echo(f"    {arm:<14} {stream_verdict(shape)}")
