from __future__ import annotations

import numpy as np
import pytest

from zerohop.calibrate import (
    Arrival,
    CostParams,
    MeasuredPoint,
    calibrate,
    predict,
    what_if,
)

pytestmark = pytest.mark.unit

TRUTH = CostParams(overhead_ms=8.0, prefill_us_per_token=120.0, decode_ms_per_seq=1.5,
                   context_us_per_token=2.0, client_offset_ms=3.0)


def test_a_lone_request_costs_what_the_formula_says() -> None:
    prediction = predict(TRUTH, [Arrival(0.0, prompt_tokens=100, output_tokens=5)])
    # first token: one prefill step of 100 tokens + client offset
    assert prediction.ttft_p50_ms == pytest.approx(8.0 + 0.12 * 100 + 3.0, rel=1e-6)
    # each next token: one decode step over a context of 100..103 tokens (mean 101.5)
    assert prediction.tpot_p50_ms == pytest.approx(8.0 + 1.5 + 0.002 * 101.5, rel=1e-3)


def test_batching_limit_queues_requests() -> None:
    burst = [Arrival(0.0, 50, 20) for _ in range(8)]
    wide = predict(TRUTH, burst, max_num_seqs=8)
    narrow = predict(TRUTH, burst, max_num_seqs=2)
    assert narrow.ttft_p50_ms > 3 * wide.ttft_p50_ms  # half of them wait for a slot
    assert narrow.tpot_p50_ms < wide.tpot_p50_ms  # smaller batches decode faster


def synthetic_point(rate: float, seed: int) -> MeasuredPoint:
    rng = np.random.default_rng(seed)
    n = int(rate * 30)
    times = np.cumsum(rng.exponential(1.0 / rate, n))
    arrivals = [Arrival(float(t), int(rng.integers(40, 200)), 32) for t in times]
    truth = predict(TRUTH, arrivals, max_num_seqs=8)
    return MeasuredPoint(rate, arrivals, truth.ttft_p50_ms, truth.tpot_p50_ms)


def test_fit_recovers_held_out_points_of_a_known_engine() -> None:
    # Held-out points below the knee: at 10 req/s (TTFT ×4 of 8 req/s) a 1 % error in
    # the fitted cost is a 25 % error in queueing delay, for any model.
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
    lone = [Arrival(0.0, 100, 10)]
    assert predict(TRUTH, lone, cost_scale=0.5).tpot_p50_ms == pytest.approx(
        0.5 * predict(TRUTH, lone).tpot_p50_ms)


def test_everything_held_out_is_an_error() -> None:
    with pytest.raises(ValueError, match="no point left"):
        calibrate([synthetic_point(2.0, 0)], held_out=[2.0])
