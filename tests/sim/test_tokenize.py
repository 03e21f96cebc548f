"""The sim's POST /tokenize (vLLM's shape): the count it gives is the usage it reports."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from tests.sim.conftest import MODEL
from zerohop.sim.answers.tokenize import TokenizeError, token_strs, tokenize_ids
from zerohop.sim.answers.tokens import count_chat_tokens, count_prompt_tokens
from zerohop.sim.launcher import SimProcess


@pytest.mark.unit
@pytest.mark.parametrize("messages", [
    [{"role": "user", "content": "Hello, world!"}],
    [{"role": "system", "content": "be brief"}, {"role": "user", "content": "a b. c"}],
    [{"role": "user", "content": [{"type": "text", "text": "look:"}, {"type": "image"}]}],
    [{"role": "user", "content": [{"type": "tool_result", "content": "42 apples"}]}],
])
def test_chat_ids_count_what_the_template_rule_counts(messages: list[dict[str, Any]]) -> None:
    ids = tokenize_ids({"messages": messages})
    assert len(ids) == count_chat_tokens(messages)
    primer = 3
    assert len(tokenize_ids({"messages": messages, "add_generation_prompt": False})) == (
        len(ids) - primer)


@pytest.mark.unit
def test_prompt_ids_are_stable_and_token_ids_pass_through() -> None:
    text = "the cat sat. the cat!"
    ids = tokenize_ids({"prompt": text})
    assert len(ids) == count_prompt_tokens(text) == 7
    assert ids[0] == ids[4] and ids[1] == ids[5]  # the same word, the same id
    assert tokenize_ids({"prompt": [5, 6, 7]}) == [5, 6, 7]
    for bad in ({}, {"prompt": 3}, {"messages": []}, {"messages": ["hi"]}):
        with pytest.raises(TokenizeError):
            tokenize_ids(bad)


@pytest.mark.unit
def test_token_strings_mark_the_space_before_a_word_as_byte_level_bpe_does() -> None:
    assert token_strs({"prompt": "the cat, sat."}) == ["the", " cat", ",", " sat", "."]
    messages = [{"role": "user", "content": "a b"}]
    strings = token_strs({"messages": messages})
    assert len(strings) == len(tokenize_ids({"messages": messages})) == 4 + 2 + 3
    assert strings[4:6] == ["a", " b"]


def _post(sim: SimProcess, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(sim.url + path, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.mark.integration
def test_tokenize_on_the_wire_matches_the_usage_of_the_same_request(sim: SimProcess) -> None:
    messages = [{"role": "user", "content": "Zerohop counts, exactly: 3 tokens or 30?"}]
    status, tokenized = _post(sim, "/tokenize", {"model": MODEL, "messages": messages})
    assert status == 200 and tokenized["count"] == len(tokenized["tokens"])
    assert tokenized["max_model_len"] > tokenized["count"]
    _, answer = _post(sim, "/v1/chat/completions",
                      {"model": MODEL, "messages": messages, "max_tokens": 2})
    assert answer["usage"]["prompt_tokens"] == tokenized["count"]
    _, completion = _post(sim, "/v1/completions",
                          {"model": MODEL, "prompt": messages[0]["content"], "max_tokens": 2})
    _, plain = _post(sim, "/tokenize", {"model": MODEL, "prompt": messages[0]["content"]})
    assert completion["usage"]["prompt_tokens"] == plain["count"]
    _, spelled = _post(sim, "/tokenize", {"model": MODEL, "messages": messages,
                                          "return_token_strs": True})
    assert spelled["tokens"] == tokenized["tokens"]
    assert len(spelled["token_strs"]) == spelled["count"] and "token_strs" not in tokenized
    assert _post(sim, "/tokenize", {"model": "nope", "prompt": "x"})[0] == 404
    assert _post(sim, "/tokenize", {"model": MODEL})[0] == 400
