"""The four body forms the sim ships (registered in `body_forms` on its first lookup):
OpenAI chat and completions (as vLLM serves them), Anthropic messages and OpenAI
Responses. Each reader here is what used to be one branch of a comparison on the form's
name in the sim's modules."""

from __future__ import annotations

from typing import Any

from zerohop.sim.answers.body_forms import (
    AnswerReading,
    BodyForm,
    GreedyReading,
    register_body_form,
)
from zerohop.sim.answers.responses_shape import responses_messages
from zerohop.sim.answers.tokenize import chat_prompt_ids, prompt_ids
from zerohop.sim.answers.tokens import count_chat_tokens, count_prompt_tokens

COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI's and vLLM's default for /v1/completions

Body = dict[str, Any]


def _chat_messages(body: Body, missing: str) -> list[Any]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError(missing)
    return messages


def _completions_prompt_tokens(body: Body) -> int:
    if "prompt" not in body:
        raise ValueError("`prompt` is required")
    return count_prompt_tokens(body["prompt"])


def _completions_prompt_ids(body: Body) -> list[int]:
    """A batch counts its first prompt."""
    prompt = body.get("prompt")
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    return prompt_ids(prompt)


def _chat_tool_choice(choice: Body) -> tuple[str, str | None] | None:
    """OpenAI chat's `{"type": "function", "function": {"name"}}`."""
    if choice.get("type") != "function":
        return None
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    return "required", name if isinstance(name, str) else None


def _responses_tool_choice(choice: Body) -> tuple[str, str | None] | None:
    """Responses' `{"type": "function", "name"}`."""
    if choice.get("type") != "function":
        return None
    name = choice.get("name")
    return "required", name if isinstance(name, str) else None


def _messages_tool_choice(choice: Body) -> tuple[str, str | None] | None:
    """Anthropic's `{"type": "none" | "any" | "tool", "name"}` ("auto": None)."""
    kind = choice.get("type")
    if kind not in ("none", "any", "tool"):
        return None
    name = choice.get("name") if kind == "tool" else None
    return ("none" if kind == "none" else "required"), name if isinstance(name, str) else None


def _chat_schema_spec(body: Body) -> Any:
    """Chat's `response_format: {type: json_schema, json_schema: {schema}}`."""
    spec = body.get("response_format")
    return spec.get("json_schema") if isinstance(spec, dict) else None


def _responses_schema_spec(body: Body) -> Any:
    """Responses' `text: {format: {type: json_schema, schema}}`."""
    text = body.get("text")
    spec = text.get("format") if isinstance(text, dict) else None
    return spec if isinstance(spec, dict) and spec.get("type") == "json_schema" else None


def _chat_wants_logprobs(asked: Any) -> bool:
    return asked is True


def _completions_wants_logprobs(asked: Any) -> bool:
    return isinstance(asked, int) and not isinstance(asked, bool) and asked >= 0


CHAT = BodyForm(
    "chat",
    prompt_tokens=lambda body: count_chat_tokens(
        _chat_messages(body, "`messages` must be a non-empty list")),
    prompt_ids=lambda body: chat_prompt_ids(body.get("messages")),
    answer=AnswerReading("function", "parameters", _chat_tool_choice, _chat_schema_spec),
    greedy=GreedyReading("messages", _chat_wants_logprobs, "chat"),
)
COMPLETIONS = BodyForm(
    "completions",
    prompt_tokens=_completions_prompt_tokens,
    prompt_ids=_completions_prompt_ids,
    default_max_tokens=COMPLETIONS_DEFAULT_MAX_TOKENS,
    greedy=GreedyReading("prompt", _completions_wants_logprobs, "completions"),
)
MESSAGES = BodyForm(
    "messages",
    prompt_tokens=lambda body: count_chat_tokens(
        _chat_messages(body, "messages: field required (a non-empty list)"),
        system=body.get("system")),
    prompt_ids=lambda body: chat_prompt_ids(body.get("messages"), system=body.get("system")),
    max_tokens_required="max_tokens: Field required",
    error_style="anthropic",
    overload_status=529,
    reports_cached_tokens=True,
    answer=AnswerReading(None, "input_schema", _messages_tool_choice),
)
RESPONSES = BodyForm(  # its instructions and input counted as the chat messages they are
    "responses",
    prompt_tokens=lambda body: count_chat_tokens(responses_messages(body)),
    prompt_ids=lambda body: chat_prompt_ids(responses_messages(body)),
    max_tokens_keys=("max_output_tokens",),
    usage_always=True,  # a Responses stream always ends with its usage (response.completed)
    answer=AnswerReading(None, "parameters", _responses_tool_choice, _responses_schema_spec),
)

for _form in (CHAT, COMPLETIONS, MESSAGES, RESPONSES):
    register_body_form(_form)
