"""The run's two limits beside its duration: `--requests N` (stop after N requests, as
`vllm bench serve --num-prompts` does) and `--max-concurrency N` (an open-loop arrival
that finds N requests in flight waits for a slot instead of being sent or dropped).

Both are split over the processes that generate load (each takes its share, as each
takes its share of a schedule), so they hold for the whole run without a message per
request. A request is one logical request (its retries included): a closed-loop step,
an open-loop arrival, a conversation's turn.

When this process has sent its share of `--requests` and every one has ended, it is
done — and so is one whose every workload is open loop and whose schedules ran out
first (a trace shorter than N): a local runner stops the run itself (as Locust's
`--run-time` does); a worker tells the master, which stops the run when every worker
has.
"""

from __future__ import annotations

import heapq
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import gevent
from gevent.event import Event

from zerohop.loadgen import options as opt
from zerohop.loadgen.runtime import ProcessRuntime, runtime_of

log = logging.getLogger("zerohop")
MSG_BUDGET_SPENT = "zerohop:budget_spent"
DISPATCHERS_KEY = "dispatchers"  # this process's open-loop dispatchers, by user class
WATCH_INTERVAL_S = 0.05
_BUDGET, _CAP, _WATCH, _SPENT = "request_budget", "concurrency_cap", "budget_watch", "spent"
MAX_WAITING = 10_000  # arrivals one process holds waiting for a --max-concurrency slot


def share(total: int, index: int, count: int) -> int:
    """Process `index` of `count`'s part of `total` (the first `total % count` take one
    more): the parts add up to `total` exactly."""
    return total // count + (1 if index < total % count else 0)


@dataclass
class RequestBudget:
    """This process's share of `--requests` (None: no limit). `take` before starting a
    request, `finish` when it has ended."""

    total: int | None
    taken: int = 0
    finished: int = 0

    def take(self) -> bool:
        if self.total is not None and self.taken >= self.total:
            return False
        self.taken += 1
        return True

    def finish(self) -> None:
        self.finished += 1

    @property
    def spent(self) -> bool:
        """Nothing left to start."""
        return self.total is not None and self.taken >= self.total

    @property
    def done(self) -> bool:
        """Nothing left to start, and everything started has ended."""
        return self.spent and self.finished >= self.taken


@dataclass
class ConcurrencyCap:
    """At most `slots` open-loop requests (or sessions) in flight in this process. An
    arrival that finds none free, or others already waiting, waits (in its own
    greenlet: the schedule goes on); a freed slot goes to the waiting arrival that was
    due first, whichever workload's it is, so the mix under the cap follows the
    weights. At most `max_waiting` wait at once; at the end of the run `close` turns
    every waiting arrival away."""

    slots: int
    # arrivals that may wait at once (each holds its prompt): one more finds the queue
    # full and is not sent, so a cap far below the offered rate cannot grow memory
    # without bound over a long run
    max_waiting: int = MAX_WAITING
    _in_use: int = field(default=0, init=False)
    _waiting: list[tuple[int, int, _Waiter]] = field(default_factory=list, init=False)
    _arrivals: int = field(default=0, init=False)  # ties in due time: first come first
    _last_slot_ns: int = field(default=0, init=False)
    _last_queued: bool = field(default=False, init=False)
    _closed: bool = field(default=False, init=False)

    def acquire(self, due_ns: int) -> int | None:
        """Wait for a slot for the arrival due at `due_ns`; returns how long it queued
        (ns): from its due time to its slot when it found no slot free or a queue ahead
        of it, else 0 (a dispatcher merely late is the schedule lag, not a queue).
        None: the run ended first (`close`), and it holds no slot."""
        if self._closed:
            return None
        blocked = self._in_use >= self.slots or bool(self._waiting)
        if blocked:
            waiter = _Waiter()
            self._arrivals += 1
            heapq.heappush(self._waiting, (due_ns, self._arrivals, waiter))
            try:
                waiter.event.wait()  # release() hands its slot over: _in_use stays counted
            except BaseException:  # killed while waiting: give back a slot handed over
                if waiter.granted:
                    self.release()
                elif waiter.event.is_set():
                    pass  # turned away by close(): already off the queue
                else:
                    self._waiting.remove(next(w for w in self._waiting if w[2] is waiter))
                    heapq.heapify(self._waiting)
                raise
            if not waiter.granted:
                return None
        else:
            self._in_use += 1
        now = time.perf_counter_ns()
        # a queue ahead of it: the arrival before it queued too, until after this was due
        queued = blocked or (self._last_queued and self._last_slot_ns > due_ns)
        self._last_slot_ns, self._last_queued = now, queued
        return max(0, now - due_ns) if queued else 0

    def release(self) -> None:
        if self._waiting:
            waiter = heapq.heappop(self._waiting)[2]
            waiter.granted = True
            waiter.event.set()
        else:
            self._in_use -= 1

    def close(self) -> None:
        """The run is ending: every waiting arrival is turned away (never sent), and no
        later one waits."""
        self._closed = True
        waiting, self._waiting = self._waiting, []
        for _, _, waiter in waiting:
            waiter.event.set()

    @property
    def waiting(self) -> int:
        """Arrivals waiting for a slot now."""
        return len(self._waiting)

    @property
    def full(self) -> bool:
        """`max_waiting` arrivals wait already: the next is not sent."""
        return len(self._waiting) >= self.max_waiting

    def oldest_due_ns(self) -> int | None:
        """When the longest-waiting arrival was due (None: none waits)."""
        return self._waiting[0][0] if self._waiting else None  # a heap by due time


@dataclass
class _Waiter:
    event: Event = field(default_factory=Event)
    granted: bool = False  # handed a slot by release(), not turned away by close()


def held_at_cap(rt: ProcessRuntime) -> tuple[int, int | None]:
    """How many arrivals wait for a `--max-concurrency` slot in this process now, and
    when the longest-waiting one was due (perf ns; None: none waits)."""
    cap: ConcurrencyCap | None = rt.extras.get(_CAP)
    return (cap.waiting, cap.oldest_due_ns()) if cap is not None else (0, None)


def close_concurrency_cap(environment: Any) -> None:
    """At the end of the run's window: the arrivals still waiting for a slot are offered
    and never sent (the dispatcher keeps each as a `not_sent` record)."""
    cap = runtime_of(environment).extras.get(_CAP)
    if cap is not None:
        cap.close()
        gevent.sleep(0)  # each turned-away arrival keeps its record now, before the drain


def request_budget(environment: Any) -> RequestBudget:
    """This process's budget (built on first use from `--requests` and its position)."""
    rt = runtime_of(environment)
    budget = rt.extras.get(_BUDGET)
    if budget is None:
        from zerohop.loadgen.workload_binding import worker_position

        total = opt.run_settings(environment).requests or 0
        index, count = worker_position(environment)
        budget = RequestBudget(share(total, index, count) if total > 0 else None)
        rt.extras[_BUDGET] = budget
    return budget


def concurrency_cap(environment: Any) -> ConcurrencyCap | None:
    """This process's share of `--max-concurrency` (None without one), shared by every
    open-loop workload it runs."""
    rt = runtime_of(environment)
    if _CAP not in rt.extras:
        from zerohop.loadgen.workload_binding import worker_position

        total = opt.run_settings(environment).max_concurrency or 0
        index, count = worker_position(environment)
        rt.extras[_CAP] = ConcurrencyCap(max(1, share(total, index, count))) if total else None
    cap: ConcurrencyCap | None = rt.extras[_CAP]
    return cap


# --- stopping the run once the budget is spent -----------------------------------------
def start_budget_watch(environment: Any) -> None:
    """With `--requests`: watch this process's budget and end the run once it is done."""
    rt = runtime_of(environment)
    if not opt.run_settings(environment).requests or _WATCH in rt.extras:
        return
    rt.extras[_WATCH] = gevent.spawn(_watch, environment)


def stop_budget_watch(environment: Any) -> None:
    watch = runtime_of(environment).extras.pop(_WATCH, None)
    if watch is not None and watch is not gevent.getcurrent():
        watch.kill(block=False)


def register_master(environment: Any) -> None:
    """The master ends the run when every worker has spent its share."""
    rt = runtime_of(environment)
    runner = environment.runner

    def on_spent(msg: Any, **_: Any) -> None:
        spent: set[str] = rt.extras.setdefault(_SPENT, set())
        spent.add(msg.node_id)
        alive = {c.id for c in runner.clients.all if c.state != "missing"}
        if alive and alive <= spent:
            _end_run(environment)

    runner.register_message(MSG_BUDGET_SPENT, on_spent)


def _watch(environment: Any) -> None:
    rt = runtime_of(environment)
    budget = request_budget(environment)
    while not (budget.done or _schedules_ran_out(environment)):
        gevent.sleep(WATCH_INTERVAL_S)
    log.info("zerohop: %d requests sent and ended: the run is done", budget.taken)
    if rt.role == "worker":
        if rt.send is not None:
            rt.flush_outbox()
            rt.send(MSG_BUDGET_SPENT, {"requests": budget.taken})
        return
    _end_run(environment)


def _schedules_ran_out(environment: Any) -> bool:
    """Every workload here is open loop, and every dispatcher has sent its whole
    schedule and seen its requests end: nothing more will be sent."""
    rt = runtime_of(environment)
    dispatchers = rt.extras.get(DISPATCHERS_KEY) or {}
    bindings = rt.extras.get("bindings") or {}
    if not dispatchers or not all(b.open_loop for b in bindings.values()):
        return False
    return all(greenlet.dead for greenlet in dispatchers.values())


def _end_run(environment: Any) -> None:
    """As Locust's --run-time does: a headless run quits, a web UI run stops."""
    runner = environment.runner
    if getattr(environment, "web_ui", None) is None:
        gevent.spawn(runner.quit)
    else:
        gevent.spawn(runner.stop)
