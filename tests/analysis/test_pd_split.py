"""The PD split of TTFT read off a decode instance's Server-Timing: each part per
request, the remainder, and per-workload medians."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from zerohop.analysis.server.pd_split import pd_frame, pd_parts_ms, pd_request_id, pd_split
from zerohop.analysis.server_timing import server_timing_entries

pytestmark = pytest.mark.unit

HEADER = ('prefill_queue;dur=0.8886, prefill;dur=21.3447, kv_transfer;dur=1.8291, '
          'decode_queue;dur=0.1774, first_decode;dur=7.0187, pd;desc="___prefill_addr_1:2_ab"')


def test_entries_are_read_with_their_params_unquoted() -> None:
    entries = server_timing_entries(HEADER + ', layer;dur=5.1, route;desc="r1"')
    assert entries["kv_transfer"] == {"dur": "1.8291"}
    assert entries["pd"] == {"desc": "___prefill_addr_1:2_ab"}
    assert entries["route"] == {"desc": "r1"}


def test_the_parts_and_the_prefill_request_id() -> None:
    assert pd_parts_ms(HEADER) == {"prefill_queue": 0.8886, "prefill": 21.3447,
                                   "kv_transfer": 1.8291, "decode_queue": 0.1774,
                                   "first_decode": 7.0187}
    assert pd_request_id(HEADER) == "___prefill_addr_1:2_ab"


def test_an_answer_without_a_kv_transfer_is_not_split() -> None:
    assert pd_parts_ms("layer;dur=5.1") is None
    assert pd_parts_ms(None) is None
    assert pd_request_id("layer;dur=5.1") is None


def test_a_part_not_sent_is_absent_and_an_unreadable_one_too() -> None:
    assert pd_parts_ms("kv_transfer;dur=2, first_decode;dur=abc") == {"kv_transfer": 2.0}


def _requests() -> pd.DataFrame:
    return pd.DataFrame({
        "request_id": ["a", "b", "c", "d"],
        "workload": ["w", "w", "w", "w"],
        "outcome": ["ok", "ok", "ok", "http_503"],
        "ttft_ms": [40.0, 50.0, 45.0, math.nan],
        "server_timing": [HEADER, "kv_transfer;dur=3, first_decode;dur=7", None, HEADER],
    })


def test_the_remainder_is_ttft_minus_the_parts_sent() -> None:
    frame = pd_frame(_requests())
    assert list(frame["request_id"]) == ["a", "b"]  # c sent no parts, d failed
    first, second = frame.iloc[0], frame.iloc[1]
    assert first["remainder"] == pytest.approx(40.0 - (0.8886 + 21.3447 + 1.8291 + 0.1774
                                                       + 7.0187))
    assert second["remainder"] == pytest.approx(50.0 - 10.0)
    assert math.isnan(second["prefill"])
    assert first["prefill_request_id"] == "___prefill_addr_1:2_ab"


def test_the_split_summarises_each_workload() -> None:
    split = pd_split(_requests())
    assert split is not None
    (workload,) = split.workloads
    assert workload.n == 2
    assert workload.p50_ms["kv_transfer"] == pytest.approx((1.8291 + 3.0) / 2)
    assert workload.p50_ms["prefill"] == pytest.approx(21.3447)  # the one that sent it
    assert workload.ttft_p50_ms == pytest.approx(45.0)


def test_no_pd_answers_no_split() -> None:
    frame = _requests().assign(server_timing=None)
    assert pd_split(frame) is None
