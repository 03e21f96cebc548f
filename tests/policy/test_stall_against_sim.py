"""Against a real sim process: a stream whose first token is in time but which then
stalls longer than the stall timeout is recorded as `stall`, and is retried only when
the policy lists it."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.http_stream import Timeouts
from zerohop.client.llm_client import LLMClient, RequestSpec
from zerohop.client.policy import PolicyExecutor, client_timeouts
from zerohop.client.protocols import GenerationRequest
from zerohop.core.records import ClockAnchor, RequestRecord
from zerohop.sim.launcher import SimProcess, start_sim
from zerohop.workloads.schema.policy_spec import Policy

pytestmark = pytest.mark.integration

POLICY_TIMEOUTS = {"first_token_s": 5, "stall_s": 0.3, "total_s": 20}


@pytest.fixture(scope="module")
def stalling_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimProcess]:
    config = tmp_path_factory.mktemp("stall") / "sim.yaml"
    config.write_text("faults:\n  stall_mid: {probability: 1.0, after: 2, s: 1.0}\n")
    with start_sim(["--config", str(config)]) as sim:
        yield sim


def _run(sim: SimProcess, policy_data: dict[str, object]) -> list[RequestRecord]:
    policy = Policy.model_validate(policy_data)
    client = LLMClient(sim.url, create_api_adapter("openai-chat"), api_key=None,
                       timeouts=client_timeouts(policy, Timeouts()), anchor=ClockAnchor.now())
    try:
        executor = PolicyExecutor(policy, attempt=client.execute, rng=random.Random(0))
        gen = GenerationRequest(model="llama-3-8b", max_tokens=16, prompt="hello there",
                                ignore_eos=True)
        return executor.run(RequestSpec(workload="stall", generation=gen), "L-stall")
    finally:
        client.close()


def test_stall_is_recorded_and_not_retried_by_default(stalling_sim: SimProcess) -> None:
    records = _run(stalling_sim, {"timeouts": POLICY_TIMEOUTS, "retry": {}})
    assert [r.outcome for r in records] == ["stall"]
    final = records[0]
    assert final.ttft_ms is not None and final.ttft_ms < 5000  # the first token came in time
    assert final.final_outcome == "stall" and final.give_up_reason == "not_retryable"


def test_stall_is_retried_when_the_policy_says_so(stalling_sim: SimProcess) -> None:
    records = _run(stalling_sim, {
        "timeouts": POLICY_TIMEOUTS,
        "retry": {"outcomes": ["stall"], "max_attempts": 2,
                  "backoff": {"initial_s": 0, "max_s": 0}},
    })
    assert [r.outcome for r in records] == ["stall", "stall"]  # every attempt stalls here
    assert records[-1].give_up_reason == "max_attempts"
    logical_ms = records[-1].logical_e2e_ms
    assert logical_ms is not None and logical_ms >= 2 * 300  # two stall timeouts at least
