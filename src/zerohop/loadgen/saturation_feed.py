"""The live feed of the saturation detector: what one load-generating process sees of its
requests as it happens, one line a second, for the progress line (`runner/progress.py`).

Each attempt is counted when it starts (from its scheduled time, or its send in a closed
loop), when its first content arrives (the client's `on_first_content`: a long answer's
first token is seen while it still streams) and when it ends. Every second the process
appends one line to `<run>/live/<process>.jsonl`: the counts so far, the oldest request
still waiting for a first token and the oldest in flight (their ages from their
scheduled times), the median first-token time and E2E of that second, and the arrivals
dropped at an in-flight cap; arrivals waiting for a `--max-concurrency` slot count as
offered and waiting from their due time. A process without a results folder keeps no feed.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import gevent

from zerohop.core.layout import LIVE_DIR
from zerohop.loadgen import options as opt
from zerohop.loadgen.run_limits import held_at_cap
from zerohop.loadgen.runtime import runtime_of

WRITE_INTERVAL_S = 1.0
_KEY = "saturation_feed"


class LiveFeed:
    """The counts of one process; times are `time.perf_counter_ns`."""

    def __init__(self) -> None:
        self.offered = self.completed = self.answered = 0
        self._ids = itertools.count()
        self._waiting: dict[int, int] = {}  # no first content yet: key -> scheduled ns
        self._in_flight: dict[int, int] = {}
        self._firsts: list[float] = []  # first-token times of this second, s
        self._e2es: list[float] = []  # E2Es of the ok ends of this second, s

    def started(self, scheduled_ns: int) -> int:
        key = next(self._ids)
        self.offered += 1
        self._waiting[key] = self._in_flight[key] = scheduled_ns
        return key

    def first_content(self, key: int, content: bool) -> None:
        """The stream's first content, or its error or end before any (`content`)."""
        scheduled = self._waiting.pop(key, None)
        if scheduled is None:
            return
        self.answered += 1
        if content:
            self._firsts.append((time.perf_counter_ns() - scheduled) / 1e9)

    def ended(self, key: int, ok: bool) -> None:
        scheduled = self._in_flight.pop(key, None)
        if scheduled is None:
            return
        self.completed += 1
        if self._waiting.pop(key, None) is not None:
            self.answered += 1
        if ok:
            self._e2es.append((time.perf_counter_ns() - scheduled) / 1e9)

    def line(self, dropped: int, held: int = 0, held_since_ns: int | None = None
             ) -> dict[str, Any]:
        """The counts now, and this second's medians (which then start again). `held`:
        arrivals waiting for a --max-concurrency slot, the oldest due at `held_since_ns`:
        offered, and waiting for a first token since they were due."""
        now = time.perf_counter_ns()
        firsts, self._firsts = self._firsts, []
        e2es, self._e2es = self._e2es, []
        waits = [age for age in (_age(now, self._waiting),) if age is not None]
        if held_since_ns is not None:
            waits.append((now - held_since_ns) / 1e9)
        return {"ts": time.time(), "offered": self.offered + dropped + held,
                "dropped": dropped, "completed": self.completed, "answered": self.answered,
                "oldest_wait_s": max(waits, default=None),
                "oldest_in_flight_s": _age(now, self._in_flight),
                "first_token_s": statistics.median(firsts) if firsts else None,
                "e2e_s": statistics.median(e2es) if e2es else None}


def live_feed(environment: Any) -> LiveFeed | None:
    """This process's feed, started (with its writer) at its first use; None when the
    run keeps no results folder."""
    rt = runtime_of(environment)
    feed = rt.extras.get(_KEY)
    if feed is None:
        run_dir = rt.run_dir or (opt.locust_options(environment).run_dir or None)
        if run_dir is None:
            return None
        feed = rt.extras[_KEY] = LiveFeed()
        path = Path(run_dir) / LIVE_DIR / f"{rt.role}-{os.getpid()}.jsonl"
        gevent.spawn(_write_lines, feed, rt, path)
    return feed


def _write_lines(feed: LiveFeed, rt: Any, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as out:
        while True:
            out.write(json.dumps(feed.line(rt.counters.dropped_arrivals,
                                           *held_at_cap(rt))) + "\n")
            out.flush()
            gevent.sleep(WRITE_INTERVAL_S)


def _age(now_ns: int, scheduled: dict[int, int]) -> float | None:
    """The oldest entry's age, s. Entries go in roughly in schedule order, so the first
    few are the oldest; a retry or a session's later turn can be older, so all are read
    (a few thousand in flight at most: microseconds once a second)."""
    return (now_ns - min(scheduled.values())) / 1e9 if scheduled else None
