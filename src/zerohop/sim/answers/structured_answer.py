"""A structured answer's JSON document: what the embedded target says when a request
asks for a JSON schema (answer_plan.py).

The document is the smallest one the schema takes (each required property, a number at
its minimum, an enum's first value, `minItems` copies of an array's item), with the
answer's generated words in its first free string (a string property with no
`maxLength`, `enum` or `const`), so the answer is as long as any other while the
document stays valid. `schema_frame` gives the text before and after the words: the
shapes stream the first with the first answer token and the second with the last. A
schema with no free string has nowhere to put the words: its requests get no frame and
answer with bare words, which no client counts as valid (the README says so).
"""

from __future__ import annotations

import json
from typing import Any

from zerohop.sim.answers.body_forms import body_form

__all__ = ["requested_schema", "schema_frame"]

_SLOT = "\u0000zerohop-words\u0000"


def requested_schema(api: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a generation request asks its answer to follow: chat's
    `response_format: {type: json_schema, json_schema: {schema}}`, Responses'
    `text: {format: {type: json_schema, schema}}`; None when it asks for none."""
    reading = body_form(api).answer
    if reading is None or reading.schema_spec is None:
        return None
    spec = reading.schema_spec(body)
    schema = spec.get("schema") if isinstance(spec, dict) else None
    return schema if isinstance(schema, dict) else None


def schema_frame(schema: dict[str, Any]) -> tuple[str, str] | None:
    """(text before the words, text after them) of the document answering `schema`;
    None when the schema has no free string to hold the words."""
    document, placed = _instance(schema, want_slot=True)
    if not placed:
        return None
    text = json.dumps(document, separators=(",", ":"))
    marker = json.dumps(_SLOT)[1:-1]
    before, _, after = text.partition(marker)
    return before, after


def _instance(schema: dict[str, Any], *, want_slot: bool) -> tuple[Any, bool]:
    """The smallest value `schema` takes, and whether the words' slot is in it."""
    if "const" in schema:
        return schema["const"], False
    if "enum" in schema:
        return schema["enum"][0], False
    kinds = schema.get("type")
    allowed = kinds if isinstance(kinds, list) else ["string" if kinds is None else kinds]
    if want_slot and "string" in allowed and "maxLength" not in schema:
        return _SLOT, True
    kind = allowed[0]
    if kind == "object":
        return _object(schema, want_slot=want_slot)
    if kind == "array":
        item = schema.get("items")
        value, _ = _instance(item if isinstance(item, dict) else {}, want_slot=False)
        return [value] * int(schema.get("minItems", 0)), False
    if kind == "string":
        return "a" * int(schema.get("minLength", 0)), False
    if kind in ("integer", "number"):
        low, high = schema.get("minimum"), schema.get("maximum")
        value = low if low is not None else min(0, high) if high is not None else 0
        return (int(value) if kind == "integer" else value), False
    if kind == "boolean":
        return True, False
    return None, False


def _object(schema: dict[str, Any], *, want_slot: bool) -> tuple[dict[str, Any], bool]:
    properties: dict[str, Any] = schema.get("properties", {})
    document: dict[str, Any] = {}
    placed = False
    for name in schema.get("required", []):
        sub = properties.get(name, {})
        document[name], found = _instance(sub, want_slot=want_slot and not placed)
        placed = placed or found
    if want_slot and not placed:  # an optional property may hold the words
        for name, sub in properties.items():
            if name in document:
                continue
            value, found = _instance(sub, want_slot=True)
            if found:
                document[name], placed = value, True
                break
    return document, placed
