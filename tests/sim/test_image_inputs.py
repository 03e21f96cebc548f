"""The embedded target's image parts: each PNG's size read from its header, priced by
the asked-tokens rule into the prompt count (and so the prefill and usage), on chat,
Responses and Anthropic; a part it cannot read is a 400 that says why."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

import numpy as np
import pytest

from tests.sim.conftest import MODEL
from zerohop.core.images import image_token_count
from zerohop.sim.answers.image_parts import ImageError, image_part_tokens, png_size
from zerohop.sim.answers.tokenize import tokenize_ids
from zerohop.sim.answers.tokens import NON_TEXT_PART_TOKENS, count_chat_tokens
from zerohop.sim.launcher import SimProcess
from zerohop.workloads.content.synthetic_images import png_bytes

WIDTH, HEIGHT = 300, 200
TOKENS = image_token_count(WIDTH, HEIGHT)  # 11 · 8


def _b64(width: int = WIDTH, height: int = HEIGHT, seed: int = 1) -> str:
    return base64.b64encode(png_bytes(width, height, np.random.default_rng(seed))).decode()


def _parts(data: str) -> dict[str, dict[str, Any]]:
    return {
        "chat": {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}},
        "responses": {"type": "input_image", "image_url": f"data:image/png;base64,{data}"},
        "messages": {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                 "data": data}},
    }


@pytest.mark.unit
@pytest.mark.parametrize("shape", ["chat", "responses", "messages"])
def test_each_shape_is_priced_from_its_header(shape: str) -> None:
    part = _parts(_b64())[shape]
    assert image_part_tokens(part) == TOKENS == 88
    messages = [{"role": "user", "content": [part, {"type": "text", "text": "what is it?"}]}]
    assert count_chat_tokens(messages) == 3 + 4 + TOKENS + 4
    assert len(tokenize_ids({"messages": messages})) == count_chat_tokens(messages)


@pytest.mark.unit
def test_the_prefix_cache_tells_two_images_apart() -> None:
    first, second = (_parts(_b64(seed=s))["chat"] for s in (1, 2))
    ids = [tokenize_ids({"messages": [{"role": "user", "content": [p]}]}) for p in (first, second)]
    assert len(ids[0]) == len(ids[1]) and ids[0] != ids[1]


@pytest.mark.unit
def test_a_part_without_image_data_stays_a_placeholder() -> None:
    assert image_part_tokens({"type": "image"}) is None
    assert image_part_tokens({"type": "text", "text": "x"}) is None
    assert count_chat_tokens([{"role": "user", "content": [{"type": "image"}]}]) == (
        3 + 4 + NON_TEXT_PART_TOKENS)


@pytest.mark.unit
@pytest.mark.parametrize(("part", "fragment"), [
    ({"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
     "base64 data URLs"),
    ({"type": "image_url", "image_url": {"url": "data:image/png;base64,!!!notbase64!!!"}},
     "not base64"),
    ({"type": "image_url", "image_url": {"url": "data:image/png;base64,"
                                         + base64.b64encode(b"GIF89a" + bytes(40)).decode()}},
     "not a PNG"),
    ({"type": "input_image", "image_url": "data:image/jpeg;base64,/9j/4AAQ"}, "image/png only"),
    ({"type": "image", "source": {"type": "url", "url": "https://example.com/x.png"}},
     "source of type base64"),
])
def test_an_image_it_cannot_read_is_an_error(part: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ImageError, match=fragment):
        image_part_tokens(part)
    with pytest.raises(ImageError):
        png_size(b"\x89PNG\r\n\x1a\n" + bytes(4) + b"IHDR" + bytes(8))  # 0×0


def _post(sim: SimProcess, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    request = urllib.request.Request(sim.url + path, data=json.dumps(body).encode(),
                                     headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.mark.integration
def test_usage_counts_the_image_tokens_on_every_api(sim: SimProcess) -> None:
    text = {"type": "text", "text": "what is it?"}
    parts = _parts(_b64())
    plain_chat = _post(sim, "/v1/chat/completions", {
        "model": MODEL, "max_tokens": 2, "messages": [{"role": "user", "content": [text]}]})
    chat = _post(sim, "/v1/chat/completions", {"model": MODEL, "max_tokens": 2, "messages": [
        {"role": "user", "content": [parts["chat"], parts["chat"], text]}]})
    assert chat[0] == plain_chat[0] == 200
    assert (chat[1]["usage"]["prompt_tokens"]
            == plain_chat[1]["usage"]["prompt_tokens"] + 2 * TOKENS)
    responses = _post(sim, "/v1/responses", {"model": MODEL, "max_output_tokens": 2, "input": [
        {"role": "user", "content": [parts["responses"],
                                     {"type": "input_text", "text": "what is it?"}]}]})
    assert responses[0] == 200
    assert responses[1]["usage"]["input_tokens"] == plain_chat[1]["usage"]["prompt_tokens"] + TOKENS
    messages = _post(sim, "/v1/messages", {"model": MODEL, "max_tokens": 2, "messages": [
        {"role": "user", "content": [parts["messages"], text]}]})
    assert messages[0] == 200
    assert messages[1]["usage"]["input_tokens"] == plain_chat[1]["usage"]["prompt_tokens"] + TOKENS
    tokenized = _post(sim, "/tokenize", {"model": MODEL, "messages": [
        {"role": "user", "content": [parts["chat"], parts["chat"], text]}]})
    assert tokenized[1]["count"] == chat[1]["usage"]["prompt_tokens"]


@pytest.mark.integration
def test_a_malformed_image_is_a_400_that_says_why(sim: SimProcess) -> None:
    bad = {"type": "image_url", "image_url": {"url": "data:image/png;base64,"
                                              + base64.b64encode(b"not a png at all, no"
                                                                 b" header here").decode()}}
    status, body = _post(sim, "/v1/chat/completions", {"model": MODEL, "max_tokens": 2,
                                                        "messages": [{"role": "user",
                                                                      "content": [bad]}]})
    assert status == 400
    assert "not a PNG" in json.dumps(body), body
    status, body = _post(sim, "/v1/messages", {"model": MODEL, "max_tokens": 2, "messages": [
        {"role": "user", "content": [{"type": "image", "source": {"type": "url"}}]}]})
    assert status == 400 and "base64" in json.dumps(body), body
