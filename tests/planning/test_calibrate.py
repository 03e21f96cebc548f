"""Calibration: fitted on a sweep *measured* from the embedded target, the model predicts
the sweep's held-out points; and the fitting machinery's own pure checks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from zerohop.cli import cli
from zerohop.planning.calibrate import (
    Arrival,
    CostParams,
    MeasuredPoint,
    calibrate,
    measured_points,
    predict,
    what_if,
)
from zerohop.planning.capacity import find_knee, measure_points
from zerohop.sim.embedded import start_embedded_target

REPO = Path(__file__).resolve().parents[2]
WORKLOAD = REPO / "workloads" / "short_query_flood.yaml"

TRUTH = CostParams(overhead_ms=8.0, prefill_us_per_token=120.0, decode_ms_per_seq=1.5,
                   context_us_per_token=2.0, client_offset_ms=3.0)


# --- against the embedded target ---------------------------------------------------------
# 8B on a modelled H100, 2× slower, at most 8 running sequences: a 16-token answer holds
# a slot for ~16 steps of ~14 ms, so the target serves ~35 req/s and the rates below
# climb through the knee into saturation. The modelled times do not depend on this
# machine's speed; what does (the client's own overhead, the loop's lag) is what the fit
# must absorb, which is the point of measuring rather than generating the points.
MAX_NUM_SEQS = 8
SIM_ARGS = ["--time-scale", "2", "--max-num-seqs", str(MAX_NUM_SEQS)]
RATES = "8,14,20,26,32,40"
# A bound a 2× slower, shared machine keeps: held-out points below the knee, each a p50
# of 40-150 requests, were within 5-10 % here on a loaded 2-core machine (the test
# prints them); a fit stuck in a local minimum was 35 % off.
HELD_OUT_MAX_ERROR_PCT = 25.0


@pytest.mark.integration  # starts the embedded target and Locust
@pytest.mark.slow
@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_calibration_on_a_measured_sweep_predicts_held_out_points_below_its_knee(
    tmp_path: Path,
) -> None:
    with start_embedded_target(SIM_ARGS) as sim:
        result = CliRunner().invoke(cli, [
            "sweep", "--host", sim.url, "--rates", RATES, "--duration", "5s",
            "--workload", str(WORKLOAD), "--only", "ShortQueryFlood",
            "--telemetry", "loadgen", "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    (sweep_dir,) = tmp_path.glob("*-sweep-sweep")

    # the knee the sweep itself found (latency's p50 is all find_knee reads; the SLO is
    # only there because re-judging points needs one)
    _, capacity_points = measure_points(sweep_dir, {"ttft_p99_ms": 1e9})
    knee = find_knee(capacity_points)
    assert knee is not None, [(p.load, p.ttft_p50_ms) for p in capacity_points]
    # Fitted on the points up to the knee (past it queueing amplifies any cost error;
    # the model's stated limit). The lightest point stays in the fit (it seeds the
    # starting guess); every other point below the knee is held out.
    points = [p for p in measured_points(sweep_dir) if p.load <= knee.load]
    below = sorted(p.load for p in points if p.load < knee.load)[1:]
    held_out = below[::2]
    assert held_out, f"knee at {knee.load}: no point between the lightest and the knee"

    calibration = calibrate(points, held_out, max_num_seqs=MAX_NUM_SEQS)
    held = [e for e in calibration.errors if e.held_out]
    assert sorted(e.load for e in held) == held_out
    errors = [(e.load, round(e.ttft_error_pct, 1), round(e.tpot_error_pct, 1)) for e in held]
    print(f"knee {knee.load:g} req/s; held-out errors (load, TTFT %, TPOT %): {errors}")
    assert calibration.held_out_max_error_pct < HELD_OUT_MAX_ERROR_PCT, errors


# --- the model and the fit on their own (pure) -------------------------------------------
@pytest.mark.unit
def test_a_lone_request_costs_what_the_formula_says() -> None:
    prediction = predict(TRUTH, [Arrival(0.0, prompt_tokens=100, output_tokens=5)])
    # first token: one prefill step of 100 tokens + client offset
    assert prediction.ttft_p50_ms == pytest.approx(8.0 + 0.12 * 100 + 3.0, rel=1e-6)
    # each next token: one decode step over a context of 100..103 tokens (mean 101.5)
    assert prediction.tpot_p50_ms == pytest.approx(8.0 + 1.5 + 0.002 * 101.5, rel=1e-3)


@pytest.mark.unit
def test_batching_limit_queues_requests() -> None:
    burst = [Arrival(0.0, 50, 20) for _ in range(8)]
    wide = predict(TRUTH, burst, max_num_seqs=8)
    narrow = predict(TRUTH, burst, max_num_seqs=2)
    assert narrow.ttft_p50_ms > 3 * wide.ttft_p50_ms  # half of them wait for a slot
    assert narrow.tpot_p50_ms < wide.tpot_p50_ms  # smaller batches decode faster


@pytest.mark.unit
def test_cost_scale_scales_every_step() -> None:
    lone = [Arrival(0.0, 100, 10)]
    assert predict(TRUTH, lone, cost_scale=0.5).tpot_p50_ms == pytest.approx(
        0.5 * predict(TRUTH, lone).tpot_p50_ms)


def synthetic_point(rate: float, seed: int) -> MeasuredPoint:
    rng = np.random.default_rng(seed)
    n = int(rate * 30)
    times = np.cumsum(rng.exponential(1.0 / rate, n))
    arrivals = [Arrival(float(t), int(rng.integers(40, 200)), 32) for t in times]
    truth = predict(TRUTH, arrivals, max_num_seqs=8)
    return MeasuredPoint(rate, arrivals, truth.ttft_p50_ms, truth.tpot_p50_ms)


@pytest.mark.unit
@pytest.mark.slow  # ~40 s: six points of 30 s of arrivals, five starts
def test_the_optimiser_finds_parameters_that_reproduce_its_own_model() -> None:
    # The optimiser's self-consistency only (the points come from `predict` itself):
    # that a fit on real measurements predicts is the embedded-target test above.
    rates = (2.0, 4.0, 6.0, 8.0, 10.0, 12.0)
    points = [synthetic_point(rate, seed) for seed, rate in enumerate(rates)]
    result = calibrate(points, held_out=[4.0, 8.0], max_num_seqs=8)
    assert result.held_out_max_error_pct < 5.0, result.errors
    assert {e.load for e in result.errors if e.held_out} == {4.0, 8.0}
    prediction = what_if(result, points[-1], rate=6.0, duration_s=20)
    direct = what_if(type(result)(TRUTH, 8, []), points[-1], rate=6.0, duration_s=20)
    assert prediction.tpot_p50_ms == pytest.approx(direct.tpot_p50_ms, rel=0.1)
    faster = what_if(result, points[-1], rate=6.0, duration_s=20, cost_scale=0.5)
    assert faster.tpot_p50_ms < 0.55 * prediction.tpot_p50_ms  # and smaller batches too


@pytest.mark.unit
def test_everything_held_out_is_an_error() -> None:
    with pytest.raises(ValueError, match="no point left"):
        calibrate([synthetic_point(2.0, 0)], held_out=[2.0])
