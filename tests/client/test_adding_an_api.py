"""The walkthrough of docs/architecture.md's "Adding an API", followed with a toy API.

`toy-lines` takes chat's request on its own path and streams one small JSON object per
SSE event (`{"t": " word"}`, then `{"usage": {"in": N, "out": M}}`, then an `end`
event). It is three files written outside src/: its adapter (with its registry entry,
registered when the module is imported: a plugin), its embedded shape and its golden
stream. Loaded, the client decodes and measures its golden stream; and (integration)
`zerohop run --plugin toy_lines_adapter --api toy-lines` measures it on the embedded
target in its own process, the toy's key variable masked in everything the run wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from zerohop.client.api_adapters import create_api_adapter
from zerohop.client.http_stream import END_COMPLETE, RawExchange
from zerohop.client.measure import build_record
from zerohop.client.protocols import ContentDelta, Terminator, Usage
from zerohop.core import apis, plugins, redaction
from zerohop.core.records import ClockAnchor, RequestRecord

from .test_protocols import STREAMS_DIR, decode_stream
from .test_stream_contract import sse_blocks

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"

ADAPTER = '''\
"""The toy-lines API's client adapter and its registry entry."""
from pathlib import Path

from zerohop.client.protocols import (
    ContentDelta, DecodedResponse, HttpRequest, ProtocolError, Terminator, Usage)
from zerohop.client.wire_format import (
    base_headers, chat_messages, decode_error_body, encode_json, error_from, parse_object)
from zerohop.core.apis import ApiEntry, ApiSpec, register_api

ENTRY = ApiEntry(
    ApiSpec("toy-lines", chat_messages=True, takes_token_ids=False, tools=False,
            structured_output=False, key_env="TOYLINES_KEY"),
    adapter="toy_lines_adapter:ToyLinesAdapter",
    embedded_path="/v1/toy/lines",
    embedded_form="toy-lines",  # the body form its shape module registers in the sim
    embedded_shape="toy_lines_shape:toy_lines_shape",
    golden_stream=str(Path(__file__).with_name("toy_lines")),
)


def usage(obj):
    return Usage(obj.get("in"), obj.get("out"))


class ToyLinesAdapter:
    name = "toy-lines"

    def build_request(self, req, *, api_key, request_id, stream=True):
        body = {"model": req.model, "messages": chat_messages(req),
                "limit": req.max_tokens, "stream": stream}
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


register_api(ENTRY)  # what `--plugin toy_lines_adapter` runs in every process
'''

SHAPE = '''\
"""The toy-lines API's stream as the embedded sim sends it, and its request body as the
sim reads it: chat's messages, the budget in `limit`, the usage always sent."""
import json

from zerohop.sim.answers.answer_plan import PLAIN_ANSWER
from zerohop.sim.answers.body_forms import BodyForm, register_body_form
from zerohop.sim.answers.tokenize import chat_prompt_ids
from zerohop.sim.answers.tokens import count_chat_tokens


def messages(body):
    found = body.get("messages")
    if not isinstance(found, list) or not found:
        raise ValueError("`messages` must be a non-empty list")
    return found


register_body_form(BodyForm(
    "toy-lines", prompt_tokens=lambda body: count_chat_tokens(messages(body)),
    prompt_ids=lambda body: chat_prompt_ids(messages(body)), max_tokens_keys=("limit",),
    max_tokens_required="`limit` is required", usage_always=True))


class ToyLinesShape:
    api = "toy-lines"  # the body form the sim reads it in (its error bodies: OpenAI's)
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
    """The toy written and loaded as a plugin (its import registers it); the registry as
    it was afterwards."""
    written = write_toy_api(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    entries, specs = dict(apis._ENTRIES), dict(apis._SPECS)
    try:
        assert plugins.load_plugins(["toy_lines_adapter"]) == ["toy_lines_adapter"]
        yield written
    finally:
        for table, saved in ((apis._ENTRIES, entries), (apis._SPECS, specs)):
            table.clear()
            table.update(saved)
        for name in ("toy_lines_adapter", "toy_lines_shape"):
            sys.modules.pop(name, None)
        plugins._LOADED.discard("toy_lines_adapter")


@pytest.mark.unit
def test_the_toy_api_is_three_files_none_under_src(toy_api: list[Path]) -> None:
    assert len(toy_api) <= 3
    assert not any(path.resolve().is_relative_to(SRC) for path in toy_api)
    assert "toy-lines" in apis.api_names()
    assert apis.api_spec("toy-lines").key_env == "TOYLINES_KEY"


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


@pytest.mark.unit
def test_the_sim_reads_the_toys_own_body_form_with_no_edit_under_sim(
        toy_api: list[Path]) -> None:
    from zerohop.sim.answers import body_forms
    from zerohop.sim.answers.api_routes import api_routes
    from zerohop.sim.answers.api_shapes import error_body
    from zerohop.sim.answers.request_fields import RequestError, read_generation_fields
    from zerohop.sim.answers.tokens import count_chat_tokens

    try:
        route = api_routes()["/v1/toy/lines"]  # resolving the shape registers its form
        assert route.form == "toy-lines" in body_forms.body_form_names()
        messages = [{"role": "user", "content": "Say hello to the toy"}]
        fields = read_generation_fields("toy-lines", {"messages": messages, "limit": 7,
                                                      "stream": True}, 4096)
        assert fields == (count_chat_tokens(messages), 7, True, True, False, 0)
        with pytest.raises(RequestError, match="`limit` is required"):
            read_generation_fields("toy-lines", {"messages": messages}, 4096)
        assert error_body("toy-lines", 400, "no") == error_body("chat", 400, "no")
    finally:
        body_forms._FORMS.pop("toy-lines", None)


SECRET = "toylines-c0ffee-9d1b7a"  # shaped like no known key: only the registry says it is one
# not part of the walkthrough: a second plugin that logs the key in the Locust process
# once the load starts, so the run's log holds it unless the registry's variable is masked
KEY_ECHO = """\
import logging
import os
import sys

if "locust" in sys.modules:
    from locust import events

    @events.test_start.add_listener
    def echo_the_key(**_):
        logging.getLogger("toy").warning("toy key echo: %s", os.environ["TOYLINES_KEY"])
"""


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One `zerohop run --plugin toy_lines_adapter --api toy-lines`, started cold, against
    the embedded target in its own process, which requires the key the toy's `key_env`
    holds (and with the key-echoing plugin): (its results folder, its stdout and stderr)."""
    folder = tmp_path_factory.mktemp("toy_api")
    write_toy_api(folder)
    (folder / "toy_key_echo.py").write_text(KEY_ECHO, encoding="utf-8")
    results = folder / "results"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(REPO)]),
           "PYTHONUNBUFFERED": "1", "TOYLINES_KEY": SECRET}
    res = subprocess.run(
        [sys.executable, "-m", "zerohop", "run", "--plugin", "toy_lines_adapter",
         "--plugin=toy_key_echo", "--api", "toy-lines", "--only", "ShortQueryFlood",
         "--requests", "6", "--telemetry", "none", "--microbench", "off",
         "--results-dir", str(results), "--sim-args", f"--api-key {SECRET}"],
        capture_output=True, text=True, timeout=180, cwd=folder, env=env)
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-3000:])
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    return run_dir, res.stdout + res.stderr


@pytest.mark.integration  # `zerohop run` cold: Locust and the embedded target as processes
def test_zerohop_run_with_the_toy_plugin_measures_it_on_the_embedded_target(
        toy_run: tuple[Path, str]) -> None:
    import pandas as pd

    run_dir, output = toy_run
    assert "Traceback" not in output
    frame = pd.read_parquet(run_dir / "requests.parquet")
    assert len(frame) == 6
    assert set(frame["api"]) == {"toy-lines"}
    # ok only if the target got the key the toy's `key_env` names (it requires it)
    assert set(frame["outcome"]) == {"ok"}
    assert (frame["input_tokens"] > 0).all()
    # the sim read the budget where only the toy's body form puts it (`limit`): chat's
    # reading would have given each answer what the context leaves
    assert (frame["output_tokens"] <= frame["max_tokens"]).all()
    assert (frame["output_tokens"] > 0).all()
    assert frame["ttft_ms"].notna().all()
    assert json.loads((run_dir / "plan.json").read_text())["api"] == "toy-lines"


@pytest.mark.integration  # reads the folder of the module's one run (toy_run)
def test_the_plugin_apis_key_appears_nowhere_the_run_wrote(toy_run: tuple[Path, str]) -> None:
    run_dir, output = toy_run
    assert not redaction.is_secret_key("TOYLINES_KEY")  # only the registry makes it secret
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert {"manifest.json", "plan.json", "report.html", "locust.log",
            "requests.parquet"} <= {p.name for p in files}
    assert [str(p) for p in files if SECRET.encode() in p.read_bytes()] == []
    assert SECRET not in output
    # the Locust process logged the key (the second plugin), masked there
    assert "toy key echo: ***" in (run_dir / "locust.log").read_text()
