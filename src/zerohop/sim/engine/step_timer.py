"""Wake the engine at a step's modelled end, to within tens of microseconds.

The event loop's own timers are too coarse for a step clock: uvloop's run on libuv's
millisecond clock (they fire up to a millisecond or two early or late), asyncio's
round the poll timeout up to whole milliseconds. Every token of a step waits for that
wake-up, so its error lands on all of them. On Linux a `timerfd` armed at an absolute
CLOCK_MONOTONIC time (the clock `time.perf_counter_ns` reads) wakes the loop's poll
on time; the wait is armed a little before the deadline (the lead) and ends in a
busy-wait to it, which absorbs the kernel's and the loop's wake-up latency
(tests/bench/bench_sim_emission.py prints the emission lag that remains). The lead is
learnt, not fixed: it jumps to 1.5 times any wake-up that came later than the lead
allowed for and shrinks by 1/16 a wait otherwise, between `MIN_LEAD_NS` and
`spin_ns`, so that a machine that wakes the loop within 30 µs spins about that long
per step instead of `spin_ns` (the spin is CPU spent per step, so per token:
tests/bench/bench_sim_step_cpu.py). Elsewhere, or if the timerfd cannot be made, the
loop's own timer is used with the same lead and spin.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import sys
import time
from collections.abc import Callable

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = os.O_NONBLOCK
_TFD_CLOEXEC = getattr(os, "O_CLOEXEC", 0o2000000)
_TFD_TIMER_ABSTIME = 1
MIN_LEAD_NS = 20_000


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class StepTimer:
    """`await timer.sleep_until(target_ns)`: return at perf_counter_ns >= target_ns,
    busy-waiting at most the last `spin_ns` before it."""

    def __init__(self, spin_ns: int) -> None:
        self.spin_ns = spin_ns
        self.lead_ns = spin_ns  # how early the wait is armed: learnt (see the module)
        self._fd = -1
        self._arm: Callable[[int], None] | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # opened at the first wait: engines built for offline simulation never need one
        self._try_timerfd = sys.platform.startswith("linux") and _perf_counter_is_monotonic()

    @property
    def kernel_timer_fd(self) -> int | None:
        """The timerfd the waits arm, once one is open (None: the loop's own timer)."""
        return self._fd if self._arm is not None else None

    def _open_timerfd(self) -> None:
        self._try_timerfd = False
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            create, settime = libc.timerfd_create, libc.timerfd_settime
        except (OSError, AttributeError):
            return
        fd = create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        if fd < 0:
            return
        spec = _Itimerspec()
        spec_ref = ctypes.byref(spec)

        def arm(at_ns: int) -> None:
            spec.it_value.tv_sec, spec.it_value.tv_nsec = divmod(at_ns, 1_000_000_000)
            if settime(fd, _TFD_TIMER_ABSTIME, spec_ref, None) != 0:
                raise OSError(ctypes.get_errno(), "timerfd_settime failed")

        self._fd, self._arm = fd, arm

    async def sleep_until(self, target_ns: int) -> None:
        clock = time.perf_counter_ns
        lead = self.lead_ns
        wake_at = target_ns - lead
        if clock() < wake_at:
            if self._try_timerfd:
                self._open_timerfd()
            if self._arm is not None:
                await self._timerfd_wait(wake_at)
            else:
                await self._loop_timer_wait(wake_at)
            self.lead_ns = next_lead(lead, clock() - wake_at, self.spin_ns)
        while clock() < target_ns:
            pass

    async def _timerfd_wait(self, wake_at: int) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            if self._loop is not None:
                self._loop.remove_reader(self._fd)
            loop.add_reader(self._fd, self._fired)
            self._loop = loop
        waiter = self._waiter = loop.create_future()
        assert self._arm is not None
        self._arm(wake_at)
        try:
            await waiter
        finally:
            self._waiter = None

    def _fired(self) -> None:
        try:
            os.read(self._fd, 8)
        except BlockingIOError:
            return  # re-armed after it fired: a stale wake-up
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    @staticmethod
    async def _loop_timer_wait(wake_at: int) -> None:
        clock = time.perf_counter_ns
        while (remaining := wake_at - clock()) > 0:
            await asyncio.sleep(remaining / 1e9)

    def close(self) -> None:
        if self._fd >= 0:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd, self._arm, self._loop = -1, None, None


def next_lead(lead_ns: int, late_ns: int, spin_ns: int) -> int:
    """The lead after a wake-up `late_ns` after the armed time: 1.5 times a wake-up
    later than the lead allowed for, else 1/16 shorter; within MIN_LEAD_NS..spin_ns."""
    lead = late_ns + late_ns // 2 if late_ns > lead_ns else lead_ns - (lead_ns >> 4)
    return min(spin_ns, max(MIN_LEAD_NS, lead))


def _perf_counter_is_monotonic() -> bool:
    return time.get_clock_info("perf_counter").implementation == "clock_gettime(CLOCK_MONOTONIC)"
