"""The real vLLM CPU engine does what zerohop's end-to-end tier relies on.

Plain urllib on purpose: these tests pin down the engine (wire formats, exact lengths,
adapters, /metrics names, batching), independent of zerohop's own client.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.vllm_cpu import VllmServer

pytestmark = [pytest.mark.vllm, pytest.mark.integration]

REQUEST_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class SseEvent:
    event: str | None
    data: str

    def json(self) -> Any:
        return json.loads(self.data)


def test_chat_stream_reports_usage_and_every_token_carries_text(
    vllm_server: VllmServer,
) -> None:
    events = stream_sse(
        vllm_server,
        "/v1/chat/completions",
        {
            "model": vllm_server.model_name,
            "messages": [{"role": "user", "content": "Say something long."}],
            "max_tokens": 24,
            "ignore_eos": True,
            "logprobs": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert events[-1].data == "[DONE]"
    chunks = [event.json() for event in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    token_chunks = [c["choices"][0] for c in chunks if c["choices"] and c["choices"][0]["logprobs"]]
    # A busy engine may pack several tokens into one chunk; logprobs list them one by one.
    assert sum(len(choice["logprobs"]["content"]) for choice in token_chunks) == 24
    for choice in token_chunks:
        # The tiny model never samples a token that decodes to nothing (build_tiny_model.py),
        # so each chunk's text is exactly its tokens' texts and never empty.
        token_texts = [entry["token"] for entry in choice["logprobs"]["content"]]
        assert all(token_texts)
        assert choice["delta"]["content"] == "".join(token_texts)
    usage_chunks = [chunk for chunk in chunks if chunk.get("usage")]
    assert len(usage_chunks) == 1 and usage_chunks[0] is chunks[-1]
    assert usage_chunks[0]["choices"] == []
    usage = usage_chunks[0]["usage"]
    assert usage["completion_tokens"] == 24
    assert usage["prompt_tokens"] > 5
    assert token_chunks[-1]["finish_reason"] == "length"


def test_completions_accept_text_and_token_id_prompts(vllm_server: VllmServer) -> None:
    token_ids = [1, 45, 74, 289, 84, 266, 270, 484, 17]
    by_ids = post_json(
        vllm_server,
        "/v1/completions",
        {"model": "tiny", "prompt": token_ids, "max_tokens": 6, "ignore_eos": True},
    )
    assert by_ids["usage"]["prompt_tokens"] == len(token_ids)
    assert by_ids["usage"]["completion_tokens"] == 6
    assert by_ids["choices"][0]["text"]

    by_text = post_json(
        vllm_server,
        "/v1/completions",
        {"model": "tiny", "prompt": "The model runs fast.", "max_tokens": 6, "ignore_eos": True},
    )
    # BOS is prepended to text prompts, so a text prompt is never zero tokens.
    assert by_text["usage"]["prompt_tokens"] >= 2
    assert by_text["usage"]["completion_tokens"] == 6


def test_completions_stream_with_usage_ends_with_done(vllm_server: VllmServer) -> None:
    events = stream_sse(
        vllm_server,
        "/v1/completions",
        {
            "model": "tiny",
            "prompt": "Once upon a time",
            "max_tokens": 10,
            "ignore_eos": True,
            "logprobs": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    assert events[-1].data == "[DONE]"
    chunks = [event.json() for event in events[:-1]]
    choices = [chunk["choices"][0] for chunk in chunks if chunk["choices"]]
    assert sum(len(choice["logprobs"]["tokens"]) for choice in choices) == 10
    assert all(choice["text"] for choice in choices)
    assert chunks[-1]["usage"]["completion_tokens"] == 10


def test_anthropic_messages_stream_matches_the_same_chat_request(vllm_server: VllmServer) -> None:
    messages = [{"role": "user", "content": "hello"}]
    events = stream_sse(
        vllm_server,
        "/v1/messages",
        {
            "model": "tiny",
            "max_tokens": 12,
            "messages": messages,
            "stream": True,
            "ignore_eos": True,
            "temperature": 0,
        },
    )
    names = [event.event for event in events]
    assert names[:2] == ["message_start", "content_block_start"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(names[2:-3]) <= {"content_block_delta", "ping"}
    for event in events:
        assert event.json()["type"] == event.event  # event name and payload agree
    deltas = [event.json()["delta"] for event in events if event.event == "content_block_delta"]
    assert 1 <= len(deltas) <= 12
    assert all(delta["type"] == "text_delta" and delta["text"] for delta in deltas)
    message_delta = events[-2].json()
    assert message_delta["delta"]["stop_reason"] == "max_tokens"
    assert message_delta["usage"]["output_tokens"] == 12
    assert events[0].json()["message"]["usage"]["input_tokens"] > 0

    chat = post_json(
        vllm_server,
        "/v1/chat/completions",
        {
            "model": "tiny",
            "messages": messages,
            "max_tokens": 12,
            "ignore_eos": True,
            "temperature": 0,
        },
    )
    assert "".join(delta["text"] for delta in deltas) == chat["choices"][0]["message"]["content"]
    assert chat["usage"]["prompt_tokens"] == events[0].json()["message"]["usage"]["input_tokens"]


@pytest.mark.parametrize("max_tokens", [1, 7, 57])
def test_ignore_eos_gives_exactly_max_tokens(vllm_server: VllmServer, max_tokens: int) -> None:
    body = post_json(
        vllm_server,
        "/v1/chat/completions",
        {
            "model": "tiny",
            "messages": [{"role": "user", "content": "count"}],
            "max_tokens": max_tokens,
            "ignore_eos": True,
        },
    )
    assert body["usage"]["completion_tokens"] == max_tokens
    assert body["choices"][0]["finish_reason"] == "length"


def test_lora_adapters_are_listed_and_change_the_output(vllm_server: VllmServer) -> None:
    models = get_json(vllm_server, "/v1/models")
    served = {entry["id"]: entry.get("parent") for entry in models["data"]}
    assert served["tiny"] is None
    for name in vllm_server.adapter_names:
        assert served[name] == "tiny"
    assert vllm_server.adapter_names == ["a0", "a1", "a2", "a3"]

    def greedy(model: str) -> str:
        body = post_json(
            vllm_server,
            "/v1/completions",
            {
                "model": model,
                "prompt": "The gateway adds latency",
                "max_tokens": 16,
                "ignore_eos": True,
                "temperature": 0,
            },
        )
        assert body["model"] == model
        assert body["usage"]["completion_tokens"] == 16
        return str(body["choices"][0]["text"])

    base, with_a0, with_a1 = greedy("tiny"), greedy("a0"), greedy("a1")
    assert greedy("tiny") == base  # greedy decoding is repeatable...
    assert len({base, with_a0, with_a1}) == 3  # ...and each adapter really changes it


def test_unknown_model_is_rejected_with_404(vllm_server: VllmServer) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        post_json(
            vllm_server,
            "/v1/chat/completions",
            {"model": "no-such-adapter", "messages": [{"role": "user", "content": "x"}]},
        )
    assert caught.value.code == 404


def test_concurrent_streams_are_batched_and_visible_in_metrics(vllm_server: VllmServer) -> None:
    """What zerohop's /metrics sampler watches moves while a load is running."""
    before = scrape_metrics(vllm_server)
    ttft_count_before = before[("vllm:time_to_first_token_seconds_count", ())]
    streams = 8
    errors: list[BaseException] = []

    def one_stream(index: int) -> None:
        try:
            events = stream_sse(
                vllm_server,
                "/v1/chat/completions",
                {
                    "model": "a0" if index % 2 else "tiny",
                    "messages": [{"role": "user", "content": f"stream {index}"}],
                    # long enough that the gauges, published per engine step, see it
                    "max_tokens": 1000,
                    "ignore_eos": True,
                    "stream": True,
                },
            )
            assert events[-1].data == "[DONE]"
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one_stream, args=(i,)) for i in range(streams)]
    for thread in threads:
        thread.start()
    max_running = 0.0
    max_kv_usage = 0.0
    running_adapter_sets: set[str] = set()
    while any(thread.is_alive() for thread in threads):
        sample = scrape_metrics(vllm_server)
        max_running = max(max_running, sample[("vllm:num_requests_running", ())])
        max_kv_usage = max(max_kv_usage, sample[("vllm:kv_cache_usage_perc", ())])
        info = lora_info_if_any(vllm_server)
        if info is not None:
            running_adapter_sets.add(info["running_lora_adapters"])
        time.sleep(0.05)
    for thread in threads:
        thread.join()
    assert not errors, errors

    assert max_running >= 2, "requests were not batched together"
    assert max_kv_usage > 0
    assert "a0" in running_adapter_sets
    after = scrape_metrics(vllm_server)
    assert after[("vllm:time_to_first_token_seconds_count", ())] >= ttft_count_before + streams
    # The gauges are published per engine step: give the idle engine a moment to report.
    deadline = time.monotonic() + 5.0
    while after[("vllm:num_requests_running", ())] and time.monotonic() < deadline:
        time.sleep(0.1)
        after = scrape_metrics(vllm_server)
    assert after[("vllm:num_requests_running", ())] == 0
    assert after[("vllm:num_requests_waiting", ())] == 0


def test_metrics_expose_the_series_zerohop_samples(vllm_server: VllmServer) -> None:
    text = get_text(vllm_server, "/metrics")
    for name in (
        "vllm:num_requests_waiting",
        "vllm:num_requests_running",
        "vllm:kv_cache_usage_perc",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:time_to_first_token_seconds_sum",
        "vllm:lora_requests_info",
    ):
        assert any(line.startswith(name + "{") for line in text.splitlines()), name
    info = latest_lora_info(vllm_server)
    assert info["max_lora"] == "2"


# --- helpers: plain HTTP, SSE framing and Prometheus text --------------------------------


def post_json(server: VllmServer, path: str, body: dict[str, Any]) -> Any:
    with urllib.request.urlopen(_json_request(server, path, body), timeout=REQUEST_TIMEOUT_S) as r:
        return json.load(r)


def get_json(server: VllmServer, path: str) -> Any:
    return json.loads(get_text(server, path))


def get_text(server: VllmServer, path: str) -> str:
    with urllib.request.urlopen(server.url + path, timeout=REQUEST_TIMEOUT_S) as response:
        return str(response.read().decode())


def stream_sse(server: VllmServer, path: str, body: dict[str, Any]) -> list[SseEvent]:
    """All SSE events of one streamed response (blank-line framed, `event:`/`data:`)."""
    events: list[SseEvent] = []
    event_name: str | None = None
    data_lines: list[str] = []
    request = _json_request(server, path, body)
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
        assert response.status == 200
        assert response.headers.get_content_type() == "text/event-stream"
        for raw_line in response:
            line = raw_line.decode().rstrip("\r\n")
            if not line:
                if data_lines:
                    events.append(SseEvent(event=event_name, data="\n".join(data_lines)))
                event_name, data_lines = None, []
            elif line.startswith("event:"):
                event_name = line.removeprefix("event:").strip()
            elif line.startswith("data:"):
                data_lines.append(line.removeprefix("data:").strip())
    if data_lines:
        events.append(SseEvent(event=event_name, data="\n".join(data_lines)))
    return events


def scrape_metrics(server: VllmServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Samples keyed by (name, labels without the constant engine/model_name labels)."""
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(get_text(server, "/metrics")):
        for sample in family.samples:
            labels = tuple(
                sorted(
                    (key, value)
                    for key, value in sample.labels.items()
                    if key not in {"engine", "model_name"}
                )
            )
            samples[(sample.name, labels)] = sample.value
    return samples


def latest_lora_info(server: VllmServer) -> dict[str, str]:
    info = lora_info_if_any(server)
    assert info is not None, "no vllm:lora_requests_info series"
    return info


def lora_info_if_any(server: VllmServer) -> dict[str, str] | None:
    """vllm:lora_requests_info keeps one series per state seen; its value is a timestamp
    (none exists before the first LoRA request was scheduled)."""
    latest: tuple[float, dict[str, str]] | None = None
    for family in text_string_to_metric_families(get_text(server, "/metrics")):
        if family.name != "vllm:lora_requests_info":
            continue
        for sample in family.samples:
            if latest is None or sample.value > latest[0]:
                latest = (sample.value, dict(sample.labels))
    return None if latest is None else latest[1]


def _json_request(server: VllmServer, path: str, body: dict[str, Any]) -> urllib.request.Request:
    return urllib.request.Request(
        server.url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
