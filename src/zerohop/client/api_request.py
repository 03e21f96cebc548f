"""A planned request in the shape the chosen API takes.

A workload plans one prompt (text, or token ids) whatever the API; each API carries it
differently: the completions API takes the text or the ids as `prompt`, the chat API a
list of chat messages, Anthropic its own messages (the adapter moves a system prompt to
its field). Which API takes which form is the table in `zerohop.core.apis`; building
the request from it here, once, keeps the planner API-neutral and means every default
workload runs on every API.
"""

from __future__ import annotations

from typing import Any

from zerohop.client.llm_client import RequestSpec
from zerohop.client.pooling_request import PooledBody
from zerohop.client.protocols import GenerationRequest
from zerohop.core.apis import APIS, api_spec

__all__ = ["UnfitRequest", "generation_for", "to_request_spec"]


class UnfitRequest(ValueError):
    """A workload plans a prompt the chosen API cannot carry (e.g. token ids on chat)."""


def generation_for(planned: Any, api: str, model: str) -> GenerationRequest:
    """The `GenerationRequest` for `planned` on `api`: token ids where the API takes them,
    else the text: on the chat APIs its messages (one user message, or the several a
    system prompt or a conversation has), on the completions API the text (such a
    prompt flattened)."""
    common: dict[str, Any] = {
        "model": model,
        "max_tokens": int(planned.max_tokens),
        "temperature": float(planned.temperature),
        "ignore_eos": bool(planned.ignore_eos),
    }
    try:
        spec = api_spec(api)
    except ValueError as exc:
        raise UnfitRequest(str(exc)) from None
    if planned.token_ids is not None and spec.takes_token_ids:
        return GenerationRequest(prompt_token_ids=list(planned.token_ids), **common)
    if planned.prompt is None:
        raise UnfitRequest(
            f"workload '{planned.workload}': {api} takes text, not token ids "
            f"(use prompt_format: text, or --api {_token_id_apis()})"
        )
    tools = getattr(planned, "tools", None)
    if tools and not spec.tools:
        raise UnfitRequest(f"workload '{planned.workload}': {api} has no tools "
                           f"(use --api {_tool_apis()})")
    if spec.chat_messages:
        messages = getattr(planned, "messages", None) or [
            {"role": "user", "content": planned.prompt}]
        if tools:
            common["tools"] = [dict(tool) for tool in tools]
            common["tool_choice"] = getattr(planned, "tool_choice", None)
        return GenerationRequest(messages=messages, **common)
    return GenerationRequest(prompt=planned.prompt, **common)


def _token_id_apis() -> str:
    return " or ".join(spec.name for spec in APIS.values() if spec.takes_token_ids)


def _tool_apis() -> str:
    return " or ".join(spec.name for spec in APIS.values() if spec.tools)


def to_request_spec(planned: Any, api: str, default_model: str, *,
                    scheduled_perf_ns: int | None = None) -> RequestSpec:
    """A planner's PlannedRequest → what the client sends on `api` (a pooling kind's
    `workloads.pooling.PooledRequest`: its embeddings or rerank body)."""
    model = planned.adapter or planned.model or default_model
    endpoint = getattr(planned, "pooling", None)
    return RequestSpec(
        workload=planned.workload,
        generation=generation_for(planned, api, model),
        pooled=None if endpoint is None else PooledBody(
            endpoint, model, tuple(planned.inputs), query=planned.query,
            top_n=planned.top_n, encoding_format=planned.encoding_format),
        adapter=planned.adapter,
        target_input_tokens=planned.target_input_tokens,
        prompt_clamped=getattr(planned, "prompt_clamped", None),
        scheduled_perf_ns=scheduled_perf_ns,
        session_id=getattr(planned, "session_id", None),
        turn=getattr(planned, "turn", None),
        agent_step=getattr(planned, "agent_step", None),
        agent_max_steps=getattr(planned, "agent_max_steps", None),
    )

