"""The load generator watching itself: CPU/RSS, and loop lag that sees a blocked hub."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace
from typing import Any

import pytest

from zerohop.core.records import ClockAnchor
from zerohop.telemetry import client_process
from zerohop.telemetry.client_process import (
    LOOP_LAG_METRIC,
    LagWindow,
    ProcessSampler,
    loadgen_source,
    start_gevent_loop_lag_probe,
    start_self_telemetry,
    start_thread_lag_probe,
)
from zerohop.telemetry.samples import GAP, TelemetryClock


def clock() -> TelemetryClock:
    return TelemetryClock(ClockAnchor.now())


def stats(rows: list) -> dict[str, float]:
    return {json.loads(r.labels)["stat"]: r.value for r in rows if r.metric == LOOP_LAG_METRIC}


@pytest.mark.unit
def test_lag_window_summarises_once_per_window() -> None:
    window = LagWindow("loadgen:h:1", window_s=1.0)
    rows = []
    for i in range(100):
        rows += window.add(10.0 + i * 0.01, float(i % 10))
    assert rows == []  # 0.99 s: not yet
    rows = window.add(11.0, 50.0)
    s = stats(rows)
    assert s["max"] == 50.0 and s["p99"] == 9.0
    assert s["mean"] == pytest.approx((450 + 50) / 101)
    assert {r.ts for r in rows} == {10.5}
    assert window.flush() == []


def burn_cpu(seconds: float) -> None:
    """Run on this process's CPU until it has used `seconds` of CPU time."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        sum(i * i for i in range(10_000))


@pytest.mark.integration  # starts a child process
def test_process_sampler_reads_cpu_and_rss_and_marks_an_exited_process() -> None:
    c = clock()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        sampler = ProcessSampler([os.getpid()], c, host="h", interval_s=0.2)
        sampler.add_pid(child.pid)
        sampler.add_pid(child.pid)  # idempotent
        assert sampler.start(1.0) == []  # first readings only start each CPU interval
        wall0 = time.monotonic()
        burn_cpu(0.3)  # in the measured process: this one
        wall = time.monotonic() - wall0
        rows = sampler.tick(2.0)
        mine = {r.metric: r.value for r in rows if r.source == f"loadgen:h:{os.getpid()}"}
        idle = {r.metric: r.value for r in rows if r.source == f"loadgen:h:{child.pid}"}
        assert mine["loadgen_rss_bytes"] > 10e6
        # CPU time over wall time since the first reading: at least the 0.3 s burned
        # over the burn's wall time (plus the few ms around it), in percent of a core
        assert mine["loadgen_cpu_pct"] > 0.0
        assert mine["loadgen_cpu_pct"] >= 0.5 * 100 * 0.3 / wall, (mine, wall)
        assert idle["loadgen_cpu_pct"] < mine["loadgen_cpu_pct"]  # the child only sleeps
        assert {r.source for r in rows} == {f"loadgen:h:{os.getpid()}", f"loadgen:h:{child.pid}"}
        child.kill()
        child.wait()
        rows = sampler.tick(3.0) + sampler.tick(4.0)
        gaps = [r for r in rows if r.metric == GAP]
        assert [(g.source, json.loads(g.labels)["reason"]) for g in gaps] == [
            (f"loadgen:h:{child.pid}", "process exited")]
        closed = sampler.close(5.0)
        assert [(g.ts, g.value) for g in closed] == [(3.0, 2.0)]
    finally:
        child.kill()


class _TickingProcess:
    """A psutil.Process stand-in whose CPU time grows in 10 ms kernel ticks."""

    def __init__(self) -> None:
        self.cpu_s = 0.0

    def cpu_times(self) -> Any:
        return SimpleNamespace(user=self.cpu_s, system=0.0)


@pytest.mark.unit
def test_cpu_percent_is_never_read_over_a_sliver_of_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """One 10 ms tick counted 70 µs after the process was first seen is not 14,000 % of a
    core (a run's first sample said 13,385 % on a 2-core machine): no reading is made
    over less than the minimum interval, and the interval stays open until one is."""
    now = [100.0]
    monkeypatch.setattr(client_process.time, "monotonic", lambda: now[0])
    proc = _TickingProcess()
    cpu = client_process._CpuClock(proc, min_interval_s=0.5)  # type: ignore[arg-type]
    now[0] += 70e-6
    proc.cpu_s += 0.010
    assert cpu.percent() is None
    now[0] += 1.0 - 70e-6  # one second after the first reading, 0.25 s used in all
    proc.cpu_s += 0.240
    assert cpu.percent() == pytest.approx(25.0)
    now[0] += 2.0  # the next interval starts where that reading ended
    proc.cpu_s += 1.0
    assert cpu.percent() == pytest.approx(50.0)


@pytest.mark.unit
def test_gevent_probe_sees_a_blocked_hub() -> None:
    import gevent

    rows: list = []
    probe = start_gevent_loop_lag_probe(loadgen_source(1, "h"), clock(), window_s=0.2,
                                        on_rows=rows.extend)
    gevent.sleep(0.1)
    time.sleep(0.08)  # the stdlib sleep blocks the hub: the probe must see ~80 ms
    gevent.sleep(0.2)
    rows += probe.stop()
    assert probe.readings >= 5
    worst = max(r.value for r in rows if json.loads(r.labels)["stat"] == "max")
    assert 60.0 <= worst <= 400.0
    assert all(r.source == "loadgen:h:1" for r in rows)


def hold_the_gil(seconds: float) -> float:
    """Keep the GIL for about `seconds` in one C call (no bytecode runs, so no other
    thread can take it); returns how long it really held it, in ms."""
    n = 1_000_000
    start = time.perf_counter()
    sum(range(n))
    per_item = (time.perf_counter() - start) / n
    start = time.perf_counter()
    sum(range(int(seconds / per_item)))
    return (time.perf_counter() - start) * 1000.0


@pytest.mark.unit
def test_thread_probe_measures_wakeup_lateness() -> None:
    probe = start_thread_lag_probe("loadgen:h:2", clock(), window_s=0.1)
    time.sleep(0.15)
    blocked_ms = hold_the_gil(0.15)  # the probe's thread cannot run: it wakes that late
    time.sleep(0.15)
    rows = probe.drain() + probe.stop()
    assert probe.readings >= 10
    assert len(stats(rows)) == 3
    worst = max(r.value for r in rows if json.loads(r.labels)["stat"] == "max")
    # a 10 ms sleep that began before the block ends when the block does: it is late by
    # the block less at most one interval; half of the block is a bound any machine keeps
    assert worst >= 0.5 * blocked_ms, (worst, blocked_ms)
    typical = sorted(r.value for r in rows if json.loads(r.labels)["stat"] == "mean")
    assert typical[0] < worst  # and the windows without the block are not all as late


@pytest.mark.unit
def test_self_telemetry_ships_plain_lists() -> None:
    import gevent

    telemetry = start_self_telemetry(clock(), interval_s=0.05)
    gevent.sleep(0.3)
    time.sleep(0.3)  # not patched here: a thread samples, the lag probe is a thread too
    rows = telemetry.drain() + telemetry.stop()
    assert rows and all(isinstance(r, list) and len(r) == 6 for r in rows)
    metrics = {r[2] for r in rows}
    assert {"loadgen_cpu_pct", "loadgen_rss_bytes", LOOP_LAG_METRIC} <= metrics
    json.dumps(rows)  # msgpack/JSON-safe: plain Python only
