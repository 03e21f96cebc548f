"""Drivers from cumulative server series: a planted queue-driven TTFT must be named
by the queue histogram's mean per interval, never by a climbing `_total`/`_sum`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.signal import lfilter

from zerohop.analysis.counters import counter_rates
from zerohop.analysis.server.correlation import CorrelationSettings, find_drivers
from zerohop.analysis.server.driver_lanes import driver_lanes
from zerohop.analysis.timeseries import Lane, Timeline, lane_windows

pytestmark = pytest.mark.unit

N = 300
T0 = 1_764_000_000.0
LABELS = {"model_name": "m"}
SOURCE = "prom-raw:127.0.0.1:8000"


def _lane(metric: str, values: np.ndarray) -> Lane:
    ts = T0 + np.arange(N) + 0.5
    return Lane(f"{metric}{{model_name=m}}", metric, LABELS, SOURCE, ts, values)


def _planted(seed: int = 7) -> tuple[pd.DataFrame, list[Lane]]:
    """Each second 20 requests finish; their mean queue wait follows bursts, and p99
    TTFT follows the wait; TTFT also drifts up over the run, as a run that warms."""
    rng = np.random.default_rng(seed)
    bursts = lfilter([1.0], [1.0, -0.6], rng.standard_normal(N))
    wait_s = np.clip(0.2 + 0.15 * bursts, 0.0, None)
    finished = rng.poisson(20, N).astype(float)
    p99 = 80 + 1500 * wait_s + 0.4 * np.arange(N) + rng.normal(0, 15, N)
    lanes = [
        _lane("vllm:request_queue_time_seconds_sum", np.cumsum(wait_s * finished)),
        _lane("vllm:request_queue_time_seconds_count", np.cumsum(finished)),
        _lane("vllm:request_success_total", np.cumsum(finished)),
        _lane("vllm:generation_tokens_total", np.cumsum(rng.poisson(400, N).astype(float))),
    ]
    return pd.DataFrame({"ttft_p99_ms": p99}), lanes


def _drivers(latency: pd.DataFrame, lanes: list[Lane]) -> list[str]:
    windows = lane_windows(lanes, Timeline(T0, 1.0, N))
    report = find_drivers(latency, windows, CorrelationSettings(window_s=1.0))
    return [d.series for d in report.drivers]


def test_the_queue_is_named_from_its_histogram_and_no_cumulative_series_is() -> None:
    latency, lanes = _planted()
    named = _drivers(latency, driver_lanes(lanes))
    assert named[0] == "mean(vllm:request_queue_time_seconds){model_name=m}"
    assert not any(name.startswith("vllm:") for name in named)  # no raw cumulative series
    assert "rate(vllm:request_success_total){model_name=m}" not in named


def test_raw_cumulative_series_miss_the_queue() -> None:
    """What the analysis saw before: the queue's _sum climbing like every counter, and
    no driver named although the queue drives TTFT. Shows the test above can fail."""
    latency, lanes = _planted()
    assert not any("queue_time" in name for name in _drivers(latency, lanes))


def test_the_servers_own_latency_histograms_are_no_drivers_but_their_load_is() -> None:
    _, lanes = _planted()
    ttft = [_lane("vllm:time_to_first_token_seconds_sum", lanes[0].values),
            _lane("vllm:time_to_first_token_seconds_count", lanes[1].values)]
    keys = {lane.key for lane in driver_lanes(ttft)}
    assert keys == {"rate(vllm:time_to_first_token_seconds_count){model_name=m}"}


def test_counter_rates_handle_a_restart_and_the_first_sample() -> None:
    rates = counter_rates(np.array([0.0, 1.0, 2.0, 4.0]), np.array([5.0, 7.0, 1.0, 5.0]))
    assert np.isnan(rates[0])
    assert rates[1:].tolist() == [2.0, 1.0, 2.0]


def test_a_run_where_nothing_explains_the_latency_says_so() -> None:
    rng = np.random.default_rng(3)
    latency = pd.DataFrame({"ttft_p99_ms": 100 + rng.normal(0, 5, N)})
    telemetry = pd.DataFrame({"queue_depth": rng.poisson(3, N).astype(float)})
    report = find_drivers(latency, telemetry, CorrelationSettings(window_s=1.0))
    assert report.drivers == []
    assert report.readings[0].startswith(
        "Nothing in the telemetry explains the latency: none of 1 series moved")
    short = find_drivers(latency.iloc[:5], telemetry.iloc[:5], CorrelationSettings(window_s=1.0))
    assert short.readings[0].startswith("Nothing could be tested")
