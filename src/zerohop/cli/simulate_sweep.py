"""`zerohop simulate --sweep R1,R2,...`: one simulation per total arrival rate, laid out as
a `zerohop sweep` folder (its `index.json`, one results folder per point, judged by the
sweep's own saturation rule) so that `zerohop capacity` plans from it unchanged."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from zerohop.fleet.run import SimulationPlan, run_simulation
from zerohop.planning.sweep import SweepPlan, SweepResult, run_sweep
from zerohop.runner.plan import RunPlan
from zerohop.runner.run_once import RunResult
from zerohop.storage.summary_file import write_summary
from zerohop.workloads.schema.load_spec import OpenLoad
from zerohop.workloads.yaml_io import load_workload_file


def parse_rates(text: str) -> list[float]:
    """`10000,25000,50k` → rates in req/s; ValueError in one line."""
    rates = []
    for part in text.split(","):
        word = part.strip().lower()
        scale = 1000.0 if word.endswith("k") else 1.0
        try:
            rate = float(word.removesuffix("k")) * scale
        except ValueError:
            raise ValueError(f"--sweep: {part.strip()!r} is not a rate like 10000 or 10k"
                             ) from None
        if not rate > 0:
            raise ValueError(f"--sweep: rates must be > 0, got {part.strip()!r}")
        rates.append(rate)
    return rates


def file_rate_rps(workload: Path) -> float:
    """The workloads' total `rate_rps` (before any shape): what `--rate-scale 1` offers."""
    return sum(spec.load.rate_rps for spec in load_workload_file(workload).workloads
               if isinstance(spec.load, OpenLoad))


def simulated_sweep(base: SimulationPlan, rates: list[float], target: str) -> SweepResult:
    """One simulation per rate (each workload's rate scaled by the same factor)."""
    file_rate = file_rate_rps(base.workload)
    run_plan = RunPlan(
        host=target, api=base.api, workloads=[base.workload], classes=[], users=1,
        rate=None, duration_s=base.duration_s, telemetry="", slo={}, name=base.name,
        workers=0, results_dir=base.results_dir, seed=base.seed, report=False,
        microbench="off",
    )

    def simulate_point(point: RunPlan) -> RunResult:
        rate = point.rate if point.rate is not None else file_rate
        plan = dataclasses.replace(base, rate_scale=rate / file_rate,
                                   results_dir=point.results_dir, name=point.name)
        run_dir = run_simulation(plan).run_dir
        write_summary(run_dir)
        return RunResult(run_dir, 0, None)

    return run_sweep(SweepPlan(base=run_plan, mode="rate", loads=rates), runner=simulate_point)
