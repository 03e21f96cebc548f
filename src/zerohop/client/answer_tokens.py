"""A non-streamed OpenAI-style answer read down to what the answer probe compares: its
text, and, where the server gave per-token logprobs, its tokens (strings, and ids where
the server names them) with each one's logprob.

The shapes read: chat's `choices[0].logprobs.content[]` entries `{token, logprob}`
(OpenAI, vLLM; llama.cpp's server adds `id`), and completions' `choices[0].logprobs`
as OpenAI and vLLM send it, `{tokens, token_logprobs}`, or as llama.cpp's server
sends it, the chat form's `content[]`. A body without them still gives its text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from zerohop.client.protocols import ProtocolError
from zerohop.client.wire_format import parse_object
from zerohop.core.apis import api_entry, api_names

# per body form (`core.apis`' `embedded_form`), the request fields that ask for the
# chosen token's logprob (and one alternative)
_LOGPROB_FIELDS: dict[str, dict[str, Any]] = {
    "chat": {"logprobs": True, "top_logprobs": 1},
    "completions": {"logprobs": 1},
}


def logprob_fields(api: str) -> dict[str, Any] | None:
    """The fields that ask `api` for logprobs (None: its answers carry none)."""
    fields = _LOGPROB_FIELDS.get(api_entry(api).embedded_form) if api in api_names() else None
    return dict(fields) if fields is not None else None


def logprob_apis() -> list[str]:
    """The APIs whose answers carry logprobs: the ones the answer probe can ask."""
    return [name for name in api_names() if logprob_fields(name) is not None]


def answer_api_refusal(api: str) -> str | None:
    """Why the answer probe cannot run on `api` (None: it can)."""
    if logprob_fields(api) is not None:
        return None
    return (f"--answer-probe needs --api {' or '.join(logprob_apis())} (the APIs whose "
            f"answers carry logprobs), not {api}")


@dataclass(frozen=True)
class AnswerTokens:
    """One answer: `tokens`, `token_ids` and `logprobs` are None where the body had none
    (a logprob that is not a number is None in its place)."""

    text: str
    finish_reason: str | None
    tokens: list[str] | None
    token_ids: list[int] | None
    logprobs: list[float | None] | None


def read_answer(api: str, body: bytes) -> AnswerTokens:
    """The first choice of a chat or completions body (a `ProtocolError` when it has none)."""
    obj = parse_object(body)
    choices = obj.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ProtocolError(f"{api}: the answer has no choice")
    choice = choices[0]
    if api_entry(api).embedded_form == "chat":
        message = choice.get("message")
        text = message.get("content") if isinstance(message, dict) else None
    else:
        text = choice.get("text")
    reason = choice.get("finish_reason")
    tokens, ids, logprobs = _logprobs(choice.get("logprobs"))
    return AnswerTokens(text if isinstance(text, str) else "",
                        reason if isinstance(reason, str) else None, tokens, ids, logprobs)


def _logprobs(block: object) -> tuple[list[str] | None, list[int] | None,
                                       list[float | None] | None]:
    if not isinstance(block, dict):
        return None, None, None
    content = block.get("content")
    if isinstance(content, list):
        entries = [e for e in content if isinstance(e, dict)]
        if len(entries) != len(content) or not all(isinstance(e.get("token"), str)
                                                   for e in entries):
            raise ProtocolError("logprobs.content: an entry without its token")
        ids = [i for i in (e.get("id") for e in entries) if isinstance(i, int)
               and not isinstance(i, bool)]
        return ([str(e["token"]) for e in entries],
                ids if len(ids) == len(entries) else None,
                [_number(e.get("logprob")) for e in entries])
    tokens, values = block.get("tokens"), block.get("token_logprobs")
    if isinstance(tokens, list) and all(isinstance(t, str) for t in tokens):
        numbers = values if isinstance(values, list) and len(values) == len(tokens) else None
        return ([str(t) for t in tokens], None,
                [_number(v) for v in numbers] if numbers is not None else None)
    return None, None, None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
