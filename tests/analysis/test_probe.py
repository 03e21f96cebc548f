"""The interference probe's analysis on known inputs: the phases a probe request falls
in, the shift of each percentile and its interval, the arms of a layer comparison, and a
phase with too few samples saying so instead of printing a number."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from zerohop.analysis.comparison.probe import MIN_SAMPLES, summarise_probe
from zerohop.analysis.run_data import ProbeRecords, RunData, frame_from_rows
from zerohop.analysis.timeseries import Timeline
from zerohop.report.charts import Chart
from zerohop.report.present_probe import console_line, probe_section

pytestmark = pytest.mark.unit

IDLE_START, LOAD_START, LOAD_END = 1000.0, 1020.0, 1060.0


def probe_row(sent_ts: float, ttft_ms: float, *, arm: str | None = None,
              outcome: str = "ok") -> dict[str, Any]:
    return {"workload": "probe", "outcome": outcome, "arm": arm, "sent_ts": sent_ts,
            "end_ts": sent_ts + (ttft_ms + 20.0) / 1000.0, "ttft_ms": ttft_ms,
            "e2e_ms": ttft_ms + 20.0}


def run_with(rows: list[dict[str, Any]] | None) -> RunData:
    frame, itl = frame_from_rows([probe_row(LOAD_START + 1, 5.0)])
    probe = None
    if rows is not None:
        probe_frame, _ = frame_from_rows(rows)
        probe = ProbeRecords(probe_frame, {
            "rate_rps": 5.0, "prompt_tokens": 16, "output_tokens": 4, "idle_s": 20.0,
            "idle_start_ts": IDLE_START, "load_start_ts": LOAD_START,
            "load_end_ts": LOAD_END})
    return RunData(run_dir=Path("r"), manifest={"run_id": "r"}, requests=frame, itl=itl,
                   telemetry=frame.iloc[0:0], microbench=None, requests_source="jsonl",
                   probe=probe)


def phase_rows(idle_ttft: np.ndarray, load_ttft: np.ndarray, arm: str | None = None
               ) -> list[dict[str, Any]]:
    """Idle requests spread over the idle phase, the others over the load."""
    idle_ts = np.linspace(IDLE_START, LOAD_START - 1.0, idle_ttft.size)
    load_ts = np.linspace(LOAD_START, LOAD_END - 1.0, load_ttft.size)
    return ([probe_row(t, v, arm=arm) for t, v in zip(idle_ts, idle_ttft, strict=True)]
            + [probe_row(t, v, arm=arm) for t, v in zip(load_ts, load_ttft, strict=True)])


def test_a_load_that_adds_50_ms_to_every_probe_is_priced_at_50_ms_at_p50_and_p99() -> None:
    idle = np.random.default_rng(1).gamma(4.0, 3.0, 150) + 10.0
    figures = summarise_probe(run_with(phase_rows(idle, idle + 50.0)))
    assert figures is not None
    [arm] = figures.arms
    assert arm.arm == "all" and (arm.idle_n, arm.load_n, arm.failed) == (150, 150, 0)
    for metric in ("ttft_ms", "e2e_ms"):
        for stat in ("p50", "p99"):
            shift = arm.shift(metric, stat)
            assert shift.too_few is None
            assert shift.delta_ms == pytest.approx(50.0)
            assert shift.ci_low_ms <= 50.0 <= shift.ci_high_ms and shift.ci_low_ms > 0
            assert not shift.holds_zero
    assert arm.shift("ttft_ms", "p50").idle_ms == pytest.approx(
        np.quantile(idle, 0.5, method="inverted_cdf"))


def test_the_same_latencies_in_both_phases_give_an_interval_that_holds_0() -> None:
    rng = np.random.default_rng(2)
    figures = summarise_probe(run_with(phase_rows(rng.gamma(4.0, 3.0, 60) + 10.0,
                                                  rng.gamma(4.0, 3.0, 120) + 10.0)))
    assert figures is not None
    assert figures.arms[0].shift("ttft_ms", "p50").holds_zero


def test_too_few_samples_say_so_instead_of_a_number() -> None:
    idle = np.full(MIN_SAMPLES["p50"] - 1, 10.0)
    figures = summarise_probe(run_with(phase_rows(idle, np.full(40, 60.0))))
    assert figures is not None
    [arm] = figures.arms
    for stat in ("p50", "p99"):
        shift = arm.shift("ttft_ms", stat)
        assert shift.too_few is not None and "too few samples" in shift.too_few
        assert f"{MIN_SAMPLES['p50'] - 1} idle, 40 under load" in shift.too_few
        assert math.isnan(shift.delta_ms) and math.isnan(shift.ci_low_ms)
    line = console_line(figures)
    assert line is not None and "too few samples for p50" in line and "+50" not in line
    context = probe_section(figures, [])
    assert context is not None
    rows = context["arms"][0]["rows"]
    assert all(row["delta"] == "—" and "too few" in row["note"] for row in rows)


def test_p99_needs_a_hundred_samples_a_phase_while_p50_is_priced() -> None:
    figures = summarise_probe(run_with(phase_rows(np.full(50, 10.0), np.full(50, 30.0))))
    assert figures is not None
    [arm] = figures.arms
    assert arm.shift("ttft_ms", "p50").delta_ms == pytest.approx(20.0)
    assert arm.shift("ttft_ms", "p99").too_few is not None
    line = console_line(figures)
    assert line is not None and "TTFT p50 +20.0 ms" in line and "p99" not in line


def test_phases_a_request_in_flight_at_the_load_start_is_in_neither_and_failures_count(
        ) -> None:
    rows = phase_rows(np.full(20, 10.0), np.full(20, 30.0))
    rows.append(probe_row(LOAD_START - 0.001, 500.0))  # answered after the load began
    rows.append(probe_row(LOAD_END + 1.0, 900.0))  # after the load ended
    rows.append(probe_row(LOAD_START + 2.0, math.nan, outcome="timeout"))
    figures = summarise_probe(run_with(rows))
    assert figures is not None
    [arm] = figures.arms
    assert (arm.idle_n, arm.load_n, arm.failed) == (20, 20, 1)
    assert arm.shift("ttft_ms", "p50").load_ms == 30.0


def test_a_layer_comparison_prices_each_arm() -> None:
    idle = np.linspace(10.0, 20.0, 30)
    rows = phase_rows(idle, idle + 5.0, arm="direct") + phase_rows(idle, idle + 25.0,
                                                                     arm="layer")
    figures = summarise_probe(run_with(rows))
    assert figures is not None
    by_arm = {arm.arm: arm.shift("ttft_ms", "p50").delta_ms for arm in figures.arms}
    assert by_arm == pytest.approx({"direct": 5.0, "layer": 25.0})
    line = console_line(figures)
    assert line is not None and "direct: TTFT p50 +5.00 ms" in line and "layer: " in line


def test_the_probes_ttft_over_time_on_the_runs_clock() -> None:
    rows = phase_rows(np.full(20, 10.0), np.full(40, 30.0))
    timeline = Timeline(t0=IDLE_START, window_s=10.0, n=6)
    figures = summarise_probe(run_with(rows), timeline)
    assert figures is not None
    assert figures.load_start_s == 20.0 and figures.load_end_s == 60.0
    assert list(figures.ttft_p50_series) == [10.0, 10.0, 30.0, 30.0, 30.0, 30.0]
    charts: list[Chart] = []
    context = probe_section(figures, charts)
    assert context is not None and context["chart"] == "probe-ttft" and len(charts) == 1


def test_no_probe_no_section() -> None:
    assert summarise_probe(run_with(None)) is None
    assert console_line(None) is None and probe_section(None, []) is None
