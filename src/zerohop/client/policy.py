"""The client policy executor: one logical request, as many attempts as its policy says.

Clients decide the load a saturated engine sees: a retry storm multiplies it, backoff
with jitter spreads it, a fallback chain moves it to a smaller model. `PolicyExecutor`
plays a workload's `Policy` (timeouts are the transport's; retries, continuation and
the fallback chain are here) around any `attempt(spec) -> RequestRecord` callable, so
the same code runs under Locust (gevent.sleep), in benchmarks and in unit tests (a fake
clock and sleep). Every attempt is a record of its own; the final one also carries the
logical request's outcome, latency including waits, and the model that answered.

Order of decisions after a failed attempt: retry the same model while the outcome is
retryable and attempts remain; else continue a broken stream when allowed; else move
down the fallback chain when the outcome calls for it; else give up.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from zerohop.client.http_stream import Timeouts
from zerohop.client.llm_client import RequestSpec
from zerohop.client.protocols import GenerationRequest
from zerohop.core import records as rec
from zerohop.core import timing
from zerohop.core.records import RequestRecord
from zerohop.workloads.schema.policy_spec import MEMORY_ERROR, BackoffSpec, FallbackStep, Policy

# attempt_reason values
FIRST, RETRY, FALLBACK, CONTINUATION = "first", "retry", "fallback", "continuation"
# give_up_reason values (the logical request ended without an answer)
NOT_RETRYABLE = "not_retryable"
MAX_ATTEMPTS = "max_attempts"
CHAIN_EXHAUSTED = "chain_exhausted"
RETRY_CAP = "retry_cap"
DEADLINE = "deadline"

AttemptFn = Callable[[RequestSpec], RequestRecord]


class UniformSource(Protocol):
    """What the jitter needs from an RNG (random.Random and numpy Generators fit)."""

    def uniform(self, a: float, b: float, /) -> float: ...


class RetryBudget:
    """The in-flight retry cap of one user: extra attempts (retries, continuations,
    fallbacks) waiting or running at once. Over it a request gives up rather than add
    load (Envoy's max_retries circuit breaker)."""

    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        self.in_flight = 0
        self.refused = 0

    def try_acquire(self) -> bool:
        if self.cap is not None and self.in_flight >= self.cap:
            self.refused += 1
            return False
        self.in_flight += 1
        return True

    def release(self) -> None:
        self.in_flight = max(0, self.in_flight - 1)


def client_timeouts(policy: Policy | None, default: Timeouts) -> Timeouts:
    """The transport's limits for a workload: its policy's where it sets them."""
    if policy is None or policy.timeouts is None:
        return default
    t = policy.timeouts
    return Timeouts(
        connect_s=default.connect_s, ttft_s=t.first_token_s, stall_s=t.stall_s, total_s=t.total_s
    )


@dataclass
class PolicyExecutor:
    """Runs logical requests under one policy for one user. `emit` receives each
    attempt's record as soon as the next step is decided (before any wait), so a run
    cut short keeps every attempt already made."""

    policy: Policy | None
    attempt: AttemptFn
    rng: UniformSource
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], int] = time.perf_counter_ns
    budget: RetryBudget | None = None
    emit: Callable[[RequestRecord], None] | None = None

    def __post_init__(self) -> None:
        if self.budget is None:
            retry = self.policy.retry if self.policy is not None else None
            self.budget = RetryBudget(retry.max_in_flight if retry is not None else None)

    def run(self, spec: RequestSpec, logical_request_id: str) -> list[RequestRecord]:
        """All attempt records of one logical request, in order; the last is final."""
        state = _LogicalState(start_ns=self.clock(), original=spec)
        current = dataclasses.replace(spec, logical_request_id=logical_request_id, attempt=1)
        reason, waited_s = FIRST, 0.0
        records: list[RequestRecord] = []
        while True:
            attempt_start_ns = self.clock()
            record = self._attempt(current, reason, waited_s)
            records.append(record)
            decision = self._next_step(record, state)
            assert self.budget is not None
            if decision.spec is not None and not self.budget.try_acquire():
                decision = _Decision(give_up=RETRY_CAP)
            if decision.spec is None:
                self._finish(record, state, attempt_start_ns, decision.give_up)
                self._emit(record)
                return records
            self._emit(record)
            try:
                if decision.wait_s > 0:
                    self.sleep(decision.wait_s)
            except BaseException:
                self.budget.release()  # killed while waiting (the run ended)
                raise
            current = dataclasses.replace(
                decision.spec, logical_request_id=logical_request_id,
                attempt=len(records) + 1, scheduled_perf_ns=None, queue_wait_ns=None,
            )
            reason, waited_s = decision.reason, decision.wait_s

    # --- one attempt --------------------------------------------------------------------
    def _attempt(self, spec: RequestSpec, reason: str, waited_s: float) -> RequestRecord:
        try:
            record = self.attempt(spec)
        finally:
            if reason != FIRST and self.budget is not None:
                self.budget.release()
        record.attempt_reason = reason
        record.backoff_ms = waited_s * 1000.0 if reason != FIRST else None
        return record

    def _emit(self, record: RequestRecord) -> None:
        if self.emit is not None:
            self.emit(record)

    # --- the decision -------------------------------------------------------------------
    def _next_step(self, record: RequestRecord, state: _LogicalState) -> _Decision:
        policy = self.policy
        if record.outcome == rec.OK or record.outcome == rec.CANCELLED or policy is None:
            return _Decision(give_up=None if record.outcome == rec.OK else NOT_RETRYABLE)
        give_up = NOT_RETRYABLE
        retry = policy.retry
        if retry is not None and outcome_matches(retry.outcomes, record):
            if state.attempts_on_step < retry.max_attempts:
                wait = self._retry_wait(record, state.retries_on_step + 1)
                if retry.deadline_s is not None and (
                    (self.clock() - state.start_ns) / 1e9 + wait > retry.deadline_s
                ):
                    return _Decision(give_up=DEADLINE)
                state.attempts_on_step += 1
                state.retries_on_step += 1
                return _Decision(spec=self._spec_on_step(state), reason=RETRY, wait_s=wait)
            give_up = MAX_ATTEMPTS
        cont = policy.continuation
        received = record.output_tokens or record.content_events or 0
        if (
            cont is not None
            and received > 0
            and state.continuations < cont.max_continuations
            and outcome_matches(cont.outcomes, record)
        ):
            state.continuations += 1
            asked = record.max_tokens or state.original.generation.max_tokens
            spec = self._spec_on_step(state)
            generation = dataclasses.replace(spec.generation, max_tokens=max(1, asked - received))
            return _Decision(
                spec=dataclasses.replace(spec, generation=generation), reason=CONTINUATION
            )
        fallback = policy.fallback
        if fallback is not None and outcome_matches(fallback.outcomes, record):
            if state.step < len(fallback.chain):
                state.step += 1
                state.attempts_on_step = 1
                state.retries_on_step = 0
                return _Decision(spec=self._spec_on_step(state), reason=FALLBACK)
            give_up = CHAIN_EXHAUSTED
        return _Decision(give_up=give_up)

    def _retry_wait(self, record: RequestRecord, retry_number: int) -> float:
        assert self.policy is not None and self.policy.retry is not None
        retry = self.policy.retry
        wait = backoff_s(retry.backoff, retry_number, self.rng)
        if retry.honour_retry_after and record.retry_after_s is not None:
            wait = max(wait, min(record.retry_after_s, retry.max_retry_after_s))
        return wait

    def _spec_on_step(self, state: _LogicalState) -> RequestSpec:
        """The original request as the current fallback step asks for it."""
        if state.step == 0 or self.policy is None or self.policy.fallback is None:
            return state.original
        return apply_fallback_step(state.original, self.policy.fallback.chain[state.step - 1])

    # --- the logical request's fields -----------------------------------------------------
    def _finish(
        self, record: RequestRecord, state: _LogicalState, attempt_start_ns: int,
        give_up: str | None,
    ) -> None:
        end_ns = self.clock()
        answered = record.outcome == rec.OK
        record.final_outcome = record.outcome
        record.logical_e2e_ms = timing.ms_between(state.start_ns, end_ns)
        record.logical_attempts = record.attempt
        record.answered_by = record.model if answered else None
        record.give_up_reason = None if answered else give_up
        if answered and record.ttft_ms is not None:
            record.logical_ttft_ms = (timing.ms_between(state.start_ns, attempt_start_ns)
                                      + record.ttft_ms)


@dataclass
class _LogicalState:
    start_ns: int
    original: RequestSpec
    step: int = 0  # 0: the workload's own model; k: fallback chain[k-1]
    attempts_on_step: int = 1
    retries_on_step: int = 0
    continuations: int = 0


@dataclass(frozen=True)
class _Decision:
    spec: RequestSpec | None = None
    reason: str = RETRY
    wait_s: float = 0.0
    give_up: str | None = None


# --- pure helpers (public: tests and the report use them) ----------------------------------
def backoff_s(backoff: BackoffSpec, retry_number: int, rng: UniformSource) -> float:
    """The wait before retry `retry_number` (1 = the first retry), jittered."""
    exponent = max(0, retry_number - 1)
    try:
        base = backoff.initial_s * math.pow(backoff.multiplier, exponent)
    except OverflowError:
        base = math.inf
    wait = min(backoff.max_s, base)
    if wait <= 0:
        return 0.0
    if backoff.jitter == "full":
        return float(rng.uniform(0.0, wait))
    if backoff.jitter == "equal":
        return wait / 2 + float(rng.uniform(0.0, wait / 2))
    return wait


_MEMORY_TEXT = re.compile(r"out[ _]of[ _]memory|outofmemory|\boom\b", re.IGNORECASE)


def is_memory_error(record: RequestRecord) -> bool:
    """The engine ran out of (KV-cache or device) memory, in whatever wire form."""
    if record.outcome == rec.OK:
        return False
    text = " ".join(t for t in (record.outcome, record.error_type) if t)
    return bool(_MEMORY_TEXT.search(text)) or bool(
        record.error_message and _MEMORY_TEXT.search(record.error_message)
    )


def outcome_matches(patterns: Sequence[str], record: RequestRecord) -> bool:
    """Does a failed attempt match one of a policy's outcome patterns? Memory errors
    match only `memory_error` or their exact outcome name, never a wildcard."""
    memory = is_memory_error(record)
    for pattern in patterns:
        if pattern == MEMORY_ERROR:
            if memory:
                return True
        elif memory:
            if pattern == record.outcome:
                return True
        elif fnmatch.fnmatchcase(record.outcome, pattern):
            return True
    return False


def apply_fallback_step(spec: RequestSpec, step: FallbackStep) -> RequestSpec:
    """The request as a fallback model gets it: its name, maybe fewer output tokens,
    maybe only the end of the prompt."""
    gen = spec.generation
    max_tokens = gen.max_tokens if step.max_tokens is None else min(gen.max_tokens, step.max_tokens)
    gen = dataclasses.replace(gen, model=step.model, max_tokens=max_tokens)
    target = spec.target_input_tokens
    if step.input_fraction is not None and step.input_fraction < 1:
        gen = truncate_prompt(gen, step.input_fraction)
        if target is not None:
            target = max(1, math.ceil(target * step.input_fraction))
    return dataclasses.replace(spec, generation=gen, adapter=None, target_input_tokens=target)


def truncate_prompt(gen: GenerationRequest, fraction: float) -> GenerationRequest:
    """Keep the last `fraction` of the prompt (token ids, words of the text, or words of
    the last message): the most recent context, as chat clients truncate."""
    if gen.prompt_token_ids is not None:
        ids = gen.prompt_token_ids
        return dataclasses.replace(gen, prompt_token_ids=ids[-_kept(len(ids), fraction):])
    if gen.messages:
        messages = [dict(m) for m in gen.messages]
        last = messages[-1]
        last["content"] = _tail_words(str(last.get("content", "")), fraction)
        return dataclasses.replace(gen, messages=messages)
    if gen.prompt is not None:
        return dataclasses.replace(gen, prompt=_tail_words(gen.prompt, fraction))
    return gen


def _kept(count: int, fraction: float) -> int:
    return max(1, math.ceil(count * fraction))


def _tail_words(text: str, fraction: float) -> str:
    words = text.split(" ")
    return " ".join(words[-_kept(len(words), fraction):])
