"""Open-loop load: one dispatcher per process and workload sends on the clock.

Each arrival is sent at its scheduled time in its own greenlet, whatever the earlier
requests are doing, so a slow server shows up as growing `ttft_from_schedule_ms` and not
as a hidden client queue (coordinated omission). The schedule is shared and seeded: this
process takes its own share of it (see the planner), so N workers together replay the
same arrival process one would. An arrival over the workload's `max_in_flight` is
dropped and counted; under the run's `--max-concurrency` (`run_limits`) it waits for a
slot instead, in its own greenlet (the schedule goes on meanwhile), and its record keeps
the wait (`queue_wait_ms`). An arrival still waiting when the run ends was offered and
never sent: it is kept as a `not_sent` record without a send time, so the offered rate
counts it and nothing else does; so is one that finds `run_limits.MAX_WAITING` arrivals
waiting already (the client's queue is full: memory stays bounded). Each arrival takes
one of `--requests`; none left ends the schedule. A conversation's or an agent
workload's arrivals are sessions: each runs in its own greenlet (`sessions`), its later
requests on its own pauses, and both caps count live sessions.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import gevent
from gevent import GreenletExit
from gevent.pool import Group

from zerohop.client.llm_client import LLMClient, RequestSpec, cancelled_record
from zerohop.client.policy import PolicyExecutor
from zerohop.core import records as rec
from zerohop.loadgen.run_limits import (
    DISPATCHERS_KEY,
    ConcurrencyCap,
    RequestBudget,
    concurrency_cap,
    request_budget,
)
from zerohop.loadgen.runtime import ProcessRuntime, runtime_of
from zerohop.loadgen.workload_binding import WorkloadBinding, binding_for

if TYPE_CHECKING:
    from zerohop.workloads.planners.agent import AgentLoop
    from zerohop.workloads.planners.conversation import Session

log = logging.getLogger("zerohop")
_KEY = DISPATCHERS_KEY


def start_open_loop_dispatchers(environment: Any) -> None:
    from zerohop.loadgen.users import LLMUser

    rt = runtime_of(environment)
    running: dict[str, gevent.Greenlet] = rt.extras.setdefault(_KEY, {})
    for user_class in environment.user_classes:
        if not (isinstance(user_class, type) and issubclass(user_class, LLMUser)):
            continue
        if user_class.__name__ in running:
            continue
        binding = binding_for(environment, user_class)
        if binding.open_loop:
            running[user_class.__name__] = gevent.spawn(_dispatch, environment, user_class)


def stop_open_loop_dispatchers(environment: Any) -> None:
    rt = runtime_of(environment)
    for greenlet in rt.extras.pop(_KEY, {}).values():
        greenlet.kill(block=True)


def _dispatch(environment: Any, user_class: type) -> None:
    from zerohop.loadgen.sessions import play_session
    from zerohop.loadgen.users import new_policy_executor
    from zerohop.workloads.kind_planner import is_session_planner

    rt = runtime_of(environment)
    binding = binding_for(environment, user_class)
    sessions = is_session_planner(binding.planner)
    client = binding.new_client(environment)
    executor = new_policy_executor(environment, client, binding,
                                   (binding.spec.name, "dispatcher"))
    cap_here = binding.planner.in_flight_cap()  # this process's share of max_in_flight
    budget = request_budget(environment)
    slots = concurrency_cap(environment)
    requests = Group()
    waiting = _Waiting()
    start_ns = time.perf_counter_ns()
    try:
        for planned in binding.planner.schedule():
            due_ns = start_ns + int(planned.scheduled_offset_s * 1e9)
            wait_s = (due_ns - time.perf_counter_ns()) / 1e9
            if wait_s > 0:
                gevent.sleep(wait_s)
            if rt.draining:
                break
            if cap_here is not None and len(requests) - waiting.count >= cap_here:
                rt.counters.dropped_arrivals += 1
                continue
            if budget.spent or (not sessions and not budget.take()):
                break  # --requests: this process sent its share
            first: Callable[[], RequestSpec]
            send: Callable[[int | None], object]
            if sessions:  # each of a session's requests takes one of --requests itself
                first = functools.partial(_first_of_session, binding, planned, due_ns)
                send = functools.partial(play_session, environment, executor, client,
                                         binding, planned, due_ns)
            else:
                spec = binding.request_spec(planned, scheduled_perf_ns=due_ns)
                first = functools.partial(_same, spec)
                send = functools.partial(_counted, budget, executor, client, spec)
            if slots is not None and slots.full:  # the client's queue is full: not sent
                _never_sent(rt, client, first())
                if not sessions:
                    budget.finish()  # it took one of --requests: that one has ended
                continue
            requests.spawn(_when_slot_free, rt, slots, waiting, due_ns, client, first, send)
        # schedule exhausted (trace end): let the last requests finish
        requests.join()
    finally:
        requests.kill(block=True)  # only reached with requests left when the run ends
        client.close()


@dataclass
class _Waiting:
    """How many of a dispatcher's arrivals wait for a `--max-concurrency` slot (not in
    flight: a workload's max_in_flight does not count them)."""

    count: int = 0


def _when_slot_free(rt: ProcessRuntime, slots: ConcurrencyCap | None, waiting: _Waiting,
                    due_ns: int, client: LLMClient, first: Callable[[], RequestSpec],
                    send: Callable[[int | None], object]) -> None:
    """Send one arrival once a `--max-concurrency` slot is free (at once without a cap).
    Killed while it waits (the run ended), or handed a slot as the drain began, it was
    offered and never sent: its (first) request is kept as a `not_sent` record."""
    if slots is None:
        send(None)
        return
    waiting.count += 1
    try:
        waited_ns = slots.acquire(due_ns)
    except GreenletExit:
        _never_sent(rt, client, first())
        raise
    finally:
        waiting.count -= 1
    if waited_ns is not None and not rt.draining:
        try:
            send(waited_ns)
        finally:
            slots.release()
        return
    if waited_ns is not None:  # handed a slot as the drain began: give it back
        slots.release()
    _never_sent(rt, client, first())  # turned away, or too late: the window has ended


def _never_sent(rt: ProcessRuntime, client: LLMClient, spec: RequestSpec) -> None:
    record = cancelled_record(spec, client.new_request_id(), client.api_adapter.name,
                              client.anchor, None)
    record.outcome = rec.NOT_SENT
    rt.counters.not_sent += 1
    rt.emit(record)


def _same(spec: RequestSpec) -> RequestSpec:
    return spec


def _first_of_session(binding: WorkloadBinding, session: Session | AgentLoop, due_ns: int
                      ) -> RequestSpec:
    return binding.request_spec(session.next_request(), scheduled_perf_ns=due_ns)


def _counted(budget: RequestBudget, executor: PolicyExecutor, client: LLMClient,
             spec: RequestSpec, waited_ns: int | None) -> None:
    from zerohop.loadgen.users import run_logical_request

    spec.queue_wait_ns = waited_ns
    try:
        run_logical_request(executor, client, spec)
    finally:
        budget.finish()
