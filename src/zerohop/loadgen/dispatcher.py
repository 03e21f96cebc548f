"""Open-loop load: one dispatcher per process and workload sends on the clock.

Each arrival is sent at its scheduled time in its own greenlet, whatever the earlier
requests are doing, so a slow server shows up as growing `ttft_from_schedule_ms` and not
as a hidden client queue (coordinated omission). The schedule is shared and seeded: this
process takes its own share of it (see the planner), so N workers together replay the
same arrival process one would. An arrival over the workload's `max_in_flight` is
dropped and counted; under the run's `--max-concurrency` (`run_limits`) it waits for a
slot instead, and its record keeps the wait (`queue_wait_ms`). Each arrival takes one of
`--requests`; none left ends the schedule. A conversation's or an agent workload's
arrivals are sessions: each runs in its own greenlet (`sessions`), its later requests on
its own pauses, and both caps count live sessions.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent
from gevent.pool import Group

from zerohop.loadgen.run_limits import (
    DISPATCHERS_KEY,
    ConcurrencyCap,
    concurrency_cap,
    request_budget,
)
from zerohop.loadgen.runtime import runtime_of
from zerohop.loadgen.workload_binding import binding_for

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
    from zerohop.workloads.planners import is_session_planner

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
    start_ns = time.perf_counter_ns()
    try:
        for planned in binding.planner.schedule():
            due_ns = start_ns + int(planned.scheduled_offset_s * 1e9)
            wait_s = (due_ns - time.perf_counter_ns()) / 1e9
            if wait_s > 0:
                gevent.sleep(wait_s)
            if rt.draining:
                break
            if cap_here is not None and len(requests) >= cap_here:
                rt.counters.dropped_arrivals += 1
                continue
            if budget.spent or (not sessions and not budget.take()):
                break  # --requests: this process sent its share
            waited_ns = slots.acquire(due_ns) if slots is not None else None
            if rt.draining:
                _release(slots)
                break
            if sessions:  # each of a session's requests takes one of --requests itself
                requests.spawn(_holding_slot, slots, play_session, environment, executor,
                               client, binding, planned, due_ns, waited_ns)
                continue
            spec = binding.request_spec(planned, scheduled_perf_ns=due_ns)
            spec.queue_wait_ns = waited_ns
            requests.spawn(_holding_slot, slots, _counted, budget, executor, client, spec)
        # schedule exhausted (trace end): let the last requests finish
        requests.join()
    finally:
        requests.kill(block=True)  # only reached with requests left when the run ends
        client.close()


def _holding_slot(slots: ConcurrencyCap | None, send: Any, *args: Any) -> None:
    try:
        send(*args)
    finally:
        _release(slots)


def _release(slots: ConcurrencyCap | None) -> None:
    if slots is not None:
        slots.release()


def _counted(budget: Any, executor: Any, client: Any, spec: Any) -> None:
    from zerohop.loadgen.users import run_logical_request

    try:
        run_logical_request(executor, client, spec)
    finally:
        budget.finish()
