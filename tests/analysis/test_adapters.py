from __future__ import annotations

from typing import Any

import pytest

from tests.synthetic_runs import HOSTILE
from zerohop.analysis.latency.lora_adapters import summarise_adapters
from zerohop.analysis.run_data import frame_from_rows

pytestmark = pytest.mark.unit


def _row(
    i: int, adapter: str | None, sent: float, ttft: float, outcome: str = "ok"
) -> dict[str, Any]:
    return {
        "request_id": f"r{i}",
        "workload": "lora",
        "adapter": adapter,
        "outcome": outcome,
        "sent_ts": sent,
        "ttft_ms": ttft if outcome == "ok" else None,
        "e2e_ms": ttft + 100 if outcome == "ok" else None,
    }


def test_cold_is_the_first_request_sent_to_an_adapter_not_the_first_row() -> None:
    rows = [
        _row(0, "a", sent=10.0, ttft=50.0),
        _row(1, "a", sent=5.0, ttft=400.0),  # sent first: the cold one
        _row(2, "a", sent=11.0, ttft=60.0),
        _row(3, None, sent=1.0, ttft=30.0),  # base model: no adapter row
        _row(4, "b", sent=2.0, ttft=0.0, outcome="http_500"),  # b's cold request failed
        _row(5, "b", sent=3.0, ttft=70.0),
    ]
    frame, _ = frame_from_rows(rows)
    a, b = summarise_adapters(frame)
    assert (a.adapter, a.requests, a.cold_ttft_ms) == ("a", 3, 400.0)
    assert a.warm_ttft.n == 2 and a.warm_ttft.percentiles["p50"] == pytest.approx(55.0)
    assert a.cold_over_warm_p50 == pytest.approx(400.0 / 55.0)
    assert b.cold_outcome == "http_500" and b.errors == 1
    assert b.warm_ttft.n == 1


def test_no_adapters_no_rows_and_hostile_names_are_kept_verbatim() -> None:
    frame, _ = frame_from_rows([_row(0, None, 1.0, 10.0)])
    assert summarise_adapters(frame) == []
    frame, _ = frame_from_rows([_row(0, HOSTILE, 1.0, 10.0)])
    assert summarise_adapters(frame)[0].adapter == HOSTILE
