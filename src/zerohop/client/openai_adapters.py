"""The OpenAI-style adapters: chat completions and (text or token-id) completions.

OpenAI, vLLM, SGLang and most gateways speak these: `data:` chunks with `choices` and,
when asked for with `stream_options.include_usage`, a final chunk with `usage`, then
`data: [DONE]`.
"""

from __future__ import annotations

from typing import Any

from zerohop.client.adapter_base import AdapterBase, EventDecoder
from zerohop.client.openai_chunks import (
    logprob_count,
    reasoning_token_count,
    tool_call_entries,
    tool_call_openings,
    tool_call_text,
)
from zerohop.client.protocols import (
    ContentDelta,
    DecodedResponse,
    GenerationRequest,
    HttpRequest,
    ProtocolError,
    StreamError,
    StreamItem,
    Terminator,
    ToolCall,
    ToolCallPart,
    Usage,
)
from zerohop.client.sse import SSEEvent
from zerohop.client.wire_format import (
    chat_history,
    error_from,
    optional_count,
    optional_str,
    parse_object,
    with_images,
)
from zerohop.core.images import EncodedImage

__all__ = ["OpenAIChatAdapter", "OpenAICompletionsAdapter"]


class _OpenAIBase(AdapterBase):
    """What the two OpenAI-style APIs share: the body's common fields, chunks, errors,
    usage, auth."""

    def build_request(
        self, req: GenerationRequest, *, api_key: str | None, request_id: str, stream: bool = True
    ) -> HttpRequest:
        body: dict[str, Any] = {"model": req.model, **self._prompt_fields(req)}
        body["max_tokens"] = req.max_tokens
        body["temperature"] = req.temperature
        if req.stop:
            body["stop"] = list(req.stop)
        if req.tools:
            body["tools"] = [dict(tool) for tool in req.tools]
        if req.tool_choice is not None:
            body["tool_choice"] = req.tool_choice
        if req.response_format is not None:
            body["response_format"] = {"type": "json_schema", "json_schema": req.response_format}
        body["stream"] = stream
        if stream:
            body["stream_options"] = {"include_usage": True}
        if req.ignore_eos:
            body["ignore_eos"] = True
        own_headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        return self._post(body, req, request_id=request_id, stream=stream,
                          own_headers=own_headers)

    def _event_decoder(self) -> EventDecoder:
        return self._decode

    def _decode(self, event: SSEEvent, parts: bool) -> list[StreamItem]:
        data = event.data
        if not data.startswith("{") and data.strip() == "[DONE]":
            return [Terminator()]
        obj = parse_object(data)
        if "error" in obj or "object" in obj:
            error = _openai_error(obj)
            if error is not None:
                return [error]
        choices = obj.get("choices")
        usage = obj.get("usage")
        if choices is None and usage is None:
            raise ProtocolError(f"{self.name}: chunk has neither 'choices' nor 'usage'")
        items: list[StreamItem] = []
        if choices is not None:
            if not isinstance(choices, list):
                raise ProtocolError(f"{self.name}: 'choices' is not a list")
            for choice in choices:
                if not isinstance(choice, dict):
                    raise ProtocolError(f"{self.name}: a choice is not an object")
                self._choice_items(choice, items, parts)
        if usage is not None:
            items.append(_openai_usage(usage))
        return items

    def decode_response(self, body: bytes) -> DecodedResponse:
        obj = parse_object(body)
        error = _openai_error(obj)
        if error is not None:
            raise ProtocolError(f"{self.name}: error in response: {error.error_type}")
        choices = obj.get("choices")
        if not isinstance(choices, list):
            raise ProtocolError(f"{self.name}: response has no 'choices' list")
        parts: list[str] = []
        tool_calls = 0
        for choice in choices:
            if not isinstance(choice, dict):
                raise ProtocolError(f"{self.name}: a choice is not an object")
            parts.extend(self._response_texts(choice))
            tool_calls += _message_tool_calls(choice)
        usage_obj = obj.get("usage")
        usage = _openai_usage(usage_obj) if usage_obj is not None else Usage(None, None)
        return DecodedResponse("".join(parts), usage, tool_calls)

    # subclass hooks
    def _prompt_fields(self, req: GenerationRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _choice_items(self, choice: dict[str, Any], items: list[StreamItem], parts: bool
                      ) -> None:
        raise NotImplementedError

    def _response_texts(self, choice: dict[str, Any]) -> list[str]:
        raise NotImplementedError


class OpenAIChatAdapter(_OpenAIBase):
    """POST /v1/chat/completions (OpenAI, vLLM, SGLang, most gateways)."""

    name = "openai-chat"
    path = "/v1/chat/completions"

    def _prompt_fields(self, req: GenerationRequest) -> dict[str, Any]:
        return {"messages": with_images(chat_history(req, self.name), req.images,
                                        _image_url_part, _text_part)}

    def _choice_items(self, choice: dict[str, Any], items: list[StreamItem], parts: bool
                      ) -> None:
        delta = choice.get("delta")
        if delta is None:
            return
        if not isinstance(delta, dict):
            raise ProtocolError(f"{self.name}: 'delta' is not an object")
        content = optional_str(delta, "content", self.name)
        # vLLM has used both names for reasoning (and may send both, mirrored): take one
        reasoning = optional_str(delta, "reasoning_content", self.name) or optional_str(
            delta, "reasoning", self.name
        )
        tool_text = tool_call_text(delta)  # a tool call's arguments (openai_chunks.py)
        opened = tool_call_openings(choice.get("index"), delta) if "tool_calls" in delta else []
        if not content and not reasoning and not tool_text and not opened:
            return  # role-only, finish-reason-only and empty chunks carry no content
        tokens = logprob_count(choice, "content") if choice.get("logprobs") else None
        if reasoning:
            items.append(ContentDelta(reasoning, tokens, reasoning=True))
            tokens = None  # the count belongs to the chunk: attach it once
        if content:
            items.append(ContentDelta(content, tokens))
            tokens = None
        items.extend(ToolCall(key) for key in opened)
        if tool_text:
            items.append(ContentDelta(tool_text, tokens, tool_arguments=parts))
        if parts:  # what an agent loop sends back: each call's id, name and arguments
            items.extend(ToolCallPart(*entry) for entry in tool_call_entries(
                choice.get("index"), delta))

    def _response_texts(self, choice: dict[str, Any]) -> list[str]:
        message = choice.get("message")
        if not isinstance(message, dict):
            raise ProtocolError(f"{self.name}: a choice has no 'message' object")
        texts: list[str] = []
        reasoning = optional_str(message, "reasoning_content", self.name) or optional_str(
            message, "reasoning", self.name
        )
        if reasoning:
            texts.append(reasoning)
        content = optional_str(message, "content", self.name)
        if content:
            texts.append(content)
        return texts


class OpenAICompletionsAdapter(_OpenAIBase):
    """POST /v1/completions: raw text or token-id prompts, no chat template."""

    name = "openai-completions"
    path = "/v1/completions"

    def _prompt_fields(self, req: GenerationRequest) -> dict[str, Any]:
        if req.messages is not None:
            raise ValueError(f"messages: {self.name} takes a prompt, not chat messages")
        if req.tools:
            raise ValueError(f"tools: {self.name} has no tools")
        if req.response_format is not None:
            raise ValueError(f"response_format: {self.name} takes no JSON schema")
        if req.images:
            raise ValueError(f"images: {self.name} takes text only")
        if req.system is not None:
            raise ValueError(f"system: {self.name} has no system prompt; put it in prompt")
        if req.prompt_token_ids is not None:
            return {"prompt": list(req.prompt_token_ids)}
        return {"prompt": req.prompt}

    def _choice_items(self, choice: dict[str, Any], items: list[StreamItem], parts: bool
                      ) -> None:
        text = optional_str(choice, "text", self.name)
        if text:
            tokens = logprob_count(choice, "tokens") if choice.get("logprobs") else None
            items.append(ContentDelta(text, tokens))

    def _response_texts(self, choice: dict[str, Any]) -> list[str]:
        text = optional_str(choice, "text", self.name)
        return [text] if text else []


def _image_url_part(image: EncodedImage) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": image.data_url}}


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _openai_error(obj: dict[str, Any]) -> StreamError | None:
    """vLLM/OpenAI errors: `{"error": {...}}`, or older vLLM `{"object": "error", ...}`."""
    error = obj.get("error")
    if error is not None:
        return error_from(error)
    if obj.get("object") == "error":
        return error_from(obj)
    return None


def _openai_usage(usage: object) -> Usage:
    if not isinstance(usage, dict):
        raise ProtocolError("openai: 'usage' is not an object")
    reasoning = {"reasoning_tokens": reasoning_token_count(usage)}
    prompt_details = usage.get("prompt_tokens_details")  # vLLM sends null when it does not say
    cached = prompt_details if isinstance(prompt_details, dict) else {}
    return Usage(
        optional_count(usage, "prompt_tokens", "openai"),
        optional_count(usage, "completion_tokens", "openai"),
        optional_count(reasoning, "reasoning_tokens", "openai"),
        optional_count(cached, "cached_tokens", "openai"),
    )


def _message_tool_calls(choice: dict[str, Any]) -> int:
    """Tool calls a non-streamed chat choice asks for (`message.tool_calls`)."""
    message = choice.get("message")
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    return sum(1 for call in calls if isinstance(call, dict)) if isinstance(calls, list) else 0
