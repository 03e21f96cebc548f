"""The Locust user behind every zerohop workload.

A closed-loop workload is Locust's own model: each user sends its next request when the
previous one ends. An open-loop or trace workload is driven by the process's dispatcher
(`dispatcher.py`), which sends on the schedule whatever the responses do; its Locust
users only hold the slot and idle.
"""

from __future__ import annotations

import functools
import random
import time
from typing import Any, ClassVar

import gevent
from gevent import GreenletExit
from locust import User, task

from zerohop.client.llm_client import LLMClient, RequestSpec, cancelled_record
from zerohop.client.policy import PolicyExecutor
from zerohop.core import records as rec
from zerohop.core.records import RequestRecord
from zerohop.loadgen.run_limits import request_budget
from zerohop.loadgen.runtime import runtime_of
from zerohop.loadgen.saturation_feed import live_feed
from zerohop.loadgen.workload_binding import WorkloadBinding, binding_for
from zerohop.workloads.kind_registry import workload_kind, workload_kinds


class LLMUser(User):
    """Base class: the locustfiles' subclasses name their workload kind; its default YAML
    file and whether it runs by default come from the kind's entry in
    `workloads.kind_registry` (a class may still set them; `user_class_for` makes the
    class from the entry alone); `selection.workload_class` derives from them the class
    that runs one workload. A class with `runs_by_default = False` runs only when a --workload file
    names its kind or the command line names the class (its default file is an example)."""

    abstract = True
    workload_kind: ClassVar[str] = ""
    default_workload_file: ClassVar[str] = ""
    runs_by_default: ClassVar[bool] = True
    workload_spec: ClassVar[Any] = None  # set on the classes `selection.workload_class` makes

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("workload_kind")
        if kind:
            entry = next((k for k in workload_kinds() if k.name == kind), None)
            if "default_workload_file" not in cls.__dict__:
                cls.default_workload_file = entry.default_file if entry is not None else ""
            if "runs_by_default" not in cls.__dict__:
                cls.runs_by_default = entry is not None and entry.runs_by_default

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self.binding: WorkloadBinding = binding_for(environment, type(self))
        self.llm: LLMClient = self.binding.new_client(environment)
        self.policy = new_policy_executor(environment, self.llm, self.binding,
                                          (self.binding.spec.name, id(self)))

    def wait_time(self) -> float:
        return self.binding.think_time_s()

    def on_stop(self) -> None:
        self.llm.close()

    @task
    def next_request(self) -> None:
        rt = runtime_of(self.environment)
        if self.binding.open_loop or rt.draining or request_budget(self.environment).spent:
            gevent.sleep(0.5)  # the dispatcher sends; or the run is draining or done
            return
        self.send_next()

    def send_next(self) -> None:
        """One closed-loop step: one logical request (`sessions.SessionUser`: a session,
        whose requests each count towards --requests)."""
        budget = request_budget(self.environment)
        if not budget.take():
            return
        try:
            run_logical_request(self.policy, self.llm, self.binding.next_spec())
        finally:
            budget.finish()


def user_class_for(kind: str, base: type[LLMUser] = LLMUser, **attributes: Any
                   ) -> type[LLMUser]:
    """The Locust user class that runs workload kind `kind`, made from its registry entry
    (named by its `user_class`), for a locustfile to bind to that name, which Locust
    finds: `Toy = user_class_for("toy")`. `base`: `sessions.SessionUser` for a kind whose
    closed-loop step is a whole session; `attributes`: Locust's (`weight`, ...)."""
    entry = workload_kind(kind)
    return type(entry.user_class, (base,), {
        "workload_kind": kind, "__module__": base.__module__, "__qualname__": entry.user_class,
        **attributes})


def new_policy_executor(environment: Any, client: LLMClient, binding: WorkloadBinding,
                        seed: object) -> PolicyExecutor:
    """The workload's client policy for one user (or one open-loop dispatcher): every
    attempt is measured by `client`, kept (a cancelled one too) and reported to Locust;
    the retry budget is the policy's in-flight retry cap for that user."""
    rt = runtime_of(environment)
    feed = live_feed(environment)

    def attempt(one: RequestSpec) -> RequestRecord:
        request_id = client.new_request_id()
        sent_ns = time.perf_counter_ns()
        rt.in_flight += 1
        key = feed.started(one.scheduled_perf_ns or sent_ns) if feed is not None else -1
        ok = False
        try:
            record = client.execute(one, request_id=request_id, on_first_content=None
                                    if feed is None else functools.partial(
                                        feed.first_content, key))
            ok = record.outcome == rec.OK
            return record
        except (GreenletExit, KeyboardInterrupt, SystemExit):
            # killed at the end of the run (or interrupted): the record is kept
            rt.counters.cancelled += 1
            rt.emit(cancelled_record(one, request_id, client.api_adapter.name, client.anchor,
                                     sent_ns))
            raise
        finally:
            rt.in_flight -= 1
            if feed is not None:
                feed.ended(key, ok)

    def emit(record: RequestRecord) -> None:
        rt.emit(record)
        _fire_locust_events(environment, record)

    return PolicyExecutor(binding.spec.policy, attempt=attempt, rng=random.Random(str(seed)),
                          sleep=gevent.sleep, emit=emit)


def run_logical_request(executor: PolicyExecutor, client: LLMClient, spec: RequestSpec
                        ) -> RequestRecord:
    """One logical request (all its attempts); returns the final attempt's record."""
    return executor.run(spec, spec.logical_request_id or client.new_request_id())[-1]


def _fire_locust_events(environment: Any, record: RequestRecord) -> None:
    """Locust's web UI and CSVs get each request once, its E2E in ms (its percentiles
    are rounded: ours are in the results folder). TTFT is the same request's other
    latency, not a second request: the web UI's zerohop tab and, headless, the table
    after the run (loadgen/ttft_table.py) show it."""
    ok = record.outcome == rec.OK
    exception = None if ok else RuntimeError(record.outcome + (
        f": {record.error_message[:200]}" if record.error_message else ""))
    e2e = record.e2e_ms
    if e2e is None and record.end_ts is not None and record.sent_ts is not None:
        e2e = (record.end_ts - record.sent_ts) * 1000.0
    environment.events.request.fire(
        request_type="E2E", name=record.workload, response_time=e2e or 0.0,
        response_length=record.output_tokens or 0, exception=exception, context={},
    )


