"""The timing formulas the live client and the virtual clock share (core/timing.py)."""

from __future__ import annotations

import pytest

from zerohop.core import timing

pytestmark = pytest.mark.unit


def test_latencies_are_milliseconds_between_stamps() -> None:
    assert timing.ttft_ms(1_000_000, 26_500_000) == 25.5
    assert timing.e2e_ms(1_000_000, 101_000_000) == 100.0
    assert timing.schedule_lag_ms(0, 3_000_000, 2_000_000) == 1.0  # the slot wait is not lag
    assert timing.schedule_lag_ms(0, 3_000_000, None) == 3.0


def test_itl_is_one_gap_per_content_event_and_events_of_one_read_give_zero() -> None:
    assert timing.itl_ms([0, 2_000_000, 2_000_000, 5_000_000]) == [2.0, 0.0, 3.0]
    assert timing.itl_ms([7]) == []


def test_tpot_needs_both_latencies_and_two_tokens() -> None:
    assert timing.tpot_ms(100.0, 10.0, 10) == 10.0
    assert timing.tpot_ms(100.0, 10.0, 1) is None
    assert timing.tpot_ms(None, 10.0, 10) is None
    assert timing.tpot_ms(100.0, None, 10) is None
    assert timing.tpot_ms(100.0, 10.0, None) is None
