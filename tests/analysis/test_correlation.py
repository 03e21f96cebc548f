"""Planted-data tests for the driver analysis: a series built to drive p99 TTFT three
seconds later must be found, at that lag; unrelated series must not be reported."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.signal import lfilter

from tests.run_fixtures import RunFactory
from tests.synthetic_runs import WorkloadModel
from zerohop.analysis.run_analysis import AnalysisSettings, analyse_run
from zerohop.analysis.server.correlation import (
    CorrelationSettings,
    benjamini_hochberg,
    find_drivers,
    spearman_p_value,
)
from zerohop.storage.run_reader import load_run

pytestmark = pytest.mark.unit


def _ar1(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    shocks = rng.standard_normal(n) * np.sqrt(1 - phi * phi)
    return lfilter([1.0], [1.0, -phi], shocks)


def _planted(seed: int, n: int = 400) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    driver = _ar1(rng, n, 0.7)
    p99 = np.full(n, np.nan)
    p99[3:] = 200.0 + 80.0 * driver[:-3] + rng.normal(0.0, 20.0, n - 3)  # 3 windows later
    p99[rng.random(n) < 0.05] = np.nan  # windows with too few requests
    latency = pd.DataFrame({"ttft_p99_ms": p99, "tpot_p99_ms": 20 + rng.normal(0, 1, n)})
    telemetry = pd.DataFrame(
        {
            "queue_depth": 5.0 + 3.0 * driver,
            "pcie_rx_bytes_per_s{gpu=0}": 2e9 + 5e8 * _ar1(rng, n, 0.9),
            "gpu_power_w{gpu=0}": 400 + np.cumsum(rng.normal(0, 3, n)),  # a random walk
            "gpu_temp_c{gpu=0}": 60 + rng.normal(0, 1, n),
            "gpu_mem_total_bytes{gpu=0}": np.full(n, 80e9),
            "kv_cache_usage_frac": np.full(n, 0.5),
        }
    )
    return latency, telemetry


def test_planted_driver_is_ranked_first_at_its_lag_and_nothing_else_is_a_driver() -> None:
    latency, telemetry = _planted(seed=11)
    report = find_drivers(latency, telemetry, CorrelationSettings(window_s=1.0, max_lag_windows=5))
    top = report.drivers[0]
    assert (top.latency, top.series, top.lag_windows, top.lag_s) == (
        "ttft_p99_ms",
        "queue_depth",
        3,
        3.0,
    )
    assert top.rho > 0.9 and top.q_value < 1e-10
    assert {d.series for d in report.drivers} == {"queue_depth"}
    assert not any(d.latency == "tpot_p99_ms" for d in report.drivers)
    reading = next(r for r in report.readings if r.startswith("p99 TTFT"))
    assert "p99 TTFT follows queue_depth" in reading
    assert "lag 3 s, telemetry leads" in reading
    assert "; not " in reading
    assert any("kv_cache_usage_frac" in s for s in report.skipped)  # constant: not tested
    assert all("gpu_mem_total_bytes" not in p.series for p in report.pairs)  # excluded


def test_negative_and_leading_latency_relations_are_worded_so() -> None:
    rng = np.random.default_rng(5)
    driver = _ar1(rng, 300, 0.6)
    p99 = 500.0 - 60.0 * driver + rng.normal(0, 10, 300)
    telemetry = pd.DataFrame({"gpu_sm_clock_mhz{gpu=0}": np.roll(1800 + 50 * driver, 2)})
    report = find_drivers(
        pd.DataFrame({"ttft_p99_ms": p99}), telemetry, CorrelationSettings(window_s=2.0)
    )
    [driver_row] = report.drivers
    assert driver_row.rho < -0.9
    assert driver_row.lag_windows == -2 and driver_row.lag_s == -4.0
    assert "moves against" in report.readings[0]
    assert "lag 4 s, latency leads" in report.readings[0]


def test_unrelated_smooth_series_are_not_drivers_although_naive_p_values_say_so() -> None:
    """Two independent random walks correlate 'significantly' by the textbook
    p-value most of the time; the autocorrelation-corrected test must not report
    them. The naive count shows this test can fail."""
    false_drivers = 0
    naive_hits = 0
    settings = CorrelationSettings(window_s=1.0, max_lag_windows=5)
    for seed in range(40):
        rng = np.random.default_rng(1000 + seed)
        walk_a = np.cumsum(rng.standard_normal(300))
        walk_b = np.cumsum(rng.standard_normal(300))
        report = find_drivers(
            pd.DataFrame({"ttft_p99_ms": walk_a}), pd.DataFrame({"queue_depth": walk_b}), settings
        )
        false_drivers += len(report.drivers)
        [pair] = report.pairs
        naive_hits += spearman_p_value(pair.rho, pair.n) < 0.01
    assert false_drivers <= 1
    assert naive_hits >= 20


def test_benjamini_hochberg_matches_the_textbook_example() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.005, 0.5])
    q = benjamini_hochberg(p)
    # sorted p: .005 .01 .03 .04 .5 → ×5/rank: .025 .025 .05 .05 .5 (monotone from the top)
    assert q.tolist() == pytest.approx([0.025, 0.05, 0.05, 0.025, 0.5])


def test_end_to_end_from_requests_and_telemetry_files(make_run: RunFactory) -> None:
    """The same planted relation, but through records → windows → p99 per window."""
    run_dir = make_run(
        n_requests=12000,
        duration_s=600.0,
        workloads=(WorkloadModel("chat", 1.0, 200.0, 16),),
        driver_lag_s=3.0,
        ttft_noise_sigma=0.1,
        error_rate=0.0,
        name="planted",
    )
    analysis = analyse_run(load_run(run_dir), AnalysisSettings(window_s=1.0))
    p99 = [d for d in analysis.correlation.drivers if d.latency == "ttft_p99_ms"]
    assert p99[0].series == "queue_depth" and p99[0].lag_s == 3.0
    assert {d.series for d in analysis.correlation.drivers} == {"queue_depth"}
