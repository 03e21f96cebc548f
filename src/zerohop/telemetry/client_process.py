"""Is the load generator itself the bottleneck? CPU, memory and event-loop lag of each
Locust process, on the same clock as everything else.

- `ProcessSampler` (a sampler thread, any process): psutil CPU% and RSS of given pids.
- `start_gevent_loop_lag_probe`: a greenlet *inside* the Locust process that sleeps
  10 ms and records how late it wakes: the delay every timestamp taken on that hub may
  carry. It must run on the hub it measures, so it is started from the Locust process
  (test_start), not from the telemetry agent.
- `start_thread_lag_probe`: the same for a process without gevent (a thread's wake-up
  lateness: GIL contention plus OS scheduling).

Lag samples are summarised per window (default 1 s) as mean, p99 and max, so a 10 ms
probe does not write 100 rows a second.
"""

from __future__ import annotations

import math
import socket
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

import psutil

from zerohop.telemetry.realthreads import RealThread, StopSignal
from zerohop.telemetry.samples import GapTracker, Sample, TelemetryClock, labels_json

LOOP_LAG_METRIC = "loadgen_loop_lag_ms"
PROBE_INTERVAL_S = 0.01
WINDOW_S = 1.0


def loadgen_source(pid: int, host: str | None = None) -> str:
    """`loadgen:<host>:<pid>`, the source name of one load-generator process."""
    return f"loadgen:{host or socket.gethostname()}:{pid}"


class _CpuClock:
    """One process's CPU time against the wall, read by psutil.

    CPU% is the CPU time used over a wall interval, and the kernel counts CPU time in
    ticks (10 ms at HZ=100): over an interval of a millisecond one tick reads as 1,000 %,
    which psutil's `cpu_percent()` would report for a sample taken just after the process
    was first seen (13,385 % was seen on a 2-core machine). So a reading is made only
    over an interval of at least `min_interval_s`; a sooner call returns None and keeps
    the interval open."""

    def __init__(self, proc: psutil.Process, min_interval_s: float) -> None:
        self.proc = proc
        self.min_interval_s = min_interval_s
        self._wall, self._cpu = time.monotonic(), self._cpu_s()

    def _cpu_s(self) -> float:
        times = self.proc.cpu_times()
        return float(times.user + times.system)

    def percent(self) -> float | None:
        """CPU% of one core since the last reading, or None when too little time passed."""
        wall, cpu = time.monotonic(), self._cpu_s()
        elapsed = wall - self._wall
        if elapsed < self.min_interval_s:
            return None
        used = cpu - self._cpu
        self._wall, self._cpu = wall, cpu
        return 100.0 * max(used, 0.0) / elapsed


class ProcessSampler:
    """CPU% (of one core) and RSS of each registered process, read with psutil."""

    name = "loadgen"

    def __init__(self, pids: Iterable[int], clock: TelemetryClock, *, interval_s: float = 1.0,
                 host: str | None = None) -> None:
        self.clock = clock
        self.interval_s = interval_s
        self.host = host or socket.gethostname()
        self.source = f"loadgen:{self.host}"
        self._pids: tuple[int, ...] = tuple(dict.fromkeys(pids))
        self._cpu: dict[int, _CpuClock | None] = {}
        self._gaps: dict[int, GapTracker] = {}

    def add_pid(self, pid: int) -> None:
        """Register another process (safe from any thread: one tuple swap)."""
        if pid not in self._pids:
            self._pids = (*self._pids, pid)

    def start(self, ts: float) -> list[Sample]:
        return self.tick(ts)

    def tick(self, ts: float) -> list[Sample]:
        rows: list[Sample] = []
        for pid in self._pids:
            gaps = self._gaps.setdefault(pid, GapTracker(loadgen_source(pid, self.host)))
            if pid not in self._cpu:
                self._cpu[pid] = self._first_seen(pid)
                if self._cpu[pid] is not None:
                    continue  # CPU% needs an interval: the first reading only starts it
            clock = self._cpu[pid]
            if clock is None:
                rows.extend(gaps.missing(ts, "process not found"))
                continue
            try:
                with clock.proc.oneshot():
                    cpu = clock.percent()
                    rss = clock.proc.memory_info().rss
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                self._cpu[pid] = None
                rows.extend(gaps.missing(ts, "process exited"))
                continue
            except psutil.Error as exc:
                rows.extend(gaps.missing(ts, f"psutil: {type(exc).__name__}"))
                continue
            source = gaps.source
            rows.extend(gaps.present(ts))
            if cpu is not None:
                rows.append(Sample(ts, source, "loadgen_cpu_pct", cpu, "{}",
                                   "psutil.cpu_times"))
            rows.append(Sample(ts, source, "loadgen_rss_bytes", float(rss), "{}",
                               "psutil.memory_info.rss"))
        return rows

    def close(self, ts: float) -> list[Sample]:
        rows: list[Sample] = []
        for gaps in self._gaps.values():
            rows.extend(gaps.close_all(ts))
        return rows

    def _first_seen(self, pid: int) -> _CpuClock | None:
        try:
            return _CpuClock(psutil.Process(pid), min_interval_s=0.5 * self.interval_s)
        except psutil.Error:
            return None


class LagWindow:
    """Collects lateness readings and emits mean / p99 / max rows once per window."""

    def __init__(self, source: str, window_s: float = WINDOW_S) -> None:
        self.source = source
        self.window_s = window_s
        self._values: list[float] = []
        self._start: float | None = None
        self._last = 0.0

    def add(self, ts: float, lag_ms: float) -> list[Sample]:
        if self._start is None:
            self._start = ts
        self._values.append(lag_ms)
        self._last = ts
        if ts - self._start >= self.window_s:
            return self.flush()
        return []

    def flush(self) -> list[Sample]:
        if not self._values or self._start is None:
            return []
        values = sorted(self._values)
        at = (self._start + self._last) / 2
        p99 = values[min(len(values) - 1, math.ceil(0.99 * len(values)) - 1)]
        stats = (("mean", sum(values) / len(values)), ("p99", p99), ("max", values[-1]))
        self._values = []
        self._start = None
        return [
            Sample(at, self.source, LOOP_LAG_METRIC, value, labels_json({"stat": stat}))
            for stat, value in stats
        ]


class LoopLagProbe:
    """A running lag probe. Rows go to `on_rows` if given (called on the probe's own
    thread or greenlet), else accumulate for `drain()` (e.g. a Locust worker shipping
    them to the master). `stop()` ends it and returns the last partial window's rows."""

    def __init__(self, window: LagWindow, on_rows: Callable[[list[Sample]], None] | None) -> None:
        self.window = window
        self._on_rows = on_rows
        self._pending: list[Sample] = []
        self._stopper: Callable[[], None] = lambda: None
        self.readings = 0

    def drain(self) -> list[Sample]:
        rows, self._pending = self._pending, []
        return rows

    def stop(self) -> list[Sample]:
        self._stopper()
        return [*self.drain(), *self.window.flush()]

    def _emit(self, rows: list[Sample]) -> None:
        if not rows:
            return
        if self._on_rows is not None:
            self._on_rows(rows)
        else:
            self._pending.extend(rows)


def start_gevent_loop_lag_probe(source: str, clock: TelemetryClock, *,
                                interval_s: float = PROBE_INTERVAL_S, window_s: float = WINDOW_S,
                                on_rows: Callable[[list[Sample]], None] | None = None
                                ) -> LoopLagProbe:
    """Start the probe greenlet on the calling thread's gevent hub (call it from the
    Locust process, e.g. in test_start)."""
    import gevent

    probe = LoopLagProbe(LagWindow(source, window_s), on_rows)

    def run() -> None:
        while True:
            t0 = time.perf_counter()
            gevent.sleep(interval_s)
            lag_ms = max(0.0, (time.perf_counter() - t0 - interval_s) * 1000.0)
            probe.readings += 1
            probe._emit(probe.window.add(clock.now(), lag_ms))

    greenlet: Any = gevent.spawn(run)
    probe._stopper = lambda: greenlet.kill(block=True, timeout=1.0)
    return probe


def start_thread_lag_probe(source: str, clock: TelemetryClock, *,
                           interval_s: float = PROBE_INTERVAL_S, window_s: float = WINDOW_S,
                           on_rows: Callable[[list[Sample]], None] | None = None
                           ) -> LoopLagProbe:
    """Start a real thread measuring its own wake-up lateness (no gevent needed)."""
    probe = LoopLagProbe(LagWindow(source, window_s), on_rows)
    stop = StopSignal()

    def run() -> None:
        while True:
            t0 = time.perf_counter()
            if stop.wait(interval_s):
                return
            lag_ms = max(0.0, (time.perf_counter() - t0 - interval_s) * 1000.0)
            probe.readings += 1
            probe._emit(probe.window.add(clock.now(), lag_ms))

    thread = RealThread(run, "zerohop-lag-probe")
    thread.start()

    def stopper() -> None:
        stop.set()
        thread.join(2.0)

    probe._stopper = stopper
    return probe


def gevent_is_patched() -> bool:
    """True in a Locust process (gevent has monkey-patched the stdlib)."""
    monkey = sys.modules.get("gevent.monkey")
    return bool(monkey is not None and monkey.is_module_patched("socket"))


class SelfTelemetry:
    """A Locust worker's own CPU, RSS and loop lag, measured inside it and drained as
    plain lists (msgpack-safe, COLUMNS order) for `report_to_master`; the master hands
    them to `TelemetryRecorder.add_samples`."""

    def __init__(self, sampler: ProcessSampler, probe: LoopLagProbe | None,
                 stopper: Callable[[], None]) -> None:
        self._sampler = sampler
        self._probe = probe
        self._stopper = stopper
        self._pending: list[Sample] = []

    def drain(self) -> list[list[object]]:
        rows, self._pending = self._pending, []
        if self._probe is not None:
            rows.extend(self._probe.drain())
        return [r.to_list() for r in rows]

    def stop(self) -> list[list[object]]:
        self._stopper()
        if self._probe is not None:
            self._pending.extend(self._probe.stop())
            self._probe = None
        self._pending.extend(self._sampler.close(self._sampler.clock.now()))
        return self.drain()

    def _tick(self) -> None:
        self._pending.extend(self._sampler.tick(self._sampler.clock.now()))


def start_self_telemetry(clock: TelemetryClock, *, interval_s: float = 1.0,
                         loop_lag: bool = True) -> SelfTelemetry:
    """Start sampling this process (call from the worker's test_start)."""
    import os

    pid = os.getpid()
    sampler = ProcessSampler([pid], clock, interval_s=interval_s)
    patched = gevent_is_patched()
    probe = None
    if loop_lag:
        start = start_gevent_loop_lag_probe if patched else start_thread_lag_probe
        probe = start(loadgen_source(pid), clock)
    holder: list[SelfTelemetry] = []
    if patched:
        import gevent

        def run_greenlet() -> None:
            while True:
                holder[0]._tick()
                gevent.sleep(interval_s)

        greenlet: Any = None

        def stop_greenlet() -> None:
            if greenlet is not None:
                greenlet.kill(block=True, timeout=1.0)

        telemetry = SelfTelemetry(sampler, probe, stop_greenlet)
        holder.append(telemetry)
        greenlet = gevent.spawn(run_greenlet)
        return telemetry
    stop = StopSignal()

    def run_thread() -> None:
        while True:
            holder[0]._tick()
            if stop.wait(interval_s):
                return

    thread = RealThread(run_thread, "zerohop-self-telemetry")

    def stop_thread() -> None:
        stop.set()
        thread.join(2.0)

    telemetry = SelfTelemetry(sampler, probe, stop_thread)
    holder.append(telemetry)
    thread.start()
    return telemetry
