"""Sweep, capacity and calibration against a real vLLM CPU server (the `vllm` tier).

Calibration (issue 9): fitted on part of a vLLM-CPU sweep, the model must predict the
held-out points' p50 TTFT and TPOT within 20 %. That needs a server whose curve repeats,
which vLLM's default CPU binding on a 2-core machine does not give (figures: docs/
nightly-and-capacity.md, "Measure a curve that repeats"); the `vllm_server` fixture
confines vLLM to the last CPU and runs the load generator on the others.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from zerohop.calibrate import calibrate, measured_points
from zerohop.capacity import find_knee
from zerohop.capacity import measure_points as measure_points_for_capacity
from zerohop.cli import cli
from zerohop.testing.vllm_cpu import VllmServer

pytestmark = [pytest.mark.vllm, pytest.mark.integration, pytest.mark.slow]

WORKLOAD = Path(__file__).with_name("vllm_flood.yaml")
RATES = "2,3,4,6,8,12,16,24,32,48"


def sweep(server: VllmServer, out: Path, rates: str, duration: str) -> Path:
    result = CliRunner().invoke(cli, [
        "sweep", "--host", server.url, "--model", "tiny", "--workload", str(WORKLOAD),
        "--rates", rates, "--duration", duration, "--telemetry", "loadgen",
        "--results-dir", str(out)])
    assert result.exit_code == 0, result.output
    return max(out.glob("*-sweep-sweep"))


def test_sweep_and_capacity_on_vllm(vllm_server: VllmServer, tmp_path: Path) -> None:
    folder = sweep(vllm_server, tmp_path / "sweep", "2,8,24", "8s")
    result = CliRunner().invoke(cli, ["capacity", str(folder), "--slo",
                                      "ttft_p99_ms=400,tpot_p99_ms=20", "--traffic", "100"])
    assert result.exit_code == 0, result.output
    plan = json.loads((folder / "capacity.json").read_text())
    assert plan["operating_point"] is not None


def test_calibration_predicts_held_out_vllm_points(
    vllm_server: VllmServer, tmp_path: Path
) -> None:
    if not vllm_server.cpus:
        pytest.skip("calibration needs the server on its own CPU (this machine has one)")
    sweep(vllm_server, tmp_path / "warmup", "4,24", "6s")  # warm every batch shape
    folder = sweep(vllm_server, tmp_path / "sweep", RATES, "15s")
    knee, held_out = held_out_below_knee(folder)
    # the model is fitted where it is meant to hold: up to the knee (past it, the queue
    # grows for as long as the run lasts and the medians say more about the run's length)
    below = [p for p in measured_points(folder) if p.load <= knee]
    calibration = calibrate(below, held_out)
    (folder / "calibration.json").write_text(json.dumps(calibration.to_json(), indent=2))
    held = [e for e in calibration.errors if e.held_out]
    assert len(held) == len(held_out)
    worst = calibration.held_out_max_error_pct
    errors = [(e.load, round(e.ttft_error_pct, 1), round(e.tpot_error_pct, 1)) for e in held]
    print(f"held-out calibration errors (load, TTFT %, TPOT %): {errors}; worst {worst:.1f} %")
    assert worst < 20.0, errors


def held_out_below_knee(folder: Path) -> tuple[float, list[float]]:
    """The knee this sweep found, and held-out loads below it. A slower CPU moves vLLM's
    curve (on one machine of this kind the knee sat below 24 req/s, where a fixed
    held-out point then fell), so the points are chosen from what this run measured,
    never fixed. The lightest load stays in the fit as its anchor, and so does the knee;
    every second load between them is held out (two at most)."""
    _mode, points = measure_points_for_capacity(folder, {})
    knee = find_knee(points)
    assert knee is not None, [(p.load, p.ttft_p50_ms) for p in points]
    loads = sorted(p.load for p in points)
    below = [load for load in loads[1:] if load < knee.load]
    held = below[::2][:2]
    assert held, f"no load between the lightest and the knee at {knee.load:g} req/s"
    print(f"knee at {knee.load:g} req/s; held out {held}")
    return knee.load, held
