"""PolicyExecutor decisions on scripted attempts: a fake clock and sleep, no network."""

from __future__ import annotations

import random
from collections.abc import Iterable

import pytest

from zerohop.client import policy as pol
from zerohop.client.http_stream import Timeouts
from zerohop.client.llm_client import RequestSpec
from zerohop.client.protocols import GenerationRequest
from zerohop.core.records import RequestRecord
from zerohop.workloads.schema.policy_spec import BackoffSpec, FallbackStep, Policy

pytestmark = pytest.mark.unit


class Script:
    """Answers attempts with scripted outcomes; each attempt takes `cost_ms` of fake time."""

    def __init__(self, outcomes: Iterable[str | dict[str, object]], cost_ms: float = 10.0) -> None:
        self.outcomes = list(outcomes)
        self.now_ns = 0
        self.cost_ns = int(cost_ms * 1e6)
        self.sent: list[RequestSpec] = []
        self.slept: list[float] = []

    def clock(self) -> int:
        return self.now_ns

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now_ns += int(seconds * 1e9)

    def attempt(self, spec: RequestSpec) -> RequestRecord:
        self.sent.append(spec)
        step = self.outcomes.pop(0)
        fields = {"outcome": step} if isinstance(step, str) else dict(step)
        self.now_ns += self.cost_ns
        record = RequestRecord(
            request_id=f"r{len(self.sent)}", workload=spec.workload, api="openai-chat",
            model=spec.generation.model, max_tokens=spec.generation.max_tokens,
            logical_request_id=spec.logical_request_id, attempt=spec.attempt,
        )
        for key, value in fields.items():
            setattr(record, key, value)
        if record.outcome == "ok":
            record.ttft_ms = 5.0
        return record


def run(policy_data: dict[str, object] | None, script: Script,
        budget: pol.RetryBudget | None = None) -> list[RequestRecord]:
    policy = Policy.model_validate(policy_data) if policy_data is not None else None
    emitted: list[RequestRecord] = []
    executor = pol.PolicyExecutor(
        policy, attempt=script.attempt, rng=random.Random(1), sleep=script.sleep,
        clock=script.clock, budget=budget, emit=emitted.append,
    )
    spec = RequestSpec(workload="w", generation=GenerationRequest(
        model="large", max_tokens=64, prompt="a b c d e f g h"), target_input_tokens=8)
    records = executor.run(spec, "L1")
    assert emitted == records  # every attempt reaches the sink, in order
    return records


def test_no_policy_is_one_attempt_and_final() -> None:
    records = run(None, Script(["http_503"]))
    assert len(records) == 1
    final = records[0]
    assert final.final_outcome == "http_503" and final.give_up_reason == pol.NOT_RETRYABLE
    assert final.logical_attempts == 1 and final.answered_by is None
    assert final.logical_e2e_ms == pytest.approx(10.0)


def test_retry_until_ok_counts_waits_in_logical_latency() -> None:
    script = Script(["http_503", "http_503", "ok"])
    records = run({"retry": {"max_attempts": 5, "backoff": {"initial_s": 1, "jitter": "none"}}},
                  script)
    assert [r.attempt for r in records] == [1, 2, 3]
    assert [r.attempt_reason for r in records] == ["first", "retry", "retry"]
    assert script.slept == [1.0, 2.0]  # exponential: 1 s, then 2 s
    assert [r.final_outcome for r in records] == [None, None, "ok"]
    final = records[-1]
    assert final.logical_e2e_ms == pytest.approx(3 * 10 + 3000)
    assert final.logical_ttft_ms == pytest.approx(20 + 3000 + 5)
    assert final.answered_by == "large" and final.logical_attempts == 3
    assert {r.logical_request_id for r in records} == {"L1"}


def test_max_attempts_gives_up() -> None:
    records = run({"retry": {"max_attempts": 2, "backoff": {"initial_s": 0, "max_s": 0}}},
                  Script(["http_429", "http_429", "ok"]))
    assert len(records) == 2
    assert records[-1].give_up_reason == pol.MAX_ATTEMPTS


def test_retry_after_is_honoured_and_capped() -> None:
    script = Script([{"outcome": "http_429", "retry_after_s": 3.0},
                     {"outcome": "http_429", "retry_after_s": 100.0}, "ok"])
    run({"retry": {"backoff": {"initial_s": 0.1, "jitter": "none"}, "max_retry_after_s": 10}},
        script)
    assert script.slept == [3.0, 10.0]
    ignored = Script([{"outcome": "http_429", "retry_after_s": 3.0}, "ok"])
    run({"retry": {"backoff": {"initial_s": 0.1, "jitter": "none"},
                   "honour_retry_after": False}}, ignored)
    assert ignored.slept == [pytest.approx(0.1)]


def test_outcomes_not_listed_are_not_retried_and_stall_only_when_told() -> None:
    assert len(run({"retry": {}}, Script(["stall", "ok"]))) == 1
    records = run({"retry": {"outcomes": ["stall"], "backoff": {"initial_s": 0, "max_s": 0}}},
                  Script(["stall", "ok"]))
    assert [r.outcome for r in records] == ["stall", "ok"]


def test_memory_errors_need_to_be_named() -> None:
    oom = {"outcome": "stream_error:out_of_memory", "error_type": "out_of_memory"}
    fast = {"initial_s": 0, "max_s": 0}
    assert len(run({"retry": {"outcomes": ["*"], "backoff": fast}}, Script([oom, "ok"]))) == 1
    assert len(run({"retry": {"outcomes": ["stream_error:*"], "backoff": fast}},
                   Script([oom, "ok"]))) == 1
    assert len(run({"retry": {"outcomes": ["memory_error"], "backoff": fast}},
                   Script([oom, "ok"]))) == 2
    http_oom = {"outcome": "http_500", "error_message": "CUDA out of memory. Tried to allocate"}
    assert len(run({"retry": {"outcomes": ["http_5*"], "backoff": fast}},
                   Script([http_oom, "ok"]))) == 1


def test_fallback_chain_moves_down_with_smaller_requests() -> None:
    oom = {"outcome": "stream_error:out_of_memory", "error_type": "out_of_memory"}
    script = Script([oom, oom, "ok"])
    records = run({"fallback": {"chain": ["medium", {"model": "small", "max_tokens": 16,
                                                     "input_fraction": 0.25}]}}, script)
    assert [s.generation.model for s in script.sent] == ["large", "medium", "small"]
    assert [r.attempt_reason for r in records] == ["first", "fallback", "fallback"]
    assert script.slept == []  # a fallback goes at once
    small = script.sent[-1]
    assert small.generation.max_tokens == 16
    assert small.generation.prompt == "g h" and small.target_input_tokens == 2
    assert records[-1].answered_by == "small"


def test_fallback_chain_exhausted() -> None:
    oom = {"outcome": "stream_error:out_of_memory", "error_type": "out_of_memory"}
    records = run({"fallback": {"chain": ["medium"]}}, Script([oom, oom]))
    assert records[-1].give_up_reason == pol.CHAIN_EXHAUSTED
    assert records[-1].answered_by is None


def test_retries_then_falls_back() -> None:
    script = Script(["http_503", "http_503", "ok"])
    run({"retry": {"max_attempts": 2, "backoff": {"initial_s": 0, "max_s": 0}},
         "fallback": {"outcomes": ["http_503"], "chain": ["medium"]}}, script)
    assert [s.generation.model for s in script.sent] == ["large", "large", "medium"]


def test_continuation_asks_for_the_missing_tokens() -> None:
    script = Script([{"outcome": "stall", "output_tokens": 40, "content_events": 40}, "ok"])
    records = run({"continuation": {}}, script)
    assert script.sent[1].generation.max_tokens == 24
    assert records[1].attempt_reason == "continuation"
    # a stall before any content is no continuation
    assert len(run({"continuation": {}}, Script([{"outcome": "stall"}]))) == 1


def test_in_flight_retry_cap_gives_up_instead_of_retrying() -> None:
    budget = pol.RetryBudget(1)
    assert budget.try_acquire()  # another request of this user holds the only slot
    records = run({"retry": {"max_in_flight": 1}}, Script(["http_503", "ok"]), budget=budget)
    assert len(records) == 1 and records[0].give_up_reason == pol.RETRY_CAP
    assert budget.refused == 1
    budget.release()
    records = run({"retry": {"backoff": {"initial_s": 0, "max_s": 0}}},
                  Script(["http_503", "ok"]), budget=budget)
    assert len(records) == 2 and budget.in_flight == 0  # released after the retry


def test_deadline_stops_retries() -> None:
    records = run({"retry": {"max_attempts": 10, "deadline_s": 2.5,
                             "backoff": {"initial_s": 1, "jitter": "none"}}},
                  Script(["http_503"] * 10))
    assert records[-1].give_up_reason == pol.DEADLINE
    assert len(records) == 2  # waits 1 s, then 2 s would pass 2.5 s


def test_budget_is_released_when_killed_while_waiting() -> None:
    budget = pol.RetryBudget(2)
    script = Script(["http_503", "ok"])

    def killed(_seconds: float) -> None:
        raise KeyboardInterrupt

    script.sleep = killed  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        run({"retry": {}}, script, budget=budget)
    assert budget.in_flight == 0


@pytest.mark.parametrize(("jitter", "low", "high"), [("full", 0, 4), ("equal", 2, 4),
                                                     ("none", 4, 4)])
def test_backoff_jitter_bounds(jitter: str, low: float, high: float) -> None:
    backoff = BackoffSpec(initial_s=1, multiplier=2, max_s=10, jitter=jitter)  # type: ignore[arg-type]
    rng = random.Random(3)
    draws = [pol.backoff_s(backoff, 3, rng) for _ in range(500)]
    assert low <= min(draws) and max(draws) <= high
    if jitter == "full":
        assert max(draws) - min(draws) > 3  # spread over the range, not a constant
    assert pol.backoff_s(backoff, 60, rng) <= 10  # capped, no overflow


def test_truncate_prompt_forms() -> None:
    ids = GenerationRequest(model="m", max_tokens=1, prompt_token_ids=list(range(10)))
    assert pol.truncate_prompt(ids, 0.3).prompt_token_ids == [7, 8, 9]
    chat = GenerationRequest(model="m", max_tokens=1, messages=[
        {"role": "system", "content": "keep me"}, {"role": "user", "content": "1 2 3 4"}])
    out = pol.truncate_prompt(chat, 0.5)
    assert out.messages == [{"role": "system", "content": "keep me"},
                            {"role": "user", "content": "3 4"}]
    step = FallbackStep(model="small", max_tokens=100)
    spec = RequestSpec(workload="w", adapter="lora-1", generation=GenerationRequest(
        model="lora-1", max_tokens=8, prompt="x"))
    moved = pol.apply_fallback_step(spec, step)
    assert moved.generation.max_tokens == 8  # a cap never raises max_tokens
    assert moved.adapter is None and moved.generation.model == "small"


def test_client_timeouts_from_policy() -> None:
    default = Timeouts(connect_s=3, ttft_s=100, stall_s=50, total_s=500)
    assert pol.client_timeouts(None, default) == default
    policy = Policy.model_validate({"timeouts": {"first_token_s": 2, "stall_s": 0.5,
                                                 "total_s": 30}})
    assert pol.client_timeouts(policy, default) == Timeouts(3, 2, 0.5, 30)
