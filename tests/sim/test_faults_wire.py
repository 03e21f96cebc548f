"""Each injected fault reaches the client exactly as documented (zerohop.sim.faults)."""

from __future__ import annotations

import json
import time

import pytest

from zerohop.sim.launcher import SimProcess

from .conftest import MODEL
from .wire import RawResponse, request

pytestmark = pytest.mark.integration


def chat(
    sim: SimProcess,
    fault: str | None,
    *,
    stream: bool = True,
    max_tokens: int = 8,
    api: str = "chat",
    timeout: float = 15.0,
) -> RawResponse:
    headers = {"x-zerohop-fault": fault} if fault else {}
    body: dict[str, object] = {
        "model": MODEL,
        "max_tokens": max_tokens,
        "stream": stream,
        "ignore_eos": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    if api == "messages":
        return request(sim.url, "/v1/messages", body, headers=headers, timeout=timeout)
    body["stream_options"] = {"include_usage": True}
    return request(sim.url, "/v1/chat/completions", body, headers=headers, timeout=timeout)


def content_events(r: RawResponse) -> int:
    n = 0
    for line in r.data_lines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if (
            isinstance(event, dict)
            and event.get("choices")
            and event["choices"][0].get("delta", {}).get("content")
        ):
            n += 1
    return n


def test_no_fault_baseline(sim: SimProcess) -> None:
    r = chat(sim, None)
    assert r.status == 200 and r.complete
    assert r.data_lines()[-1] == "[DONE]" and content_events(r) == 8


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_stall_mid(sim: SimProcess) -> None:
    r = chat(sim, "stall_mid;after=3;s=0.4")
    assert r.complete and r.data_lines()[-1] == "[DONE]"
    gaps = [b[0] - a[0] for a, b in zip(r.reads, r.reads[1:], strict=False)]
    assert max(gaps) >= 0.39
    assert content_events(r) == 8


def test_stall_before_first(sim: SimProcess) -> None:
    r = chat(sim, "stall_before_first;s=0.4")
    assert r.headers_at is not None and r.headers_at - r.sent_at < 0.2  # headers at once
    first_data = next(t for t, data in r.reads if b'"content":" ' in data)
    assert first_data - r.sent_at >= 0.4 and r.complete


def test_slow_headers(sim: SimProcess) -> None:
    r = chat(sim, "slow_headers;s=0.4")
    assert r.headers_at is not None and r.headers_at - r.sent_at >= 0.39
    assert r.complete and content_events(r) == 8


def test_drop_mid_closes_without_terminator(sim: SimProcess) -> None:
    r = chat(sim, "drop_mid;after=3", max_tokens=20)
    assert r.status == 200 and r.eof and not r.complete and not r.reset
    assert content_events(r) == 3 and "[DONE]" not in r.data_lines()


def test_reset_sends_rst(sim: SimProcess) -> None:
    r = chat(sim, "reset;after=2", max_tokens=20)
    assert r.reset and not r.complete
    before_headers = chat(sim, "reset;after=0")
    assert before_headers.status == 0 and (before_headers.reset or before_headers.eof)


def test_malformed_sse_line(sim: SimProcess) -> None:
    r = chat(sim, "malformed_sse;after=2")
    assert r.complete
    text = r.body.decode()
    assert "zerohop-malformed-line-without-field-separator\n\n" in text
    assert r.data_lines()[-1] == "[DONE]"


def test_invalid_json(sim: SimProcess) -> None:
    r = chat(sim, "invalid_json;after=2")
    bad = []
    for line in r.data_lines():
        if line == "[DONE]":
            continue
        try:
            json.loads(line)
        except ValueError:
            bad.append(line)
    assert len(bad) == 1 and r.complete


def test_missing_terminator(sim: SimProcess) -> None:
    r = chat(sim, "missing_terminator")
    assert r.complete  # the HTTP body ends cleanly; the SSE stream does not
    assert content_events(r) == 8 and "[DONE]" not in r.data_lines()
    m = chat(sim, "missing_terminator", api="messages")
    names = [name for name, _ in m.events()]
    assert "message_delta" in names and "message_stop" not in names


def test_oversized_chunk(sim: SimProcess) -> None:
    r = chat(sim, "oversized_chunk;after=2;bytes=2097152")
    big = [line for line in r.data_lines() if len(line) > 2_000_000]
    assert len(big) == 1
    assert json.loads(big[0])["choices"][0]["delta"]["content"].count("x") >= 2_097_150
    assert r.complete and content_events(r) == 8


def test_stream_error_openai_and_anthropic(sim: SimProcess) -> None:
    r = chat(sim, "stream_error;after=2;type=out_of_memory")
    errors = [json.loads(line) for line in r.data_lines() if '"error"' in line]
    assert errors[0]["error"]["type"] == "out_of_memory"
    assert r.data_lines()[-1] == "[DONE]" and content_events(r) == 2
    m = chat(sim, "stream_error;after=1;type=overloaded_error", api="messages")
    name, data = m.events()[-1]
    assert name == "error" and json.loads(data)["error"]["type"] == "overloaded_error"


@pytest.mark.parametrize("api", ["chat", "messages"])
def test_http_429_with_retry_after(sim: SimProcess, api: str) -> None:
    r = chat(sim, "http_429;retry_after=3", api=api)
    assert r.status == 429 and r.headers["retry-after"] == "3"
    body = r.json()
    kind = body["error"]["type"]
    assert kind == ("rate_limit_error" if api == "messages" else "RateLimitError")


def test_http_500_503_and_nobody(sim: SimProcess) -> None:
    assert chat(sim, "http_500").status == 500
    r = chat(sim, "http_503")
    assert r.status == 503 and r.json()["error"]["code"] == 503
    nobody = chat(sim, "http_502_nobody")
    assert nobody.status == 502 and nobody.headers["content-type"] == "text/html"
    with pytest.raises(ValueError):
        nobody.json()


def test_bad_fault_header_is_a_400(sim: SimProcess) -> None:
    r = chat(sim, "explode")
    assert r.status == 400 and "unknown fault" in r.json()["error"]["message"]


def test_faults_in_non_streaming_requests(sim: SimProcess) -> None:
    t0 = time.perf_counter()
    stalled = chat(sim, "stall_mid;after=2;s=0.3", stream=False)
    assert stalled.status == 200 and time.perf_counter() - t0 >= 0.3
    dropped = chat(sim, "drop_mid", stream=False)
    assert not dropped.complete
    broken = chat(sim, "invalid_json", stream=False)
    with pytest.raises(ValueError):
        broken.json()


def test_ground_truth_records_the_fault(sim: SimProcess) -> None:
    r = chat(sim, "drop_mid;after=2", max_tokens=10)
    rid = r.headers["x-request-id"]
    time.sleep(0.05)
    record = request(sim.url, f"/zerohop/ground_truth?request_id={rid}").json()
    assert record["outcome"] == "incomplete_stream"
    assert record["fault"].startswith("drop_mid") and record["completion_tokens"] == 2


def test_client_disconnect_is_recorded_as_cancelled(sim: SimProcess) -> None:
    import socket

    body = json.dumps(
        {"model": MODEL, "prompt": "x", "max_tokens": 500, "stream": True, "ignore_eos": True}
    ).encode()
    host, port = sim.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(
            b"POST /v1/completions HTTP/1.1\r\nhost: x\r\nx-request-id: gone-1\r\n"
            b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
        )
        sock.recv(4096)
        time.sleep(0.05)
    for _ in range(50):
        got = request(sim.url, "/zerohop/ground_truth?request_id=gone-1")
        if got.status == 200:
            break
        time.sleep(0.02)
    record = got.json()
    assert record["outcome"] == "cancelled" and 0 < record["completion_tokens"] < 500
    stats = request(sim.url, "/zerohop/stats").json()["engines"][0]
    assert stats["running"] == 0  # the engine freed the sequence


def test_stream_error_before_the_first_token(sim: SimProcess) -> None:
    r = chat(sim, "stream_error;after=0;type=internal_error")
    assert r.status == 200 and r.complete and content_events(r) == 0
    assert json.loads(r.data_lines()[0])["error"]["type"] == "internal_error"
    dropped = chat(sim, "drop_mid;after=0")
    assert dropped.status == 200 and dropped.body == b"" and not dropped.complete
