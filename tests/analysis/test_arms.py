"""The layer's cost from one interleaved run: records split by arm, each arm against
`direct` per percentile with bootstrap intervals, recovering a known injected cost
under a drifting server; the noise floor that tells a sequential cost from drift;
per-arm cache hit rate, goodput and routes."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zerohop.analysis.comparison.arms import (
    arm_comparisons,
    arm_figures,
    arm_views,
    arms_of,
    budget_dict,
    half_views,
    noise_floor,
    noise_verdict,
)
from zerohop.analysis.comparison.compare import compare_runs
from zerohop.analysis.run_data import RunData, frame_from_rows
from zerohop.client.arms import ArmAssigner

pytestmark = pytest.mark.unit

T0 = 1_764_000_000.0
LAYER_MS = 5.0


def run_of(rows: list[dict[str, Any]], duration_s: float, slo: dict[str, float] | None = None
           ) -> RunData:
    frame, itl = frame_from_rows(rows)
    manifest = {"run_id": "r", "load": {"duration_s": duration_s}, "slo": slo or {}}
    return RunData(run_dir=Path("r"), manifest=manifest, requests=frame, itl=itl,
                   telemetry=frame.iloc[0:0], microbench=None, requests_source="jsonl")


def drifting_rows(n: int, *, arms: list[str | None], extra_ms: dict[str | None, float],
                  seed: int = 0, t0: float = 0.0, drift_ms: float = 30.0,
                  span_s: float = 120.0) -> list[dict[str, Any]]:
    """A server whose TTFT creeps up by `drift_ms` over the span; each request's arm
    adds its own `extra_ms` (the layer's cost)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        t = t0 + span_s * i / n
        base = 40.0 + drift_ms * (t / span_s) + rng.gamma(4.0, 2.0)
        extra = extra_ms.get(arms[i], 0.0)
        rows.append({
            "request_id": f"q{seed}-{i}", "workload": "flood", "outcome": "ok", "arm": arms[i],
            "sent_ts": T0 + t, "end_ts": T0 + t + 0.1,
            "ttft_ms": base + extra, "e2e_ms": base + 60.0 + extra, "tpot_ms": 8.0,
            "itl_ms": [8.0, 8.0], "input_tokens": 100, "output_tokens": 8,
        })
    return rows


def interleaved(n: int = 1600, seed: int = 1) -> RunData:
    assigner = ArmAssigner(("direct", "layer"), seed)
    arms: list[str | None] = [assigner.next_arm() for _ in range(n)]
    return run_of(drifting_rows(n, arms=arms, extra_ms={"layer": LAYER_MS}, seed=seed), 120.0)


def test_records_split_by_arm_direct_first() -> None:
    run = interleaved(200)
    views = arm_views(run)
    assert arms_of(run) == ["direct", "layer"] == list(views)
    assert sum(len(v.requests) for v in views.values()) == 200
    assert set(views["layer"].requests["arm"].astype(str)) == {"layer"}
    assert views["layer"].itl.values.size == 2 * len(views["layer"].requests)
    assert views["layer"].manifest["target"]["kind"] == "layer"


def test_interleaved_cost_recovers_the_injected_layer_within_its_ci() -> None:
    cost = budget_dict(arm_comparisons(interleaved())["layer"])
    for metric in ("ttft_ms", "e2e_ms"):
        value = cost["layer_cost_ms"][metric]["p50"]
        low, high = cost["ci95_ms"][metric]["p50"]
        assert low <= LAYER_MS <= high, (metric, value, low, high)
        assert abs(value - LAYER_MS) < 2.0 and high - low < 6.0


def test_the_same_drift_run_in_turn_prices_the_drift_and_the_noise_floor_says_so() -> None:
    n = 800  # direct in the first minute, through the layer in the second
    direct = run_of(drifting_rows(n, arms=[None] * n, extra_ms={}, span_s=60.0,
                                  drift_ms=15.0), 60.0)
    layered = run_of(drifting_rows(n, arms=[None] * n, extra_ms={None: LAYER_MS}, t0=60.0,
                                   span_s=60.0, drift_ms=15.0, seed=2), 60.0)
    cost = budget_dict(compare_runs(direct, layered, layer=True))
    assert cost["layer_cost_ms"]["ttft_ms"]["p50"] > LAYER_MS + 10  # the drift, priced
    noises = [budget_dict(noise_floor(run)) for run in (direct, layered)]
    half = noises[0]["layer_cost_ms"]["ttft_ms"]["p50"]
    assert 4.0 < half < 11.0  # each run drifts by ~7.5 ms between its halves
    verdict = noise_verdict(cost, noises)
    assert verdict["noise_ms"]["ttft_ms"]["p50"] == pytest.approx(max(
        abs(n["layer_cost_ms"]["ttft_ms"]["p50"]) for n in noises), abs=1e-3)


def test_noise_exceeds_a_cost_smaller_than_the_runs_own_drift() -> None:
    cost = {"layer_cost_ms": {"ttft_ms": {"p50": 5.0, "p99": 30.0}}}
    noises = [{"layer_cost_ms": {"ttft_ms": {"p50": -7.0, "p99": 3.0}}},
              {"layer_cost_ms": {"ttft_ms": {"p50": 1.0, "p99": math.nan}}}]
    verdict = noise_verdict(cost, noises)
    assert verdict["noise_exceeds_cost"]["ttft_ms"] == {"p50": True, "p99": False}
    assert verdict["noise_ms"]["ttft_ms"] == {"p50": 7.0, "p99": 3.0}


def test_half_views_split_at_the_median_start_and_halve_the_duration() -> None:
    first, second = half_views(interleaved(400))
    assert len(first.requests) == len(second.requests) == 200
    assert first.requests["sent_ts"].max() < second.requests["sent_ts"].min()
    assert first.manifest["load"]["duration_s"] == 60.0


def test_arm_figures_cache_goodput_and_routes() -> None:
    rows = drifting_rows(40, arms=["direct", "layer"] * 20, extra_ms={"layer": 30.0})
    for i, row in enumerate(rows):
        if row["arm"] == "layer":
            row["cached_tokens"] = 50 if i % 4 == 1 else 0
            row["server_timing"] = f'layer;dur=5.0, route;desc="r{i % 4 // 2}"'
    views = arm_views(run_of(rows, 120.0, slo={"ttft_p50_ms": 60.0}))
    direct, layer = (arm_figures(views[a], a) for a in ("direct", "layer"))
    assert direct.cache_hit_pct is None and direct.cache_known == 0  # unknown, not 0 %
    assert layer.cache_hit_pct == 25.0 and layer.cache_known == 20
    assert layer.routes == {"r0": 10, "r1": 10} and direct.routes == {}
    assert direct.good_pct > layer.good_pct  # the layer's 30 ms pushes some past 60 ms
    assert direct.goodput_rps == pytest.approx(direct.requests * direct.good_pct / 100 / 120,
                                               abs=1e-3)


def test_a_run_without_a_direct_arm_is_refused() -> None:
    run = run_of(drifting_rows(10, arms=["layer"] * 10, extra_ms={}), 10.0)
    with pytest.raises(ValueError, match="direct"):
        arm_comparisons(run)


def test_arms_follow_the_manifests_order() -> None:
    rows = drifting_rows(6, arms=["prefix_affinity", "direct", "round_robin"] * 2,
                         extra_ms={})
    run = run_of(rows, 10.0)
    assert arms_of(run) == ["direct", "prefix_affinity", "round_robin"]  # first seen
    run.manifest["target"] = {"arms": [{"arm": "direct", "url": "u"},
                                       {"arm": "round_robin", "url": "v"},
                                       {"arm": "prefix_affinity", "url": "w"}]}
    assert arms_of(run) == ["direct", "round_robin", "prefix_affinity"]
