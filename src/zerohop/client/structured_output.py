"""Structured output: what a workload's `response_format` asks of the server, and how an
answer fares against it.

A workload states a JSON schema; the request carries it (chat's `response_format`,
Responses' `text.format`, built by the adapters from `request_format`), and the answer's
text (thinking and tool-call arguments left out) is judged after the stream: does it
parse as JSON, and does the document follow the schema (the subset of JSON Schema that
`core.json_schema` checks)? Pure; runs off the timing path, after the record is built.
"""

from __future__ import annotations

import json
from typing import Any

from zerohop.core import records as rec
from zerohop.core.json_schema import schema_violation

__all__ = ["judge_answer", "request_format"]


def request_format(schema: dict[str, Any], name: str) -> dict[str, Any]:
    """The `{name, schema, strict}` object both OpenAI APIs take for a JSON schema
    (`name`: letters, digits, `_` and `-` only, as OpenAI requires)."""
    safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in name)[:64] or "answer"
    return {"name": safe, "schema": schema, "strict": True}


def judge_answer(text: str, schema: dict[str, Any]) -> str:
    """STRUCTURED_VALID, STRUCTURED_INVALID_JSON or STRUCTURED_SCHEMA_MISMATCH."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return rec.STRUCTURED_INVALID_JSON
    if schema_violation(document, schema) is not None:
        return rec.STRUCTURED_SCHEMA_MISMATCH
    return rec.STRUCTURED_VALID
