"""One reset rule for every cumulative series (zerohop.analysis.counters): a counter or
histogram that goes down restarted from zero. The telemetry scraper, the driver analysis
and the report's appendix read one restart alike, each checked against figures worked
out here by a plain loop."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from zerohop.analysis.counters import (
    bucket_increases,
    counter_rate,
    counter_rates,
    window_quantiles,
    window_rates,
)
from zerohop.analysis.run_analysis import TimeSeriesData
from zerohop.analysis.server.driver_lanes import driver_lanes
from zerohop.analysis.timeseries import Lane, Timeline
from zerohop.report.charts import Chart
from zerohop.report.present_appendix import appendix_section
from zerohop.telemetry.prometheus import PromDeriver, parse_exposition

pytestmark = pytest.mark.unit

SOURCE = "prom:127.0.0.1:8000"
STEP_S = 2.0
# a prompt-token counter read every 2 s; the server restarts between 70 and 5
TS = np.arange(5) * STEP_S
TOKENS = np.array([10.0, 30.0, 70.0, 5.0, 25.0])
# a TTFT histogram's cumulative buckets (le 0.1, 0.5, +Inf) at three scrapes; the
# server restarts before the third, which by then has counted more in two buckets
BOUNDS = (0.1, 0.5, math.inf)
SCRAPES = ([5.0, 8.0, 10.0], [7.0, 12.0, 15.0], [2.0, 13.0, 16.0])


def plain_rates(ts: np.ndarray, values: np.ndarray) -> list[float]:
    """A second author: the increase is the new value when the counter went down."""
    out = [math.nan]
    for i in range(1, len(values)):
        increase = values[i] - values[i - 1] if values[i] >= values[i - 1] else values[i]
        out.append(increase / (ts[i] - ts[i - 1]))
    return out


def plain_window(before: list[float], now: list[float]) -> list[float]:
    """Per-bucket observations between two scrapes, restarted if any bucket fell."""
    if any(b > n for b, n in zip(before, now, strict=True)):
        return list(now)
    return [n - b for b, n in zip(before, now, strict=True)]


def plain_median(window: list[float]) -> float:
    """The median observation of a window's cumulative buckets, linear inside a bucket."""
    rank, lower = window[-1] / 2, 0.0
    below = 0.0
    for bound, count in zip(BOUNDS, window, strict=True):
        if count >= rank:
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    raise AssertionError("no bucket holds the rank")


def test_the_restart_rule_by_hand() -> None:
    assert plain_rates(TS, TOKENS)[1:] == [10.0, 20.0, 2.5, 10.0]  # 5 since the restart
    assert plain_window(SCRAPES[1], SCRAPES[2]) == [2.0, 13.0, 16.0]  # all counted anew
    assert plain_median([2.0, 13.0, 16.0]) == pytest.approx(0.1 + 0.4 * 6 / 11)  # rank 8


def test_a_counter_restart_is_a_rate_of_the_new_value() -> None:
    expected = plain_rates(TS, TOKENS)
    assert counter_rates(TS, TOKENS)[1:].tolist() == expected[1:]
    assert np.isnan(counter_rates(TS, TOKENS)[0])
    assert window_rates(TOKENS, STEP_S)[1:].tolist() == expected[1:]
    assert counter_rate(70.0, 4.0, 5.0, 6.0) == expected[3]
    assert counter_rate(1.0, 10.0, 2.0, 10.0) is None  # no time passed


def test_a_histogram_restart_counts_its_buckets_anew() -> None:
    cumulative = np.array(SCRAPES).T
    increases = bucket_increases(cumulative)
    assert np.isnan(increases[:, 0]).all()
    assert increases[:, 1].tolist() == plain_window(SCRAPES[0], SCRAPES[1])
    assert increases[:, 2].tolist() == plain_window(SCRAPES[1], SCRAPES[2])
    result = window_quantiles(BOUNDS, cumulative, (0.5,))
    assert result.n[1:].tolist() == [5.0, 16.0]
    medians = [plain_median(plain_window(SCRAPES[i - 1], SCRAPES[i])) for i in (1, 2)]
    assert result.quantiles[0.5][1:] == pytest.approx(medians)


def test_bucket_increases_give_each_windows_quantiles() -> None:
    bounds = [0.1, 0.2, 0.4, float("inf")]
    # window 1 adds 100 observations, all in (0.1, 0.2]; window 2 adds 200: 100 ≤ 0.1,
    # 100 in (0.2, 0.4]; window 3 adds 3 (too few for a p99)
    cumulative = np.array([[0, 0, 100, 100], [0, 100, 200, 201], [0, 100, 300, 303],
                           [0, 100, 300, 303]], dtype=float)
    result = window_quantiles(bounds, cumulative, (0.5, 0.99))
    p50, p99 = result.quantiles[0.5], result.quantiles[0.99]
    assert np.isnan(p50[0]) and result.n[1:].tolist() == [100.0, 200.0, 3.0]
    assert p50[1] == pytest.approx(0.15)  # the middle of (0.1, 0.2]
    assert p99[1] == pytest.approx(0.199)
    assert p50[2] == pytest.approx(0.1)  # rank 100 of 200: the top of the first bucket
    assert p99[2] == pytest.approx(0.2 + 0.2 * 98 / 100)
    assert np.isfinite(p50[3]) and np.isnan(p99[3])  # 3 observations: p50 yes, p99 no


def _exposition(tokens: float, buckets: list[float]) -> str:
    lines = ["# TYPE vllm:prompt_tokens counter", f"vllm:prompt_tokens_total {tokens}",
             "# TYPE vllm:time_to_first_token_seconds histogram"]
    for bound, count in zip(("0.1", "0.5", "+Inf"), buckets, strict=True):
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{le="{bound}"}} {count}')
    lines += [f"vllm:time_to_first_token_seconds_count {buckets[-1]}",
              "vllm:time_to_first_token_seconds_sum 1.0", ""]
    return "\n".join(lines)


def test_the_scraper_reads_the_restart_alike() -> None:
    deriver = PromDeriver(SOURCE, keep_raw=False)
    rates, medians = [], []
    for i, tokens in enumerate(TOKENS):
        buckets = SCRAPES[min(i, 2)]
        rows = deriver.feed(float(TS[i]), parse_exposition(_exposition(tokens, buckets)))
        rates += [r.value for r in rows if r.metric == "prompt_tokens_per_s"]
        if i in (1, 2):
            medians += [r.value for r in rows if r.metric == "server_ttft_p50_s"]
    assert rates == plain_rates(TS, TOKENS)[1:]
    assert medians == pytest.approx(
        [plain_median(plain_window(SCRAPES[i - 1], SCRAPES[i])) for i in (1, 2)])


def test_the_driver_analysis_reads_the_restart_alike() -> None:
    lane = Lane("vllm:prompt_tokens_total", "vllm:prompt_tokens_total", {}, SOURCE,
                TS + 100.0, TOKENS)
    (rate,) = driver_lanes([lane])
    assert rate.metric == "rate(vllm:prompt_tokens_total)"
    assert rate.values[1:].tolist() == plain_rates(TS, TOKENS)[1:]


def test_the_report_appendix_reads_the_restart_alike() -> None:
    columns = {"vllm:prompt_tokens_total": ("vllm:prompt_tokens_total", {}, TOKENS)}
    for le, row in zip(("0.1", "0.5", "+Inf"), np.array(SCRAPES).T, strict=True):
        columns[f"ttft_bucket{{le={le}}}"] = ("vllm:time_to_first_token_seconds_bucket",
                                              {"le": le}, np.append(row, [row[-1]] * 2))
    data = TimeSeriesData(
        timeline=Timeline(0.0, STEP_S, 5), load=pd.DataFrame(), latency=pd.DataFrame(),
        schedule_lag=pd.DataFrame(), outcomes=pd.DataFrame(),
        lanes=pd.DataFrame({k: v for k, (_, _, v) in columns.items()}),
        lane_metrics={k: m for k, (m, _, _) in columns.items()},
        lane_labels={k: labels for k, (_, labels, _) in columns.items()},
        lane_sources={k: "prom-raw:127.0.0.1:8000" for k in columns},
    )
    charts: list[Chart] = []
    appendix_section(data, list(columns), TS + 1.0, (0.0, 10.0), {}, charts)
    by_name = {c.title.split(" ")[0]: c for c in charts}
    rate = by_name["vllm:prompt_tokens_total"].series[0].values
    assert rate[1:].tolist() == plain_rates(TS, TOKENS)[1:]
    p50 = by_name["vllm:time_to_first_token_seconds"].series[0].values
    medians_ms = [1e3 * plain_median(plain_window(SCRAPES[i - 1], SCRAPES[i])) for i in (1, 2)]
    assert p50[1:3] == pytest.approx(medians_ms)
