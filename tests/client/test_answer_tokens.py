"""The answer probe's reading of a non-streamed answer in the shapes real servers send
(OpenAI/vLLM chat and completions, llama.cpp's server with token ids)."""

from __future__ import annotations

import json

import pytest

from zerohop.client.answer_tokens import answer_api_refusal, read_answer
from zerohop.client.protocols import ProtocolError

pytestmark = pytest.mark.unit


def body(choice: dict[str, object]) -> bytes:
    return json.dumps({"id": "x", "choices": [choice]}).encode()


def test_chat_logprobs_with_and_without_ids() -> None:
    vllm = read_answer("openai-chat", body({
        "message": {"content": "Hi there"}, "finish_reason": "stop",
        "logprobs": {"content": [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105]},
                                 {"token": " there", "logprob": -1.25}]}}))
    assert (vllm.text, vllm.finish_reason) == ("Hi there", "stop")
    assert vllm.tokens == ["Hi", " there"] and vllm.logprobs == [-0.5, -1.25]
    assert vllm.token_ids is None
    llamacpp = read_answer("openai-completions", body({
        "text": "Hi", "logprobs": {"content": [{"id": 13347, "token": "Hi", "logprob": -0.1}]}}))
    assert llamacpp.token_ids == [13347] and llamacpp.tokens == ["Hi"]


def test_completions_logprobs_in_openai_form() -> None:
    answer = read_answer("openai-completions", body({
        "text": " a b", "logprobs": {"tokens": [" a", " b"], "token_logprobs": [-0.2, None],
                                     "top_logprobs": [], "text_offset": [0, 2]}}))
    assert answer.tokens == [" a", " b"] and answer.logprobs == [-0.2, None]


def test_an_answer_without_logprobs_keeps_its_text() -> None:
    answer = read_answer("openai-chat", body({"message": {"content": "ok"}, "logprobs": None}))
    assert answer.text == "ok" and answer.tokens is None and answer.logprobs is None


def test_a_body_without_a_choice_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        read_answer("openai-chat", b'{"choices": []}')
    with pytest.raises(ProtocolError):
        read_answer("openai-chat", body({"message": {"content": "x"},
                                         "logprobs": {"content": [{"logprob": -1}]}}))


def test_apis_without_logprobs_are_refused_in_one_line() -> None:
    assert answer_api_refusal("openai-chat") is None
    refusal = answer_api_refusal("anthropic")
    assert refusal is not None and "--answer-probe" in refusal and "\n" not in refusal
