"""A generation request's body read into what the engine needs — prompt size, output
budget, streaming options — or a client error (HTTP 400, with vLLM's or Anthropic's
wording) the app answers in the API's error shape."""

from __future__ import annotations

import json
from typing import Any

from zerohop.sim.answers.body_forms import body_form


class RequestError(Exception):
    """A client error found while reading the request (HTTP status + message)."""

    def __init__(self, status: int, message: str, error_type: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.error_type = error_type


def json_body(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object, or a 400."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RequestError(400, f"request body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise RequestError(400, "request body must be a JSON object")
    return body


def read_generation_fields(
    api: str, body: dict[str, Any], max_model_len: int
) -> tuple[int, int, bool, bool, bool, int]:
    """(prompt_tokens, max_tokens, stream, include_usage, ignore_eos, min_tokens), read
    as body form `api` (`body_forms.BodyForm`) says."""
    form = body_form(api)
    try:
        prompt_tokens = form.prompt_tokens(body)
    except ValueError as exc:
        raise RequestError(400, str(exc)) from None
    raw_max = next((body[key] for key in form.max_tokens_keys if key in body), None)
    if raw_max is None and form.max_tokens_required is not None:
        raise RequestError(400, form.max_tokens_required)
    if raw_max is None:
        max_tokens = (form.default_max_tokens if form.default_max_tokens is not None
                      else max(1, max_model_len - prompt_tokens))
    elif isinstance(raw_max, bool) or not isinstance(raw_max, int) or raw_max < 1:
        raise RequestError(400, "max_tokens must be a positive integer")
    else:
        max_tokens = raw_max
    n = body.get("n", 1)
    if n != 1:
        raise RequestError(400, "the sim supports n=1 only")
    stream = bool(body.get("stream", False))
    options = body.get("stream_options") or {}
    include_usage = form.usage_always or bool(
        isinstance(options, dict) and options.get("include_usage"))
    ignore_eos = bool(body.get("ignore_eos", False))
    min_tokens = body.get("min_tokens", 0)
    if not isinstance(min_tokens, int) or min_tokens < 0:
        raise RequestError(400, "min_tokens must be a non-negative integer")
    return prompt_tokens, max_tokens, stream, include_usage, ignore_eos, min(min_tokens, max_tokens)
