"""The `agent` workload kind: loops of model calls that offer tools, each call's tool
calls answered by a mocked tool on the client, until the model answers in text or the
loop reaches its step cap.

Declarations only: `agent` plans the loops and plays them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator

from zerohop.core.apis import api_names, api_spec
from zerohop.workloads.schema.distributions import (
    Distribution,
    LognormalDist,
    fixed_by_default,
    uniform_by_default,
)
from zerohop.workloads.schema.load_spec import ClosedOrOpenLoad, ThinkTime, closed_by_default
from zerohop.workloads.schema.model_base import StrictModel
from zerohop.workloads.schema.workload_base import TextPromptWorkload

__all__ = ["AgentSpec", "FunctionDefinition", "ToolDefinition", "tools_refusal"]

MAX_STEPS = 1000


class FunctionDefinition(StrictModel):
    """The function of a tool, as OpenAI's chat API defines it."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="The function's name (letters, digits, _ and -; at most 64).",
    )
    description: str | None = Field(
        default=None, description="What the function does, for the model."
    )
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}},
        description="JSON Schema of its arguments: an object schema.",
    )
    strict: bool | None = Field(
        default=None, description="OpenAI's strict schema adherence (None: not sent)."
    )

    @field_validator("parameters")
    @classmethod
    def _object_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object":
            raise ValueError("must be a JSON Schema with type: object")
        return value


class ToolDefinition(StrictModel):
    """One tool a model call offers, as an OpenAI chat request's `tools` entry
    (`{type: function, function: {name, description, parameters}}`); on the Anthropic
    API it is sent as `{name, description, input_schema}`."""

    type: Literal["function"] = Field(description="Tool kind: a function.")
    function: FunctionDefinition = Field(description="The function the model may call.")

    def request_entry(self) -> dict[str, Any]:
        """The `tools` entry of a chat request (fields left unset are not sent)."""
        return self.model_dump(exclude_none=True)


def _default_tools() -> list[ToolDefinition]:
    def tool(name: str, description: str, argument: str) -> ToolDefinition:
        return ToolDefinition.model_validate({"type": "function", "function": {
            "name": name, "description": description,
            "parameters": {"type": "object", "properties": {argument: {"type": "string"}},
                           "required": [argument]}}})

    return [tool("search", "Search the project's documents.", "query"),
            tool("read_file", "Read a file of the project.", "path")]


def _zero_is_none(value: Any) -> Any:
    """Let YAML say `tool_latency_ms: 0` for no latency at all."""
    return None if isinstance(value, int | float) and not isinstance(value, bool) \
        and value == 0 else value


class AgentSpec(TextPromptWorkload):
    """Agent loops: every model call offers `tools` and sends the whole history. When the
    model asks for tools, the client answers each call with a mocked result of
    `tool_result_tokens` after `tool_latency_ms`, then calls the model again with the
    call and its result added; the loop ends when the model answers without a tool call
    or at `max_steps`. A failed call ends its loop. Closed loop: each user runs one loop
    after another; open loop: `rate_rps` is loop arrivals per second and
    `max_in_flight` caps live loops."""

    kind: Literal["agent"] = Field(description="Workload kind.")
    tools: list[ToolDefinition] = Field(
        default_factory=_default_tools,
        min_length=1,
        description="The tools every model call offers: OpenAI function tool definitions "
        "(converted for the Anthropic API). Default: `search` (a string `query`) and "
        "`read_file` (a string `path`).",
    )
    tool_choice: Literal["auto", "required", "none"] = Field(
        default="auto",
        description="`auto`: the model decides; `required`: it must call a tool (every "
        "loop runs to max_steps); `none`: it may not.",
    )
    input_tokens: Distribution = uniform_by_default(
        64, 256,
        "The first user message (the task) in tokens, sized like any prompt; "
        "the tools' definitions come on top, as the server renders them.",
    )
    max_tokens: Distribution = fixed_by_default(
        128, "max_tokens of each model call (drawn per call)."
    )
    max_steps: int = Field(
        default=6,
        gt=0,
        le=MAX_STEPS,
        description="Model calls per loop at most: a loop whose call at this step still "
        "asks for a tool ends there (its record's agent_end: cap).",
    )
    tool_latency_ms: Annotated[Distribution | None, BeforeValidator(_zero_is_none)] = Field(
        default_factory=lambda: LognormalDist(type="lognormal", median=200, sigma=0.5,
                                              max=5000),
        description="How long each mocked tool call takes, in ms (a token-count "
        "distribution read as ms; the calls of one step run at once, so the loop waits "
        "for the slowest); 0 or null: no wait.",
    )
    tool_result_tokens: Distribution = uniform_by_default(
        64, 256, "Length of each mocked tool result in tokens."
    )
    think_time_s: float = Field(
        default=0.0,
        ge=0,
        description="Pause after the tool results before the next model call (the "
        "agent's own work, s).",
    )
    think_time: ThinkTime = "exponential"
    ignore_eos: bool = Field(
        default=False,
        description="Ask the server to ignore end-of-sequence. Off for agents: a model "
        "must be free to end its tool call or its answer.",
    )
    load: ClosedOrOpenLoad = closed_by_default(
        4, "closed (users = loops at once; load.think_time_s between loops) or "
        "open (rate_rps = loop arrivals per second, max_in_flight caps live loops).",
    )

    @field_validator("api")
    @classmethod
    def _an_api_with_tools(cls, value: str | None) -> str | None:
        if value is not None and not api_spec(value).tools:
            raise ValueError(f"{value} has no tools: use {_tool_apis()}")
        return value

    @field_validator("tools")
    @classmethod
    def _unique_names(cls, value: list[ToolDefinition]) -> list[ToolDefinition]:
        names = [tool.function.name for tool in value]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"each tool name once (twice: {', '.join(twice)})")
        return value


def _tool_apis() -> str:
    return " or ".join(name for name in api_names() if api_spec(name).tools)


def tools_refusal(spec: Any, run_api: str) -> str | None:
    """Why `spec` cannot run on the API it would use (its own `api`, else the run's):
    an agent loop needs tools. None when it can."""
    api = spec.api or run_api
    if spec.kind == "agent" and not api_spec(api).tools:
        return (f"workload '{spec.name}' is an agent loop and {api} has no tools: "
                f"use --api {_tool_apis()}")
    return None
