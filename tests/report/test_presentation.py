"""The pure presentation functions behind a report people read: brief legend names,
the tokens_per_read explanation of 0 ms ITL gaps, the first screen's figures, and the
comparison headline that is the worst judged figure."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.run_fixtures import RunFactory
from zerohop.analysis.comparison.compare import (
    CompareSettings,
    Comparison,
    LogicalComparison,
    MetricComparison,
    PercentileDelta,
    RateComparison,
    WorkloadComparison,
)
from zerohop.analysis.latency.policy import PolicySummary
from zerohop.analysis.latency.reads import summarise_reads
from zerohop.analysis.run_analysis import analyse_run
from zerohop.analysis.run_data import ItlColumn
from zerohop.report.legend import brief_names
from zerohop.report.present import report_page
from zerohop.report.present_compare import comparison_page, headline_verdict, verdict_line
from zerohop.report.present_latency import ITL_BETWEEN_READS, same_read_notes
from zerohop.storage.run_reader import load_run

pytestmark = pytest.mark.unit

DCGM = {"Hostname": "node-a", "modelName": "NVIDIA H200", "device": "nvidia{i}",
        "UUID": "GPU-5f3c9a1e-77d2-4b0e-9c1a-{i:012d}"}


def dcgm_labels(i: int) -> dict[str, str]:
    return {"gpu": str(i), **{k: v.format(i=i) for k, v in DCGM.items()}}


def lane_key(metric: str, labels: dict[str, str]) -> str:
    return metric + "{" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())) + "}"


# --- legends ---------------------------------------------------------------------------
def test_dcgm_lanes_are_named_by_gpu_and_keep_their_full_key_for_hover() -> None:
    series = [(lane_key("gpu_sm_util_pct", dcgm_labels(i)), dcgm_labels(i)) for i in range(4)]
    names = brief_names(series)
    assert [n.brief for n in names] == ["GPU 0", "GPU 1", "GPU 2", "GPU 3"]
    assert [n.full for n in names] == [key for key, _ in series]
    assert all("UUID" in n.full and "Hostname" in n.full for n in names)


def test_a_second_host_is_named_only_when_it_tells_series_apart() -> None:
    labels = [dict(dcgm_labels(0), Hostname="node-a"), dict(dcgm_labels(0), Hostname="node-b")]
    names = brief_names([(lane_key("gpu_power_w", x), x) for x in labels])
    assert [n.brief for n in names] == ["node-a", "node-b"]


def test_prefixes_and_label_free_lanes() -> None:
    rx_tx = [("pcie_rx{gpu=3}", {"gpu": "3"}), ("pcie_tx{gpu=3}", {"gpu": "3"})]
    assert [n.brief for n in brief_names(rx_tx, ["RX", "TX"])] == ["RX GPU 3", "TX GPU 3"]
    assert [n.brief for n in brief_names([("queue_depth", {})])] == ["queue_depth"]
    long_value = {"pool": "x" * 60}
    other = {"pool": "y"}
    names = brief_names([("m{pool=...}", long_value), ("m{pool=y}", other)])
    assert len(names[0].brief) < 40 and names[0].brief.endswith("…")


def test_the_report_legends_of_dcgm_lanes_are_brief(make_run: RunFactory) -> None:
    run = load_run(make_run(dcgm_labels=True, name="dcgm"))
    page = report_page(analyse_run(run), "now")
    lane_charts = [c for c in page.charts if c.chart_id.startswith("chart-lane-gpu")]
    assert lane_charts
    for chart in lane_charts:
        for s in chart.series:
            assert "{" not in s.label and "UUID" not in s.label and len(s.label) <= 16, s.label
            assert s.full_label is not None and "UUID=" in s.full_label
        assert chart.to_json()["series"][0]["full"].startswith("gpu_")


# --- tokens per read --------------------------------------------------------------------
def requests_frame(workloads: list[str], outcomes: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"workload": pd.Categorical(workloads),
                         "outcome": pd.Categorical(outcomes)})


def test_same_read_gaps_are_counted_per_read() -> None:
    # request 0: events at 0, 10, 10, 10, 25 → reads {0}, {10, 10, 10}, {25}
    # request 1: events at 0, 5 → 2 reads; request 2 failed (its gaps do not count)
    itl = ItlColumn(np.array([10.0, 0.0, 0.0, 15.0, 5.0, 0.0, 0.0]),
                    np.array([0, 4, 5, 7]))
    frame = requests_frame(["chat", "chat", "chat"], ["ok", "ok", "http_503"])
    (chat,) = summarise_reads(frame, itl, ["chat"])
    assert (chat.gaps, chat.same_read_gaps, chat.events, chat.reads) == (5, 2, 7, 5)
    assert chat.max_events_per_read == 3
    assert chat.tokens_per_read == pytest.approx(7 / 5)
    assert chat.between_reads.n == 3 and chat.between_reads.min == 5.0


def test_the_note_explains_zero_gaps_and_none_is_written_without_them() -> None:
    itl = ItlColumn(np.array([10.0, 0.0, 15.0]), np.array([0, 3]))
    (chat,) = summarise_reads(requests_frame(["chat"], ["ok"]), itl, ["chat"])
    (note,) = same_read_notes([chat])
    assert "tokens_per_read 1.33" in note and "1 of 3 ITL gaps" in note
    assert "not a token that took no time" in note
    plain = ItlColumn(np.array([10.0, 12.0]), np.array([0, 2]))
    assert same_read_notes(summarise_reads(requests_frame(["chat"], ["ok"]), plain,
                                           ["chat"])) == []


def test_the_report_shows_itl_between_reads_where_tokens_came_together(
        make_run: RunFactory) -> None:
    page = report_page(analyse_run(load_run(make_run(same_read_share=0.3, name="batched"))),
                       "now")
    latency = page.context["latency"]
    metrics = [row["metric"] for row in latency["rows"]]
    assert ITL_BETWEEN_READS in metrics and "ITL" not in metrics
    assert latency["notes"] and all("tokens_per_read" in n for n in latency["notes"])
    between = [row for row in latency["rows"] if row["metric"] == ITL_BETWEEN_READS]
    assert all(float(row["cells"][-2]) > 0 for row in between)  # min: no 0 ms token
    itl_cdf = next(c for c in page.charts if c.chart_id == "chart-cdf-itl_ms")
    assert float(np.nanmin(itl_cdf.x)) > 0
    figures = {row["label"]: row["value"] for row in page.context["headline"]["figures"]}
    assert f"{ITL_BETWEEN_READS} p50 / p99" in figures


def test_without_batched_tokens_the_report_keeps_plain_itl(make_run: RunFactory) -> None:
    page = report_page(analyse_run(load_run(make_run())), "now")
    assert page.context["latency"]["notes"] == []
    assert "ITL" in [row["metric"] for row in page.context["latency"]["rows"]]


# --- first screen -------------------------------------------------------------------------
def test_headline_figures_and_chart(make_run: RunFactory) -> None:
    page = report_page(analyse_run(load_run(make_run())), "now")
    headline = page.context["headline"]
    labels = [row["label"] for row in headline["figures"]]
    assert labels[:4] == ["requests", "errors", "throughput", "goodput"]
    assert {"TTFT p50 / p99", "TPOT p50 / p99", "E2E p50 / p99"} <= set(labels)
    chart = next(c for c in page.charts if c.chart_id == headline["chart"])
    assert [s.label for s in chart.series] == ["p50", "p99"]


# --- comparison headline --------------------------------------------------------------------
SETTINGS = CompareSettings()


def metric(name: str, verdict: str) -> MetricComparison:
    row = PercentileDelta(name, "p99", 100.0, 101.0, 1.0, 1.0, -2.0, 4.0, verdict)  # type: ignore[arg-type]
    empty = (np.array([]), np.array([]))
    return MetricComparison(name, verdict, [row], 100, 100, empty, empty)  # type: ignore[arg-type]


def error_rate(verdict: str | None, delta_pp: float) -> RateComparison:
    return RateComparison("error %", 1.0, 1.0 + delta_pp, delta_pp, delta_pp - 2, delta_pp + 2,
                          verdict)  # type: ignore[arg-type]


def policy(p99: float) -> PolicySummary:
    return PolicySummary(100, 100, 90, 120, 1.2, 0.9, 50.0, p99, p99, 40.0, {"m": 1.0}, {}, {},
                         {}, 1000, 0)


def comparison(error: RateComparison, logical_p99: str | None = None) -> Comparison:
    latency = [metric(m, "within noise") for m in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")]
    workloads = [WorkloadComparison("all", latency, [error])]
    logical = None
    if logical_p99 is not None:
        success = RateComparison("logical success", 90.0, 89.0, -1.0, -3.0, 1.0, "within noise")
        amp = RateComparison("amplification", 1.2, 1.3, 0.1, math.nan, math.nan, None)
        p99 = PercentileDelta("logical_e2e_ms", "p99", 100.0, 160.0, 60.0, 60.0, 40.0, 80.0,
                              logical_p99)  # type: ignore[arg-type]
        logical = LogicalComparison(policy(100.0), policy(160.0), amp, success, [p99], [])
    return Comparison("base", "cand", SETTINGS, workloads, [], logical=logical)


def test_a_worse_error_rate_is_the_headline_when_latency_is_within_noise() -> None:
    verdict, because = headline_verdict(comparison(error_rate("worse", 31.0)))
    assert verdict == "worse" and because == ["all error %"]
    block = comparison_page([comparison(error_rate("worse", 31.0))], "now").context
    (shown,) = block["comparisons"]
    assert shown["overall"] == "worse" and "error %" in shown["because"]
    assert "error % worse (+31.00 pp)" in verdict_line(comparison(error_rate("worse", 31.0)))


def test_a_worse_logical_p99_is_the_headline() -> None:
    verdict, because = headline_verdict(comparison(error_rate("within noise", 0.0), "worse"))
    assert verdict == "worse" and because == ["logical E2E p99"]


def test_within_noise_only_when_every_judged_figure_is() -> None:
    assert headline_verdict(comparison(error_rate("within noise", 0.0), "within noise")) == (
        "within noise", [])
    # shown-only figures (verdict None) never move the headline
    assert headline_verdict(comparison(error_rate(None, 50.0)))[0] == "within noise"
    assert headline_verdict(comparison(error_rate("better", -5.0)))[0] == "better"


def test_worse_outranks_better_and_mixed(tmp_path: Path) -> None:
    c = comparison(error_rate("better", -5.0), "worse")
    c.workloads[0].metrics[0] = metric("ttft_ms", "mixed")
    assert headline_verdict(c)[0] == "worse"


def test_a_comparison_warns_when_the_runs_differ_in_duration_and_load(
        make_run: RunFactory) -> None:
    from zerohop.analysis.comparison.compare import compare_runs

    base = load_run(make_run(duration_s=120.0, name="long"))
    short = load_run(make_run(duration_s=60.0, open_loop=False, name="short"))
    warnings = compare_runs(base, short).warnings
    assert any("lasted differently" in w and "120 s" in w and "60 s" in w for w in warnings)
    assert any("different loads" in w and "mode open → closed" in w for w in warnings)
    assert compare_runs(base, load_run(make_run(duration_s=120.0, noise_seed=5,
                                                name="same"))).warnings == []


def test_a_badge_and_its_own_line_agree_when_another_workload_earned_it() -> None:
    """The arms page showed a control's badge "worse" beside its line "all: ... within
    noise": the badge is the worst figure of any workload, the line was the `all` row's
    only. The line now names what earned the badge wherever it is."""
    from types import SimpleNamespace as NS

    worse = NS(metric="ttft_ms", verdict="worse",
               rows=[NS(verdict="worse", stat="p50", delta_pct=31.0, ci_low=1.0, ci_high=2.0)])
    quiet = NS(metric="ttft_ms", verdict="within noise", rows=[])
    comparison = NS(workloads=[NS(workload="long_context", metrics=[worse], rates=[]),
                               NS(workload="all", metrics=[quiet], rates=[])], logical=None)
    badge, because = headline_verdict(comparison)  # type: ignore[arg-type]
    line = verdict_line(comparison)  # type: ignore[arg-type]
    assert (badge, because) == ("worse", ["long_context TTFT"])
    assert line.startswith("all: TTFT within noise") and "worse: long_context TTFT" in line
    calm = NS(workloads=[NS(workload="all", metrics=[quiet], rates=[])], logical=None)
    assert verdict_line(calm) == "all: TTFT within noise"  # type: ignore[arg-type]
