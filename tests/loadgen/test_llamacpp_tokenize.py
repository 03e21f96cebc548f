"""Prompt sizing on llama.cpp's server (loadgen/llamacpp_tokenize.py): its /tokenize and
chat-count shapes are asked when the vLLM-shaped request gets ids without a count, and
prompts then count exactly what the server counts. The server is modelled in process
(the embedded target's tokenizer behind llama.cpp's shapes, no socket); the llamacpp
tier checks the same against a real llama-server."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from zerohop.loadgen import tokenize_words
from zerohop.loadgen.llamacpp_tokenize import (
    CHAT_COUNT_PATH,
    TOKENIZE_PATH,
    is_llamacpp_answer,
    llamacpp_request,
    vllm_shaped_answer,
)
from zerohop.loadgen.prompt_sizing import SIZED_BY_TOKENIZE, probe_tokenize
from zerohop.sim.answers.tokenize import tokenize_response
from zerohop.sim.answers.tokens import count_chat_tokens, count_prompt_tokens
from zerohop.workloads.content.prompts import PromptBuilder

pytestmark = pytest.mark.unit

MODEL = "tiny"
TARGETS = (16, 23, 64, 65, 100, 255, 777, 2048, 4000)


class FakeLlamaCpp:
    """llama.cpp's POST /tokenize and /v1/chat/completions/input_tokens, answered in its
    shapes with the embedded target's counts, behind `tokenize_words._post_json`."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.engine = SimpleNamespace(max_model_len=32_768)

    def _count(self, body: dict[str, Any]) -> dict[str, Any]:
        status, raw = tokenize_response(json.dumps(body).encode(),
                                        {MODEL: (self.engine, None)}, self.engine)
        assert status == 200, raw
        answer: dict[str, Any] = json.loads(raw)
        return answer

    def __call__(self, base_url: str, path: str, body: dict[str, Any], api_key: str | None
                 ) -> Any:
        self.asked.append((path, body))
        if path == CHAT_COUNT_PATH:
            counted = self._count({"messages": body["messages"],
                                   "add_generation_prompt": body["add_generation_prompt"]})
            return {"input_tokens": counted["count"], "object": "response.input_tokens"}
        assert path == TOKENIZE_PATH
        if "content" not in body:  # what llama.cpp answers a vLLM-shaped body
            return {"tokens": []}
        counted = self._count({"prompt": body["content"],
                               "add_special_tokens": body.get("add_special", False),
                               "return_token_strs": body.get("with_pieces", False)})
        if body.get("with_pieces"):
            return {"tokens": [{"id": i, "piece": s} for i, s
                               in zip(counted["tokens"], counted["token_strs"], strict=True)]}
        return {"tokens": counted["tokens"]}


@pytest.mark.parametrize("api, count", [
    ("openai-chat", lambda text: count_chat_tokens([{"role": "user", "content": text}])),
    ("openai-completions", count_prompt_tokens),
])
def test_prompts_are_sized_exactly_through_llamacpps_shapes(
        monkeypatch: pytest.MonkeyPatch, api: str, count: Any) -> None:
    server = FakeLlamaCpp()
    monkeypatch.setattr(tokenize_words, "_post_json", server)
    sizing = probe_tokenize("http://target", api, MODEL, api_key=None)
    assert sizing is not None and sizing.source == SIZED_BY_TOKENIZE
    assert sizing.calibration.words is not None  # the word table, from the pieces
    paths = {path for path, body in server.asked if "content" in body or path != TOKENIZE_PATH}
    assert paths == ({CHAT_COUNT_PATH, TOKENIZE_PATH} if api == "openai-chat"
                     else {TOKENIZE_PATH})
    builder, rng = PromptBuilder(), np.random.default_rng(4)
    assert [count(builder.build_for_tokens(t, rng, sizing.calibration)) for t in TARGETS] \
        == list(TARGETS)


def test_a_vllm_answer_is_taken_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def vllm(base_url: str, path: str, body: dict[str, Any], api_key: str | None) -> Any:
        asked.append(path)
        return {"count": 3, "tokens": [1, 2, 3], "max_model_len": 4096}

    monkeypatch.setattr(tokenize_words, "_post_json", vllm)
    assert tokenize_words.tokenize("http://t", {"model": MODEL, "prompt": "a b"}, None) == {
        "count": 3, "tokens": [1, 2, 3], "max_model_len": 4096}
    assert asked == [TOKENIZE_PATH]


def test_a_request_in_vllms_shape_becomes_llamacpps() -> None:
    messages = [{"role": "user", "content": "hi"}]
    assert llamacpp_request({"model": MODEL, "messages": messages,
                             "add_generation_prompt": True}) == (
        CHAT_COUNT_PATH, {"model": MODEL, "messages": messages, "add_generation_prompt": True})
    assert llamacpp_request({"model": MODEL, "prompt": "hi"}) == (
        TOKENIZE_PATH, {"content": "hi", "add_special": True, "with_pieces": False})
    assert llamacpp_request({"model": MODEL, "prompt": "hi", "add_special_tokens": False,
                             "return_token_strs": True}) == (
        TOKENIZE_PATH, {"content": "hi", "add_special": False, "with_pieces": True})


def test_llamacpps_answers_in_vllms_shape() -> None:
    assert vllm_shaped_answer(TOKENIZE_PATH, {"tokens": [1, 77, 74]}) == {
        "count": 3, "tokens": [1, 77, 74]}
    # a piece that is part of a UTF-8 sequence comes as its bytes
    pieces = {"tokens": [{"id": 5, "piece": " the"}, {"id": 9, "piece": [226, 130]}]}
    assert vllm_shaped_answer(TOKENIZE_PATH, pieces) == {
        "count": 2, "tokens": [5, 9], "token_strs": [" the", "\ufffd"]}
    assert vllm_shaped_answer(CHAT_COUNT_PATH, {"input_tokens": 14}) == {"count": 14}


@pytest.mark.parametrize("path, answer", [
    (CHAT_COUNT_PATH, {"input_tokens": True}),
    (CHAT_COUNT_PATH, {"tokens": [1, 2]}),
    (TOKENIZE_PATH, {"tokens": [1, "2"]}),
    (TOKENIZE_PATH, {"tokens": [{"id": 1, "piece": [300]}]}),
    (TOKENIZE_PATH, {"tokens": [{"id": None, "piece": "a"}]}),
    (TOKENIZE_PATH, {"error": {"code": 500}}),
    (TOKENIZE_PATH, None),
])
def test_an_answer_that_is_not_llamacpps_gives_no_count(path: str, answer: Any) -> None:
    assert vllm_shaped_answer(path, answer) is None


def test_llamacpps_answer_is_told_from_vllms() -> None:
    assert is_llamacpp_answer({"tokens": []})
    assert not is_llamacpp_answer({"count": 0, "tokens": []})
    assert not is_llamacpp_answer({"error": "no"})
    assert not is_llamacpp_answer(None)
