"""The discrete-event loop: arrivals, the layer's CPU, and every replica's engine steps
on one virtual clock in integer nanoseconds.

Each replica is a `sim.engine.Engine`, the model `zerohop sim` serves, driven the way
its live loop drives it: `plan_step` at a step's start, `finish_step` at its end, the
next step planned at that end while work remains, and an idle replica woken by a
submit. Only the waiting differs: the loop jumps to the earliest next event instead of
sleeping. Events at one instant run steps first, then the layer's CPU, then arrivals.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from itertools import count

import numpy as np

from zerohop.fleet.arrivals import OfferedLoad
from zerohop.fleet.layer_model import LayerSpec, LayerState
from zerohop.fleet.outcomes import Outcomes
from zerohop.fleet.request import FleetRequest
from zerohop.sim.answers.tokens import draw_output_tokens
from zerohop.sim.engine.engine import Engine, StepPlan
from zerohop.sim.sequence import EngineError, Sequence

NEVER = np.iinfo(np.int64).max
Tick = Callable[[int, "FleetClock"], None]


class FleetClock:
    """N engines, an optional layer, and what happened to every request (`outcomes`)."""

    def __init__(
        self,
        engines: list[Engine],
        layer: LayerSpec | None,
        outcomes: Outcomes,
        *,
        record_sample: float = 1.0,
        seed: int = 0,
    ) -> None:
        self.engines = engines
        self.outcomes = outcomes
        self.layer = LayerState(layer, len(engines), self._send) if layer else None
        self.record_sample = record_sample
        self._rng = np.random.default_rng((seed, 7))
        self._steps: list[tuple[int, int, int, StepPlan]] = []  # (end, order, replica, plan)
        self._order = count()
        self._busy = [False] * len(engines)
        self._next_replica = 0
        self._ignore_eos: list[bool] = []
        self.now_ns = 0
        self.dropped = 0  # arrivals over their workload's max_in_flight, never sent
        self._in_flight: list[int] = []
        self.compute_s = 0.0  # every step's modelled compute time (FLOPs ÷ FLOP/s) so far

    def run(self, load: OfferedLoad, *, drain_ns: int, tick_ns: int, on_tick: Tick) -> None:
        """Every arrival of `load`, then the drain: requests still running `drain_ns`
        after the last arrival's time are cancelled. `on_tick` sees the fleet every
        `tick_ns`."""
        self._ignore_eos = load.ignore_eos
        self._in_flight = [0] * len(load.workloads)
        caps = load.max_in_flight
        arrivals = load.arrival_ns
        n = len(load)
        recorded = self._rng.random(n) < self.record_sample if self.record_sample < 1 else None
        stop_ns = (int(arrivals[-1]) if n else 0) + drain_ns
        layer = self.layer
        steps = self._steps
        next_tick = 0
        i = 0
        arrival_list = arrivals.tolist()
        routed = load.replica.tolist() if load.replica is not None else None
        workloads, prompts = load.workload.tolist(), load.prompt_tokens.tolist()
        answers = load.max_tokens.tolist()
        sampled = recorded.tolist() if recorded is not None else None
        while True:
            t_arrival = arrival_list[i] if i < n else NEVER
            t_cpu = layer.cpu_queue[0][0] if layer is not None and layer.cpu_queue else NEVER
            t_step = steps[0][0] if steps else NEVER
            now = min(t_arrival, t_cpu, t_step)
            if now == NEVER or now > stop_ns:
                break
            while next_tick <= now:
                on_tick(next_tick, self)
                next_tick += tick_ns
            self.now_ns = now
            if t_step == now:
                _, _, replica, plan = heapq.heappop(steps)
                self.engines[replica].finish_step(plan)
                self.compute_s += plan.compute_s
                self._plan(replica, now)
            elif t_cpu == now:
                layer.cpu_done(now)  # type: ignore[union-attr]
            else:
                w = workloads[i]
                cap = caps[w]
                if cap is not None and self._in_flight[w] >= cap:
                    self.dropped += 1  # the client drops it, as a live open loop does
                    i += 1
                    continue
                self._in_flight[w] += 1
                req = FleetRequest(
                    i, w, now, prompts[i], answers[i],
                    sampled[i] if sampled is not None else True, self._ended,
                )
                i += 1
                self._arrive(req, now, routed[i - 1] if routed is not None else -1)
        on_tick(next_tick, self)
        for engine in self.engines:
            for seq in [*engine.running, *engine.waiting]:
                engine.abort(seq)
                self.outcomes.cancelled(seq.sink, self.now_ns)  # type: ignore[arg-type]
        if layer is not None:
            for req in layer.take_all():
                if req.seq is None:
                    self.outcomes.cancelled(req, self.now_ns)
        self._in_flight = [0] * len(self._in_flight)

    # --- the request's path ---------------------------------------------------------
    def _arrive(self, req: FleetRequest, now: int, replica: int) -> None:
        """`replica` >= 0: the arrival was made for that replica (no layer)."""
        self.outcomes.arrived(req)
        layer = self.layer
        if layer is None:
            if replica < 0:
                replica = self._next_replica
                self._next_replica = (replica + 1) % len(self.engines)
            self._send(req, replica, now)
            return
        if layer.arrive(req, now):
            return
        if layer.died_ns == now and layer.held:  # this arrival took the memory past the limit
            for lost in layer.take_all():
                if lost.seq is not None:
                    self.engines[lost.replica].abort(lost.seq)
                self._in_flight[lost.workload] -= 1
                self.outcomes.layer_lost(lost, now, layer.spec.memory_mib)
        self._in_flight[req.workload] -= 1
        self.outcomes.layer_down(req, now)

    def _send(self, req: FleetRequest, replica: int, now: int) -> None:
        engine = self.engines[replica]
        req.replica = replica
        req.sent_ns = now
        try:
            engine.check_request(req.prompt_tokens, req.max_tokens, None)
        except EngineError as exc:
            self._ended(req, -1, exc)
            return
        if engine.queue_full():
            self._ended(req, -1, EngineError("queue_full", "engine queue is full", 503))
            return
        ec = engine.engine_config
        target = draw_output_tokens(
            max_tokens=req.max_tokens, ignore_eos=self._ignore_eos[req.workload]
            or ec.ignore_eos_default, min_tokens=0, seed=engine.seed,
            request_id=str(req.index), eos_median_tokens=ec.eos_median_tokens,
            eos_sigma=ec.eos_sigma,
        )
        seq = Sequence(str(req.index), req.prompt_tokens, target, req.max_tokens, req, now)
        req.seq = seq
        engine.submit(seq)
        if not self._busy[replica]:
            self._plan(replica, now)

    def _plan(self, replica: int, now: int) -> None:
        plan = self.engines[replica].plan_step(now)
        if plan is None:
            self._busy[replica] = False
            return
        self._busy[replica] = True
        heapq.heappush(self._steps, (plan.end_ns, next(self._order), replica, plan))

    def _ended(self, req: FleetRequest, end_ns: int, error: EngineError | None) -> None:
        now = self.now_ns if end_ns < 0 else end_ns
        self._in_flight[req.workload] -= 1
        if error is None:
            self.outcomes.finished(req, now)
        else:
            self.outcomes.failed(req, now, error)
        if self.layer is not None:
            self.layer.release(req, now)
