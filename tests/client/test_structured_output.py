"""Structured output: the JSON Schema subset zerohop checks, the judgement of an answer,
the request bodies that carry a schema, and the embedded target's schema-valid answers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.protocols import GenerationRequest
from zerohop.client.structured_output import judge_answer, request_format
from zerohop.core import records as rec
from zerohop.core.json_schema import check_schema, schema_violation
from zerohop.sim.answers.structured_answer import requested_schema, schema_frame

pytestmark = pytest.mark.unit

PERSON: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 3, "maximum": 120},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]},
                 "minItems": 1},
        "kind": {"const": "person"},
        "score": {"type": ["number", "null"]},
    },
    "required": ["age", "tags", "kind", "name"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(("document", "where"), [
    ({"name": "x", "age": 3, "tags": ["a"], "kind": "person"}, None),
    ({"name": "x", "age": 3, "tags": ["a"], "kind": "person", "score": None}, None),
    ({"name": "x", "age": 3.0, "tags": ["b"], "kind": "person", "score": 1.5}, None),
    ({"name": "x", "age": 2, "tags": ["a"], "kind": "person"}, "$.age"),
    ({"name": "x", "age": True, "tags": ["a"], "kind": "person"}, "$.age"),
    ({"name": "x", "age": 3, "tags": [], "kind": "person"}, "$.tags"),
    ({"name": "x", "age": 3, "tags": ["c"], "kind": "person"}, "$.tags[0]"),
    ({"name": "x", "age": 3, "tags": ["a"], "kind": "robot"}, "$.kind"),
    ({"name": 1, "age": 3, "tags": ["a"], "kind": "person"}, "$.name"),
    ({"age": 3, "tags": ["a"], "kind": "person"}, "$: missing"),
    ({"name": "x", "age": 3, "tags": ["a"], "kind": "person", "x": 1}, "$: properties not"),
    ([], "$: not of type"),
])
def test_schema_violation_names_where(document: Any, where: str | None) -> None:
    found = schema_violation(document, PERSON)
    assert (found is None) if where is None else (found is not None and found.startswith(where))


@pytest.mark.parametrize(("schema", "message"), [
    ({"type": "object", "patternProperties": {}}, "patternProperties"),
    ({"type": "object", "properties": {"a": {"$ref": "#/x"}}}, "properties.a"),
    ({"type": "strin"}, "'strin'"),
    ({"type": "object", "additionalProperties": {"type": "string"}}, "additionalProperties"),
    ({"enum": []}, "enum"),
    ("not a schema", "mapping"),
])
def test_a_schema_outside_the_subset_is_refused(schema: Any, message: str) -> None:
    with pytest.raises(ValueError, match=r"^response_format") as raised:
        check_schema(schema)
    assert message in str(raised.value)


def test_judge_answer_tells_the_three_outcomes_apart() -> None:
    good = json.dumps({"name": "x", "age": 4, "tags": ["a"], "kind": "person"})
    assert judge_answer(good, PERSON) == rec.STRUCTURED_VALID
    assert judge_answer(" the quick brown fox", PERSON) == rec.STRUCTURED_INVALID_JSON
    assert judge_answer(good[:-1], PERSON) == rec.STRUCTURED_INVALID_JSON  # cut short
    assert judge_answer('{"name": "x"}', PERSON) == rec.STRUCTURED_SCHEMA_MISMATCH


def test_the_openai_apis_carry_the_schema_and_the_others_refuse_it() -> None:
    fmt = request_format(PERSON, "json answers.v2")
    assert fmt == {"name": "json_answers_v2", "schema": PERSON, "strict": True}
    req = GenerationRequest(model="m", max_tokens=8, prompt="hi", response_format=fmt)
    chat = json.loads(create_api_adapter("openai-chat").build_request(
        req, api_key=None, request_id="r").body)
    assert chat["response_format"] == {"type": "json_schema", "json_schema": fmt}
    responses = json.loads(create_api_adapter("openai-responses").build_request(
        req, api_key=None, request_id="r").body)
    assert responses["text"] == {"format": {"type": "json_schema", **fmt}}
    for api in ("openai-completions", "anthropic"):
        with pytest.raises(ValueError, match=r"^response_format:"):
            create_api_adapter(api).build_request(req, api_key=None, request_id="r")


@pytest.mark.parametrize("schema", [
    PERSON,
    {"type": "object", "properties": {"answer": {"type": "string"}}},
    {"type": "object", "properties": {"n": {"type": "integer", "maximum": -2},
                                      "inner": {"type": "object", "properties": {
                                          "text": {"type": "string"}}, "required": ["text"]}},
     "required": ["n", "inner"]},
    {"type": "string"},
])
def test_the_embedded_targets_document_follows_the_schema_for_any_words(
        schema: dict[str, Any]) -> None:
    frame = schema_frame(schema)
    assert frame is not None
    before, after = frame
    for words in ("", " word", ' "quoted" \\ words'):
        text = before + json.dumps(words)[1:-1] + after
        assert judge_answer(text, schema) == rec.STRUCTURED_VALID, text


def test_a_schema_without_a_free_string_gets_no_frame() -> None:
    assert schema_frame({"type": "object", "properties": {"n": {"type": "integer"}},
                         "required": ["n"]}) is None
    assert schema_frame({"type": "string", "maxLength": 3}) is None


def test_the_embedded_target_reads_the_schema_where_each_api_sends_it() -> None:
    fmt = request_format(PERSON, "p")
    assert requested_schema("chat", {"response_format": {"type": "json_schema",
                                                         "json_schema": fmt}}) == PERSON
    assert requested_schema("responses", {"text": {"format": {"type": "json_schema",
                                                               **fmt}}}) == PERSON
    assert requested_schema("responses", {"text": {"format": {"type": "text"}}}) is None
    assert requested_schema("chat", {}) is None
    assert requested_schema("messages", {"response_format": fmt}) is None
