"""Raw Prometheus series made readable: counters as rates, histogram buckets as
quantiles, labels in numeric order, info series summarised, modelled GPU marked."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.run_fixtures import RunFactory
from zerohop.analysis.run_analysis import TimeSeriesData, analyse_run
from zerohop.analysis.timeseries import Timeline
from zerohop.core.metrics import needed_n
from zerohop.report.charts import Chart
from zerohop.report.present import report_page
from zerohop.report.present_appendix import MODELLED_NOTE, appendix_section, gauge_unit
from zerohop.report.telemetry_transforms import family_of, natural_key
from zerohop.storage.run_reader import load_run

pytestmark = pytest.mark.unit


def test_a_quantile_needs_one_observation_beyond_it() -> None:
    assert [needed_n(q) for q in (0.5, 0.9, 0.99, 0.999)] == [2, 10, 100, 1000]


def test_labels_sort_as_numbers() -> None:
    les = ["le=1920.0", "le=+Inf", "le=2.0", "le=10.0", "le=0.5"]
    assert sorted(les, key=natural_key) == ["le=0.5", "le=2.0", "le=10.0", "le=1920.0",
                                            "le=+Inf"]
    assert sorted(["gpu=10", "gpu=2"], key=natural_key) == ["gpu=2", "gpu=10"]


def test_families_and_units() -> None:
    assert family_of("vllm:ttft_seconds_bucket").role == "bucket"
    assert family_of("vllm:ttft_seconds_count").name == "vllm:ttft_seconds"
    assert family_of("vllm:prompt_tokens_total").role == "counter"
    assert family_of("vllm:lora_requests_info").role == "info"
    assert gauge_unit("vllm:kv_cache_usage_perc") == ("%", 100.0)  # a 0–1 fraction
    assert gauge_unit("DCGM_FI_DEV_POWER_USAGE") == ("W", 1.0)
    assert gauge_unit("DCGM_FI_DEV_FB_USED")[0] == "GB"


def _data(columns: dict[str, tuple[str, dict[str, str], np.ndarray]]) -> TimeSeriesData:
    n = len(next(iter(columns.values()))[2])
    empty = pd.DataFrame(index=pd.RangeIndex(n))
    return TimeSeriesData(
        timeline=Timeline(0.0, 1.0, n), load=empty, latency=empty, schedule_lag=empty,
        outcomes=empty, lanes=pd.DataFrame({k: v for k, (_, _, v) in columns.items()}),
        lane_metrics={k: m for k, (m, _, _) in columns.items()},
        lane_labels={k: labels for k, (_, labels, _) in columns.items()},
        lane_sources={k: "prom-raw:127.0.0.1:8000" for k in columns},
    )


def test_the_appendix_draws_rates_and_quantiles_and_summarises_info() -> None:
    ramp = np.arange(6, dtype=float) * 500.0  # 500 observations a window: enough for p99
    lanes = {
        f"h_seconds_bucket{{le={le}}}": ("h_seconds_bucket", {"le": le}, ramp * share)
        for le, share in (("0.5", 0.5), ("2.0", 0.9), ("+Inf", 1.0), ("1920.0", 1.0))
    }
    lanes["gen_tokens_total"] = ("gen_tokens_total", {}, ramp * 10.0)
    lanes["DCGM_FI_DEV_POWER_USAGE{gpu=0}"] = ("DCGM_FI_DEV_POWER_USAGE", {"gpu": "0"},
                                               np.full(6, 600.0))
    for i in range(12):
        lanes[f"x_info{{a={i}}}"] = ("x_info", {"a": str(i)}, np.full(6, 1.0))
    charts: list[Chart] = []
    x = np.arange(6) + 0.5
    embedded = {"target": {"kind": "embedded"}}
    section = appendix_section(_data(lanes), list(lanes), x, (0.0, 6.0), embedded, charts)
    by_title = {c.title.split(" ")[0]: c for c in charts}
    assert section["infos"] == [{"metric": "x_info", "sets": "12",
                                 "labels": "a: 0, 1, 2 … 9 more"}]
    rate = by_title["gen_tokens_total"]
    assert "tokens/s" in rate.title and np.nanmax(rate.series[0].values) == 5000.0
    hist = by_title["h_seconds"]
    assert [s.label for s in hist.series] == ["p50", "p99"] and "(ms" in hist.title
    assert "n = " in hist.title
    power = by_title["DCGM_FI_DEV_POWER_USAGE"]
    assert MODELLED_NOTE in power.title and "(W)" in power.title
    assert MODELLED_NOTE not in hist.title


def test_the_embedded_targets_gpu_is_marked_modelled_and_nvml_is_not(
        make_run: RunFactory) -> None:
    embedded = report_page(analyse_run(load_run(make_run(
        raw_prometheus=True, gpus=0, name="raw-embedded"))), "now")
    titles = [c.title for c in embedded.charts if c.title.startswith("DCGM_")]
    assert titles and all(MODELLED_NOTE in t for t in titles)
    nvml = report_page(analyse_run(load_run(make_run(name="nvml-gpus"))), "now")
    gpu = [c.title for c in nvml.charts if c.chart_id.startswith("chart-lane-gpu")]
    assert gpu and not any(MODELLED_NOTE in t for t in gpu)


@pytest.mark.parametrize(("manifest", "modelled"), [
    ({"simulation": {"replicas": 2}}, True),  # the virtual clock: every series a model's
    ({"target": {"kind": "embedded"}}, True),  # its /metrics (prom): the modelled GPU
    ({"target": {"kind": "external", "url": "http://gpu-box"}}, False),
])
def test_a_gpu_series_is_marked_modelled_wherever_a_model_made_it(
        manifest: dict[str, object], modelled: bool) -> None:
    lanes = {"DCGM_FI_DEV_POWER_USAGE{gpu=0}": ("DCGM_FI_DEV_POWER_USAGE", {"gpu": "0"},
                                                np.full(6, 600.0))}
    charts: list[Chart] = []
    appendix_section(_data(lanes), list(lanes), np.arange(6) + 0.5, (0.0, 6.0), manifest, charts)
    [power] = charts
    assert (MODELLED_NOTE in power.title) is modelled, power.title
