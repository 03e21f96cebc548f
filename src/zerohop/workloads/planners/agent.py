"""Agent loops: model calls that offer tools, each tool call answered by a mocked tool.

An `AgentPlanner` hands out `AgentLoop`s: closed loop, `next_session()` (a user runs one
after another); open loop, `schedule()` (loop arrivals on the seeded clock, shared by
all workers like every open load, worker i keeping arrivals i, i+N, ...). A loop knows
up front its task's size, each call's max_tokens and each step's tool latency, result
size and think time; the request of step k exists only once step k-1 was answered.

Each step sends the whole history in the chat API's shape: the task, then for every
earlier step the model's message with its `tool_calls` (the id, name and argument text
exactly as they streamed) and one `{"role": "tool", "tool_call_id", "content"}` message
per call with its mocked result; the Anthropic adapter turns these into `tool_use` and
`tool_result` blocks. The loop ends when the model answers without a tool call
(`AGENT_ANSWERED`), when it still calls one at `max_steps` (`AGENT_CAPPED`), when a
call fails, when a call's arguments are no JSON object (no tool could take them, and
Anthropic's `input` must be one), or when the run stops.

`run_agent_loop` plays one loop with any `send` and `sleep` (Locust's greenlets, a
test's fake client): a step is sent after the previous step's tool calls and think time.

Sizes: step 1 is the task, sized like any prompt (calibrated, template included; the
tools' definitions come on top, as the server renders them). A later step's
`target_input_tokens` is the previous prompt as the server counted it, plus the model's
answer, the results and the template the new messages add: at first the calibration's
template overhead, then the mean of what the server's counts of earlier steps showed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from zerohop.core import records as rec
from zerohop.workloads.content.prompts import count_regex_tokens
from zerohop.workloads.planners.request_plans import PlannedRequest
from zerohop.workloads.planners.session_planner import SessionPlanner
from zerohop.workloads.planners.worker_load import WorkerSetup
from zerohop.workloads.schema.agent_spec import AgentSpec

__all__ = [
    "FAILED",
    "STOPPED",
    "UNUSABLE_CALL",
    "AgentLoop",
    "AgentPlanner",
    "StepPlan",
    "StepResult",
    "ToolCallMade",
    "assistant_message",
    "make_agent_planner",
    "run_agent_loop",
    "tool_message",
]

_EXTRA_CALLS = 3  # the stream of draws for a step's second and later parallel calls

# why a loop ended besides the two its last record says (`core.records.agent_loop_end`)
FAILED = "failed"  # a model call failed (its record's outcome says how)
UNUSABLE_CALL = "unusable_tool_call"  # a call without a name, or arguments not an object
STOPPED = "stopped"  # the run was ending


@dataclass(frozen=True)
class ToolCallMade:
    """One tool call as the model streamed it: its id and function name (None where
    the stream did not say) and its argument text exactly as streamed."""

    call_id: str | None
    name: str | None
    arguments: str


@dataclass(frozen=True)
class StepResult:
    """What `send` reports back for one model call: whether it was answered, its text,
    its tool calls and the server's counts (None: not reported)."""

    ok: bool
    answer: str = ""
    tool_calls: tuple[ToolCallMade, ...] = ()
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass(frozen=True)
class StepPlan:
    """One step's draws: the call's max_tokens, and, should the model call a tool, its
    latency and result size, and the think time before the next step."""

    max_tokens: int
    tool_latency_s: float
    result_tokens: int
    think_time_s: float


def assistant_message(text: str, calls: list[tuple[str, ToolCallMade]]) -> dict[str, Any]:
    """The model's message in the history: its text (None when it said none) and its
    tool calls, each under its id with the name and arguments exactly as streamed."""
    return {"role": "assistant", "content": text or None, "tool_calls": [
        {"id": call_id, "type": "function",
         "function": {"name": call.name, "arguments": call.arguments}}
        for call_id, call in calls]}


def tool_message(call_id: str, content: str) -> dict[str, Any]:
    """A mocked tool's result for the call `call_id`."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def _usable(call: ToolCallMade) -> bool:
    """Could a tool take this call: it names a function, its arguments are an object."""
    if not call.name:
        return False
    if not call.arguments.strip():
        return True  # no arguments at all
    try:
        return isinstance(json.loads(call.arguments), dict)
    except ValueError:
        return False


@dataclass
class AgentLoop:
    """One agent loop: its draws and, as its steps are answered, its history."""

    session_id: str
    task_tokens: int
    steps_plan: tuple[StepPlan, ...]  # one per step, max_steps of them
    scheduled_offset_s: float | None
    planner: AgentPlanner = field(repr=False)
    rng: np.random.Generator = field(repr=False)
    history: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0  # model calls answered (or failed)
    end: str | None = None  # why the loop ended; None while it runs
    _pending: tuple[int, float] | None = field(default=None, repr=False)
    _last_input_tokens: int = 0
    _added_tokens: int = 0  # the results' tokens the next step adds
    _pause_s: float = 0.0

    @property
    def done(self) -> bool:
        return self.end is not None

    @property
    def next_step(self) -> int:
        """The number (1, 2, ...) of the model call to send next."""
        return self.steps + 1

    def pause_s(self) -> float:
        """The wait before the next call: the last step's slowest tool call and its
        think time (0 before the first)."""
        return self._pause_s

    def stop(self) -> None:
        """The run is ending: no further step."""
        self.end = self.end or STOPPED

    def next_request(self) -> PlannedRequest:
        """The next model call: the history so far, the tools."""
        if self.done:
            raise ValueError(f"loop {self.session_id} has ended ({self.end})")
        planner = self.planner
        template = 0.0
        if self.steps == 0:
            task = planner.builder.build_for_tokens(self.task_tokens, self.rng,
                                                    planner.calibration)
            self.history = [{"role": "user", "content": task}]
            target = self.task_tokens
        else:
            template = planner.template_tokens()
            target = round(self._last_input_tokens + self._added_tokens + template)
        self._pending = (target, template)
        return planner.request(self, target, self.steps_plan[self.steps].max_tokens)

    def answered(self, result: StepResult) -> None:
        """The call just sent came back with `result`: the loop ends, or the model's
        message and a mocked result per tool call join the history."""
        if self._pending is None:
            raise ValueError(f"loop {self.session_id}: no step was sent")
        target, template = self._pending
        self._pending = None
        self.steps += 1
        if not result.ok:
            self.end = FAILED
            return
        if result.input_tokens and self.steps > 1:  # the server's count shows the template
            self.planner.observe_template(result.input_tokens - (target - template))
        self.end = rec.agent_loop_end(ok=True, tool_calls=len(result.tool_calls),
                                      step=self.steps, max_steps=self.planner.spec.max_steps)
        if self.end is not None:
            return
        if not all(_usable(call) for call in result.tool_calls):
            self.end = UNUSABLE_CALL
            return
        self._take_calls(result, target)

    def _take_calls(self, result: StepResult, target: int) -> None:
        plan = self.steps_plan[self.steps - 1]
        calls = [(call.call_id or f"call_{self.session_id}_{self.steps}_{i}", call)
                 for i, call in enumerate(result.tool_calls)]
        self.history.append(assistant_message(result.answer, calls))
        latency, added = plan.tool_latency_s, 0
        for i, (call_id, _call) in enumerate(calls):
            if i == 0:
                tokens = plan.result_tokens
            else:  # parallel calls: each its own draws, the step waits for the slowest
                extra = self.planner.extra_call(self.rng)
                tokens, latency = extra.result_tokens, max(latency, extra.tool_latency_s)
            units = self.planner.calibration.block_units(tokens)
            self.history.append(tool_message(call_id, self.planner.builder.build_text(
                units, self.rng)))
            added += tokens
        spoken = result.output_tokens
        if spoken is None:
            spoken = count_regex_tokens(result.answer + "".join(
                c.arguments for c in result.tool_calls))
        self._last_input_tokens = (result.input_tokens or target) + spoken
        self._added_tokens = added
        self._pause_s = latency + plan.think_time_s


def run_agent_loop(loop: AgentLoop, send: Callable[[PlannedRequest], StepResult],
                   sleep: Callable[[float], None], *,
                   stopping: Callable[[], bool] = lambda: False) -> int:
    """Play `loop`: each model call after the previous step's tool calls and think
    time, until the loop ends (see the module docstring) or `stopping()` says the run
    is ending. Returns the model calls made."""
    while not loop.done:
        pause = loop.pause_s()
        if pause > 0:
            sleep(pause)
        if stopping():
            loop.stop()
            break
        loop.answered(send(loop.next_request()))
    return loop.steps


def make_agent_planner(spec: AgentSpec, setup: WorkerSetup) -> AgentPlanner:
    """The planner of one worker."""
    return AgentPlanner(spec=spec, setup=setup)


class AgentPlanner(SessionPlanner[AgentLoop]):
    """Plans one worker's loops of one agent workload."""

    def __init__(self, *, spec: AgentSpec, setup: WorkerSetup) -> None:
        super().__init__(spec=spec, setup=setup)
        self.tools = tuple(tool.request_entry() for tool in spec.tools)

    def _make(self, session_id: str, position: int, offset: float | None,
              rng: np.random.Generator) -> AgentLoop:
        spec = self.spec
        steps = spec.max_steps
        task = max(1, spec.input_tokens.sample_one(rng))
        max_tokens = spec.max_tokens.sample(rng, steps)
        results = spec.tool_result_tokens.sample(rng, steps)
        latencies = self._latencies_s(rng, steps)
        thinks = self._think_times_s(rng, steps)
        plans = tuple(StepPlan(max(1, int(m)), float(lat), max(1, int(r)), float(t))
                      for m, lat, r, t in zip(max_tokens, latencies, results, thinks,
                                              strict=True))
        return AgentLoop(session_id=session_id, task_tokens=task, steps_plan=plans,
                         scheduled_offset_s=offset, planner=self, rng=rng)

    def _latencies_s(self, rng: np.random.Generator, n: int) -> np.ndarray:
        latency = self.spec.tool_latency_ms
        if latency is None:
            return np.zeros(n)
        return latency.sample(rng, n) / 1000.0

    def _think_times_s(self, rng: np.random.Generator, n: int) -> np.ndarray:
        mean = self.spec.think_time_s
        if self.spec.think_time == "exponential" and mean > 0:
            return rng.exponential(mean, n)
        return np.full(n, float(mean))

    def extra_call(self, rng: np.random.Generator) -> StepPlan:
        """Draws for a step's second or later parallel tool call."""
        results = self.spec.tool_result_tokens.sample_one(rng)
        return StepPlan(0, float(self._latencies_s(rng, 1)[0]), max(1, results), 0.0)

    # --- the requests ----------------------------------------------------------------------
    def request(self, loop: AgentLoop, target: int, max_tokens: int) -> PlannedRequest:
        """One model call of `loop` (called by the loop)."""
        spec = self.spec
        step = loop.next_step
        history = tuple(loop.history)
        planned = PlannedRequest(
            workload=spec.name, kind=spec.kind, api=self.api, model=spec.model, adapter=None,
            prompt=_as_text(history), token_ids=None, target_input_tokens=max(1, target),
            max_tokens=max(1, max_tokens), ignore_eos=spec.ignore_eos,
            temperature=spec.temperature,
            scheduled_offset_s=loop.scheduled_offset_s if step == 1 else None,
            trace_row=None, sequence=self._sequence, worker_index=self.worker_index,
            session_id=loop.session_id, history=history, tools=self.tools,
            tool_choice=spec.tool_choice, agent_step=step, agent_max_steps=spec.max_steps,
        )
        self._sequence += 1
        return planned


def _as_text(history: tuple[dict[str, Any], ...]) -> str:
    """The history's text contents, a blank line apart (what a completions prompt would
    be; an agent never runs on that API, but a planned request always has its text)."""
    return "\n\n".join(m["content"] for m in history if isinstance(m.get("content"), str))
