"""Summary figures on hand-made records whose answers are known exactly."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from zerohop.analysis.latency.slo import evaluate_slos, good_mask, parse_slos
from zerohop.analysis.latency.summary import summarise_workloads
from zerohop.analysis.run_data import frame_from_rows

pytestmark = pytest.mark.unit


def _row(i: int, workload: str, outcome: str = "ok", **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "request_id": f"r{i}",
        "workload": workload,
        "outcome": outcome,
        "sent_ts": 1000.0 + i,
        "end_ts": 1000.0 + i + 1.0,
        "ttft_ms": 10.0 * (i + 1),
        "e2e_ms": 100.0 + i,
        "tpot_ms": 5.0,
        "input_tokens": 100,
        "output_tokens": 11,
        "itl_ms": [1.0, 2.0, 3.0],
    }
    if outcome != "ok":
        row.update(ttft_ms=None, e2e_ms=None, tpot_ms=None, itl_ms=[], output_tokens=0)
    row.update(extra)
    return row


def test_only_ok_requests_count_towards_latency_and_rates() -> None:
    rows = [_row(i, "a") for i in range(10)]
    rows.append(_row(10, "a", "http_503", error_message="busy"))
    frame, itl = frame_from_rows(rows)
    [summary] = summarise_workloads(frame, itl, np.ones(len(frame), dtype=bool))
    assert (summary.requests, summary.ok, summary.errors) == (11, 10, 1)
    assert summary.error_pct == pytest.approx(100 / 11)
    ttft = summary.latency["ttft_ms"]
    assert ttft.n == 10
    assert ttft.percentiles["p50"] == pytest.approx(np.percentile(np.arange(1, 11) * 10.0, 50))
    assert ttft.max == 100.0
    # window: first send 1000 → last end 1011 (the failed request ends last)
    assert summary.window_s == pytest.approx(11.0)
    assert summary.req_per_s == pytest.approx(10 / 11)
    assert summary.output_tokens_per_s == pytest.approx(110 / 11)
    assert summary.input_tokens_per_s == pytest.approx(1000 / 11)
    itl_dist = summary.latency["itl_ms"]
    assert itl_dist.n == 30  # pooled: 3 gaps × 10 ok requests
    assert itl_dist.mean == pytest.approx(2.0)


def test_goodput_counts_requests_meeting_every_slo_and_good_fraction_counts_errors() -> None:
    rows = [_row(i, "a") for i in range(10)]  # ttft 10..100 ms
    rows[2]["tpot_ms"] = 60.0  # fast TTFT, slow TPOT: not good
    rows[3]["output_tokens"] = 1
    rows[3]["tpot_ms"] = None  # one token: no TPOT, passes that objective
    rows.append(_row(10, "a", "timeout_ttft"))
    frame, itl = frame_from_rows(rows)
    targets, notes = parse_slos({"ttft_p99_ms": 55, "tpot_p90_ms": 50, "bogus": 3})
    assert [t.column for t in targets] == ["ttft_ms", "tpot_ms"]
    assert notes and "bogus" in notes[0]
    good = good_mask(frame, itl, targets)
    # ttft ≤ 55: requests 0..4; minus request 2 (tpot 60) → 0, 1, 3, 4
    assert np.flatnonzero(good).tolist() == [0, 1, 3, 4]
    [summary] = summarise_workloads(frame, itl, good)
    assert summary.good == 4
    assert summary.good_fraction == pytest.approx(4 / 11)
    assert summary.goodput_rps == pytest.approx(4 / summary.window_s)
    ok = (frame["outcome"] == "ok").to_numpy()
    results = evaluate_slos(
        targets,
        {"ttft_ms": frame["ttft_ms"].to_numpy()[ok], "tpot_ms": frame["tpot_ms"].to_numpy()[ok]},
    )
    ttft_result, tpot_result = results
    assert ttft_result.observed_ms == pytest.approx(np.percentile(np.arange(1, 11) * 10.0, 99))
    assert ttft_result.met is False
    # the run-level objective is judged on p90 (16 ms over eight 5 ms and one 60 ms
    # TPOT), while goodput judged request 2 alone: it met p90 yet was not good
    assert tpot_result.observed_ms == pytest.approx(5.0 + 0.2 * 55.0)
    assert tpot_result.met is True


def test_slo_key_forms() -> None:
    targets, notes = parse_slos(
        {
            "ttft_p999_ms": 900,
            "e2e_p99_9_ms": 2000,
            "itl_max_ms": 80,
            "tpot_mean_ms": 20,
            "ttft_from_schedule_p99_ms": 700,
            "ttft_p99_ms": -1,
        }
    )
    assert [(t.column, t.statistic) for t in targets] == [
        ("ttft_ms", "p99.9"),
        ("e2e_ms", "p99.9"),
        ("itl_ms", "max"),
        ("tpot_ms", "mean"),
        ("ttft_from_schedule_ms", "p99"),
    ]
    assert len(notes) == 1 and "ttft_p99_ms" in notes[0]


def test_itl_slo_judges_each_requests_largest_gap() -> None:
    rows = [_row(0, "a", itl_ms=[1.0, 9.0]), _row(1, "a", itl_ms=[1.0, 2.0])]
    frame, itl = frame_from_rows(rows)
    targets, _ = parse_slos({"itl_p99_ms": 5})
    assert good_mask(frame, itl, targets).tolist() == [False, True]


def test_several_workloads_get_an_all_row_in_first_send_order() -> None:
    rows = [_row(i, "late" if i < 3 else "early", sent_ts=2000.0 - i) for i in range(6)]
    frame, itl = frame_from_rows(rows)
    names = [s.workload for s in summarise_workloads(frame, itl, np.ones(6, dtype=bool))]
    assert names == ["early", "late", "all"]
