"""The real llama-server and the tiny GGUF: what zerohop reads from it, where it differs
from vLLM. The stream has a role-only first chunk with `content: null`, one content
event per token, and with `include_usage` a last chunk of usage plus llama.cpp's own
`timings` (on completions the finish chunk itself, not an empty-choices one as vLLM's);
/tokenize takes `{"content"}` and answers `{"tokens"}` (zerohop's sizing still gets the
usage's count, llamacpp_tokenize.py); an error is `{"error": {"code", "message",
"type"}}` with the HTTP status; /metrics carries the `llamacpp:` names
telemetry/canonical.py maps."""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.llamacpp_server import SERVED_MODEL_NAME, LlamaServer, build_tiny_gguf
from zerohop.loadgen.tokenize_words import request_body, tokenize
from zerohop.telemetry.canonical import SCALAR_MAP


def post(server: LlamaServer, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
    request = urllib.request.Request(server.url + path, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def sse_objects(raw: bytes) -> list[Any]:
    """Every `data:` payload of an SSE body, JSON-decoded except the `[DONE]`."""
    payloads = [line[len(b"data: "):] for line in raw.split(b"\n") if line.startswith(b"data: ")]
    assert payloads[-1] == b"[DONE]", payloads[-3:]
    return [json.loads(p) for p in payloads[:-1]]


def test_the_tiny_gguf_is_the_same_bytes_every_time(tiny_gguf: Path, tmp_path: Path) -> None:
    again = build_tiny_gguf(tmp_path / "again.gguf")
    assert hashlib.sha256(again.read_bytes()).digest() \
        == hashlib.sha256(tiny_gguf.read_bytes()).digest()


@pytest.mark.parametrize("api, path", [("openai-chat", "/v1/chat/completions"),
                                       ("openai-completions", "/v1/completions")])
def test_a_stream_is_a_token_an_event_then_usage_and_timings(
        llama_server: LlamaServer, api: str, path: str) -> None:
    body = {**request_body(api, SERVED_MODEL_NAME, "the model reads a long page"),
            "max_tokens": 24, "stream": True, "stream_options": {"include_usage": True},
            "ignore_eos": True}
    body.pop("add_generation_prompt", None)
    status, raw = post(llama_server, path, body)
    assert status == 200, raw[:500]
    chunks = sse_objects(raw)
    usage_chunks = [c for c in chunks if c.get("usage")]
    assert len(usage_chunks) == 1 and usage_chunks[0] is chunks[-1]
    # chat: usage in a chunk of its own, choices empty (as vLLM); completions: usage rides
    # on the finish chunk, whose text is empty
    finish = chunks[-2 if api == "openai-chat" else -1]["choices"][0]
    assert finish["finish_reason"] == "length"
    assert chunks[-1]["choices"] == ([] if api == "openai-chat" else [finish])
    texts = [choice.get("delta", {}).get("content") if api == "openai-chat"
             else choice.get("text") for c in chunks[:-1] for choice in c["choices"]]
    content = [t for t in texts if t]
    # every sampled token decodes to non-empty ASCII (the builder's bias channel)
    assert len(content) == 24 and all(t.isascii() for t in content)
    if api == "openai-chat":  # llama.cpp opens with a role-only chunk, content null
        assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    usage, timings = chunks[-1]["usage"], chunks[-1]["timings"]
    assert usage["completion_tokens"] == 24 == timings["predicted_n"]
    counted = tokenize(llama_server.url, request_body(api, SERVED_MODEL_NAME,
                                                      "the model reads a long page"), None)
    assert counted is not None and usage["prompt_tokens"] == counted["count"]
    # prompt_n counts only what was not in the slot's cache
    assert timings["prompt_n"] + timings["cache_n"] == usage["prompt_tokens"]
    assert timings["prompt_ms"] > 0 and timings["predicted_ms"] > 0


def test_tokenize_is_llamacpps_shape(llama_server: LlamaServer) -> None:
    status, raw = post(llama_server, "/tokenize", {"content": "the model", "add_special": True})
    assert status == 200
    tokens = json.loads(raw)["tokens"]
    assert all(isinstance(t, int) for t in tokens) and len(tokens) >= 3  # BOS first
    status, raw = post(llama_server, "/tokenize", {"content": " the model",
                                                   "with_pieces": True})
    pieces = [t["piece"] for t in json.loads(raw)["tokens"]]
    assert "".join(pieces) == " the model" and pieces[0].startswith(" ")
    # vLLM's shape: no `content`, so no tokens and no count
    status, raw = post(llama_server, "/tokenize", {"model": SERVED_MODEL_NAME,
                                                   "prompt": "the model"})
    assert status == 200 and json.loads(raw) == {"tokens": []}


def test_an_over_long_prompt_is_a_400_with_llamacpps_error_type(
        llama_server: LlamaServer) -> None:
    words = " ".join(["model"] * 20_000)  # past the slot's 16384 tokens
    status, raw = post(llama_server, "/v1/completions",
                       {"model": SERVED_MODEL_NAME, "prompt": words, "max_tokens": 1})
    assert status == 400, raw[:300]
    error = json.loads(raw)["error"]
    assert error["type"] == "exceed_context_size_error" and error["code"] == 400
    assert "context size" in error["message"]


def test_metrics_carry_the_names_zerohop_maps(llama_server: LlamaServer) -> None:
    post(llama_server, "/v1/completions", {"model": SERVED_MODEL_NAME, "prompt": "a b c",
                                           "max_tokens": 2})
    with urllib.request.urlopen(llama_server.url + "/metrics", timeout=30) as response:
        text = response.read().decode()
    served = {line.split()[0] for line in text.splitlines()
              if line and not line.startswith("#")}
    mapped = {name for name in SCALAR_MAP if name.startswith("llamacpp:")}
    assert len(mapped) >= 8
    # counters are written with `_total`, which the mapping's keys leave out
    assert all(name in served or f"{name}_total" in served for name in mapped), \
        sorted(served)
