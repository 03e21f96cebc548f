"""Speculative decoding from the server's counters and the records' reads
(analysis/latency/spec_decode.py), with numbers worked by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from zerohop.analysis.latency.spec_decode import summarise_spec_decode
from zerohop.analysis.measured_window import MeasuredWindow
from zerohop.analysis.run_data import RunData, frame_from_rows

pytestmark = pytest.mark.unit

T0 = 1_800_000_000.0
RAW = "prom-raw:http://127.0.0.1:8000/metrics"
MODEL = {"model_name": "m"}


def _sample(ts: float, metric: str, value: float, **labels: str) -> dict[str, Any]:
    return {"ts": T0 + ts, "source": RAW, "metric": metric,
            "labels": json.dumps({**MODEL, **labels}, sort_keys=True), "value": value}


def _row(end_s: float, itl_ms: list[float], outcome: str = "ok") -> dict[str, Any]:
    return {"workload": "chat", "outcome": outcome, "scheduled_ts": T0 + end_s - 1,
            "sent_ts": T0 + end_s - 1, "end_ts": T0 + end_s, "ttft_ms": 10.0,
            "e2e_ms": 1000.0, "tpot_ms": 5.0, "input_tokens": 10,
            "output_tokens": len(itl_ms) + 1, "itl_ms": itl_ms}


def _run(samples: list[dict[str, Any]], rows: list[dict[str, Any]]) -> RunData:
    frame, itl = frame_from_rows(rows)
    telemetry = pd.DataFrame(samples or {"ts": [], "source": [], "metric": [], "labels": [],
                                         "value": []})
    return RunData(Path("/nonexistent"), {"run_id": "r", "load": {"duration_s": 10.0}},
                   frame, itl, telemetry, None, "jsonl")


WINDOW = MeasuredWindow(start_ts=T0, duration_s=10.0, source="manifest")


def _vllm_counters() -> list[dict[str, Any]]:
    # scrapes at -5 (before the window), 0, 5, 10 and 15 (after it); the interval
    # (-5, 0] and (10, 15] do not overlap the window's (0, 10)
    drafts = [0, 10, 110, 20, 500]  # a restart between 5 and 10: +20 there
    draft_tokens = [0, 40, 440, 80, 2000]
    accepted = [0, 20, 200, 30, 900]
    pos0 = [0, 8, 88, 16, 400]
    pos1 = [0, 12, 112, 14, 500]
    out = []
    for i, t in enumerate((-5.0, 0.0, 5.0, 10.0, 15.0)):
        out += [
            _sample(t, "vllm:spec_decode_num_drafts_total", drafts[i]),
            _sample(t, "vllm:spec_decode_num_draft_tokens_total", draft_tokens[i]),
            _sample(t, "vllm:spec_decode_num_accepted_tokens_total", accepted[i]),
            _sample(t, "vllm:spec_decode_num_accepted_tokens_per_pos_total", pos0[i],
                    position="0"),
            _sample(t, "vllm:spec_decode_num_accepted_tokens_per_pos_total", pos1[i],
                    position="1"),
            _sample(t, "vllm:num_requests_running", 3.0),
        ]
    return out


def test_counter_increases_over_the_window_with_a_restart() -> None:
    rows = [_row(2.0, [5.0, 0.0, 0.0, 5.0]),  # 5 events in 3 reads: 5/3
            _row(3.0, [5.0, 5.0, 5.0]),  # 4 events in 4 reads: 1
            _row(4.0, [0.0]),  # 2 events in 1 read: 2
            _row(6.0, [5.0, 0.0]),  # 3 in 2: 1.5
            _row(12.0, [0.0, 0.0, 0.0]),  # ended after the window: not per request
            _row(5.0, [0.0, 0.0], outcome="http_500")]  # not ok
    s = summarise_spec_decode(_run(_vllm_counters(), rows), WINDOW)
    assert s is not None
    # (0, 5]: +100; (5, 10]: the counter fell from 110 to 20, so it restarted: +20
    assert s.drafts == 120
    assert s.draft_tokens == 400 + 80
    assert s.accepted_tokens == 180 + 30
    assert s.acceptance_rate == pytest.approx(210 / 480)
    assert s.accepted_per_draft == pytest.approx(210 / 120)
    assert s.per_position == pytest.approx(((80 + 16) / 120, (100 + 14) / 120))
    assert math.isnan(s.server_accept_rate) and math.isnan(s.server_accept_length)
    assert s.requests == 4
    assert s.tokens_per_read_p50 == pytest.approx((1.5 + 5 / 3) / 2)  # of 1, 1.5, 5/3, 2
    assert s.tokens_per_read_p90 == pytest.approx(5 / 3 + 0.7 * (2 - 5 / 3))  # rank 2.7
    assert s.tokens_per_read_mean == pytest.approx((1 + 1.5 + 5 / 3 + 2) / 4)
    # pooled over every ok request (reads.py): 18 events, 7 of them in an earlier read
    assert s.tokens_per_read_pooled == pytest.approx(18 / 11)


def test_sglang_gauges_give_the_servers_own_rate() -> None:
    samples = [_sample(t, "sglang:spec_accept_rate", v)
               for t, v in ((-1.0, 0.9), (2.0, 0.5), (4.0, 0.7), (11.0, 0.1))]
    samples += [_sample(t, "sglang:spec_accept_length", v) for t, v in ((2.0, 2.5), (4.0, 3.5))]
    s = summarise_spec_decode(_run(samples, [_row(2.0, [0.0])]), WINDOW)
    assert s is not None
    assert s.server_accept_rate == pytest.approx(0.6)
    assert s.acceptance_rate == pytest.approx(0.6)
    assert s.server_accept_length == pytest.approx(3.0)
    assert math.isnan(s.drafts) and math.isnan(s.accepted_per_draft)
    assert s.per_position == ()


def test_none_without_speculative_decoding_series() -> None:
    plain = [_sample(t, "vllm:generation_tokens_total", 10 * t) for t in (0.0, 5.0)]
    assert summarise_spec_decode(_run(plain, [_row(2.0, [5.0])]), WINDOW) is None
    assert summarise_spec_decode(_run([], [_row(2.0, [5.0])]), WINDOW) is None
