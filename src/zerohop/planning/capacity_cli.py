"""`zerohop capacity SWEEP_DIR`: the command around `planning.capacity` (the plan) and
`planning.capacity_page` (its page); its flags, the traffic-mix file, the console lines."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import click
import yaml
from pydantic import ValidationError

from zerohop.core.exit_codes import EXIT_BAD_INPUT, RunError
from zerohop.planning.capacity import (
    CapacityPlan,
    Forecast,
    TrafficMix,
    measure_sweep,
    plan_capacity,
)
from zerohop.planning.capacity_page import operating_point_text, write_capacity_report

CAPACITY_JSON = "capacity.json"
CAPACITY_HTML = "capacity.html"


@click.command("capacity")
@click.argument("sweep_dir", type=click.Path(path_type=Path))
@click.option("--slo", required=True, help="e.g. ttft_p99_ms=500,tpot_p99_ms=50")
@click.option("--traffic", type=float, default=None, help="Forecast peak, req/s.")
@click.option("--mix", type=click.Path(path_type=Path), default=None,
              help="YAML: workloads: {name: share} of the forecast traffic.")
@click.option("--headroom", type=float, default=0.2, show_default=True,
              help="Spare capacity on top of the peak (0.2 = 20 %).")
@click.option("--gpu-cost-per-hour", type=float, default=None, help="Price of one GPU-hour.")
@click.option("--gpus-per-replica", type=int, default=1, show_default=True)
@click.option("--layer", "layers", multiple=True, metavar="NAME=REQ_PER_S",
              help="A layer in front of the replicas and the rate one instance of it "
                   "carries before its added latency grows (its knee, docs/layers.md); "
                   "repeatable. A layer sweep's measured knee is read from SWEEP_DIR; "
                   "--layer for the same name overrides it.")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Page path (default: SWEEP_DIR/capacity.html).")
def capacity_command(**kw: Any) -> None:
    """Capacity plan from a sweep: SLO-limited goodput, knee, replicas, cost."""
    try:
        plan = capacity_from_flags(kw)
    except RunError as exc:
        click.echo(f"zerohop: error: {exc}", err=True)
        sys.exit(exc.code)
    sweep_dir: Path = kw["sweep_dir"]
    (sweep_dir / CAPACITY_JSON).write_text(json.dumps(plan.to_json(), indent=2) + "\n")
    page = write_capacity_report(plan, kw["out"] or sweep_dir / CAPACITY_HTML)
    for line in summary_lines(plan):
        click.echo(line)
    click.echo(f"capacity page: {page}")


def capacity_from_flags(kw: dict[str, Any]) -> CapacityPlan:
    from zerohop.loadgen.options import parse_slo

    try:
        slo = parse_slo(kw["slo"])
        if not slo:
            raise ValueError("--slo: at least one objective is required")
        if kw["traffic"] is not None and not kw["traffic"] > 0:
            raise ValueError("--traffic must be > 0")
        if not kw["headroom"] >= 0:
            raise ValueError("--headroom must be ≥ 0")
        if kw["gpu_cost_per_hour"] is not None and not kw["gpu_cost_per_hour"] > 0:
            raise ValueError("--gpu-cost-per-hour must be > 0")
        if kw["gpus_per_replica"] <= 0:
            raise ValueError("--gpus-per-replica must be > 0")
        mix = load_mix(kw["mix"]) if kw["mix"] is not None else None
        layer_knees = parse_layer_knees(kw.get("layers") or ())
        mode, points, measured = measure_sweep(kw["sweep_dir"], slo)
        if not points:
            raise ValueError(f"{kw['sweep_dir']}: the sweep has no points")
    except ValueError as exc:
        raise RunError(str(exc), EXIT_BAD_INPUT) from None
    # a layer sweep's measured knees, each overridden by a --layer of the same name
    measured = {name: knee for name, knee in measured.items() if name not in layer_knees}
    layer_knees = {**{name: knee.knee_rps for name, knee in measured.items()}, **layer_knees}
    forecast = Forecast(kw["traffic"], kw["headroom"], kw["gpu_cost_per_hour"],
                        kw["gpus_per_replica"], mix, layer_knees, measured)
    return plan_capacity(points, slo, forecast, mode)


def parse_layer_knees(specs: tuple[str, ...]) -> dict[str, float]:
    """`--layer NAME=REQ_PER_S`, repeatable → {name: knee}."""
    knees: dict[str, float] = {}
    for spec in specs:
        name, _, value = spec.partition("=")
        try:
            knee = float(value)
        except ValueError:
            knee = math.nan
        if not name.strip() or not math.isfinite(knee) or knee <= 0:
            raise ValueError(f"--layer {spec!r}: expected NAME=REQ_PER_S with a rate > 0")
        if name.strip() in knees:
            raise ValueError(f"--layer {name.strip()!r} is given twice")
        knees[name.strip()] = knee
    return knees


def load_mix(path: Path) -> TrafficMix:
    try:
        data = yaml.safe_load(Path(path).read_text("utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"--mix: cannot read {path}: {exc}") from None
    try:
        return TrafficMix.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        message = str(err["msg"]).removeprefix("Value error, ")
        raise ValueError(f"--mix {path}: {where}: {message}") from None


def summary_lines(plan: CapacityPlan) -> list[str]:
    unit = "req/s" if plan.mode == "rate" else "users"
    op = plan.operating_point
    lines = []
    if op is None:
        lines.append("operating point: none meets the SLOs")
    else:
        lines.append(f"operating point: {operating_point_text(plan)} · goodput "
                     f"{op.goodput_rps:.3g} req/s · {op.output_tokens_per_s:.4g} output tok/s "
                     "per replica")
    if plan.slo_limited_load_estimate is not None:
        lines.append(f"SLO-limited load ≈ {plan.slo_limited_load_estimate:.3g} {unit} "
                     f"(interpolated; limited by {plan.slo_limited_by})")
    if plan.knee is not None:
        lines.append(f"knee of the p50 TTFT curve: {plan.knee.load:g} {unit}")
    if plan.replicas is not None:
        lines.append(f"replicas for {plan.forecast.peak_qps:g} req/s peak with "
                     f"{plan.forecast.headroom:.0%} headroom: {plan.replicas}")
    if plan.cost_per_million_output_tokens is not None:
        lines.append(f"cost per million output tokens: {plan.cost_per_million_output_tokens:.4g}")
    lines += [f"layer {layer.name}: {layer.describe()}" for layer in plan.layers]
    lines += [f"note: {n}" for n in plan.notes]
    return lines

