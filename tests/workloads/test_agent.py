"""Agent loops: the spec, the loops' draws, the history each step sends on both APIs (the
model's tool calls and their ids and arguments exactly as they came back) and how a
loop ends. A fake target answers; no server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.api_request import UnfitRequest, to_request_spec
from zerohop.core import records as rec
from zerohop.sim.answers import tokens as sim_tokens
from zerohop.workloads.errors import WorkloadError
from zerohop.workloads.kind_planner import is_session_planner, make_workload_planner
from zerohop.workloads.planners.agent import (
    FAILED,
    STOPPED,
    UNUSABLE_CALL,
    StepResult,
    ToolCallMade,
    run_agent_loop,
)
from zerohop.workloads.planners.worker_load import worker_setup
from zerohop.workloads.schema.agent_spec import tools_refusal
from zerohop.workloads.yaml_io import load_workload_file, parse_workloads

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
AGENT: dict[str, Any] = {
    "kind": "agent", "name": "agent", "input_tokens": {"type": "uniform", "min": 40, "max": 80},
    "max_tokens": 32, "max_steps": 4, "tool_latency_ms": {"type": "uniform", "min": 50,
                                                          "max": 150},
    "tool_result_tokens": {"type": "uniform", "min": 20, "max": 60},
    "think_time_s": 0.25, "think_time": "constant",
}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}


def _spec(data: dict[str, Any] | None = None, **fields: Any) -> Any:
    return parse_workloads({**(data or AGENT), **fields}).workloads[0]


def _planner(*, api: Any = "openai-chat", seed: int = 1, **fields: Any) -> Any:
    spec = _spec(**fields)
    planner = make_workload_planner(spec, worker_setup(
        spec, seed=seed, worker_index=0, worker_count=1, default_api=api))
    assert is_session_planner(planner)
    return planner


class FakeModel:
    """Answers each model call of a loop: a tool call at the steps in `call_at` (its id
    and arguments made of odd characters, to see them come back exactly), text at the
    others; `fail_at` fails a step. Counts prompts by the embedded target's rule."""

    def __init__(self, call_at: tuple[int, ...] = (1, 2, 3, 4, 5, 6), *,
                 fail_at: tuple[int, ...] = (), calls_per_step: int = 1,
                 arguments: str | None = None, call_id: str | None = "set") -> None:
        self.sent: list[Any] = []
        self.calls: list[ToolCallMade] = []
        self.call_at, self.fail_at = call_at, fail_at
        self.calls_per_step, self.arguments, self.call_id = calls_per_step, arguments, call_id

    def send(self, planned: Any) -> StepResult:
        self.sent.append(planned)
        step = planned.agent_step
        if step in self.fail_at:
            return StepResult(ok=False)
        counted = sim_tokens.count_chat_tokens(planned.messages)
        if step not in self.call_at:
            return StepResult(ok=True, answer="the answer " * 3, input_tokens=counted,
                              output_tokens=6)
        calls = tuple(ToolCallMade(
            None if self.call_id is None else f"call_{planned.session_id}-{step}.{i} ü\"",
            "get_weather",
            self.arguments if self.arguments is not None
            else json.dumps({"city": f"Pa\"ris {step}/{i}", "n": [1, 2.50]}, indent=1))
            for i in range(self.calls_per_step))
        self.calls += calls
        return StepResult(ok=True, answer="", tool_calls=calls, input_tokens=counted,
                          output_tokens=12)


# --- the spec ---------------------------------------------------------------------------
def test_the_shipped_file_and_the_defaults() -> None:
    (spec,) = load_workload_file(REPO / "workloads" / "agent.yaml").workloads
    assert spec.kind == "agent" and spec.max_steps == 6 and not spec.ignore_eos
    assert [t.function.name for t in spec.tools] == ["search", "read_file"]
    default = _spec({"kind": "agent", "name": "a"})
    assert default.ignore_eos is False and default.tool_choice == "auto"
    assert default.tools[0].request_entry() == {
        "type": "function", "function": {
            "name": "search", "description": "Search the project's documents.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                           "required": ["query"]}}}
    assert _spec(tool_latency_ms=0).tool_latency_ms is None


@pytest.mark.parametrize(("fields", "where", "says"), [
    ({"api": "openai-completions"}, "api", "openai-completions has no tools: use openai-chat "
                                           "or anthropic or openai-responses"),
    ({"prompt_format": "token_ids"}, "prompt_format", "token_ids"),
    ({"tools": []}, "tools", "at least 1"),
    ({"tools": [WEATHER, WEATHER]}, "tools", "each tool name once (twice: get_weather)"),
    ({"tools": [{"type": "function", "function": {"name": "bad name"}}]},
     "tools[0].function.name", "pattern"),
    ({"tools": [{"type": "function", "function": {"name": "f",
                                                  "parameters": {"type": "string"}}}]},
     "tools[0].function.parameters", "type: object"),
    ({"tools": [{"function": {"name": "f"}}]}, "tools[0].type", "required"),
    ({"max_steps": 0}, "max_steps", "must be > 0 (got 0)"),
])
def test_a_bad_agent_spec_names_its_field(fields: dict[str, Any], where: str, says: str) -> None:
    with pytest.raises(WorkloadError) as err:
        _spec(**fields)
    assert where in str(err.value) and says in str(err.value), str(err.value)


def test_the_runs_api_must_have_tools() -> None:
    spec = _spec()
    assert tools_refusal(spec, "openai-chat") is None
    assert tools_refusal(spec, "anthropic") is None
    refusal = tools_refusal(spec, "openai-completions")
    assert refusal == ("workload 'agent' is an agent loop and openai-completions has no "
                       "tools: use --api openai-chat or anthropic or openai-responses")
    assert tools_refusal(_spec(api="anthropic"), "openai-completions") is None  # its own
    conversation = parse_workloads({"kind": "conversation", "name": "c"}).workloads[0]
    assert tools_refusal(conversation, "openai-completions") is None
    # and a request never reaches the wire without them
    loop = _planner().next_session()
    with pytest.raises(UnfitRequest, match="openai-completions has no tools"):
        to_request_spec(loop.next_request(), "openai-completions", "m")


# --- the loops ----------------------------------------------------------------------------
def test_loops_have_their_draws_and_ids_and_are_reproducible() -> None:
    planner = _planner()
    loops = [planner.next_session() for _ in range(20)]
    assert [lp.session_id for lp in loops[:2]] == ["agent-0-0", "agent-0-1"]
    for loop in loops:
        assert 40 <= loop.task_tokens <= 80 and len(loop.steps_plan) == 4
        assert all(p.max_tokens == 32 and 20 <= p.result_tokens <= 60
                   and 0.05 <= p.tool_latency_s <= 0.15 and p.think_time_s == 0.25
                   for p in loop.steps_plan)
    again = _planner().next_session()
    assert (again.task_tokens, again.steps_plan) == (loops[0].task_tokens, loops[0].steps_plan)
    other = _planner(seed=2).next_session()
    assert (other.task_tokens, other.steps_plan) != (again.task_tokens, again.steps_plan)


def test_open_loop_arrivals_are_loops() -> None:
    planner = _planner(load={"kind": "open", "rate_rps": 4, "max_in_flight": 8})
    loops = list(planner.schedule(10.0))
    assert 20 <= len(loops) <= 60
    offsets = [lp.scheduled_offset_s for lp in loops]
    assert offsets == sorted(offsets) and offsets[-1] < 10.0
    model = FakeModel(call_at=(1,))
    run_agent_loop(loops[0], model.send, lambda _s: None)
    first, second = model.sent
    assert first.scheduled_offset_s == loops[0].scheduled_offset_s
    assert second.scheduled_offset_s is None  # after its tool call, not on the clock


def test_every_step_sends_the_history_with_the_calls_exactly_as_they_came_back() -> None:
    loop = _planner().next_session()
    model, slept = FakeModel(call_at=(1, 2)), []
    assert run_agent_loop(loop, model.send, slept.append) == 3
    assert loop.end == rec.AGENT_ANSWERED
    assert [p.agent_step for p in model.sent] == [1, 2, 3]
    assert {p.session_id for p in model.sent} == {loop.session_id}
    assert all(p.agent_max_steps == 4 and p.tool_choice == "auto" for p in model.sent)
    assert all(p.tools == (loop.planner.tools) for p in model.sent)
    last = model.sent[-1].messages
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "assistant", "tool"]
    assert last[0] == model.sent[0].messages[0]  # the task, unchanged
    assert model.sent[1].messages == last[:3]  # every step: the history so far
    for k, call in enumerate(model.calls):
        assistant, result = last[1 + 2 * k], last[2 + 2 * k]
        assert assistant == {"role": "assistant", "content": None, "tool_calls": [{
            "id": call.call_id, "type": "function",
            "function": {"name": "get_weather", "arguments": call.arguments}}]}
        assert result["role"] == "tool" and result["tool_call_id"] == call.call_id
        assert 20 <= sim_tokens.count_text_tokens(result["content"]) <= 62
    # after each tool call: its latency and the think time, before the next step
    plans = loop.steps_plan
    assert slept == [pytest.approx(plans[0].tool_latency_s + 0.25),
                     pytest.approx(plans[1].tool_latency_s + 0.25)]


def test_the_openai_chat_request_carries_ids_names_arguments_and_tools_exactly() -> None:
    loop = _planner().next_session()
    model = FakeModel(call_at=(1, 2))
    run_agent_loop(loop, model.send, lambda _s: None)
    spec = to_request_spec(model.sent[-1], "openai-chat", "m")
    assert (spec.session_id, spec.agent_step, spec.agent_max_steps, spec.turn) == (
        loop.session_id, 3, 4, None)
    body = json.loads(create_api_adapter("openai-chat").build_request(
        spec.generation, api_key=None, request_id="r").body)
    assert body["tools"] == [t.request_entry() for t in _spec().tools]
    assert body["tool_choice"] == "auto"
    calls = [m["tool_calls"][0] for m in body["messages"] if m["role"] == "assistant"]
    assert [(c["id"], c["type"], c["function"]["name"], c["function"]["arguments"])
            for c in calls] == [(c.call_id, "function", "get_weather", c.arguments)
                                for c in model.calls]
    results = [m for m in body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in results] == [c.call_id for c in model.calls]
    assert set(results[0]) == {"role", "tool_call_id", "content"}


def test_the_anthropic_request_has_tool_use_and_tool_result_blocks() -> None:
    loop = _planner(api="anthropic", tool_choice="required").next_session()
    model = FakeModel(call_at=(1, 2), calls_per_step=2)
    run_agent_loop(loop, model.send, lambda _s: None)
    spec = to_request_spec(model.sent[-1], "anthropic", "m")
    body = json.loads(create_api_adapter("anthropic").build_request(
        spec.generation, api_key=None, request_id="r").body)
    assert body["tools"] == [{
        "name": t.function.name, "description": t.function.description,
        "input_schema": t.function.parameters} for t in _spec().tools]
    assert body["tool_choice"] == {"type": "any"}
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    uses = [b for m in messages[1::2] for b in m["content"]]
    assert uses == [{"type": "tool_use", "id": c.call_id, "name": "get_weather",
                     "input": json.loads(c.arguments)} for c in model.calls]
    results = [b for m in messages[2::2] for b in m["content"]]  # both calls' in one message
    assert [(b["type"], b["tool_use_id"]) for b in results] == [
        ("tool_result", c.call_id) for c in model.calls]
    assert all(isinstance(b["content"], str) and b["content"] for b in results)


def test_a_call_without_an_id_gets_one_of_its_own() -> None:
    loop = _planner().next_session()
    model = FakeModel(call_at=(1,), call_id=None)
    run_agent_loop(loop, model.send, lambda _s: None)
    call, result = model.sent[-1].messages[1]["tool_calls"][0], model.sent[-1].messages[2]
    assert call["id"] == f"call_{loop.session_id}_1_0" == result["tool_call_id"]


@pytest.mark.parametrize(("model", "steps", "end"), [
    (FakeModel(call_at=()), 1, rec.AGENT_ANSWERED),
    (FakeModel(call_at=(1, 2)), 3, rec.AGENT_ANSWERED),
    (FakeModel(), 4, rec.AGENT_CAPPED),  # still calling at max_steps
    (FakeModel(fail_at=(2,)), 2, FAILED),
    (FakeModel(arguments='{"city": "Par'), 1, UNUSABLE_CALL),  # cut JSON: no tool takes it
    (FakeModel(arguments='["Paris"]'), 1, UNUSABLE_CALL),
    (FakeModel(arguments=""), 4, rec.AGENT_CAPPED),  # no arguments at all: fine
])
def test_how_a_loop_ends(model: FakeModel, steps: int, end: str) -> None:
    loop = _planner().next_session()
    assert run_agent_loop(loop, model.send, lambda _s: None) == steps
    assert len(model.sent) == steps and loop.end == end and loop.done
    with pytest.raises(ValueError, match="has ended"):
        loop.next_request()


def test_the_record_says_answer_or_cap_on_the_last_call_only() -> None:
    end = rec.agent_loop_end
    assert end(ok=True, tool_calls=0, step=1, max_steps=4) == rec.AGENT_ANSWERED
    assert end(ok=True, tool_calls=1, step=3, max_steps=4) is None
    assert end(ok=True, tool_calls=2, step=4, max_steps=4) == rec.AGENT_CAPPED
    assert end(ok=False, tool_calls=0, step=4, max_steps=4) is None


def test_a_stopping_run_sends_no_further_step() -> None:
    loop = _planner().next_session()
    model = FakeModel()
    assert run_agent_loop(loop, model.send, lambda _s: None,
                          stopping=lambda: len(model.sent) >= 2) == 2
    assert loop.end == STOPPED and len(model.sent) == 2


def test_the_step_sizes_meet_the_servers_counts() -> None:
    """Step 1 is the task, sized like any prompt; a later step is the previous prompt
    as counted, the answer and the results, plus the template its counts teach (the
    embedded target leaves the calls' arguments out of its count: it is negative)."""
    planner = _planner(max_steps=6)
    errors: dict[int, list[int]] = {}
    for _ in range(30):
        model = FakeModel()
        run_agent_loop(planner.next_session(), model.send, lambda _s: None)
        for planned in model.sent:
            counted = sim_tokens.count_chat_tokens(planned.messages)
            errors.setdefault(planned.agent_step, []).append(
                counted - planned.target_input_tokens)
    assert set(errors) == {1, 2, 3, 4, 5, 6}
    assert max(map(abs, errors[1])) <= 2, errors
    later = [e for step, found in errors.items() if step > 1 for e in found]
    assert sum(abs(e) <= 3 for e in later) >= 0.95 * len(later), errors
    assert planner.template_tokens() < 0
