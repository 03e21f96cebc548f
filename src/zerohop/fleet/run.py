"""One simulation from a plan to a results folder: the offered load, N engines of the
served model, the clock, then the records, telemetry and a manifest that says the run
was on a virtual clock (and, with a records sample, which fraction the rows are).

With `simulated_replicas` k < N and no layer, only k replicas run, each on exactly the
arrivals round robin would give it (`arrivals.replica_share`); they stand for the N:
records and counts are theirs (k/N of the fleet's), rates and totals in the manifest
and telemetry are scaled to the fleet. Behind a layer the replicas are coupled through
it, so all N run."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from zerohop.fleet.arrivals import offered_load
from zerohop.fleet.clock import FleetClock
from zerohop.fleet.layer_model import LayerSpec
from zerohop.fleet.outcomes import Outcomes
from zerohop.fleet.records import RecordWriter
from zerohop.fleet.telemetry import FleetTelemetry
from zerohop.sim.config import SimConfig
from zerohop.sim.cost_model.gpu_activity import GpuActivity
from zerohop.sim.engine.engine import Engine
from zerohop.storage import run_folder

CLOCK = "virtual"


@dataclass(frozen=True)
class SimulationPlan:
    workload: Path
    duration_s: float
    config: SimConfig
    replicas: int = 1
    simulated_replicas: int | None = None  # k of `replicas` stand for all (no layer)
    layer: LayerSpec | None = None
    record_sample: float = 1.0
    rate_scale: float = 1.0
    seed: int = 0
    drain_s: float = 60.0
    tick_s: float = 1.0
    results_dir: Path = Path("results")
    name: str = "simulate"
    api: str = "openai-chat"
    argv: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SimulationResult:
    run_dir: Path
    summary: dict[str, Any]


def build_engines(config: SimConfig, replicas: int) -> list[Engine]:
    """`replicas` engines of the config's first model, their GPU gauges on virtual time."""
    served = config.models[0]
    engines = []
    for index in range(replicas):
        engine = Engine(served, seed=config.seed + index, max_queue=config.max_queue,
                        virtual=True)
        engine.activity = GpuActivity(engine.gpu, 0)
        engines.append(engine)
    return engines


def run_simulation(plan: SimulationPlan) -> SimulationResult:
    wall0 = time.perf_counter()
    k = plan.simulated_replicas
    share = (k, plan.replicas) if k is not None else None
    load = offered_load(plan.workload, plan.duration_s, seed=plan.seed,
                        rate_scale=plan.rate_scale, share=share)
    engines = build_engines(plan.config, k or plan.replicas)
    fleet_scale = plan.replicas / len(engines)  # requests and totals of the whole fleet
    run_dir = run_folder.new_run_dir(plan.results_dir, plan.name)
    start_wall_s = time.time()
    run_folder.start_manifest(
        run_dir, name=plan.name,
        target={"url": f"virtual://{plan.replicas}x{engines[0].name}", "kind": "simulated",
                "api": plan.api},
        workloads=[{"file": str(plan.workload)}],
        load={"mode": "open", "rate_rps": load.rate_rps(plan.duration_s) * fleet_scale,
              "duration_s": plan.duration_s},
        config={"argv": " ".join(plan.argv)},
        workload_slo=load.slos,  # judged as a live run's are (analysis/latency/run_summary.py)
    )
    writer = RecordWriter(run_dir)
    outcomes = Outcomes(start_wall_s=start_wall_s, workloads=load.workloads, api=plan.api,
                        model=engines[0].name, emit=writer.add, layer=plan.layer is not None)
    telemetry = FleetTelemetry(start_wall_s, int(plan.tick_s * 1e9), fleet_scale=fleet_scale,
                               load_end_ns=int(plan.duration_s * 1e9))
    clock = FleetClock(engines, plan.layer, outcomes, record_sample=plan.record_sample,
                       seed=plan.seed)
    clock.run(load, drain_ns=int(plan.drain_s * 1e9), tick_ns=telemetry.tick_ns,
              on_tick=telemetry.tick)
    writer.close()
    telemetry.write(run_dir)
    wall_s = time.perf_counter() - wall0
    summary = _summary(plan, load.rate_rps(plan.duration_s) * fleet_scale, outcomes,
                       telemetry, wall_s, writer.rows_written)
    summary["dropped_arrivals"] = clock.dropped
    summary["saturation"] = saturation(summary["offered_rps"], telemetry.queue_at_load_end,
                                       clock.dropped, plan.replicas)
    counters = {"sent": outcomes.arrivals, "dropped_arrivals": clock.dropped,
                "cancelled": outcomes.counts.get("cancelled", 0)}
    run_folder.update_manifest(run_dir, simulation=summary, counters=counters)
    run_folder.finish_manifest(run_dir, status="completed", end_reason="finished")
    return SimulationResult(run_dir, summary)


BACKLOG_S = 1.0  # a queue of more than this many seconds of arrivals: saturated
MIN_BACKLOG = 10  # ... and of at least this many requests (a sparse load's burst is not)


def saturation(offered_rps: float, queued: float, dropped: int, replicas: int) -> str | None:
    """Why the replicas were saturated, in one phrase, or None: at the load's end more
    than BACKLOG_S of its arrivals still waited for a batch slot (a queue that grows for
    as long as the load lasts: its latencies say how long the run was, not what the
    replicas can do), or arrivals were dropped at a workload's max_in_flight."""
    reasons = []
    if offered_rps > 0 and queued >= max(MIN_BACKLOG, offered_rps * BACKLOG_S):
        reasons.append(f"{queued:,.0f} requests still queued when the load ended "
                       f"({queued / offered_rps:.1f} s of arrivals)")
    if dropped:
        reasons.append(f"{dropped:,} arrivals dropped at max_in_flight")
    if not reasons:
        return None
    fleet = f"{replicas} replica" + ("s" if replicas != 1 else "")
    return f"the {fleet} saturated at {offered_rps:,.0f} req/s offered: " + "; ".join(reasons)


def _summary(plan: SimulationPlan, rate: float, outcomes: Outcomes, telemetry: FleetTelemetry,
             wall_s: float, rows: int) -> dict[str, Any]:
    died = outcomes.layer_died_ns
    return {
        "clock": CLOCK,
        "replicas": plan.replicas,
        "simulated_replicas": plan.simulated_replicas or plan.replicas,
        "layer": plan.layer.model_dump() if plan.layer else None,
        "offered_rps": rate,
        "simulated_s": plan.duration_s,
        "wall_s": round(wall_s, 3),
        "requests_per_wall_s": round(outcomes.arrivals / wall_s, 1) if wall_s > 0 else None,
        "record_sample": plan.record_sample,
        "records_written": rows,
        "arrivals": outcomes.arrivals,  # simulated: of the simulated replicas
        "outcomes": dict(sorted(outcomes.counts.items())),
        "layer_failed_at_s": None if died is None else round(died / 1e9, 3),
        "peak": {k: round(v, 4) for k, v in sorted(telemetry.peak.items())},
    }
