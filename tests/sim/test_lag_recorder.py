"""The emission-lag histogram: a step's writes recorded at once (`add_written`, after
the step's last write) count exactly as each lag recorded alone (`add_ns`)."""

from __future__ import annotations

import pytest

from zerohop.sim.engine.histograms import LagRecorder

pytestmark = pytest.mark.unit


def test_a_steps_writes_at_once_are_each_lag_alone() -> None:
    due = 1_000_000_000
    # 0: not written; one written before the step's end (offline steps do); one past
    # the exact range (kept as a raw value)
    written = [due + 1_500, 0, due + 999, due - 3_000, due + 2_000_000, 0, due + 60_000_000]
    at_once, alone = LagRecorder(limit_us=50_000), LagRecorder(limit_us=50_000)
    at_once.add_written(written, due)
    at_once.add_written([due + 7_000], due)
    for w in [*written, due + 7_000]:
        if w:
            alone.add_ns(w - due)
    assert at_once.counts == alone.counts
    assert at_once.overflow == alone.overflow == [60_000]
    assert (at_once.n, at_once.total_us, at_once.max_us) == (
        alone.n, alone.total_us, alone.max_us) == (6, 1 + 0 + 0 + 2_000 + 60_000 + 7, 60_000)
    assert at_once.summary_ms() == alone.summary_ms()
