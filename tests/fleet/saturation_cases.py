"""Planted saturation cases on the virtual clock, each seen by two detectors at once:
zerohop's (`analysis.saturation`, fed one observation a virtual second) and GuideLLM's
published rule (`guidellm_rule`, fed every start and end). Shared by the tests and
`tests/bench/bench_saturation.py`, which prints the table in docs/saturation.md.

A case is an offered rate over time, as a multiple of the modelled target's capacity
(measured here, once per request size, as the completions a second of a run offered
three times what it can serve), drawn as a seeded inhomogeneous Poisson process.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tests.fleet.guidellm_rule import GuideLLMRule
from zerohop.analysis.server.saturation import Observation, SaturationDetector
from zerohop.fleet.arrivals import OfferedLoad
from zerohop.fleet.clock import FleetClock
from zerohop.fleet.outcomes import Outcomes
from zerohop.fleet.request import FleetRequest
from zerohop.fleet.run import build_engines
from zerohop.sim.config import load_config
from zerohop.sim.embedded import EMBEDDED_TARGET_CONFIG
from zerohop.sim.sequence import EngineError

TICK_NS = 1_000_000_000
Shape = Callable[[np.ndarray], np.ndarray]  # seconds -> multiple of capacity


@dataclass(frozen=True)
class Sizes:
    prompt: int
    answer: int


CHAT = Sizes(512, 256)
LONG = Sizes(8_000, 4_000)  # an answer streams for 32 s on the idle target


@dataclass(frozen=True)
class Case:
    name: str
    sizes: Sizes
    duration_s: float
    shape: Shape
    onset_s: float | None  # when the offered rate first exceeds capacity (None: control)


def _flat(level: float) -> Shape:
    return lambda t: np.full_like(t, level)


def _ramp(start: float, end: float, duration_s: float) -> Shape:
    return lambda t: start + (end - start) * t / duration_s


def _burst(base: float, peak: float, at_s: float, length_s: float) -> Shape:
    return lambda t: np.where((t >= at_s) & (t < at_s + length_s), peak, base)


def cases(nightly_s: float = 600.0) -> list[Case]:
    """The planted cases: four overloads, then four controls."""
    return [
        Case("overload from the start (1.5x)", CHAT, 120, _flat(1.5), 0.0),
        Case("rising 0.5x -> 1.5x over 240 s", CHAT, 240, _ramp(0.5, 1.5, 240), 120.0),
        Case("exactly at capacity (1.0x)", CHAT, 300, _flat(1.0), 0.0),
        Case("long contexts, overload (1.5x)", LONG, 300, _flat(1.5), 0.0),
        Case(f"80 % of capacity, {nightly_s:.0f} s", CHAT, nightly_s, _flat(0.8), None),
        Case("burst 2x for 10 s, then 0.6x", CHAT, 180, _burst(0.6, 2.0, 60, 10), None),
        Case("long contexts at 60 %", LONG, 300, _flat(0.6), None),
        Case("long contexts at 85 %", LONG, 300, _flat(0.85), None),
    ]


@dataclass(frozen=True)
class Outcome:
    case: str
    seed: int
    zerohop_s: float | None  # when zerohop's detector first said saturated
    guidellm_s: float | None  # when GuideLLM's rule first stopped
    since_s: float | None
    signal: str | None


def arrivals(shape: Shape, capacity_rps: float, duration_s: float, seed: int) -> np.ndarray:
    """Arrival times (ns) of a Poisson process of rate shape(t) x capacity, by thinning."""
    rng = np.random.default_rng(seed)
    grid = np.linspace(0, duration_s, 1001)
    peak = float(shape(grid).max()) * capacity_rps
    n = rng.poisson(peak * duration_s)
    t = np.sort(rng.uniform(0, duration_s, n))
    kept = t[rng.uniform(0, peak, n) < shape(t) * capacity_rps]
    return np.round(kept * 1e9).astype(np.int64)


def offered(sizes: Sizes, arrival_ns: np.ndarray) -> OfferedLoad:
    n = arrival_ns.size
    return OfferedLoad(
        workloads=["planted"], arrival_ns=arrival_ns, workload=np.zeros(n, np.int32),
        prompt_tokens=np.full(n, sizes.prompt, np.int64),
        max_tokens=np.full(n, sizes.answer, np.int64), ignore_eos=[True],
        max_in_flight=[None])


class Watch(Outcomes):
    """The fleet's outcomes as both detectors see them: no rows, just the events."""

    def __init__(self) -> None:
        super().__init__(start_wall_s=0.0, workloads=["planted"], api="openai-chat",
                         model="m", emit=lambda row: None)
        self.zerohop = SaturationDetector()
        self.guidellm = GuideLLMRule()
        self.waiting: dict[int, FleetRequest] = {}  # no first token yet, in arrival order
        self.in_flight = 0
        self.completed = 0
        self.answered = 0
        self.in_flight_since: dict[int, int] = {}  # arrival time of each request in flight
        self.e2es: list[float] = []  # of the ok requests ended since the last tick

    def arrived(self, req: FleetRequest) -> None:
        self.arrivals += 1
        self.in_flight += 1
        self.waiting[req.index] = req
        self.in_flight_since[req.index] = req.arrival_ns
        self.guidellm.started(req.arrival_ns / 1e9, self.in_flight)

    def finished(self, req: FleetRequest, end_ns: int) -> None:
        self.e2es.append((end_ns - req.arrival_ns) / 1e9)
        self._ended(req, end_ns)

    def failed(self, req: FleetRequest, now_ns: int, error: EngineError) -> None:
        self._ended(req, now_ns)

    def cancelled(self, req: FleetRequest, now_ns: int) -> None:
        self._ended(req, now_ns)

    def _ended(self, req: FleetRequest, end_ns: int) -> None:
        self.in_flight -= 1
        self.completed += 1
        del self.in_flight_since[req.index]
        if self.waiting.pop(req.index, None) is not None:
            self.answered += 1
        ttft = (req.token_ns[0] - req.arrival_ns) / 1e9 if req.token_ns else None
        self.guidellm.finished(end_ns / 1e9, ttft)

    def tick(self, now_ns: int, clock: FleetClock) -> None:
        """One observation: first tokens since the last, the oldest still waiting."""
        firsts = []
        for index, req in list(self.waiting.items()):
            if req.token_ns:
                firsts.append((req.token_ns[0] - req.arrival_ns) / 1e9)
                del self.waiting[index]
                self.answered += 1
        oldest = next(iter(self.waiting.values()), None)
        oldest_sent = min(self.in_flight_since.values(), default=None)
        e2es, self.e2es = self.e2es, []
        self.zerohop.observe(Observation(
            t_s=now_ns / 1e9, offered=self.arrivals + clock.dropped,
            completed=self.completed, answered=self.answered, dropped=clock.dropped,
            oldest_wait_s=(now_ns - oldest.arrival_ns) / 1e9 if oldest else None,
            first_token_s=float(np.median(firsts)) if firsts else None,
            oldest_in_flight_s=None if oldest_sent is None else (now_ns - oldest_sent) / 1e9,
            e2e_s=float(np.median(e2es)) if e2es else None))
        # no server_queue: both detectors see only what the client sees


@functools.cache
def capacity_rps(sizes: Sizes, precise: bool = True) -> float:
    """The most completions a second the modelled target serves, the rate a case's
    multiples are of. Found in two steps: the offer is raised fourfold until the target
    falls behind; then, from what it served under that overload (less than its best: a
    deep queue's prefills slow the batch), the offer rises 5 % a step while what it
    serves still rises. `precise=False` stops after the first step: a lower bound
    (within 10 % here), enough for cases well above or below capacity."""
    offer = 0.25
    served = _served_rps(sizes, offer)
    while served > 0.8 * offer:
        offer *= 4
        served = _served_rps(sizes, offer)
    best = served
    while precise:
        served = _served_rps(sizes, best * 1.05)
        if served <= best:
            return best
        best = served
    return best


def _served_rps(sizes: Sizes, offered_rps: float) -> float:
    config = load_config(EMBEDDED_TARGET_CONFIG, {})  # type: ignore[arg-type]
    duration = 120.0 + 120.0 * sizes.answer / 1000.0  # long answers: many seconds each
    gaps = np.arange(0, duration, 1 / offered_rps)
    count = Outcomes(start_wall_s=0.0, workloads=["planted"], api="openai-chat", model="m",
                     emit=lambda row: None)
    count.finished = lambda req, end_ns: count.counts.update(["ok"])  # type: ignore[method-assign]
    clock = FleetClock(build_engines(config, 1), None, count, record_sample=0.0)
    ends: list[tuple[int, int]] = []

    def tick(now_ns: int, _clock: FleetClock) -> None:
        ends.append((now_ns, count.counts["ok"]))

    clock.run(offered(sizes, np.round(gaps * 1e9).astype(np.int64)), drain_ns=0,
              tick_ns=TICK_NS, on_tick=tick)
    (t0, c0), (t1, c1) = ends[len(ends) // 3], ends[-2]
    return (c1 - c0) / ((t1 - t0) / 1e9)


def run_case(case: Case, seed: int, *, precise: bool = True) -> Outcome:
    config = load_config(EMBEDDED_TARGET_CONFIG, {})  # type: ignore[arg-type]
    engines = build_engines(config, 1)
    capacity = capacity_rps(case.sizes, precise)
    load = offered(case.sizes, arrivals(case.shape, capacity, case.duration_s, seed))
    watch = Watch()
    clock = FleetClock(engines, None, watch, seed=seed)
    clock.run(load, drain_ns=0, tick_ns=TICK_NS, on_tick=watch.tick)
    verdict = watch.zerohop.verdict
    return Outcome(case.name, seed, verdict.detected_s, watch.guidellm.alarm_s,
                   verdict.since_s, verdict.signal)


def delay(outcome: Outcome, case: Case, which: str) -> float | None:
    """Seconds from the overload's onset to the alarm (None: no alarm)."""
    at = outcome.zerohop_s if which == "zerohop" else outcome.guidellm_s
    if at is None or case.onset_s is None:
        return at
    return at - case.onset_s


def nan_if_none(value: float | None) -> float:
    return math.nan if value is None else value
