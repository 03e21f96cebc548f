"""`zerohop simulate`: a workload file on the fleet's virtual clock (`zerohop.fleet`),
written as a results folder that `report`, `compare` and `capacity` read like a live
run's. Bad input is one line and exit 2."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from zerohop.core.exit_codes import EXIT_BAD_INPUT
from zerohop.runner.setting_options import setting_options

if TYPE_CHECKING:
    from zerohop.analysis.run_analysis import RunAnalysis


@click.command(name="simulate", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--workload", "workload", type=click.Path(path_type=Path), required=True,
              help="Workload file (open-loop short_query_flood / long_context workloads).")
@setting_options(("duration", "seed", "results_dir", "name"), defaults={
    "duration": "60s", "name": "simulate"}, helps={
    "duration": "Simulated time the load is offered: 30s, 2m, 1h.",
    "seed": "Seed of the arrivals and sizes (`zerohop run`'s default: the same arrivals).",
    "name": "Run name."})
@click.option("--replicas", type=int, default=1, show_default=True,
              help="Engine replicas of the served model.")
@click.option("--simulated-replicas", type=int, default=None,
              help="Run only K of the replicas, each on its round-robin share of the "
              "arrivals, standing for all (no layer): an hour at high rates in minutes.")
@click.option("--layer", "layer", default=None,
              help="A layer in front of the replicas: `on` or key=value,... of cpu_ms, cores, "
              "workers, connections, memory_mib, base_mib, request_kib (default: none).")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="The served model's config, as `zerohop sim --config` (default: the "
              "embedded target's).")
@click.option("--time-scale", type=float, default=None,
              help="Multiply every modelled duration (as `zerohop sim --time-scale`).")
@click.option("--rate-scale", type=float, default=1.0, show_default=True,
              help="Multiply every workload's arrival rate.")
@click.option("--record-sample", type=float, default=1.0, show_default=True,
              help="Share of requests written as records (seeded); counts in the manifest "
              "stay exact.")
@click.option("--drain", default="60s", show_default=True,
              help="How long requests may run on after the last arrival.")
@click.option("--report/--no-report", default=False, show_default=True,
              help="Write report.html when done.")
@click.option("--sweep", "sweep", default=None,
              help="Total arrival rates, e.g. 10k,25k,50k: one simulation each, in a "
              "`zerohop sweep` folder that `zerohop capacity` reads.")
def simulate_command(**kw: Any) -> None:
    """Run a workload on N modelled replicas on a virtual clock: no sockets, no sleeping."""
    from zerohop.fleet.run import run_simulation
    from zerohop.runner.console_summary import print_summary, slo_verdict

    try:
        plan = _plan(kw)
    except ValueError as exc:
        click.echo(f"zerohop: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    if kw["sweep"] is not None:
        _sweep(plan, kw["sweep"])
        return
    result = run_simulation(plan)
    analysis = _analyse_and_summarise(result.run_dir)
    summary = result.summary
    counts = ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items())
    click.echo(f"zerohop: simulated {summary['simulated_s']:g} s of {summary['arrivals']} "
               f"requests in {summary['wall_s']:.1f} s wall ({counts})")
    if summary["layer_failed_at_s"] is not None:
        click.echo(f"zerohop: the layer failed at t={summary['layer_failed_at_s']:.1f} s")
    print_summary(analysis, slo_verdict(analysis))  # saturation among its warnings
    click.echo(f"results: {result.run_dir}")
    if kw["report"]:
        from zerohop.core.layout import REPORT_FILE
        from zerohop.report.build import write_report

        click.echo(f"report: {write_report(analysis, result.run_dir / REPORT_FILE)}")


def _analyse_and_summarise(run_dir: Path) -> RunAnalysis:
    """The run loaded and analysed once, summary.json written from that analysis, which
    the console's table and SLO lines (as `zerohop run` prints them) and the report
    share."""
    from zerohop.analysis.run_analysis import analyse_run
    from zerohop.analysis.summary_document import parts_of_analysis
    from zerohop.storage.run_reader import load_run
    from zerohop.storage.summary_file import write_summary

    run = load_run(run_dir)
    analysis = analyse_run(run)
    write_summary(run_dir, run, parts_of_analysis(analysis, run))
    return analysis


def _sweep(plan: Any, rates_text: str) -> None:
    from zerohop.cli.simulate_sweep import simulated_sweep

    result = simulated_sweep(plan, _rates(rates_text), f"virtual://{plan.replicas}x")
    click.echo(f"sweep: {result.sweep_dir}")


def _rates(text: str) -> list[float]:
    from zerohop.cli.simulate_sweep import parse_rates

    return parse_rates(text)


def _plan(kw: dict[str, Any]) -> Any:
    from zerohop.fleet.layer_model import parse_layer_spec
    from zerohop.fleet.run import SimulationPlan
    from zerohop.runner.plan import parse_duration
    from zerohop.sim.config import load_config
    from zerohop.sim.embedded import EMBEDDED_TARGET_CONFIG
    from zerohop.workloads.errors import WorkloadError

    duration = parse_duration(kw["duration"])
    try:
        drain = parse_duration(kw["drain"])
    except ValueError as exc:
        raise ValueError(str(exc).replace("--duration", "--drain")) from None
    if duration <= 0:
        raise ValueError("--duration must be > 0")
    if kw["replicas"] <= 0:
        raise ValueError("--replicas must be > 0")
    k = kw["simulated_replicas"]
    if k is not None and not 0 < k <= kw["replicas"]:
        raise ValueError("--simulated-replicas must be between 1 and --replicas")
    if k is not None and kw["layer"] not in (None, "off"):
        raise ValueError("--simulated-replicas needs no --layer: a layer couples the replicas")
    if not 0 < kw["record_sample"] <= 1:
        raise ValueError("--record-sample must be in (0, 1]")
    if kw["rate_scale"] <= 0:
        raise ValueError("--rate-scale must be > 0")
    if kw["sweep"] is not None:
        _rates(kw["sweep"])
        if kw["record_sample"] < 1 or kw["rate_scale"] != 1 or k is not None:
            raise ValueError("--sweep reads every point's rates from all its records and "
                             "sets the rates itself: leave out --record-sample, "
                             "--simulated-replicas and --rate-scale")
    if not kw["workload"].is_file():
        raise ValueError(f"--workload: no such file {kw['workload']}")
    config_path = kw["config_path"] or Path(str(EMBEDDED_TARGET_CONFIG))
    config = load_config(config_path, {"time_scale": kw["time_scale"]})
    layer = parse_layer_spec(kw["layer"]) if kw["layer"] not in (None, "off") else None
    plan = SimulationPlan(
        workload=kw["workload"], duration_s=duration, config=config,
        replicas=kw["replicas"], simulated_replicas=k, layer=layer,
        record_sample=kw["record_sample"],
        rate_scale=kw["rate_scale"], seed=kw["seed"], drain_s=drain,
        results_dir=kw["results_dir"], name=kw["name"], argv=sys.argv[1:],
    )
    try:  # read the workloads now: a bad file is one line before anything is written
        from zerohop.fleet.arrivals import offered_load

        offered_load(plan.workload, min(duration, 0.001), seed=plan.seed)
    except WorkloadError as exc:
        raise ValueError(str(exc)) from None
    except ValueError as exc:  # a workload the virtual clock cannot run: name the file
        raise ValueError(f"{plan.workload}: {exc}") from None
    return plan
