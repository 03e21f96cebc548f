"""The walkthrough of docs/architecture.md's "Adding an API", followed with a toy API.

`toy-lines` takes chat's request on its own path and streams one small JSON object per
SSE event (`{"t": " word"}`, then `{"usage": {"in": N, "out": M}}`, then an `end`
event). It is three files written outside src/: its adapter (with its registry entry),
its embedded shape and its golden stream. Registered, the client decodes and measures
its golden stream, and (integration) the embedded sim serves it to zerohop's client.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.http_stream import END_COMPLETE, RawExchange, Timeouts
from zerohop.client.llm_client import LLMClient, RequestSpec
from zerohop.client.measure import build_record
from zerohop.client.protocols import ContentDelta, GenerationRequest, Terminator, Usage
from zerohop.core import apis
from zerohop.core.records import ClockAnchor, RequestRecord

from .test_protocols import STREAMS_DIR, decode_stream
from .test_stream_contract import sse_blocks

SRC = Path(__file__).resolve().parents[2] / "src"

ADAPTER = '''\
"""The toy-lines API's client adapter and its registry entry."""
from pathlib import Path

from zerohop.client.protocols import (
    ContentDelta, DecodedResponse, HttpRequest, ProtocolError, Terminator, Usage)
from zerohop.client.wire_format import (
    base_headers, chat_messages, decode_error_body, encode_json, error_from, parse_object)
from zerohop.core.apis import ApiEntry, ApiSpec

ENTRY = ApiEntry(
    ApiSpec("toy-lines", chat_messages=True, takes_token_ids=False, tools=False,
            structured_output=False, key_env="TOY_API_KEY"),
    adapter="toy_lines_adapter:ToyLinesAdapter",
    embedded_path="/v1/toy/lines",
    embedded_form="chat",
    embedded_shape="toy_lines_shape:toy_lines_shape",
    golden_stream=str(Path(__file__).with_name("toy_lines")),
)


def usage(obj):
    return Usage(obj.get("in"), obj.get("out"))


class ToyLinesAdapter:
    name = "toy-lines"

    def build_request(self, req, *, api_key, request_id, stream=True):
        body = {"model": req.model, "messages": chat_messages(req),
                "max_tokens": req.max_tokens, "stream": stream,
                "stream_options": {"include_usage": True}}
        if req.ignore_eos:
            body["ignore_eos"] = True
        headers = base_headers(request_id, stream)
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        return HttpRequest("POST", ENTRY.embedded_path, headers, encode_json(body))

    def new_stream_decoder(self, *, tool_call_parts=False):
        return self  # nothing to merge across the events of one stream

    def decode_event(self, event):
        if event.event == "end":
            return [Terminator()]
        obj = parse_object(event.data)
        if "error" in obj:
            return [error_from(obj["error"])]
        if "usage" in obj:
            return [usage(obj["usage"])]
        if "t" in obj:
            return [ContentDelta(obj["t"])]
        raise ProtocolError("toy-lines: an event with neither 't' nor 'usage'")

    def decode_error_body(self, status, body):
        return decode_error_body(status, body)

    def decode_response(self, body):
        obj = parse_object(body)
        return DecodedResponse(obj["text"], usage(obj["usage"]))
'''

SHAPE = '''\
"""The toy-lines API's stream as the embedded sim sends it."""
import json

from zerohop.sim.answer_plan import PLAIN_ANSWER


class ToyLinesShape:
    api = "chat"  # the body form the sim reads it in: its error bodies are chat's
    content_type = b"text/event-stream; charset=utf-8"
    answer = PLAIN_ANSWER

    def __init__(self, include_usage):
        self.include_usage = include_usage

    def head_events(self):
        return b""

    def first_events(self):
        return b""

    def token_frame(self):
        return b'data: {"t":"', b'"}\\n\\n'

    def token_event(self, index, piece):
        return b'data: {"t":"' + piece + b'"}\\n\\n'

    def last_token_event(self, index, piece, finish_reason):
        return b'data: {"t":"' + piece + b'","end":"' + finish_reason.encode() + b'"}\\n\\n'

    def tail_events(self, prompt, completion, reason, terminator, cached=None):
        out = b""
        if self.include_usage:
            out += b'data: {"usage":{"in":%d,"out":%d}}\\n\\n' % (prompt, completion)
        if terminator:
            out += b"event: end\\ndata: {}\\n\\n"
        return out

    def error_event(self, error_type, message):
        error = {"error": {"type": error_type, "message": message}}
        return b"data: " + json.dumps(error).encode() + b"\\n\\n"

    def invalid_json_event(self):
        return b'data: {"t":" bro\\n\\n'

    def final_body(self, text, prompt, completion, reason, cached=None):
        return json.dumps({"text": text, "usage": {"in": prompt, "out": completion}}).encode()


def toy_lines_shape(answer, *, request_id, model, include_usage, prompt_tokens,
                    cached_tokens, word_offset=0, max_tokens=0):
    return ToyLinesShape(include_usage)
'''

GOLDEN = (b'data: {"t":"Hello"}\n\n'
          b'data: {"t":" toy"}\n\n'
          b'data: {"t":" world","end":"stop"}\n\n'
          b'data: {"usage":{"in":12,"out":3}}\n\n'
          b"event: end\ndata: {}\n\n")
GOLDEN_ITEMS = [ContentDelta("Hello"), ContentDelta(" toy"), ContentDelta(" world"),
                Usage(12, 3), Terminator()]


def write_toy_api(folder: Path) -> list[Path]:
    """The walkthrough's files: adapter (with its entry), embedded shape, golden stream."""
    files = {"toy_lines_adapter.py": ADAPTER, "toy_lines_shape.py": SHAPE,
             "toy_lines.sse": GOLDEN}
    written = []
    for name, text in files.items():
        path = folder / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


@pytest.fixture
def toy_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    """The toy written, importable and registered; the registry as it was afterwards."""
    written = write_toy_api(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    entries, specs = dict(apis._ENTRIES), dict(apis._SPECS)
    module: ModuleType = importlib.import_module("toy_lines_adapter")
    apis.register_api(module.ENTRY)
    try:
        yield written
    finally:
        for table, saved in ((apis._ENTRIES, entries), (apis._SPECS, specs)):
            table.clear()
            table.update(saved)
        for name in ("toy_lines_adapter", "toy_lines_shape"):
            sys.modules.pop(name, None)


@pytest.mark.unit
def test_the_toy_api_is_three_files_none_under_src(toy_api: list[Path]) -> None:
    assert len(toy_api) <= 3
    assert not any(path.resolve().is_relative_to(SRC) for path in toy_api)
    assert "toy-lines" in apis.api_names()
    assert apis.api_spec("toy-lines").key_env == "TOY_API_KEY"


@pytest.mark.unit
def test_the_toy_adapter_decodes_and_measures_its_golden_stream(toy_api: list[Path]) -> None:
    golden = (STREAMS_DIR / apis.api_entry("toy-lines").golden_stream).with_suffix(".sse")
    assert golden.read_bytes() == GOLDEN
    assert decode_stream("toy-lines", [GOLDEN]) == GOLDEN_ITEMS
    chunks = [GOLDEN[i:i + 1] for i in range(len(GOLDEN))]
    assert decode_stream("toy-lines", chunks) == GOLDEN_ITEMS
    # one read per event, a millisecond apart: TTFT on the first word, ITL between words
    reads = [((i + 1) * 1_000_000, block) for i, block in enumerate(sse_blocks(GOLDEN))]
    exchange = RawExchange(sent_ns=0, status=200,
                           headers={"content-type": "text/event-stream"}, reads=reads,
                           end_ns=(len(reads) + 1) * 1_000_000, end=END_COMPLETE)
    record = RequestRecord(request_id="r1", workload="toy", api="toy-lines", model="m")
    build_record(record, exchange, create_api_adapter("toy-lines"), ClockAnchor(0, 0))
    assert record.outcome == "ok"
    assert record.ttft_ms == pytest.approx(1.0)
    assert record.itl_ms == pytest.approx([1.0, 1.0])
    assert (record.input_tokens, record.output_tokens) == (12, 3)


@contextlib.contextmanager
def sim_in_this_process() -> Iterator[str]:
    """The embedded sim on a loopback port, in a thread of this process (so it sees the
    toy registered here); the URL while it runs."""
    from zerohop.sim.app import serve
    from zerohop.sim.config import SimConfig

    thresholds = gc.get_threshold()  # serve() tunes the collector for its own process
    loop = asyncio.new_event_loop()
    ready: asyncio.Future[int] = loop.create_future()
    task = loop.create_task(serve(SimConfig(port=0, seed=1), ready=ready))

    def run() -> None:
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(task)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        port = asyncio.run_coroutine_threadsafe(asyncio.wait_for(
            asyncio.shield(ready), 30), loop).result(timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(task.cancel)
        thread.join(timeout=30)
        loop.close()
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.mark.integration
def test_the_sim_serves_the_toy_and_the_client_measures_it(toy_api: list[Path]) -> None:
    with sim_in_this_process() as url:
        client = LLMClient(url, create_api_adapter("toy-lines"), api_key=None,
                           timeouts=Timeouts(), anchor=ClockAnchor.now())
        try:
            generation = GenerationRequest(model="llama-3-8b", max_tokens=12,
                                           prompt="Say hello", ignore_eos=True)
            records = [client.execute(RequestSpec(workload="toy", generation=generation))
                       for _ in range(3)]
        finally:
            client.close()
    for record in records:
        assert record.api == "toy-lines" and record.outcome == "ok", record
        assert record.output_tokens == 12 and record.input_tokens
        assert record.ttft_ms is not None and record.ttft_ms > 0
        assert len(record.itl_ms) == 11 and all(gap >= 0 for gap in record.itl_ms)
