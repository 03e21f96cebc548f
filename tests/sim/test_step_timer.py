"""The engine's step clock returns at its deadline, never before it, and not much after
it, with the kernel timer (Linux) and with the event loop's own timer (elsewhere)."""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

import pytest

from zerohop.sim.step_timer import StepTimer

pytestmark = pytest.mark.unit


def _lateness_us(timer: StepTimer, delays_ms: list[float]) -> list[float]:
    async def scenario() -> list[float]:
        late = []
        for delay in delays_ms:
            target = time.perf_counter_ns() + int(delay * 1e6)
            await timer.sleep_until(target)
            late.append((time.perf_counter_ns() - target) / 1e3)
        return late

    try:
        return asyncio.run(scenario())
    finally:
        timer.close()


DELAYS_MS = [0.2, 1.0, 2.5, 0.05, 3.0, 1.7] * 5


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="timerfd is Linux-only")
def test_the_kernel_timer_wakes_on_time() -> None:
    timer = StepTimer(spin_ns=300_000)
    late = _lateness_us(timer, DELAYS_MS)
    assert min(late) >= 0.0  # never early
    # the spin absorbs the kernel's wake-up latency (the bound is generous: shared CI)
    assert statistics.median(late) < 1_000.0, late


def test_the_loop_timer_fallback_is_never_early(monkeypatch: pytest.MonkeyPatch) -> None:
    timer = StepTimer(spin_ns=300_000)
    monkeypatch.setattr(timer, "_try_timerfd", False)  # as on a platform without timerfd
    late = _lateness_us(timer, DELAYS_MS)
    assert min(late) >= 0.0
    assert max(late) < 50_000.0  # coarse, but it ends


def test_a_deadline_in_the_past_returns_at_once() -> None:
    timer = StepTimer(spin_ns=300_000)

    async def scenario() -> float:
        start = time.perf_counter_ns()
        await timer.sleep_until(start - 5_000_000)
        return (time.perf_counter_ns() - start) / 1e3

    try:
        assert asyncio.run(scenario()) < 1_000.0
    finally:
        timer.close()
