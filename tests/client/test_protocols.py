"""Protocol adapters: golden streams, chunking invariance, garbage, request building.

The golden streams live in tests/fixtures/streams (NAME.sse + NAME.json, see its README);
every adapter is checked against the same recorded shapes, parser included.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zerohop.client.api_adapters import create_api_adapter
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
    Usage,
    api_key_from_env,
)
from zerohop.client.sse import SSEEvent, SSEOverflow, SSEParser
from zerohop.core.apis import API_NAMES

pytestmark = pytest.mark.unit

STREAMS_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "streams"
GOLDEN = sorted(STREAMS_DIR.glob("*.json"))
SECRET = "sk-test-DO-NOT-LEAK-0123456789"


# --- helpers ------------------------------------------------------------------------
def load_golden(path: Path) -> tuple[bytes, dict[str, Any]]:
    spec = json.loads(path.read_text(encoding="utf-8"))
    return path.with_suffix(".sse").read_bytes(), spec


# fields a fixture names only when they differ from these values (README.md)
QUIET_DEFAULTS = {"reasoning": False, "reasoning_tokens": None, "cached_tokens": None,
                  "tool_arguments": False}
ITEM_TYPES = {
    ContentDelta: "content",
    ToolCall: "tool_call",
    Usage: "usage",
    StreamError: "error",
    Terminator: "terminator",
}


def item_json(item: StreamItem) -> dict[str, Any]:
    fields = {
        k: v for k, v in asdict(item).items() if k not in QUIET_DEFAULTS or v != QUIET_DEFAULTS[k]
    }
    return {"type": ITEM_TYPES[type(item)], **fields}


def decode_stream(api: str, chunks: list[bytes], *, stateless: bool = False) -> list[StreamItem]:
    adapter = create_api_adapter(api)
    decode = adapter.decode_event if stateless else adapter.new_stream_decoder().decode_event
    parser = SSEParser()
    items: list[StreamItem] = []
    for chunk in chunks:
        for event in parser.feed(chunk):
            items += decode(event)
    return items


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted({c % (len(data) + 1) for c in cuts}), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


def chat_request(**overrides: Any) -> GenerationRequest:
    fields: dict[str, Any] = {"model": "m", "max_tokens": 16, "prompt": "Hi"}
    fields.update(overrides)
    return GenerationRequest(**fields)


def streaming_headers(request_id: str) -> dict[str, str]:
    """The headers every API's streaming request carries, before its own auth headers."""
    return {
        "content-type": "application/json",
        "accept": "text/event-stream",
        "x-request-id": request_id,
    }


def body_of(request: HttpRequest) -> dict[str, Any]:
    body = json.loads(request.body)
    assert isinstance(body, dict)
    return body


# --- golden streams -----------------------------------------------------------------
def test_every_api_has_golden_streams() -> None:
    apis = {load_golden(p)[1]["api"] for p in GOLDEN}
    assert apis == set(API_NAMES)


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_stream_decodes_to_the_recorded_items(path: Path) -> None:
    data, spec = load_golden(path)
    parser = SSEParser()
    events = parser.feed(data)
    assert len(events) == spec["event_count"]
    assert parser.feed(b"\n\n") == []  # the stream ended on an event boundary: none left open
    assert [item_json(i) for i in decode_stream(spec["api"], [data])] == spec["items"]
    stateless = spec.get("stateless_items", spec["items"])
    assert [item_json(i) for i in decode_stream(spec["api"], [data], stateless=True)] == stateless


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
@pytest.mark.parametrize("eol", [b"\r\n", b"\r"], ids=["CRLF", "CR"])
def test_golden_stream_with_other_line_endings(path: Path, eol: bytes) -> None:
    data, spec = load_golden(path)
    converted = data.replace(b"\r\n", b"\n").replace(b"\n", eol)
    assert [item_json(i) for i in decode_stream(spec["api"], [converted])] == spec["items"]


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_stream_one_byte_at_a_time(path: Path) -> None:
    data, spec = load_golden(path)
    chunks = [data[i : i + 1] for i in range(len(data))]
    assert [item_json(i) for i in decode_stream(spec["api"], chunks)] == spec["items"]


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
@given(cuts=st.lists(st.integers(min_value=0, max_value=100_000), max_size=60))
@settings(max_examples=30, deadline=None)
def test_golden_stream_any_chunking_equals_whole(path: Path, cuts: list[int]) -> None:
    data, spec = load_golden(path)
    assert decode_stream(spec["api"], split_at(data, cuts)) == decode_stream(spec["api"], [data])


def test_crlf_fixtures_really_are_crlf() -> None:
    crlf = sorted(STREAMS_DIR.glob("*_crlf.sse"))
    assert crlf
    for path in crlf:
        data = path.read_bytes()
        assert data.count(b"\r\n") == data.count(b"\n") > 0, path.name


# --- decoding details ---------------------------------------------------------------
def ev(data: str, event: str | None = None) -> SSEEvent:
    return SSEEvent(data, event)


def test_openai_role_only_and_empty_chunks_yield_nothing() -> None:
    chat = create_api_adapter("openai-chat")
    role = '{"choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}'
    assert chat.decode_event(ev(role)) == []
    assert chat.decode_event(ev('{"choices":[{"delta":{"content":null}}],"usage":null}')) == []


def test_openai_error_type_falls_back_to_code() -> None:
    chat = create_api_adapter("openai-chat")
    items = chat.decode_event(ev('{"error":{"message":"too long","type":null,"code":400}}'))
    assert items == [StreamError("400", "too long")]
    items = chat.decode_event(ev('{"error":"plain string"}'))
    assert items == [StreamError("unknown", "plain string")]


def test_openai_multiple_choices_each_count() -> None:
    comp = create_api_adapter("openai-completions")
    data = '{"choices":[{"index":0,"text":"a"},{"index":1,"text":"b"},{"index":2,"text":""}]}'
    assert comp.decode_event(ev(data)) == [ContentDelta("a"), ContentDelta("b")]


def test_reasoning_and_content_in_one_delta_are_both_content() -> None:
    chat = create_api_adapter("openai-chat")
    data = '{"choices":[{"delta":{"reasoning":"think","content":"say"}}]}'
    assert chat.decode_event(ev(data)) == [
        ContentDelta("think", reasoning=True),
        ContentDelta("say"),
    ]


def test_a_tool_call_is_opened_by_the_entry_naming_its_function() -> None:
    """A name-only entry opens a call without being content; fragments repeating the
    name (TGI) or carrying only `index` do not open another; parallel calls and
    choices are told apart by their indexes."""
    chat = create_api_adapter("openai-chat")
    name_only = '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a",' \
        '"type":"function","function":{"name":"f","arguments":""}}]}}]}'
    assert chat.decode_event(ev(name_only)) == [ToolCall("0:0")]
    fragment = '{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,' \
        '"function":{"arguments":"{}"}}]}}]}'
    assert chat.decode_event(ev(fragment)) == [ContentDelta("{}")]
    parallel = '{"choices":[{"index":1,"delta":{"tool_calls":[' \
        '{"index":0,"function":{"name":"f","arguments":"{"}},' \
        '{"index":1,"function":{"name":"g","arguments":"}"}},' \
        '{"function":{"name":null}},"junk"]}}]}'
    assert chat.decode_event(ev(parallel)) == [
        ToolCall("1:0"),
        ToolCall("1:1"),
        ContentDelta("{}"),
    ]


def test_anthropic_tool_use_block_opens_a_tool_call() -> None:
    adapter = create_api_adapter("anthropic")
    start = '{"type":"content_block_start","index":2,"content_block":{"type":"tool_use",' \
        '"id":"toolu_1","name":"f","input":{}}}'
    assert adapter.decode_event(ev(start)) == [ToolCall("2")]
    text = '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'
    assert adapter.decode_event(ev(text)) == []
    odd = '{"type":"content_block_start","index":0,"content_block":"tool_use"}'
    assert adapter.decode_event(ev(odd)) == []


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ('{"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":6}}', 6),
        ('{"completion_tokens":9,"reasoning_tokens":5}', 5),  # SGLang's UsageInfo
        ('{"completion_tokens":9,"completion_tokens_details":null}', None),
        ('{"completion_tokens":9,"completion_tokens_details":{"audio_tokens":0}}', None),
    ],
)
def test_openai_usage_reasoning_tokens(usage: str, expected: int | None) -> None:
    items = create_api_adapter("openai-chat").decode_event(ev(f'{{"choices":[],"usage":{usage}}}'))
    assert items == [Usage(None, 9, expected)]


def test_openai_usage_rejects_a_bad_reasoning_count() -> None:
    data = '{"choices":[],"usage":{"completion_tokens_details":{"reasoning_tokens":"6"}}}'
    with pytest.raises(ProtocolError, match="reasoning_tokens"):
        create_api_adapter("openai-chat").decode_event(ev(data))


def test_stream_decoder_keeps_the_latest_reasoning_count() -> None:
    decoder = create_api_adapter("openai-chat").new_stream_decoder()
    details = '{"choices":[],"usage":{"completion_tokens_details":{"reasoning_tokens":4}}}'
    assert decoder.decode_event(ev(details)) == [Usage(None, None, 4)]
    later = decoder.decode_event(ev('{"choices":[],"usage":{"prompt_tokens":2}}'))
    assert later == [Usage(2, None, 4)]


def test_openai_stream_decoder_keeps_latest_counts() -> None:
    decoder = create_api_adapter("openai-chat").new_stream_decoder()
    first = decoder.decode_event(ev('{"choices":[],"usage":{"prompt_tokens":5}}'))
    last = decoder.decode_event(ev('{"choices":[],"usage":{"completion_tokens":9}}'))
    assert first == [Usage(5, None)]
    assert last == [Usage(5, 9)]


def test_stream_decoders_do_not_share_state() -> None:
    adapter = create_api_adapter("anthropic")
    one, two = adapter.new_stream_decoder(), adapter.new_stream_decoder()
    one.decode_event(ev('{"type":"message_start","message":{"usage":{"input_tokens":7}}}'))
    delta = '{"type":"message_delta","delta":{},"usage":{"output_tokens":3}}'
    assert two.decode_event(ev(delta)) == [Usage(None, 3)]
    assert one.decode_event(ev(delta)) == [Usage(7, 3)]


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        ('{"type":"text_delta","text":""}', []),
        ('{"type":"text_delta","text":"a"}', [ContentDelta("a")]),
        ('{"type":"thinking_delta","thinking":"t"}', [ContentDelta("t", reasoning=True)]),
        ('{"type":"input_json_delta","partial_json":"{\\"a\\": 1"}', [ContentDelta('{"a": 1')]),
        ('{"type":"signature_delta","signature":"xyz"}', []),
        ('{"type":"citations_delta","citation":{}}', []),
    ],
)
def test_anthropic_delta_kinds(delta: str, expected: list[StreamItem]) -> None:
    data = f'{{"type":"content_block_delta","index":0,"delta":{delta}}}'
    assert create_api_adapter("anthropic").decode_event(ev(data, "content_block_delta")) == expected


def test_anthropic_type_may_come_from_the_event_field_only() -> None:
    adapter = create_api_adapter("anthropic")
    assert adapter.decode_event(ev("{}", "message_stop")) == [Terminator()]
    with pytest.raises(ProtocolError, match="type"):
        adapter.decode_event(ev("{}"))


@pytest.mark.parametrize(
    ("api", "data", "match"),
    [
        ("openai-chat", "not json", "malformed JSON"),
        ("openai-chat", "[1, 2]", "JSON object"),
        ("openai-chat", "{}", "neither"),
        ("openai-chat", '{"choices": {}}', "not a list"),
        ("openai-chat", '{"choices": [1]}', "not an object"),
        ("openai-chat", '{"choices": [{"delta": "x"}]}', "delta"),
        ("openai-chat", '{"choices": [{"delta": {"content": 5}}]}', "content"),
        ("openai-completions", '{"choices": [{"text": ["a"]}]}', "text"),
        ("openai-completions", '{"choices": [], "usage": {"prompt_tokens": -1}}', "prompt_tokens"),
        ("openai-completions", '{"choices": [], "usage": {"completion_tokens": true}}', "compl"),
        ("openai-completions", '{"choices": [], "usage": 3}', "usage"),
        ("anthropic", '{"type": "content_block_delta"}', "delta"),
        (
            "anthropic",
            '{"type": "content_block_delta", "delta": {"type": "text_delta", "text": 1}}',
            "text",
        ),
        ("anthropic", '{"type": "message_start", "message": null}', "message"),
        ("anthropic", '{"type": "message_delta", "usage": {"output_tokens": 1.5}}', "output"),
    ],
)
def test_malformed_events_raise_protocol_error(api: str, data: str, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        create_api_adapter(api).new_stream_decoder().decode_event(ev(data))


# --- garbage ------------------------------------------------------------------------
@pytest.mark.parametrize("api", API_NAMES)
@given(data=st.binary(max_size=1500), cuts=st.lists(st.integers(0, 1500), max_size=6))
@settings(max_examples=150, deadline=None)
def test_garbage_bytes_raise_only_protocol_errors(api: str, data: bytes, cuts: list[int]) -> None:
    decoder = create_api_adapter(api).new_stream_decoder()
    parser = SSEParser(max_event_bytes=512)
    try:
        for chunk in split_at(data, cuts):
            for event in parser.feed(chunk):
                decoder.decode_event(event)
    except (ProtocolError, SSEOverflow):
        pass


_KEYS = [
    "choices", "delta", "content", "reasoning_content", "reasoning", "text", "usage",
    "prompt_tokens", "completion_tokens", "input_tokens", "output_tokens", "error", "object",
    "type", "message", "code", "logprobs", "tokens", "index", "thinking", "partial_json",
]  # fmt: skip
_TYPES = [
    "message_start", "content_block_delta", "message_delta", "message_stop", "error", "ping",
    "text_delta", "thinking_delta", "input_json_delta", "signature_delta",
]  # fmt: skip
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(_TYPES)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4)
    ),
    max_leaves=20,
)


@pytest.mark.parametrize("api", API_NAMES)
@given(value=json_values, event_type=st.none() | st.sampled_from(_TYPES))
@settings(max_examples=300, deadline=None)
def test_wrongly_shaped_json_raises_only_protocol_errors(
    api: str, value: Any, event_type: str | None
) -> None:
    adapter = create_api_adapter(api)
    event = SSEEvent(json.dumps(value), event_type)
    for decode in (adapter.decode_event, adapter.new_stream_decoder().decode_event):
        try:
            items = decode(event)
        except ProtocolError:
            continue
        assert all(isinstance(i, ContentDelta | Usage | StreamError | Terminator) for i in items)
    with contextlib.suppress(ProtocolError):
        adapter.decode_response(json.dumps(value).encode())


@pytest.mark.parametrize("api", API_NAMES)
@given(
    status=st.integers(100, 599),
    body=st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()),
)
@settings(max_examples=200, deadline=None)
def test_decode_error_body_never_raises(api: str, status: int, body: bytes) -> None:
    error = create_api_adapter(api).decode_error_body(status, body)
    assert error.error_type
    assert isinstance(error.message, str)


# --- error bodies -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (400, b'{"error":{"message":"bad","type":"invalid_request_error","code":null}}',
         StreamError("invalid_request_error", "bad")),
        (400, b'{"object":"error","message":"too long","type":"BadRequestError","code":400}',
         StreamError("BadRequestError", "too long")),
        (529, b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
         StreamError("overloaded_error", "Overloaded")),
        (422, b'{"detail":"Field required"}', StreamError("http_422", "Field required")),
        (502, b"<html>Bad Gateway</html>", StreamError("http_502", "<html>Bad Gateway</html>")),
        (503, b"", StreamError("http_503", "")),
        (500, b"\xff\xfe", StreamError("http_500", "\ufffd\ufffd")),
    ],
)  # fmt: skip
def test_decode_error_body_shapes(status: int, body: bytes, expected: StreamError) -> None:
    for api in API_NAMES:
        assert create_api_adapter(api).decode_error_body(status, body) == expected


def test_decode_error_body_truncates_huge_messages() -> None:
    error = create_api_adapter("openai-chat").decode_error_body(500, b"x" * 10_000)
    assert error.error_type == "http_500"
    assert len(error.message) <= 501


# --- non-streaming responses --------------------------------------------------------
def test_decode_response_per_api() -> None:
    chat = b"""{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":
        "assistant","reasoning_content":"hmm ","content":"Hello"},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}"""
    assert create_api_adapter("openai-chat").decode_response(chat) == DecodedResponse(
        "hmm Hello", Usage(3, 4)
    )
    comp = b'{"choices":[{"index":0,"text":" fox","finish_reason":"length"}]}'
    assert create_api_adapter("openai-completions").decode_response(comp) == DecodedResponse(
        " fox", Usage(None, None)
    )
    msg = b"""{"id":"msg_1","type":"message","role":"assistant","content":[
        {"type":"thinking","thinking":"sum ","signature":"abc"},{"type":"text","text":"4"},
        {"type":"tool_use","id":"t","name":"f","input":{}}],"stop_reason":"end_turn",
        "usage":{"input_tokens":10,"output_tokens":2}}"""
    assert create_api_adapter("anthropic").decode_response(msg) == DecodedResponse(
        "sum 4", Usage(10, 2), tool_calls=1
    )


def test_decode_response_counts_tool_calls() -> None:
    chat = b"""{"choices":[{"index":0,"message":{"role":"assistant","content":null,
        "tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},
        {"id":"b","type":"function","function":{"name":"g","arguments":"{}"}}]},
        "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":9,
        "completion_tokens_details":{"reasoning_tokens":5}}}"""
    assert create_api_adapter("openai-chat").decode_response(chat) == DecodedResponse(
        "", Usage(3, 9, 5), tool_calls=2
    )
    msg = b"""{"type":"message","content":[{"type":"tool_use","id":"t1","name":"f",
        "input":{}},{"type":"tool_use","id":"t2","name":"f","input":{}}],
        "stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":8}}"""
    assert create_api_adapter("anthropic").decode_response(msg).tool_calls == 2


@pytest.mark.parametrize(
    ("api", "body"),
    [
        ("openai-chat", b"not json"),
        ("openai-chat", b'{"choices":[{"index":0}]}'),
        ("openai-chat", b'{"error":{"message":"x","type":"server_error"}}'),
        ("openai-completions", b'{"object":"list"}'),
        ("anthropic", b'{"type":"error","error":{"type":"api_error","message":"x"}}'),
        ("anthropic", b'{"type":"message","content":"text"}'),
    ],
)
def test_decode_response_rejects_wrong_shapes(api: str, body: bytes) -> None:
    with pytest.raises(ProtocolError):
        create_api_adapter(api).decode_response(body)


# --- request building ---------------------------------------------------------------
def test_openai_chat_request() -> None:
    req = chat_request(system="Be brief.", stop=["\n\n"], ignore_eos=True, temperature=0.5)
    http = create_api_adapter("openai-chat").build_request(req, api_key=SECRET, request_id="r-1")
    assert (http.method, http.path) == ("POST", "/v1/chat/completions")
    assert http.headers == {
        **streaming_headers("r-1"),
        "authorization": f"Bearer {SECRET}",
    }
    assert body_of(http) == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
        "max_tokens": 16,
        "temperature": 0.5,
        "stop": ["\n\n"],
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
    }


def test_openai_chat_uses_messages_when_given_and_omits_optional_fields() -> None:
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    req = chat_request(prompt=None, messages=messages)
    http = create_api_adapter("openai-chat").build_request(req, api_key=None, request_id="r")
    body = body_of(http)
    assert body["messages"] == messages
    assert "stop" not in body and "ignore_eos" not in body
    assert "authorization" not in {k.lower() for k in http.headers}


def test_non_streaming_request_has_no_stream_options() -> None:
    for api in ("openai-chat", "openai-completions"):
        http = create_api_adapter(api).build_request(
            chat_request(), api_key=None, request_id="r", stream=False
        )
        body = body_of(http)
        assert body["stream"] is False and "stream_options" not in body
        assert http.headers["accept"] == "application/json"


def test_completions_request_text_and_token_ids() -> None:
    adapter = create_api_adapter("openai-completions")
    http = adapter.build_request(chat_request(), api_key=SECRET, request_id="r-2")
    assert http.path == "/v1/completions"
    assert body_of(http)["prompt"] == "Hi"
    assert http.headers["authorization"] == f"Bearer {SECRET}"
    ids = adapter.build_request(
        chat_request(prompt="ignored", prompt_token_ids=[1, 2, 3]), api_key=None, request_id="r"
    )
    assert body_of(ids)["prompt"] == [1, 2, 3]
    assert body_of(ids)["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(
    ("api", "overrides", "field"),
    [
        ("openai-completions", {"messages": [{"role": "user", "content": "x"}]}, "messages"),
        ("openai-completions", {"system": "s"}, "system"),
        ("openai-chat", {"prompt": None, "prompt_token_ids": [1]}, "prompt"),
        ("anthropic", {"prompt": None, "prompt_token_ids": [1]}, "prompt"),
    ],
)
def test_requests_an_api_cannot_carry_are_rejected(
    api: str, overrides: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=f"^{field}:"):
        create_api_adapter(api).build_request(chat_request(**overrides), api_key=None,
                                              request_id="r")


def test_anthropic_request() -> None:
    req = chat_request(system="Be brief.", stop=["END"], ignore_eos=True)
    http = create_api_adapter("anthropic").build_request(req, api_key=SECRET, request_id="r-3")
    assert (http.method, http.path) == ("POST", "/v1/messages")
    assert http.headers == {
        **streaming_headers("r-3"),
        "anthropic-version": "2023-06-01",
        "x-api-key": SECRET,
    }
    assert body_of(http) == {
        "model": "m",
        "max_tokens": 16,
        "messages": [{"role": "user", "content": "Hi"}],
        "system": "Be brief.",
        "temperature": 0.0,
        "stop_sequences": ["END"],
        "stream": True,
    }  # no ignore_eos: Anthropic has none


def test_anthropic_lifts_system_messages_and_omits_key_header_without_key() -> None:
    messages = [{"role": "system", "content": "Rules."}, {"role": "user", "content": "q"}]
    req = chat_request(prompt=None, messages=messages)
    http = create_api_adapter("anthropic").build_request(req, api_key=None, request_id="r")
    body = body_of(http)
    assert body["system"] == "Rules."
    assert body["messages"] == [{"role": "user", "content": "q"}]
    assert "x-api-key" not in http.headers
    assert messages[0] == {"role": "system", "content": "Rules."}  # caller's list untouched


@pytest.mark.parametrize("api", API_NAMES)
def test_extra_body_is_merged_last(api: str) -> None:
    extra = {"top_p": 0.9, "max_tokens": 99, "stream_options": {"continuous_usage_stats": True}}
    http = create_api_adapter(api).build_request(
        chat_request(extra_body=extra), api_key=None, request_id="r"
    )
    body = body_of(http)
    assert body["top_p"] == 0.9 and body["max_tokens"] == 99
    assert body["stream_options"] == {"continuous_usage_stats": True}


def test_unicode_prompt_is_sent_as_utf8() -> None:
    http = create_api_adapter("openai-chat").build_request(
        chat_request(prompt="café 🙂"), api_key=None, request_id="r"
    )
    assert "café 🙂".encode() in http.body


@pytest.mark.parametrize("api", API_NAMES)
def test_api_key_never_appears_in_repr(api: str) -> None:
    http = create_api_adapter(api).build_request(chat_request(), api_key=SECRET, request_id="r")
    assert SECRET in json.dumps(http.headers)  # it is really sent...
    for text in (repr(http), str(http), f"{http}", repr([http])):
        assert SECRET not in text  # ...but never shown
        assert "<redacted>" in text
    assert "x-request-id" in repr(http)


def test_generation_request_validation_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"^max_tokens:"):
        chat_request(max_tokens=0)
    with pytest.raises(ValueError, match=r"^model:"):
        chat_request(model="")
    with pytest.raises(ValueError, match=r"^temperature:"):
        chat_request(temperature=-1.0)
    with pytest.raises(ValueError, match=r"^prompt:"):
        GenerationRequest(model="m", max_tokens=1)


# --- registry and keys --------------------------------------------------------------
def test_registry_names_and_unknown_name() -> None:
    assert API_NAMES == ("openai-chat", "openai-completions", "anthropic", "openai-responses")
    for name in API_NAMES:
        assert create_api_adapter(name).name == name
    with pytest.raises(ValueError, match="openai-chat, openai-completions, anthropic, openai-r"):
        create_api_adapter("openai")


@pytest.mark.parametrize(
    ("api", "environ", "expected"),
    [
        ("openai-chat", {"ZEROHOP_API_KEY": "z", "OPENAI_API_KEY": "o"}, "z"),
        ("openai-completions", {"OPENAI_API_KEY": "o", "ANTHROPIC_API_KEY": "a"}, "o"),
        ("anthropic", {"OPENAI_API_KEY": "o", "ANTHROPIC_API_KEY": "a"}, "a"),
        ("anthropic", {"ZEROHOP_API_KEY": "z", "ANTHROPIC_API_KEY": "a"}, "z"),
        ("anthropic", {"OPENAI_API_KEY": "o"}, None),
        ("openai-chat", {"ZEROHOP_API_KEY": "", "OPENAI_API_KEY": "o"}, "o"),
        ("openai-chat", {}, None),
    ],
)
def test_api_key_from_env_precedence(
    api: str, environ: dict[str, str], expected: str | None
) -> None:
    assert api_key_from_env(api, environ) == expected


def test_api_key_from_env_rejects_unknown_api() -> None:
    with pytest.raises(ValueError, match="valid"):
        api_key_from_env("nope", {})
