"""The API registry (zerohop.core.apis): every registered API has all its parts, and
each layer reads them from its entry: the client's adapter, the sim's route and shape,
the tests' golden stream."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.protocols import ContentDelta, Terminator, Usage
from zerohop.client.sse import SSEParser
from zerohop.core.apis import API_ENTRIES, ApiEntry, api_entry, register_api
from zerohop.sim.answers.answer_plan import PLAIN_ANSWER
from zerohop.sim.answers.api_routes import api_routes
from zerohop.sim.answers.body_forms import body_form_names

from .test_protocols import STREAMS_DIR, decode_stream, item_json

pytestmark = pytest.mark.unit


def golden_stream(entry: ApiEntry) -> tuple[bytes, dict[str, object]]:
    """The entry's golden stream and what it decodes to (absolute paths are kept)."""
    stem = STREAMS_DIR / entry.golden_stream
    return (stem.with_suffix(".sse").read_bytes(),
            json.loads(stem.with_suffix(".json").read_text(encoding="utf-8")))


@pytest.mark.parametrize("name", list(API_ENTRIES))
def test_each_registered_api_decodes_its_golden_stream(name: str) -> None:
    data, spec = golden_stream(API_ENTRIES[name])
    assert spec["api"] == name
    assert [item_json(i) for i in decode_stream(name, [data])] == spec["items"]


@pytest.mark.parametrize("name", list(API_ENTRIES))
def test_each_registered_api_has_its_adapter(name: str) -> None:
    assert create_api_adapter(name).name == name


def test_the_sim_serves_each_registered_api_on_its_path() -> None:
    routes = api_routes()
    assert set(routes) == {entry.embedded_path for entry in API_ENTRIES.values()}
    for entry in API_ENTRIES.values():
        assert routes[entry.embedded_path].form == entry.embedded_form in body_form_names()


@pytest.mark.parametrize("name", list(API_ENTRIES))
def test_each_embedded_shape_streams_what_its_adapter_reads(name: str) -> None:
    """The sim's stream for a three-token answer, read by the client's adapter: the
    adapter finds the three words, the usage the sim reported and the stream's end."""
    entry = API_ENTRIES[name]
    shape = api_routes()[entry.embedded_path].make_shape(
        PLAIN_ANSWER, request_id="r1", model="m", include_usage=True, prompt_tokens=5,
        cached_tokens=None, word_offset=0, max_tokens=3)
    body = (shape.head_events() + shape.first_events() + shape.token_event(0, b" a")
            + shape.token_event(1, b" b") + shape.last_token_event(2, b" c", "stop")
            + shape.tail_events(5, 3, "stop", True))
    decoder = create_api_adapter(name).new_stream_decoder()
    items = [item for event in SSEParser().feed(body) for item in decoder.decode_event(event)]
    assert "".join(i.text for i in items if isinstance(i, ContentDelta)) == " a b c"
    usage = [i for i in items if isinstance(i, Usage)]
    assert usage and (usage[-1].input_tokens, usage[-1].output_tokens) == (5, 3)
    assert isinstance(items[-1], Terminator)


def test_a_taken_name_or_path_is_refused() -> None:
    chat = api_entry("openai-chat")
    with pytest.raises(ValueError, match="already registered"):
        register_api(chat)
    other_name = replace(chat, spec=replace(chat.spec, name="x"))
    with pytest.raises(ValueError, match="already serves 'openai-chat' on /v1/chat/completions"):
        register_api(other_name)
    assert "x" not in API_ENTRIES
