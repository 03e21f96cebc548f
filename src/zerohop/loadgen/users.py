"""The Locust user behind every zerohop workload.

A closed-loop workload is Locust's own model: each user sends its next request when the
previous one ends. An open-loop or trace workload is driven by the process's dispatcher
(`dispatcher.py`), which sends on the schedule whatever the responses do; its Locust
users only hold the slot and idle.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import gevent
from gevent import GreenletExit
from locust import User, task

from zerohop import records as rec
from zerohop.loadgen import options as opt
from zerohop.loadgen.client import LLMClient, RequestSpec, cancelled_record
from zerohop.loadgen.runtime import runtime_of
from zerohop.loadgen.workload_binding import WorkloadBinding, binding_for
from zerohop.records import RequestRecord


class LLMUser(User):
    """Base class: subclasses name their workload kind and default YAML file."""

    abstract = True
    workload_kind: ClassVar[str] = ""
    default_workload_file: ClassVar[str] = ""

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self.binding: WorkloadBinding = binding_for(environment, type(self))
        self.llm: LLMClient = self.binding.new_client(environment)

    def wait_time(self) -> float:
        return self.binding.think_time_s()

    def on_stop(self) -> None:
        self.llm.close()

    @task
    def next_request(self) -> None:
        rt = runtime_of(self.environment)
        if self.binding.open_loop or rt.draining:
            gevent.sleep(0.5)  # the dispatcher sends; or the run is draining
            return
        measure_and_report(self.environment, self.llm, self.binding.next_spec())


def measure_and_report(environment: Any, client: LLMClient, spec: RequestSpec) -> RequestRecord:
    """Execute one request, keep its record whatever happens, fire Locust's events."""
    rt = runtime_of(environment)
    request_id = client.new_request_id()
    sent_ns = time.perf_counter_ns()
    rt.in_flight += 1
    try:
        record = client.execute(spec, request_id=request_id)
    except (GreenletExit, KeyboardInterrupt, SystemExit):
        # killed at the end of the run, or the greenlet that was current when Ctrl-C
        # arrived: the request is cut off, its record is kept
        rt.counters.cancelled += 1
        rt.emit(cancelled_record(spec, request_id, client.adapter.name, client.anchor, sent_ns))
        raise
    finally:
        rt.in_flight -= 1
    rt.emit(record)
    _fire_locust_events(environment, record)
    return record


def _fire_locust_events(environment: Any, record: RequestRecord) -> None:
    """Locust's web UI and CSVs get E2E and TTFT in ms (its percentiles are rounded: ours
    are in the results folder)."""
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
    if record.ttft_ms is not None:
        environment.events.request.fire(
            request_type="TTFT", name=record.workload, response_time=record.ttft_ms,
            response_length=0, exception=None, context={},
        )


def drain_timeout(environment: Any) -> float:
    return float(opt.option(environment, "zh_drain_timeout"))
