"""Sweep, capacity and calibration against a real vLLM CPU server (the `vllm` tier).

Calibration: fitted on a vLLM-CPU sweep up to its knee, the model must predict held-out
loads below the knee within 20 % (or as well as the sweep's neighbouring points predict
them: a floor from the measurements, never from the fit), and learn the curve (its
error well under the uncalibrated start's). That needs a server whose curve repeats,
which vLLM's default CPU binding on a 2-core machine does not give (figures: docs/
nightly-and-capacity.md, "Measure a curve that repeats"); the `vllm_server` fixture
confines vLLM to the last CPU and runs the load generator on the others.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.vllm_cpu import VllmServer
from zerohop.cli import cli
from zerohop.planning.calibrate import (
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

pytestmark = [pytest.mark.vllm, pytest.mark.integration, pytest.mark.slow]

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
    folder = sweep(vllm_server, tmp_path / "sweep", "15s", "--rates", rates)
    knee, held_out = held_out_below_knee(folder)
    # the model is fitted where it is meant to hold: up to the knee (past it, the queue
    # grows for as long as the run lasts and the medians say more about the run's length)
    below = [p for p in measured_points(folder) if p.load <= knee]
    calibration = calibrate(below, held_out)
    (folder / "calibration.json").write_text(json.dumps(calibration.to_json(), indent=2))
    held = [e for e in calibration.errors if e.held_out]
    assert len(held) == len(held_out)
    errors = [(e.load, round(e.ttft_error_pct, 1), round(e.tpot_error_pct, 1)) for e in held]
    fitted_worst = max(_worst(e) for e in calibration.errors if not e.held_out)
    start = initial_guess([p for p in below if p.load not in held_out])
    start_mean = float(np.mean([_start_error(start, p) for p in below]))
    fitted_mean = float(np.mean([_worst(e) for e in calibration.errors]))
    print(f"held-out calibration errors (load, TTFT %, TPOT %): {errors}; worst "
          f"{calibration.held_out_max_error_pct:.1f} % (fitted points' worst "
          f"{fitted_worst:.1f} %); mean error "
          f"{fitted_mean:.1f} % calibrated vs {start_mean:.1f} % uncalibrated")
    # How closely the engine model can follow this CPU's vLLM curve is a figure of the
    # machine (within 20 % on one machine of this kind, 60 % at the lightest fitted load
    # on another): it is printed, not held. What holds everywhere: the fit predicts a load
    # it did not see within 20 %, or as well as two things measured beside it allow, and
    # neither is the held-out error itself. One is the sweep's own scatter there (how far
    # the point sits off the line through its neighbours: a medians' wobble no smooth
    # curve follows; on a busy machine TTFT at 3 req/s sat 10 ms under both neighbours,
    # 31 % off their line). The other is the fit's error at those neighbours, loads it
    # did see: a model that cannot follow the curve at 2 and 4 req/s cannot at 3 either
    # (a CI run: 27 % held out beside 14 % scatter). And it learns the curve: it halves
    # the uncalibrated error, or (when the start already lands close, as a sweep measured
    # on a busy machine can make it: 36 % once, 97 % and 283 % on quiet runs) ends within
    # 30 % and no worse than it started.
    for error in held:
        load, held_error = error.load, _worst(error)
        wobble = neighbour_wobble_pct(below, load)
        beside = neighbour_fit_error_pct(calibration.errors, load)
        print(f"at {load:g} req/s: held out {held_error:.1f} %, scatter {wobble:.1f} %, "
              f"fit beside it {beside:.1f} %")
        assert held_error <= max(20.0, wobble + max(10.0, beside)), \
            f"{load:g} req/s: held out {held_error:.1f} %, scatter {wobble:.1f} %, " \
            f"fit beside it {beside:.1f} %; knee {knee:g}, all held out {errors}"
    measured = f"knee {knee:g}, held out {errors}, fitted worst {fitted_worst:.1f} %, " \
        f"mean {fitted_mean:.1f} % vs start {start_mean:.1f} %"
    assert fitted_mean <= min(start_mean, max(0.5 * start_mean, 30.0)), measured


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
