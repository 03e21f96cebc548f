"""A request's record starts from its spec in one place (`llm_client.spec_record`): a
measured request and one the end of the run cut off carry the same identity fields."""

from __future__ import annotations

import dataclasses

import pytest

from zerohop.client.llm_client import RequestSpec, cancelled_record, process_tag, spec_record
from zerohop.client.protocols import GenerationRequest
from zerohop.core import records as rec
from zerohop.core.records import ClockAnchor, RequestRecord

pytestmark = pytest.mark.unit

SPEC = RequestSpec(
    workload="chat", generation=GenerationRequest(model="m", max_tokens=64, prompt="hi"),
    adapter="lora-1", target_input_tokens=128, scheduled_perf_ns=1_000_000_000,
    queue_wait_ns=2_500_000, logical_request_id="logical-7", attempt=2,
    prompt_token_source="tokenize", prompt_clamped=True, session_id="s1", turn=3,
    agent_step=4, arm="layer",
)
FROM_SPEC = {
    "request_id": "r1", "workload": "chat", "api": "openai-chat", "model": "m",
    "adapter": "lora-1", "target_input_tokens": 128, "max_tokens": 64,
    "logical_request_id": "logical-7", "attempt": 2, "prompt_token_source": "tokenize",
    "prompt_clamped": True, "session_id": "s1", "turn": 3, "agent_step": 4, "arm": "layer",
    "queue_wait_ms": 2.5,
}


def test_the_spec_gives_the_identity_fields_and_nothing_measured() -> None:
    record = spec_record(SPEC, "r1", "openai-chat")
    row = record.to_row()
    assert {k: row[k] for k in FROM_SPEC} == FROM_SPEC
    assert record.worker == process_tag()
    empty = RequestRecord(request_id="r1", workload="chat", api="openai-chat", model="m")
    untouched = set(rec.RECORD_FIELDS) - set(FROM_SPEC) - {"worker"}
    assert {k: row[k] for k in untouched} == {k: getattr(empty, k) for k in untouched}
    plain = spec_record(dataclasses.replace(SPEC, logical_request_id=None, queue_wait_ns=None),
                        "r2", "openai-chat")
    assert plain.logical_request_id == "r2" and plain.queue_wait_ms is None


def test_a_cancelled_record_is_the_spec_record_with_its_times() -> None:
    anchor = ClockAnchor(wall_ns=10_000_000_000, perf_ns=0)
    record = cancelled_record(SPEC, "r1", "openai-chat", anchor, sent_perf_ns=1_004_000_000)
    row = record.to_row()
    assert {k: row[k] for k in FROM_SPEC} == FROM_SPEC
    assert record.outcome == rec.CANCELLED
    assert record.scheduled_ts == 11.0 and record.sent_ts == 11.004
    assert record.schedule_lag_ms == 1.5  # 4 ms late, 2.5 of them waiting for a slot
    assert record.end_ts is not None and record.ttft_ms is None
