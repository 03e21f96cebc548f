"""Exposition parsing, canonical mapping, counter rates and windowed histogram quantiles,
on recorded-shape texts of vLLM, SGLang, TGI and a DCGM exporter."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.telemetry.fakes import DCGM_TEXT, SGLANG_TEXT, TGI_TEXT, vllm_text
from zerohop.analysis.counters import counter_rate, histogram_quantile
from zerohop.telemetry.canonical import GLOSSARY, SCALAR_MAP
from zerohop.telemetry.prometheus import PromDeriver, bucket_deltas, parse_exposition
from zerohop.telemetry.samples import Sample

pytestmark = pytest.mark.unit

INF = math.inf
SOURCE = "prom:127.0.0.1:8000"


def canonical(rows: list[Sample], metric: str) -> list[float]:
    return [r.value for r in rows if r.metric == metric and r.source == SOURCE]


# --- the maths ----------------------------------------------------------------------------
def test_quantile_interpolates_linearly_inside_the_bucket() -> None:
    buckets = [(0.1, 0.0), (0.5, 4.0), (1.0, 8.0), (INF, 8.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.5)
    assert histogram_quantile(0.99, buckets) == pytest.approx(0.5 + 0.5 * (7.92 - 4) / 4)
    assert histogram_quantile(0.25, buckets) == pytest.approx(0.1 + 0.4 * 0.5)


def test_quantile_first_bucket_starts_at_zero_and_inf_bucket_gives_highest_bound() -> None:
    assert histogram_quantile(0.5, [(0.1, 2.0), (INF, 2.0)]) == pytest.approx(0.05)
    # half the observations are above the last finite bound: p99 reads as that bound
    assert histogram_quantile(0.99, [(0.1, 1.0), (1.0, 2.0), (INF, 4.0)]) == 1.0
    assert histogram_quantile(0.5, [(-1.0, 3.0), (INF, 3.0)]) == -1.0


def test_quantile_edge_cases_follow_prometheus() -> None:
    assert math.isnan(histogram_quantile(0.5, [(0.1, 0.0), (INF, 0.0)]))  # no observations
    assert math.isnan(histogram_quantile(0.5, [(0.1, 1.0), (1.0, 2.0)]))  # no +Inf bucket
    assert math.isnan(histogram_quantile(0.5, [(INF, 3.0)]))  # one bucket
    assert histogram_quantile(1.5, [(0.1, 1.0), (INF, 1.0)]) == INF
    assert histogram_quantile(-0.1, [(0.1, 1.0), (INF, 1.0)]) == -INF
    # non-monotonic input (a scrape racing an update) is repaired to [2, 2, 4], not an error
    assert histogram_quantile(0.5, [(0.1, 2.0), (0.5, 1.0), (INF, 4.0)]) == pytest.approx(0.1)
    assert histogram_quantile(0.75, [(0.1, 2.0), (0.5, 1.0), (INF, 4.0)]) == 0.5


@given(
    st.lists(st.integers(0, 50), min_size=1, max_size=8),
    st.floats(0.0, 1.0), st.floats(0.0, 1.0),
)
def test_quantile_is_monotone_and_inside_the_bounds(increments: list[int], q1: float,
                                                     q2: float) -> None:
    bounds = [0.01 * 2**i for i in range(len(increments))]
    counts, total = [], 0
    for inc in increments:
        total += inc
        counts.append(float(total))
    buckets = [*zip(bounds, counts, strict=True), (INF, float(total + 1))]
    lo, hi = sorted((q1, q2))
    a, b = histogram_quantile(lo, buckets), histogram_quantile(hi, buckets)
    assert 0.0 <= a <= b <= bounds[-1]


def test_counter_rate_handles_resets_and_zero_time() -> None:
    assert counter_rate(100.0, 10.0, 300.0, 12.0) == 100.0
    assert counter_rate(500.0, 10.0, 40.0, 12.0) == 20.0  # restarted: 40 since reset
    assert counter_rate(1.0, 10.0, 2.0, 10.0) is None


def test_bucket_deltas_per_window_and_after_reset() -> None:
    before = {0.1: 1.0, 0.5: 2.0, INF: 2.0}
    assert bucket_deltas(before, {0.1: 1.0, 0.5: 6.0, INF: 10.0}) == [
        (0.1, 0.0), (0.5, 4.0), (INF, 8.0)]
    # one bucket went down: the server restarted, the current counts are the window
    assert bucket_deltas(before, {0.1: 0.0, 0.5: 1.0, INF: 1.0}) == [
        (0.1, 0.0), (0.5, 1.0), (INF, 1.0)]


# --- vLLM ------------------------------------------------------------------------------------
def _vllm(**kw: object) -> str:
    base: dict[str, object] = dict(waiting=0, running=2, kv=0.1, prompt_total=1000,
                                   gen_total=500, preempt_total=0,
                                   ttft_buckets={"0.1": 1, "0.5": 2, "1.0": 2, "+Inf": 2})
    base.update(kw)
    return vllm_text(**base)  # type: ignore[arg-type]


def test_vllm_two_scrapes_give_gauges_rates_and_windowed_ttft() -> None:
    deriver = PromDeriver(SOURCE)
    first = deriver.feed(100.0, parse_exposition(_vllm()))
    assert canonical(first, "queue_depth") == [0.0]
    assert canonical(first, "prompt_tokens_per_s") == []  # a rate needs two scrapes
    assert canonical(first, "server_ttft_p50_s") == []

    second = deriver.feed(102.0, parse_exposition(_vllm(
        waiting=7, running=4, kv=0.4, prompt_total=3000, gen_total=1500, preempt_total=2,
        ttft_buckets={"0.1": 1, "0.5": 6, "1.0": 10, "+Inf": 10})))
    assert canonical(second, "queue_depth") == [7.0]
    assert canonical(second, "running_requests") == [4.0]
    assert canonical(second, "kv_cache_usage_frac") == [0.4]
    assert canonical(second, "prompt_tokens_per_s") == [1000.0]
    assert canonical(second, "generation_tokens_per_s") == [500.0]
    assert canonical(second, "preemptions_per_s") == [1.0]
    assert canonical(second, "server_ttft_p50_s") == [pytest.approx(0.5)]
    assert canonical(second, "server_ttft_p99_s") == [pytest.approx(0.99)]

    row = next(r for r in second if r.metric == "queue_depth")
    assert json.loads(row.labels) == {"engine": "0", "model_name": "tiny"}
    assert row.raw_metric == "vllm:num_requests_waiting"
    ttft = next(r for r in second if r.metric == "server_ttft_p50_s")
    assert "le" not in json.loads(ttft.labels)


def test_vllm_server_restart_is_a_counter_reset_not_a_negative_rate() -> None:
    deriver = PromDeriver(SOURCE)
    deriver.feed(100.0, parse_exposition(_vllm(prompt_total=5000)))
    rows = deriver.feed(102.0, parse_exposition(_vllm(
        prompt_total=100, ttft_buckets={"0.1": 2, "0.5": 2, "1.0": 2, "+Inf": 2})))
    assert canonical(rows, "prompt_tokens_per_s") == [50.0]
    assert canonical(rows, "server_ttft_p50_s") == [pytest.approx(0.05)]


def test_no_ttft_row_for_a_window_without_requests() -> None:
    deriver = PromDeriver(SOURCE)
    deriver.feed(100.0, parse_exposition(_vllm()))
    rows = deriver.feed(101.0, parse_exposition(_vllm()))
    assert canonical(rows, "server_ttft_p50_s") == []


def test_raw_series_are_kept_under_the_raw_source_without_created() -> None:
    text = _vllm()
    rows = PromDeriver(SOURCE).feed(100.0, parse_exposition(text))
    raw = [r for r in rows if r.source == "prom-raw:127.0.0.1:8000"]
    exposed = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert len(raw) == len(exposed) - 1  # every sample but the _created one
    assert {r.metric for r in raw} >= {"vllm:num_requests_waiting", "vllm:prompt_tokens_total",
                                       "vllm:time_to_first_token_seconds_bucket"}
    bucket = next(r for r in raw if r.metric.endswith("_bucket"))
    assert "le" in json.loads(bucket.labels)
    assert not [r for r in PromDeriver(SOURCE, keep_raw=False).feed(1.0, parse_exposition(text))
                if r.source.startswith("prom-raw")]


def test_older_vllm_cache_name_maps_too() -> None:
    text = "# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc 0.25\n"
    rows = PromDeriver(SOURCE).feed(1.0, parse_exposition(text))
    assert canonical(rows, "kv_cache_usage_frac") == [0.25]


# --- SGLang, TGI, DCGM -----------------------------------------------------------------------
def test_sglang_mapping() -> None:
    deriver = PromDeriver(SOURCE)
    deriver.feed(10.0, parse_exposition(SGLANG_TEXT % {"prompt": 100, "b1": 0, "b2": 0}))
    rows = deriver.feed(11.0, parse_exposition(SGLANG_TEXT % {"prompt": 400, "b1": 3, "b2": 4}))
    assert canonical(rows, "queue_depth") == [3.0]
    assert canonical(rows, "running_requests") == [12.0]
    assert canonical(rows, "kv_cache_usage_frac") == [0.28]
    assert canonical(rows, "prompt_tokens_per_s") == [300.0]
    assert canonical(rows, "generation_tokens_per_s") == [0.0]
    # 4 requests: 3 under 100 ms, 1 in (0.1, 0.5]: p50 at rank 2 of 3 in the first bucket
    assert canonical(rows, "server_ttft_p50_s") == [pytest.approx(0.1 * 2 / 3)]
    assert canonical(rows, "server_ttft_p99_s") == [pytest.approx(0.1 + 0.4 * 0.96)]


def test_tgi_mapping_uses_histogram_sums_for_token_rates() -> None:
    deriver = PromDeriver(SOURCE)
    deriver.feed(0.0, parse_exposition(TGI_TEXT % {"queue": 1, "gen_sum": 100}))
    rows = deriver.feed(4.0, parse_exposition(TGI_TEXT % {"queue": 9, "gen_sum": 300}))
    assert canonical(rows, "queue_depth") == [9.0]
    assert canonical(rows, "running_requests") == [8.0]
    assert canonical(rows, "generation_tokens_per_s") == [50.0]
    assert canonical(rows, "prompt_tokens_per_s") == [0.0]


def test_dcgm_mapping_converts_units_and_survives_counter_typed_gauges() -> None:
    rows = PromDeriver(SOURCE).feed(5.0, parse_exposition(DCGM_TEXT))
    assert canonical(rows, "gpu_sm_clock_mhz") == [1980.0]
    assert canonical(rows, "gpu_sm_util_pct") == [97.0]
    assert canonical(rows, "gpu_mem_used_bytes") == [1024.0 * 1024 * 1024]
    assert canonical(rows, "gpu_power_w") == [612.5]
    assert canonical(rows, "gpu_temp_c") == [61.0]
    assert canonical(rows, "gpu_sm_active_pct") == [75.0]
    # declared `counter` by some exporter configs, yet a bytes/s rate: read as a gauge
    assert canonical(rows, "pcie_rx_bytes_per_s") == [2.5e9]
    assert canonical(rows, "pcie_tx_bytes_per_s") == [1.25e9]
    row = next(r for r in rows if r.metric == "gpu_temp_c")
    assert json.loads(row.labels)["gpu"] == "0"
    # the energy counter stays cumulative (its deltas are the energy), mJ → J, from the
    # first scrape on: unlike a rate it needs no previous reading
    assert canonical(rows, "gpu_energy_j") == [pytest.approx(123456.789)]
    later = PromDeriver(SOURCE).feed(6.0, parse_exposition(
        DCGM_TEXT.replace("} 123456789", "} 123457789")))
    assert canonical(later, "gpu_energy_j") == [pytest.approx(123457.789)]


def test_every_mapped_metric_is_in_the_glossary() -> None:
    assert {m.canonical for m in SCALAR_MAP.values()} <= set(GLOSSARY)
    for name in ("server_ttft_p50_s", "server_ttft_p99_s", "loadgen_cpu_pct",
                 "loadgen_rss_bytes", "loadgen_loop_lag_ms", "gpu_power_avg_w", "gap"):
        assert name in GLOSSARY


def test_garbage_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_exposition("this is { not prometheus\n")


def test_old_and_new_names_together_give_one_row_from_the_new() -> None:
    text = ("# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc 0.5\n"
            "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc 0.25\n")
    rows = PromDeriver(SOURCE).feed(1.0, parse_exposition(text))
    assert [(r.value, r.raw_metric) for r in rows if r.source == SOURCE] == [
        (0.25, "vllm:kv_cache_usage_perc")]
