"""The sampling loop every source runs in its own real thread.

A sampler is three calls: `start` (open handles), `tick` (read once), `close` (release,
close open gaps). The loop keeps a fixed cadence without catching up in bursts, writes
to the sampler's own sink (so threads share no lock), flushes it at least once a second,
and turns any exception a sampler lets through into a gap instead of a dead thread.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import Protocol

from zerohop.telemetry.realthreads import StopSignal
from zerohop.telemetry.samples import GapTracker, Sample, TelemetryClock, describe_error
from zerohop.telemetry.store import FLUSH_INTERVAL_S


class Sampler(Protocol):
    """One telemetry source. `name` tags its sink file; `interval_s` is its cadence."""

    name: str
    source: str
    interval_s: float

    def start(self, ts: float) -> list[Sample]: ...

    def tick(self, ts: float) -> list[Sample]: ...

    def close(self, ts: float) -> list[Sample]: ...


class RowSink(Protocol):
    """Where a loop's rows go: a `store.SampleSink` file, or the exporter's snapshot."""

    def add(self, samples: Iterable[Sample]) -> None: ...

    def flush_if_due(self) -> None: ...

    def close(self) -> None: ...


def run_sampler_loop(sampler: Sampler, sink: RowSink, clock: TelemetryClock,
                     stop: StopSignal) -> None:
    """Run `sampler` until `stop` is set; always closes the sampler and the sink."""
    crashes = GapTracker(sampler.source)
    try:
        sink.add(_guarded(sampler.start, clock.now(), crashes, "start"))
        next_at = time.perf_counter()
        while not stop.is_set():
            sink.add(_guarded(sampler.tick, clock.now(), crashes, "tick"))
            next_at += sampler.interval_s
            if next_at < time.perf_counter():  # fell behind (slow call, busy CPU): skip
                next_at = time.perf_counter()
            if _sleep_until(next_at, sink, stop):
                break
        now = clock.now()
        sink.add(_guarded(sampler.close, now, crashes, "close"))
        sink.add(crashes.close_all(now))
    finally:
        sink.close()


def _sleep_until(deadline: float, sink: RowSink, stop: StopSignal) -> bool:
    """Wait for the next tick in slices of at most a second, flushing the sink between
    them (a 5 s scrape interval must not leave rows unwritten for 5 s). True if stopped."""
    while True:
        sink.flush_if_due()
        delay = deadline - time.perf_counter()
        if delay <= 0:
            return stop.is_set()
        if stop.wait(min(delay, FLUSH_INTERVAL_S)):
            return True


def _guarded(call: object, ts: float, crashes: GapTracker, what: str) -> list[Sample]:
    try:
        rows = call(ts)  # type: ignore[operator]
    except Exception as exc:  # a sampler bug must not end the run's telemetry
        print(f"zerohop telemetry: {what} failed: {exc!r}", file=sys.stderr)
        return crashes.missing(ts, f"sampler error: {describe_error(exc)}")
    return [*crashes.present(ts), *rows]
