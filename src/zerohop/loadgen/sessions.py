"""Conversations and agent loops under Locust: a session's requests sent one after
another, each with the history the target itself answered.

Closed loop: a `SessionUser` runs one session after another (Locust's wait time, the
load's `think_time_s`, falls between sessions). Open loop: the dispatcher starts each
session at its arrival time and `play_session` runs it in its own greenlet, the later
requests following the session's own pauses (a conversation's think times, an agent
loop's tool latencies and think times). Every request is one logical request under the
workload's client policy; the text (and an agent's tool calls) of its last attempt is
what the next request carries. A request that fails ends its session (its record says
how it failed), and a run that is draining starts no further request.
"""

from __future__ import annotations

from typing import Any

import gevent

from zerohop.client.llm_client import LLMClient
from zerohop.client.policy import PolicyExecutor
from zerohop.client.protocols import StreamedToolCall
from zerohop.core import records as rec
from zerohop.core.records import RequestRecord
from zerohop.loadgen.run_limits import request_budget
from zerohop.loadgen.runtime import runtime_of
from zerohop.loadgen.users import LLMUser, run_logical_request
from zerohop.loadgen.workload_binding import WorkloadBinding
from zerohop.workloads.planners.agent import AgentLoop, StepResult, ToolCallMade, run_agent_loop
from zerohop.workloads.planners.conversation import Session, TurnResult, run_session
from zerohop.workloads.planners.request_plans import PlannedRequest

__all__ = ["SessionUser", "play_session"]


class SessionUser(LLMUser):
    """A user whose closed-loop step is a whole conversation or agent loop."""

    abstract = True

    def send_next(self) -> None:
        play_session(self.environment, self.policy, self.llm, self.binding,
                     self.binding.planner.next_session())


def play_session(environment: Any, executor: PolicyExecutor, client: LLMClient,
                 binding: WorkloadBinding, session: Session | AgentLoop,
                 first_due_ns: int | None = None, first_queue_wait_ns: int | None = None
                 ) -> int:
    """Send `session`'s requests; `first_due_ns`: the open loop's scheduled time of the
    first (the later ones are due when their pause ends), `first_queue_wait_ns` how long
    it waited for a --max-concurrency slot. Each request takes one of --requests; a
    session that finds none left ends. Returns the requests answered (a conversation's
    turns, an agent loop's model calls)."""
    rt = runtime_of(environment)
    budget = request_budget(environment)

    def measure(planned: PlannedRequest, first: bool, answer: list[str],
                calls: list[StreamedToolCall] | None) -> RequestRecord:
        spec = binding.request_spec(planned, scheduled_perf_ns=first_due_ns if first else None)
        spec.answer, spec.tool_calls = answer, calls
        if first:
            spec.queue_wait_ns = first_queue_wait_ns
        try:
            return run_logical_request(executor, client, spec)
        finally:
            budget.finish()

    def stopping() -> bool:  # asked before each request: the run ends, or none is left
        return rt.draining or not budget.take()

    def answered_tokens(record: RequestRecord) -> int | None:
        answered = record.output_tokens
        if answered is not None and record.reasoning_tokens:  # the history holds no thinking
            answered = max(0, answered - record.reasoning_tokens)
        return answered

    def text_input_tokens(record: RequestRecord) -> int | None:
        """The server's prompt count less the tokens its images were asked to cost: the
        next request's history is sized in text, and its own images come on top."""
        if record.input_tokens is None or not record.image_tokens:
            return record.input_tokens
        return max(0, record.input_tokens - record.image_tokens)

    if isinstance(session, AgentLoop):
        def step(planned: PlannedRequest) -> StepResult:
            answer: list[str] = []
            calls: list[StreamedToolCall] = []
            record = measure(planned, planned.agent_step == 1, answer, calls)
            return StepResult(
                ok=record.outcome == rec.OK, answer="".join(answer),
                tool_calls=tuple(ToolCallMade(c.call_id, c.name, c.arguments) for c in calls),
                input_tokens=text_input_tokens(record), output_tokens=answered_tokens(record))

        return run_agent_loop(session, step, gevent.sleep, stopping=stopping)

    def turn(planned: PlannedRequest) -> TurnResult:
        answer: list[str] = []
        record = measure(planned, planned.turn == 1, answer, None)
        return TurnResult(ok=record.outcome == rec.OK, answer="".join(answer),
                          input_tokens=text_input_tokens(record),
                          output_tokens=answered_tokens(record))

    return run_session(session, turn, gevent.sleep, stopping=stopping)
