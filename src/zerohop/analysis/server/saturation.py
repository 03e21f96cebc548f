"""Is the target saturated, and since when: a verdict from what a run sees as it happens.

Fed one `Observation` a second (the live run's progress path, the virtual clock, or a
finished run's records replayed), it answers "saturated since t, by this signal, at
this offered rate" or "not saturated". Pure: no clock, no I/O.

Why not GuideLLM's over-saturation rule (after 30 s, median TTFT over 2.5 s, then a
positive linear slope of both the in-flight count and TTFT): it learns a TTFT only when
a request ends, so a long answer hides the queue for as long as it streams, and a
straight line reads a server at exactly its capacity, whose backlog grows like √t, as
nearly flat. Here the evidence is the queue itself, seen live:

- **the first-token wait**: how long the oldest request still waiting for its first
  token has waited since its scheduled time. A server that keeps up answers each
  request within a few of its quickest first-token times; one that does not lets the
  wait grow without bound;
- **the first-token backlog**: arrivals offered less those answered (a first token or an
  end). Its growth over the window is tested against its Poisson noise (the square root
  of the arrivals and answers it counts), so a random wander is not growth.

Both must hold for a whole persistence window (at least `persistence_s`, longer when the
target's first tokens are slow): every second of it waited past the floor, and the
backlog grew over the window and over its second half. A burst that the target drains
fails the second test while the queue drains; a stable load fails the first. A target
at exactly its capacity grows its backlog like √t, within its noise over any one window:
a wait held past the floor for four windows whose backlog never drained is saturation
too. Long answers hide the backlog from the first-token wait while the target still has
room to start them: then the oldest request in flight outliving three of the quickest
E2Es, the number in flight growing, is the sign (`in_flight_age`). Where the target
exports its own queue (`server_queue`) the window test runs on it; arrivals dropped at a
workload's in-flight cap in both halves of the window are the client's own sign.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

FIRST_TOKEN_WAIT = "first_token_wait"
IN_FLIGHT_AGE = "in_flight_age"
SERVER_QUEUE = "server_queue"
DROPPED = "dropped_arrivals"
SIGNALS = (FIRST_TOKEN_WAIT, IN_FLIGHT_AGE, SERVER_QUEUE, DROPPED)

PERSISTENCE_S = 15.0  # the shortest window of evidence
PERSISTENCE_TTFTS = 3.0  # ... or this many of the quickest first-token times, if longer
WAIT_FLOOR_S = 1.0  # a first-token wait under this is never a queue
WAIT_FLOOR_TTFTS = 4.0  # ... nor one under this many of the quickest first-token times
AGE_FLOOR_E2ES = 3.0  # a request in flight for under this many of the quickest E2Es is
# not stuck
GROWTH_Z = 1.0  # backlog growth over the window, in standard deviations of its noise
HELD_WINDOWS = 4  # a wait over its floor this many windows long, its backlog not drained,
# is saturation too: a target at exactly its capacity, whose backlog grows like √t
QUEUE_FLOOR = 8.0  # a server queue under this many requests is never saturation
DROP_SHARE = 0.05  # arrivals dropped in the window, of those offered in it
HISTORY_S = 900.0  # observations kept (a window never needs more)


@dataclass(frozen=True)
class Observation:
    """What the run saw at `t_s` seconds after its load began. Counts are cumulative."""

    t_s: float
    offered: int  # arrivals due so far, sent or dropped
    completed: int  # requests ended, any outcome
    answered: int  # requests with a first token, or ended without one
    dropped: int = 0  # arrivals never sent (a workload's max_in_flight)
    oldest_wait_s: float | None = None  # oldest request still waiting for a first token:
    # its age from its scheduled time (None: none waiting)
    first_token_s: float | None = None  # median first-token time (from schedule) of the
    # first tokens that came since the last observation (None: none came)
    server_queue: float | None = None  # the target's own waiting queue, where it has one
    oldest_in_flight_s: float | None = None  # the oldest request not yet ended: its age
    # from its scheduled time (None: none in flight)
    e2e_s: float | None = None  # median E2E (from schedule) of the ok requests that ended
    # since the last observation (None: none ended)


@dataclass(frozen=True)
class Verdict:
    saturated: bool
    since_s: float | None = None  # when the evidence began (the wait last under its floor)
    detected_s: float | None = None  # when the window of evidence was complete
    signal: str | None = None  # one of SIGNALS
    offered_rps: float | None = None  # the offered rate over the window of evidence
    evidence: str = ""  # one phrase, for the console and the report

    def as_dict(self) -> dict[str, object]:
        return {"saturated": self.saturated, "since_s": _round(self.since_s),
                "detected_s": _round(self.detected_s), "signal": self.signal,
                "offered_rps": _round(self.offered_rps), "evidence": self.evidence}


NOT_SATURATED = Verdict(False)


class SaturationDetector:
    """Observations in, the run's verdict out: the first saturation found is kept
    (`verdict`); `now` says whether the evidence holds at the latest observation."""

    def __init__(self, *, persistence_s: float = PERSISTENCE_S) -> None:
        self.persistence_s = persistence_s
        self.history: deque[Observation] = deque()
        self.quickest_ttft_s = math.inf
        self.quickest_e2e_s = math.inf
        self.verdict = NOT_SATURATED
        self.now = NOT_SATURATED

    def observe(self, obs: Observation) -> Verdict:
        """Take one observation; return the run's verdict so far."""
        self.history.append(obs)
        while self.history and obs.t_s - self.history[0].t_s > HISTORY_S:
            self.history.popleft()
        if obs.first_token_s is not None and obs.first_token_s > 0:
            self.quickest_ttft_s = min(self.quickest_ttft_s, obs.first_token_s)
        if obs.e2e_s is not None and obs.e2e_s > 0:
            self.quickest_e2e_s = min(self.quickest_e2e_s, obs.e2e_s)
        self.now = self._judge()
        if self.now.saturated and not self.verdict.saturated:
            self.verdict = self.now
        return self.verdict

    # --- the window ------------------------------------------------------------------
    def window_s(self) -> float:
        quickest = self.quickest_ttft_s if math.isfinite(self.quickest_ttft_s) else 0.0
        return max(self.persistence_s, PERSISTENCE_TTFTS * quickest)

    def wait_floor_s(self) -> float:
        quickest = self.quickest_ttft_s if math.isfinite(self.quickest_ttft_s) else 0.0
        return max(WAIT_FLOOR_S, WAIT_FLOOR_TTFTS * quickest)

    def _window(self, seconds: float) -> list[Observation] | None:
        """The observations of the last `seconds`, the one just before them first (the
        window's baseline); None until the run is that long."""
        last = self.history[-1]
        start = last.t_s - seconds
        if self.history[0].t_s > start:
            return None
        for index in range(len(self.history) - 1, -1, -1):
            if self.history[index].t_s <= start:
                return list(self.history)[index:]
        return None

    def _judge(self) -> Verdict:
        window = self._window(self.window_s())
        if window is None:
            return NOT_SATURATED
        for test in (self._first_token_wait, self._in_flight_age, self._server_queue,
                     self._dropped):
            verdict = test(window)
            if verdict is not None:
                return verdict
        return NOT_SATURATED

    # --- the signals -------------------------------------------------------------------
    def _first_token_wait(self, window: list[Observation]) -> Verdict | None:
        floor = self.wait_floor_s()
        if any((o.oldest_wait_s or 0.0) <= floor for o in window[1:]):
            return None
        first, middle, last = window[0], window[len(window) // 2], window[-1]
        seconds = self.window_s()
        if not (_grew(first, last) and _grew(middle, last)):  # still growing: no drain
            held = self._window(HELD_WINDOWS * seconds)
            if held is None or any((o.oldest_wait_s or 0.0) <= floor for o in held[1:]):
                return None
            if _waiting(last) <= _waiting(held[0]):  # it drained, however slowly
                return None
            first, seconds = held[0], HELD_WINDOWS * seconds
        growth = _waiting(last) - _waiting(first)
        return self._found(window, FIRST_TOKEN_WAIT, self._since(floor),
                           f"the oldest request has waited {last.oldest_wait_s:.1f} s for "
                           f"its first token (floor {floor:.1f} s), {growth:,} more "
                           f"waiting than {seconds:.0f} s before")

    def _in_flight_age(self, window: list[Observation]) -> Verdict | None:
        """Long answers hide a backlog from the first-token wait while the target still
        has room to start them: the requests in flight then outlive the quickest ones
        by far, and their number grows."""
        if not math.isfinite(self.quickest_e2e_s):
            return None  # nothing has ended yet: a long answer may simply be streaming
        floor = max(WAIT_FLOOR_S, AGE_FLOOR_E2ES * self.quickest_e2e_s)
        if any((o.oldest_in_flight_s or 0.0) <= floor for o in window[1:]):
            return None
        first, middle, last = window[0], window[len(window) // 2], window[-1]
        if not (_in_flight_grew(first, last) and _in_flight_grew(middle, last)):
            return None
        return self._found(window, IN_FLIGHT_AGE, window[0].t_s,
                           f"the oldest request has been in flight "
                           f"{last.oldest_in_flight_s:.0f} s (floor {floor:.0f} s) and "
                           f"{_in_flight(last) - _in_flight(first):,} more are in flight "
                           f"than {self.window_s():.0f} s before")

    def _server_queue(self, window: list[Observation]) -> Verdict | None:
        queues = [o.server_queue for o in window]
        if any(q is None for q in queues):
            return None
        first, last = window[0], window[-1]
        floor = max(QUEUE_FLOOR, _rate(first, last))  # a second of arrivals
        if min(q for q in queues[1:] if q is not None) < floor:
            return None
        growth = float(last.server_queue or 0.0) - float(first.server_queue or 0.0)
        counted = last.offered - first.offered + last.completed - first.completed
        if growth <= GROWTH_Z * math.sqrt(max(counted, 1)):
            return None
        return self._found(window, SERVER_QUEUE, window[0].t_s,
                           f"the target's queue held at least {floor:.0f} requests for "
                           f"{self.window_s():.0f} s and grew by {growth:,.0f}")

    def _dropped(self, window: list[Observation]) -> Verdict | None:
        first, middle, last = window[0], window[len(window) // 2], window[-1]
        if not (middle.dropped > first.dropped and last.dropped > middle.dropped):
            return None
        dropped = last.dropped - first.dropped
        if dropped < DROP_SHARE * max(last.offered - first.offered, 1):
            return None
        return self._found(window, DROPPED, window[0].t_s,
                           f"{dropped:,} arrivals dropped at the in-flight cap in "
                           f"{self.window_s():.0f} s")

    # --- helpers -------------------------------------------------------------------------
    def _since(self, floor: float) -> float:
        """The start of the current excursion: just after the wait was last at or under
        its floor (the oldest kept observation when it never was)."""
        previous = self.history[0].t_s
        for obs in reversed(self.history):
            if (obs.oldest_wait_s or 0.0) <= floor:
                return previous
            previous = obs.t_s
        return self.history[0].t_s

    def _found(self, window: list[Observation], signal: str, since: float,
               evidence: str) -> Verdict:
        last = window[-1]
        return Verdict(True, since_s=since, detected_s=last.t_s, signal=signal,
                       offered_rps=_rate(window[0], last), evidence=evidence)


def _grew(first: Observation, last: Observation) -> bool:
    """Did the first-token backlog grow from `first` to `last` by more than its Poisson
    noise (the square root of the arrivals and answers counted between them)?"""
    counted = (last.offered - first.offered) + (last.answered - first.answered)
    return _waiting(last) - _waiting(first) > GROWTH_Z * math.sqrt(max(counted, 1))


def _in_flight_grew(first: Observation, last: Observation) -> bool:
    counted = (last.offered - first.offered) + (last.completed - first.completed)
    return _in_flight(last) - _in_flight(first) > GROWTH_Z * math.sqrt(max(counted, 1))


def _in_flight(obs: Observation) -> int:
    return obs.offered - obs.dropped - obs.completed


def _waiting(obs: Observation) -> int:
    return obs.offered - obs.dropped - obs.answered


def _rate(first: Observation, last: Observation) -> float:
    span = last.t_s - first.t_s
    return (last.offered - first.offered) / span if span > 0 else 0.0


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
