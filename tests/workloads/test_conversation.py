"""Conversation plans: sessions, their turns, and the history they carry (a fake client
answers; no server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.workloads.conftest import trace_path
from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.api_request import to_request_spec
from zerohop.sim.answers import tokens as sim_tokens
from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.inputs import check_inputs
from zerohop.workloads.kind_planner import is_session_planner, make_workload_planner
from zerohop.workloads.planners.conversation import TurnResult, run_session
from zerohop.workloads.planners.worker_load import worker_setup
from zerohop.workloads.timing.conversation_sources import (
    TurnShape,
    mooncake_sessions,
    read_sharegpt_sessions,
)
from zerohop.workloads.timing.traces import TraceRequest, read_mooncake_jsonl
from zerohop.workloads.yaml_io import parse_workloads

pytestmark = pytest.mark.unit

CONVERSATION = {
    "kind": "conversation", "name": "chat",
    "source": {"type": "synthetic", "turns": {"type": "uniform", "min": 3, "max": 5},
               "user_tokens": {"type": "uniform", "min": 20, "max": 60}, "answer_tokens": 12},
    "think_time_s": 0.25, "think_time": "constant",
}


def _spec(data: dict[str, Any]) -> Any:
    return parse_workloads(data).workloads[0]


def _planner(data: dict[str, Any] = CONVERSATION, *, worker_index: int = 0,
             worker_count: int = 1, api: Any = "openai-chat", seed: int = 1) -> Any:
    spec = _spec(data)
    planner = make_workload_planner(spec, worker_setup(
        spec, seed=seed, worker_index=worker_index, worker_count=worker_count, default_api=api))
    assert is_session_planner(planner)
    return planner


class FakeTarget:
    """Answers each turn with text of its own (the server's counts: the sim's rule), and
    fails the turn numbers in `fail_turns`."""

    def __init__(self, fail_turns: tuple[int, ...] = ()) -> None:
        self.sent: list[Any] = []
        self.answers: list[str] = []
        self.fail_turns = fail_turns

    def send(self, planned: Any) -> TurnResult:
        self.sent.append(planned)
        if planned.turn in self.fail_turns:
            return TurnResult(ok=False)
        answer = f"answer {planned.session_id} turn {planned.turn} " + "word " * planned.max_tokens
        self.answers.append(answer)
        return TurnResult(ok=True, answer=answer,
                          input_tokens=sim_tokens.count_chat_tokens(planned.messages),
                          output_tokens=sim_tokens.count_content_tokens(answer))


def test_a_session_has_its_turns_in_order_with_their_think_times() -> None:
    planner = _planner()
    for _ in range(20):
        session = planner.next_session()
        assert 3 <= len(session.turns) <= 5
        assert session.turns[0].think_time_s == 0.0
        assert all(t.think_time_s == 0.25 for t in session.turns[1:])
        assert all(20 <= t.user_tokens <= 60 and t.max_tokens == 12 for t in session.turns)
        target, slept = FakeTarget(), []
        assert run_session(session, target.send, slept.append) == len(session.turns)
        assert [r.turn for r in target.sent] == list(range(1, len(session.turns) + 1))
        assert {r.session_id for r in target.sent} == {session.session_id}
        assert slept == [0.25] * (len(session.turns) - 1)  # before every turn but the first
        assert [r.max_tokens for r in target.sent] == [12] * len(session.turns)


def test_every_turn_carries_the_history_with_the_targets_own_answers() -> None:
    session = _planner().next_session()
    target = FakeTarget()
    run_session(session, target.send, lambda _s: None)
    previous: list[dict[str, str]] = []
    for k, planned in enumerate(target.sent, start=1):
        messages = planned.messages
        assert len(messages) == 2 * k - 1
        assert messages[: len(previous)] == previous  # the history, unchanged
        assert [m["role"] for m in messages] == ["user", "assistant"] * (k - 1) + ["user"]
        # the assistant messages are exactly what the target answered
        assert [m["content"] for m in messages[1::2]] == target.answers[: k - 1]
        previous = [*messages, {"role": "assistant", "content": target.answers[k - 1]}]
    inputs = [sim_tokens.count_chat_tokens(r.messages) for r in target.sent]
    assert inputs == sorted(inputs) and len(set(inputs)) == len(inputs)  # grows every turn


def test_the_turn_sizes_meet_the_servers_counts() -> None:
    """Turn 1 as any prompt; later turns: the previous prompt as counted, the answer,
    the new message and its template, which the first counts teach."""
    planner = _planner()
    errors: dict[int, list[int]] = {}
    for _ in range(30):
        target = FakeTarget()
        run_session(planner.next_session(), target.send, lambda _s: None)
        for planned in target.sent:
            counted = sim_tokens.count_chat_tokens(planned.messages)
            errors.setdefault(planned.turn, []).append(counted - planned.target_input_tokens)
    every = [e for turn in errors.values() for e in turn]
    assert max(map(abs, every)) <= 2, errors
    # the template is taught by the counts: no bias left (whole words round either way)
    later = [e for turn, found in errors.items() if turn > 1 for e in found]
    assert abs(np.mean(later)) < 0.25, errors


def test_a_failed_turn_ends_its_session_and_a_draining_run_sends_no_more() -> None:
    session = _planner({**CONVERSATION, "source": {**CONVERSATION["source"], "turns": 4}}
                       ).next_session()
    target = FakeTarget(fail_turns=(2,))
    assert run_session(session, target.send, lambda _s: None) == 1
    assert [r.turn for r in target.sent] == [1, 2]  # turn 3 never sent
    stopping = _planner().next_session()
    target = FakeTarget()
    assert run_session(stopping, target.send, lambda _s: None,
                       stopping=lambda: len(target.sent) >= 2) == 2
    assert len(target.sent) == 2


def test_completions_get_the_history_flattened_and_chat_apis_get_messages() -> None:
    session = _planner(api="openai-completions").next_session()
    target = FakeTarget()
    run_session(session, target.send, lambda _s: None)
    last = target.sent[-1]
    assert last.prompt == "\n\n".join(m["content"] for m in last.messages)
    assert target.answers[0] in last.prompt
    body = json.loads(create_api_adapter("openai-completions").build_request(
        to_request_spec(last, "openai-completions", "m").generation, api_key=None,
        request_id="r").body)
    assert body["prompt"] == last.prompt
    for api in ("openai-chat", "anthropic"):
        spec = to_request_spec(last, api, "m")
        assert (spec.session_id, spec.turn) == (last.session_id, last.turn)
        body = json.loads(create_api_adapter(api).build_request(
            spec.generation, api_key=None, request_id="r").body)
        assert body["messages"] == last.messages


def test_open_loop_sessions_arrive_on_the_shared_clock() -> None:
    data = {**CONVERSATION, "load": {"kind": "open", "rate_rps": 5}}
    single = list(_planner(data).schedule(20.0))
    shares = [list(_planner(data, worker_index=i, worker_count=2).schedule(20.0))
              for i in range(2)]
    assert 60 <= len(single) <= 140
    offsets = [s.scheduled_offset_s for s in single]
    assert offsets == sorted(offsets) and offsets[-1] < 20.0
    assert sorted(s.scheduled_offset_s for share in shares for s in share) == offsets
    ids = [s.session_id for share in shares for s in share]
    assert len(set(ids)) == len(ids)
    target = FakeTarget()
    run_session(single[0], target.send, lambda _s: None)
    assert target.sent[0].scheduled_offset_s == single[0].scheduled_offset_s
    assert all(r.scheduled_offset_s is None for r in target.sent[1:])  # on its own time
    with pytest.raises(ValueError, match="closed-loop"):
        next(iter(_planner().schedule()))


def test_sessions_are_reproducible_and_workers_differ() -> None:
    def first_messages(planner: Any) -> list[str]:
        return [planner.next_session().next_request().prompt for _ in range(5)]

    again = first_messages(_planner())
    assert first_messages(_planner()) == again
    assert not set(first_messages(_planner(worker_index=1, worker_count=2))) & set(again)
    assert not set(first_messages(_planner(seed=2))) & set(again)


def _sharegpt(tmp_path: Path) -> Path:
    path = tmp_path / "conv.json"
    path.write_text(json.dumps([
        {"id": "a", "conversations": [
            {"from": "human", "value": "one two three"}, {"from": "gpt", "value": "a b"},
            {"from": "human", "value": "four five"}, {"from": "gpt", "value": "c d e f"},
            {"from": "human", "value": "six"}]},
        {"id": "b", "conversations": [{"from": "gpt", "value": "no human"}]},
        {"id": "c", "conversations": [{"from": "system", "value": "be nice"},
                                      {"from": "user", "value": "hello there"},
                                      {"from": "assistant", "value": "hi"}]},
    ]))
    return path


def test_sharegpt_multi_turn_conversations_become_turn_lengths(tmp_path: Path) -> None:
    sessions = read_sharegpt_sessions(_sharegpt(tmp_path))
    assert sessions == [
        (TurnShape(3, 2), TurnShape(2, 4), TurnShape(1, None)),
        (TurnShape(2, 1),),
    ]
    data = {**CONVERSATION, "source": {"type": "sharegpt", "path": str(tmp_path / "conv.json"),
                                       "answer_tokens": 9}}
    planner = _planner(data)
    turns = [planner.next_session().turns for _ in range(3)]
    assert [(t.user_tokens, t.max_tokens) for t in turns[0]] == [(3, 2), (2, 4), (1, 9)]
    assert [(t.user_tokens, t.max_tokens) for t in turns[1]] == [(2, 1)]
    assert turns[2] == turns[0]  # cycles through the file
    workers = [_planner(data, worker_index=i, worker_count=2).next_session().turns
               for i in range(2)]
    assert workers[0] != workers[1]  # worker i takes conversations i, i+N, ...


def test_a_file_source_is_checked_before_the_run(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    spec = _spec({**CONVERSATION, "source": {"type": "sharegpt", "path": str(empty)}})
    with pytest.raises(WorkloadError, match="holds no conversation"):
        check_inputs(spec)
    with pytest.raises(WorkloadError, match="conversation file not found"):
        _spec({**CONVERSATION, "source": {"type": "sharegpt", "path": str(tmp_path / "x")}})
    with pytest.raises(WorkloadError, match="prompt_format: text"):
        _spec({**CONVERSATION, "api": "openai-completions", "prompt_format": "token_ids"})


def test_the_shared_sharegpt_file_gives_one_turn_sessions() -> None:
    """The public ShareGPT slice holds first turns only: sessions of one turn."""
    sessions = read_sharegpt_sessions(trace_path("ShareGPT_V3_filtered_500.json"))
    assert len(sessions) == 500
    assert all(len(s) == 1 and s[0].answer_tokens is None for s in sessions)


def _row(offset: float, inputs: int, outputs: int, blocks: tuple[int, ...]) -> TraceRequest:
    return TraceRequest(offset_s=offset, input_tokens=inputs, output_tokens=outputs,
                        hash_ids=blocks)


def test_mooncake_rows_that_extend_a_sessions_blocks_are_its_next_turns() -> None:
    rows = [
        _row(0.0, 1500, 100, (0, 1, 2)),           # session A, turn 1
        _row(1.0, 1200, 50, (0, 7, 8)),            # B: shares only block 0, its own session
        _row(5.0, 2100, 80, (0, 1, 2, 3, 4)),      # A's turn 2: 2100 - 1500 - 100 = 500
        _row(6.0, 1800, 10, (0, 1, 2, 9)),         # continues A's turn 1 again: a new session
        _row(9.0, 2500, 60, (0, 1, 2, 3, 4, 5)),   # A's turn 3: 2500 - 2100 - 80 = 320
    ]
    assert mooncake_sessions(rows) == [
        (TurnShape(1500, 100), TurnShape(500, 80, 5.0), TurnShape(320, 60, 4.0)),
        (TurnShape(1200, 50),),
        (TurnShape(1800, 10),),
    ]


def test_mooncake_trace_think_times_and_scaling(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"timestamp": 0, "input_length": 1500, "output_length": 100, "hash_ids": [0, 1, 2]},
        {"timestamp": 8000, "input_length": 1700, "output_length": 80,
         "hash_ids": [0, 1, 2, 3]},
    ]))
    data = {**CONVERSATION, "source": {"type": "mooncake", "path": str(path),
                                       "trace_think_times": True, "speed": 4},
            "scale_tokens": {"input_multiplier": 0.1, "max_output_tokens": 50}}
    turns = _planner(data).next_session().turns
    assert [(t.user_tokens, t.max_tokens, t.think_time_s) for t in turns] == [
        (150, 50, 0.0), (10, 50, 2.0)]


def test_the_mooncake_conversation_trace_holds_multi_turn_sessions() -> None:
    rows = read_mooncake_jsonl(trace_path("conversation_trace.jsonl"))
    sessions = mooncake_sessions(rows)
    assert sum(len(s) for s in sessions) == len(rows)
    multi = [s for s in sessions if len(s) > 1]
    assert len(multi) > 1000
    assert all(t.gap_s is not None and t.gap_s >= 0 for s in multi for t in s[1:])


def test_max_turns_cuts_sessions() -> None:
    planner = _planner({**CONVERSATION, "max_turns": 2})
    assert all(len(planner.next_session().turns) == 2 for _ in range(10))
