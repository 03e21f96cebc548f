"""Arrival processes and rate shapes: rates, burstiness, shapes, worker splits."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerohop.workloads.schema.load_spec import OpenLoad
from zerohop.workloads.timing.arrivals import (
    ArrivalSchedule,
    arrival_offsets,
    schedule_for_load,
    split_count,
    unit_gaps,
    worker_share,
)
from zerohop.workloads.timing.rate_curve import (
    PiecewiseLinearRate,
    constant_rate,
    piecewise_rate,
    ramp_rate,
    rate_shape_for,
    spike_rate,
    step_rate,
)
from zerohop.workloads.yaml_io import parse_workloads

pytestmark = pytest.mark.unit

_BAD_KIND: Any = "burst"


def _cv(offsets: np.ndarray) -> float:
    gaps = np.diff(offsets)
    return float(gaps.std() / gaps.mean())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_poisson_has_the_mean_rate_and_cv_one(seed: int) -> None:
    offsets = arrival_offsets("poisson", 50.0, 400.0, seed=seed)
    assert len(offsets) / 400.0 == pytest.approx(50.0, rel=0.03)
    assert _cv(offsets) == pytest.approx(1.0, abs=0.05)
    # counts per second of a Poisson process: variance equals the mean
    counts = np.bincount(offsets.astype(int), minlength=400)
    assert counts.var() / counts.mean() == pytest.approx(1.0, abs=0.2)


@pytest.mark.parametrize("cv", [0.5, 2.0, 4.0])
def test_gamma_has_the_mean_rate_and_the_requested_cv(cv: float) -> None:
    offsets = arrival_offsets("gamma", 40.0, 1000.0, seed=7, cv=cv)
    assert len(offsets) / 1000.0 == pytest.approx(40.0, rel=0.08)
    assert _cv(offsets) == pytest.approx(cv, rel=0.1)


def test_constant_arrivals_are_evenly_spaced_from_zero() -> None:
    offsets = arrival_offsets("constant", 4.0, 10.0, seed=0)
    assert offsets.tolist() == pytest.approx([i / 4 for i in range(40)])


def test_unit_gaps_have_mean_one() -> None:
    rng = np.random.default_rng(0)
    kinds: list[tuple[Any, float]] = [("poisson", 1.0), ("gamma", 3.0), ("constant", 0.0)]
    for kind, cv in kinds:
        assert unit_gaps(kind, 200_000, rng, cv=cv).mean() == pytest.approx(1.0, rel=0.02)
    with pytest.raises(ValueError, match="unknown arrival kind"):
        unit_gaps(_BAD_KIND, 3, rng)


def test_schedules_are_reproducible_and_seed_dependent() -> None:
    rate = constant_rate(10)
    first = ArrivalSchedule("gamma", rate, seed=(1, 2), cv=2).offsets(30)
    assert np.array_equal(first, ArrivalSchedule("gamma", rate, seed=(1, 2), cv=2).offsets(30))
    assert not np.array_equal(first, ArrivalSchedule("gamma", rate, seed=(1, 3), cv=2).offsets(30))
    assert np.all(np.diff(first) >= 0)


def test_spike_shape_quadruples_the_rate_for_its_duration() -> None:
    shape = spike_rate(20.0, peak_multiplier=4.0, at_s=20.0, duration_s=60.0)
    offsets = ArrivalSchedule("poisson", shape, seed=11).offsets(120.0)
    before = np.sum(offsets < 20) / 20
    during = np.sum((offsets >= 20) & (offsets < 80)) / 60
    after = np.sum(offsets >= 80) / 40
    assert before == pytest.approx(20, rel=0.15)
    assert during == pytest.approx(80, rel=0.08)
    assert after == pytest.approx(20, rel=0.15)
    assert during / ((before + after) / 2) == pytest.approx(4.0, rel=0.15)


def test_gamma_burstiness_survives_a_spike() -> None:
    shape = spike_rate(20.0, peak_multiplier=4.0, at_s=100.0, duration_s=300.0)
    offsets = ArrivalSchedule("gamma", shape, seed=5, cv=3.0).offsets(400.0)
    inside = offsets[(offsets >= 100) & (offsets < 400)]
    assert _cv(inside) == pytest.approx(3.0, rel=0.15)


def test_ramp_grows_linearly() -> None:
    shape = ramp_rate(100.0, from_multiplier=0.0, to_multiplier=1.0, duration_s=100.0)
    offsets = ArrivalSchedule("poisson", shape, seed=3).offsets(100.0)
    counts = np.histogram(offsets, bins=10, range=(0, 100))[0]
    expected = np.array([(i + 0.5) * 100.0 for i in range(10)])  # mean rate × 10 s
    assert np.corrcoef(counts, expected)[0, 1] > 0.98
    assert len(offsets) == pytest.approx(5000, rel=0.05)


def test_rate_that_drops_to_zero_ends_the_schedule() -> None:
    shape = step_rate(10.0, [(5.0, 0.0)])
    offsets = list(ArrivalSchedule("constant", shape, seed=0))
    assert len(offsets) == 50 and max(offsets) < 5.0


def test_shape_values_and_integral() -> None:
    shape = spike_rate(10.0, peak_multiplier=4.0, at_s=10.0, duration_s=5.0)
    assert shape.rate_at([0, 9.99, 10, 14.99, 15, 100]).tolist() == [10, 10, 40, 40, 10, 10]
    assert shape.expected_arrivals(0, 20) == pytest.approx(10 * 15 + 40 * 5)
    steps = step_rate(2.0, [(1.0, 3.0), (2.0, 0.5)])
    assert steps.cumulative(3.0) == pytest.approx(2 + 6 + 1)
    curve = piecewise_rate(10.0, [(0.0, 1.0), (10.0, 3.0)])
    assert curve.rate_at(5.0) == pytest.approx(20.0)
    assert curve.cumulative(10.0) == pytest.approx(200.0)
    with pytest.raises(ValueError, match="start at 0"):
        PiecewiseLinearRate(np.array([1.0]), np.array([1.0]))
    with pytest.raises(ValueError, match=">= 0"):
        PiecewiseLinearRate(np.array([0.0]), np.array([-1.0]))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.0, 5.0), st.floats(0.0, 50.0)), min_size=1, max_size=6
    ),
    st.floats(0.01, 400.0),
)
def test_inverse_cumulative_inverts_the_cumulative(
    knots: list[tuple[float, float]], u: float
) -> None:
    times = np.cumsum([0.0] + [gap for gap, _ in knots[1:]])
    rates = np.array([rate for _, rate in knots], dtype=float)
    rates[-1] = max(rates[-1], 0.5)  # a tail rate, so every u is reached
    shape = PiecewiseLinearRate(times, rates)
    t = float(shape.inverse_cumulative(u))
    assert np.isfinite(t)
    assert float(shape.cumulative(t)) == pytest.approx(u, rel=1e-6, abs=1e-6)


def test_shapes_from_the_spec() -> None:
    spec: Any = parse_workloads(
        {"kind": "short_query_flood", "name": "s",
         "load": {"kind": "open", "rate_rps": 5,
                  "shape": {"type": "ramp", "from_multiplier": 1, "to_multiplier": 3,
                            "start_s": 10, "duration_s": 10}}}
    ).workloads[0]
    shape = rate_shape_for(spec.load.rate_rps, spec.load.shape)
    assert shape.rate_at([0, 10, 15, 20, 99]).tolist() == pytest.approx([5, 5, 10, 15, 15])
    assert rate_shape_for(7.0, None).rate_at(1e6) == pytest.approx(7.0)


def test_schedule_for_each_arrival_kind() -> None:
    for arrival, cv in (("poisson", 1.0), ({"type": "gamma", "cv": 2.5}, 2.5),
                        ("constant", 0.0)):
        load = OpenLoad.model_validate({"kind": "open", "rate_rps": 30, "arrival": arrival})
        offsets = schedule_for_load(load, seed=1).offsets(300)
        assert len(offsets) / 300 == pytest.approx(30, rel=0.1)
        assert _cv(offsets) == pytest.approx(cv, abs=0.3)


@pytest.mark.parametrize("workers", [1, 2, 3, 8])
def test_worker_shares_add_up_to_the_requested_process(workers: int) -> None:
    schedule = ArrivalSchedule("gamma", constant_rate(50), seed=9, cv=3.0)
    total = schedule.offsets(100)
    shares = [np.array(list(worker_share(iter(total), i, workers))) for i in range(workers)]
    union = np.sort(np.concatenate(shares))
    assert np.array_equal(union, total)  # exactly the requested process
    assert _cv(union) == pytest.approx(3.0, rel=0.15)  # burstiness kept
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1


def test_split_count_adds_up() -> None:
    for total in (0, 1, 7, 64):
        for workers in (1, 2, 3, 5):
            parts = [split_count(total, i, workers) for i in range(workers)]
            assert sum(parts) == total and max(parts) - min(parts) <= 1
    with pytest.raises(ValueError, match="outside"):
        split_count(4, 2, 2)
