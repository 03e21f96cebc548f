"""Conversations under Locust: a session's turns sent one after another, each with the
history the target itself answered.

Closed loop: a `SessionUser` runs one session after another (Locust's wait time, the
load's `think_time_s`, falls between sessions). Open loop: the dispatcher starts each
session at its arrival time and `play_session` runs it in its own greenlet, the later
turns following the session's own think times. Every turn is one logical request
under the workload's client policy; the text of its last attempt is the answer the
next turn carries. A turn that fails ends its session (its record says how it failed),
and a run that is draining starts no further turn.
"""

from __future__ import annotations

from typing import Any

import gevent

from zerohop.client.llm_client import LLMClient
from zerohop.client.policy import PolicyExecutor
from zerohop.core import records as rec
from zerohop.loadgen.runtime import runtime_of
from zerohop.loadgen.users import LLMUser, run_logical_request
from zerohop.loadgen.workload_binding import WorkloadBinding
from zerohop.workloads.conversation import Session, TurnResult, run_session
from zerohop.workloads.plans import PlannedRequest

__all__ = ["SessionUser", "play_session"]


class SessionUser(LLMUser):
    """A user whose closed-loop step is a whole conversation."""

    abstract = True

    def send_next(self) -> None:
        play_session(self.environment, self.policy, self.llm, self.binding,
                     self.binding.planner.next_session())


def play_session(environment: Any, executor: PolicyExecutor, client: LLMClient,
                 binding: WorkloadBinding, session: Session,
                 first_due_ns: int | None = None) -> int:
    """Send `session`'s turns; `first_due_ns`: the open loop's scheduled time of the
    first turn (the later ones are due when their think time ends). Returns the turns
    answered."""
    rt = runtime_of(environment)

    def send(planned: PlannedRequest) -> TurnResult:
        answer: list[str] = []
        due_ns = first_due_ns if planned.turn == 1 else None
        spec = binding.request_spec(planned, scheduled_perf_ns=due_ns)
        spec.answer = answer
        record = run_logical_request(executor, client, spec)
        answered = record.output_tokens
        if answered is not None and record.reasoning_tokens:  # the history holds no thinking
            answered = max(0, answered - record.reasoning_tokens)
        return TurnResult(ok=record.outcome == rec.OK, answer="".join(answer),
                          input_tokens=record.input_tokens, output_tokens=answered)

    return run_session(session, send, gevent.sleep, stopping=lambda: rt.draining)
