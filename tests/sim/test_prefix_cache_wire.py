"""Prefix caching seen from outside: a repeated system prompt is reported cached in
usage, is served faster, and shows on /metrics; `--no-prefix-caching` turns it off."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from zerohop.sim.launcher import SimProcess, start_sim

from .conftest import MODEL
from .test_behaviour import metric_values, truth
from .wire import RawResponse, request

pytestmark = pytest.mark.integration

SERVED = (("model_name", "meta-llama/Meta-Llama-3-8B-Instruct"),)


@pytest.fixture(scope="module")
def uncached_sim() -> Iterator[SimProcess]:
    with start_sim(["--no-prefix-caching"]) as process:
        yield process


def system_prompt() -> str:
    """About 2,000 tokens, new for every test so no test hits another's cache."""
    tag = uuid.uuid4().hex
    return " ".join(f"rule {tag} {i} applies." for i in range(500))


def chat(sim: SimProcess, system: str, question: str) -> RawResponse:
    body = {
        "model": MODEL,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
        "max_tokens": 4,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    return request(sim.url, "/v1/chat/completions", body, timeout=60)


def usage_of(response: RawResponse) -> dict:
    assert response.status == 200, response.body
    chunks = [json.loads(line) for line in response.data_lines() if line != "[DONE]"]
    usage = chunks[-1]["usage"]
    assert isinstance(usage, dict)
    return usage


@pytest.mark.alone  # timing-sensitive: CI runs it with no test beside it
def test_a_repeated_system_prompt_is_cached_and_served_faster(sim: SimProcess) -> None:
    system = system_prompt()
    first = chat(sim, system, "what is one plus one?")
    second = chat(sim, system, "and two plus two?")
    cold, warm = usage_of(first), usage_of(second)
    assert cold["prompt_tokens_details"] == {"cached_tokens": 0}
    cached = warm["prompt_tokens_details"]["cached_tokens"]
    assert cached % 16 == 0 and warm["prompt_tokens"] - 32 < cached < warm["prompt_tokens"]
    cold_ttft, warm_ttft = truth(sim, first)["server_ttft_ms"], truth(sim, second)["server_ttft_ms"]
    assert warm_ttft < 0.5 * cold_ttft


def test_anthropic_reports_cache_reads_at_message_start(sim: SimProcess) -> None:
    system = system_prompt()
    chat(sim, system, "warm the cache")
    body = {"model": MODEL, "system": system, "max_tokens": 3, "stream": True,
            "messages": [{"role": "user", "content": "now in messages"}]}
    response = request(sim.url, "/v1/messages", body, timeout=60)
    events = {name: json.loads(data) for name, data in response.events() if name}
    start = events["message_start"]["message"]["usage"]
    delta = events["message_delta"]["usage"]
    assert start["cache_read_input_tokens"] > 1900
    assert delta["cache_read_input_tokens"] == start["cache_read_input_tokens"]
    body["stream"] = False  # the same request again: its own user turn is now cached too
    reply = request(sim.url, "/v1/messages", body, timeout=60).json()
    assert reply["usage"]["cache_read_input_tokens"] > start["cache_read_input_tokens"]


def test_prefix_cache_counters_grow_on_metrics(sim: SimProcess) -> None:
    before_q = metric_values(sim, "vllm:prefix_cache_queries_total")[SERVED]
    before_h = metric_values(sim, "vllm:prefix_cache_hits_total")[SERVED]
    system = system_prompt()
    first, second = chat(sim, system, "one"), chat(sim, system, "two")
    prompt = usage_of(first)["prompt_tokens"] + usage_of(second)["prompt_tokens"]
    cached = usage_of(second)["prompt_tokens_details"]["cached_tokens"]
    queries = metric_values(sim, "vllm:prefix_cache_queries_total")[SERVED] - before_q
    hits = metric_values(sim, "vllm:prefix_cache_hits_total")[SERVED] - before_h
    assert (queries, hits) == (prompt, cached)


def test_no_prefix_caching_reports_nothing_cached(uncached_sim: SimProcess) -> None:
    system = system_prompt()
    chat(uncached_sim, system, "one")
    again = usage_of(chat(uncached_sim, system, "two"))
    assert again["prompt_tokens_details"] == {"cached_tokens": 0}
    assert metric_values(uncached_sim, "vllm:prefix_cache_hits_total")[SERVED] == 0
    body = {"model": MODEL, "system": system, "max_tokens": 2,
            "messages": [{"role": "user", "content": "three"}]}
    reply = request(uncached_sim.url, "/v1/messages", body, timeout=60).json()
    assert reply["usage"]["cache_read_input_tokens"] == 0
