"""The engine's step clock returns at its deadline, never before it, and not much after
it, with the kernel timer (Linux) and with the event loop's own timer (elsewhere).

`sleep_until` ends in a busy-wait to the deadline, which by itself makes any wait
"never early" and, given a long enough spin, on time. So the kernel timer's own wake-up
is checked beneath that busy-wait, and the wait is checked for leaving the loop free.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import pytest

from zerohop.sim.engine.step_timer import MIN_LEAD_NS, StepTimer, next_lead

pytestmark = pytest.mark.unit

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="timerfd is Linux-only")


def loop_timer(spin_ns: int) -> StepTimer:
    timer = StepTimer(spin_ns=spin_ns)
    timer._try_timerfd = False  # as on a platform without timerfd
    return timer


async def lateness_us(timer: StepTimer, delay_ms: float) -> float:
    target = time.perf_counter_ns() + int(delay_ms * 1e6)
    await timer.sleep_until(target)
    return (time.perf_counter_ns() - target) / 1e3


# fractions of a millisecond: the loop's timer rounds its poll timeout up to whole ms
DELAYS_MS = [0.25, 1.3, 2.2, 0.6, 3.15, 1.4] * 5


@linux_only
def test_the_kernel_timer_is_a_timerfd() -> None:
    timer = StepTimer(spin_ns=300_000)
    assert timer.kernel_timer_fd is None  # opened at the first wait, not before

    async def scenario() -> int | None:
        await timer.sleep_until(time.perf_counter_ns() + 2_000_000)
        return timer.kernel_timer_fd

    try:
        fd = asyncio.run(scenario())
        assert fd is not None, "the wait fell back to the loop's timer"
        assert os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[timerfd]"
    finally:
        timer.close()
    assert timer.kernel_timer_fd is None


@linux_only
def test_the_kernel_timer_alone_is_never_early_and_beats_the_loop_timer() -> None:
    # The two waits under the final busy-wait, called directly: sleep_until itself
    # spins to the deadline whatever spin_ns is, which would hide an early wake-up.
    # Never early proves the timerfd is armed at the absolute deadline on
    # perf_counter's clock; beating the loop's own timer (same machine, same moment,
    # waits interleaved) proves it is worth having.
    timer = StepTimer(spin_ns=0)

    async def woke_late_us(wait: Callable[[int], Awaitable[None]], delay_ms: float) -> float:
        deadline = time.perf_counter_ns() + int(delay_ms * 1e6)
        await wait(deadline)
        return (time.perf_counter_ns() - deadline) / 1e3

    async def scenario() -> tuple[list[float], list[float]]:
        await timer.sleep_until(time.perf_counter_ns() + 1_000_000)  # opens the timerfd
        assert timer.kernel_timer_fd is not None
        by_kernel, by_loop = [], []
        for delay in DELAYS_MS:
            by_kernel.append(await woke_late_us(timer._timerfd_wait, delay))
            by_loop.append(await woke_late_us(StepTimer._loop_timer_wait, delay))
        return by_kernel, by_loop

    try:
        by_kernel, by_loop = asyncio.run(scenario())
    finally:
        timer.close()
    assert min(by_kernel) >= 0.0, by_kernel
    assert min(by_loop) >= 0.0, by_loop  # the fallback re-sleeps until the deadline
    # pair by pair (each pair at one moment of the machine's load), the kernel's wins
    paired = [k - loop for k, loop in zip(by_kernel, by_loop, strict=True)]
    assert statistics.median(paired) < 0, (by_kernel, by_loop)


@linux_only
def test_the_wait_sleeps_instead_of_spinning() -> None:
    # CPU time of this process over the waits, against the share of a core a pure spin
    # gets at the same moment (a loaded machine lowers both alike)
    timer = StepTimer(spin_ns=200_000)

    async def spin() -> None:
        end = time.perf_counter() + 0.1
        while time.perf_counter() < end:
            pass

    async def waits() -> None:
        for _ in range(20):
            await lateness_us(timer, 5.0)
        assert timer.kernel_timer_fd is not None

    def cpu_share(scenario: Callable[[], Coroutine[Any, Any, None]]) -> float:
        wall0, cpu0 = time.perf_counter(), time.process_time()
        asyncio.run(scenario())
        return (time.process_time() - cpu0) / (time.perf_counter() - wall0)

    try:
        spinning = cpu_share(spin)
        waiting = cpu_share(waits)
    finally:
        timer.close()
    assert waiting < 0.5 * spinning, (waiting, spinning)


@linux_only
def test_the_deadline_is_met_while_the_loop_serves_other_work() -> None:
    # Another task keeps the loop busy with callbacks; the timerfd's readiness still
    # ends each wait on time, and the other task runs during every wait.
    timer = StepTimer(spin_ns=300_000)

    def plain_sleep_late_us(delay_ms: float) -> float:
        """The floor: how late the kernel wakes a plain blocking sleep, at this moment."""
        target = time.perf_counter_ns() + int(delay_ms * 1e6)
        time.sleep(max(0.0, (target - time.perf_counter_ns()) / 1e9))
        return (time.perf_counter_ns() - target) / 1e3

    floor: list[float] = []

    async def scenario() -> tuple[list[float], list[int]]:
        ticks = 0
        done = False

        async def other_work() -> None:
            nonlocal ticks
            while not done:
                ticks += 1
                await asyncio.sleep(0)

        worker = asyncio.create_task(other_work())
        await asyncio.sleep(0)
        late, ticked = [], []
        for delay in DELAYS_MS:
            before = ticks
            late.append(await lateness_us(timer, delay))
            ticked.append(ticks - before)
            floor.append(plain_sleep_late_us(delay))
        done = True
        await worker
        assert timer.kernel_timer_fd is not None
        return late, ticked

    try:
        late, ticked = asyncio.run(scenario())
    finally:
        timer.close()
    assert min(late) >= 0.0
    # the waits well beyond the spin window yielded the loop to the other task (most:
    # one preempted on a loaded machine past its wake-up time spins instead)
    long_waits = [n for n, d in zip(ticked, DELAYS_MS, strict=True) if d >= 1.0]
    assert sum(n > 0 for n in long_waits) >= 0.8 * len(long_waits), ticked
    # on time: no later than the kernel wakes a plain sleep, measured between the waits
    # (the timer wakes a spin window early and spins to the deadline)
    assert statistics.median(late) <= statistics.median(floor), (late, floor)


def test_the_loop_timer_fallback_opens_no_timerfd_and_ends() -> None:
    timer = loop_timer(spin_ns=300_000)

    async def scenario() -> list[float]:
        return [await lateness_us(timer, delay) for delay in DELAYS_MS]

    try:
        late = asyncio.run(scenario())
    finally:
        timer.close()
    assert timer.kernel_timer_fd is None
    assert min(late) >= 0.0
    assert max(late) < 50_000.0  # coarse, but it ends


def test_a_deadline_in_the_past_returns_at_once() -> None:
    timer = StepTimer(spin_ns=300_000)

    async def scenario() -> float:
        start = time.perf_counter_ns()
        await timer.sleep_until(start - 5_000_000)
        return (time.perf_counter_ns() - start) / 1e3

    try:
        assert asyncio.run(scenario()) < 10_000.0
        assert timer.kernel_timer_fd is None  # nothing was armed: it did not wait
    finally:
        timer.close()


def test_the_lead_jumps_after_a_late_wake_up_and_shrinks_after_prompt_ones() -> None:
    spin = 300_000
    assert next_lead(100_000, 120_000, spin) == 180_000  # late past the lead: 1.5x
    assert next_lead(100_000, 250_000, spin) == spin  # never more than timer_spin_us
    assert next_lead(160_000, 10_000, spin) == 150_000  # on time: 1/16 shorter
    lead = spin
    for _ in range(200):  # wake-ups 10 µs late, one after the other
        lead = next_lead(lead, 10_000, spin)
    assert lead == MIN_LEAD_NS
    assert next_lead(200_000, 10_000, 0) == 0  # timer_spin_us 0: never spins
