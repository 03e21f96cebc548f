"""The layer's knee (analysis.layer_knee): a planted knee is found at its rate, noise
with wide intervals is no knee, p99 has its own knee, and the layer's CPU and the
engines' saturation are read at the knee's rate."""

from __future__ import annotations

import pytest

from zerohop.analysis.comparison.layer_knee import (
    KNEE_GROWTH_MS,
    CostAt,
    find_knee,
    layer_knees,
    process_figures,
)

pytestmark = pytest.mark.unit


def flat_then_rising(rates: list[float], knee_at: float, rise_ms: float,
                     half_width: float = 0.5) -> list[CostAt]:
    return [CostAt(r, 1.0 + (rise_ms if r >= knee_at else 0.0),
                   1.0 + (rise_ms if r >= knee_at else 0.0) - half_width,
                   1.0 + (rise_ms if r >= knee_at else 0.0) + half_width) for r in rates]


def test_a_planted_knee_is_found_at_its_rate() -> None:
    knee = find_knee(flat_then_rising([10, 20, 40, 80, 160], knee_at=80, rise_ms=12), "p50")
    assert knee.rate == 80
    assert knee.base_rate == 10
    assert knee.growth_ms == pytest.approx(12)
    assert "knee at 80" in knee.describe()


def test_growth_under_the_threshold_is_no_knee() -> None:
    knee = find_knee(flat_then_rising([10, 20, 40], knee_at=20,
                                      rise_ms=KNEE_GROWTH_MS - 0.1), "p50")
    assert knee.rate is None
    assert knee.describe() == "p50: no knee within the rates tried"


def test_noise_with_overlapping_intervals_is_no_knee() -> None:
    # the cost jumps past the threshold, but the intervals overlap: noise, not a knee
    noisy = [CostAt(10, 1.0, -10.0, 12.0), CostAt(20, 9.0, -4.0, 25.0),
             CostAt(40, 2.0, -9.0, 13.0)]
    assert find_knee(noisy, "p99").rate is None


def test_the_lowest_rate_with_a_cost_is_the_base_and_the_order_is_by_rate() -> None:
    costs = list(reversed(flat_then_rising([5, 10, 20, 40], knee_at=20, rise_ms=30)))
    costs.append(CostAt(1, float("nan"), float("nan"), float("nan")))
    knee = find_knee(costs, "p50")
    assert (knee.base_rate, knee.rate) == (5, 20)
    assert find_knee([], "p50").rate is None


def summary(costs: dict[str, tuple[dict[str, float], dict[str, list[float]]]],
            control: str | None = None, ok: int = 200) -> dict:
    """An arms summary: each arm's cost and interval, `ok` requests on every arm."""
    return {"control": control, "costs": {
        arm: {"layer_cost_ms": {"ttft_ms": cost}, "ci95_ms": {"ttft_ms": ci}}
        for arm, (cost, ci) in costs.items()},
        "arms": {arm: {"requests": ok, "ok": ok} for arm in ["direct", *costs]}}


def test_p99_has_its_own_knee_and_cpu_and_saturation_are_read_there() -> None:
    def point(rate: float, p50: float, p99: float, cpu: float, saturated: bool) -> dict:
        return {"load": rate, "engines_saturated": saturated,
                "arms": summary({
                    "router": ({"p50": p50, "p99": p99},
                               {"p50": [p50 - 0.5, p50 + 0.5], "p99": [p99 - 1, p99 + 1]}),
                    "control": ({"p50": 0.1, "p99": 0.2},
                                {"p50": [-1, 1], "p99": [-1, 1]})}, control="control"),
                "processes": {"router": {"cpu_pct_mean": cpu, "rss_bytes_max": 2**20}}}

    points = [point(10, 1, 2, 5.0, False), point(20, 1.2, 20, 11.0, False),
              point(40, 15, 60, 22.0, True)]
    knees = layer_knees(points)
    assert list(knees["layers"]) == ["router"]  # the control is no layer under test
    router = knees["layers"]["router"]
    assert router["p99"]["rate"] == 20 and router["p50"]["rate"] == 40
    assert router["p99"]["process"]["cpu_pct_mean"] == 11.0
    assert router["p99"]["layer_rps"] == pytest.approx(20 / 3, abs=1e-3)  # a third of them
    assert router["p99"]["engines_saturated"] is False
    assert router["p50"]["engines_saturated"] is True
    assert knees["threshold_ms"] == KNEE_GROWTH_MS


def test_process_figures_keep_the_load_window_only() -> None:
    rows = [(0.0, "loadgen_cpu_pct", 90.0), (1.0, "loadgen_cpu_pct", 10.0),
            (1.0, "loadgen_rss_bytes", 100.0), (2.0, "loadgen_cpu_pct", 30.0),
            (2.0, "loadgen_rss_bytes", 300.0), (3.0, "gap", float("nan")),
            (9.0, "loadgen_rss_bytes", 900.0)]
    figures = process_figures(rows, 1.0, 3.0)
    assert figures == {"cpu_pct_mean": 20.0, "cpu_pct_max": 30.0, "rss_bytes_max": 300,
                       "samples": 2}
    assert process_figures([], 0, 1)["cpu_pct_mean"] is None


def test_the_layer_rate_is_its_arms_share_of_the_offered_rate() -> None:
    def point(rate: float, cost: float) -> dict:
        arms = summary({"router": ({"p50": cost, "p99": cost},
                                   {"p50": [cost - 1, cost + 1], "p99": [cost - 1, cost + 1]})})
        arms["arms"] = {"direct": {"requests": 60, "ok": 60},
                        "control": {"requests": 60, "ok": 60},
                        "router": {"requests": 60, "ok": 60}}
        return {"load": rate, "arms": arms, "engines_saturated": False}

    knee = layer_knees([point(10, 1.0), point(30, 20.0)])["layers"]["router"]["p50"]
    assert (knee["rate"], knee["layer_rps"]) == (30.0, 10.0)


def test_a_p99_of_too_few_requests_neither_bases_nor_sets_a_knee() -> None:
    """p99 needs 100 requests on the arm and on direct (core.metrics.needed_n): a low
    rate's p99 of a few dozen requests is left out, as the report leaves it out."""
    def point(rate: float, p99: float, ok: int) -> dict:
        return {"load": rate, "engines_saturated": False, "arms": summary(
            {"router": ({"p50": 1.0, "p99": p99},
                        {"p50": [0.5, 1.5], "p99": [p99 - 1, p99 + 1]})}, ok=ok)}

    # 28 requests at 10 req/s: a p99 of -4 ms there would make 30 req/s look like a knee
    points = [point(10, -4.0, 28), point(30, 2.0, 120), point(60, 4.0, 240)]
    knee = layer_knees(points)["layers"]["router"]["p99"]
    assert knee["rate"] is None and knee["base_rate"] == 30
    assert layer_knees([point(10, -4.0, 120), point(30, 2.0, 120)])[
        "layers"]["router"]["p99"]["rate"] == 30  # the same figures with enough requests
